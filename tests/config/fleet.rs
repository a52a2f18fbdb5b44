//! The fleet in the file: `[fleet]` and `fleet = true` mapped to the
//! `FleetConfig` a registry joins with, checked where they are, and one
//! fleet started from a file against a real `redis-server`.

use std::time::Duration;

use stormproof::fleet::{Fleet, FleetConfig};
use stormproof::{
    Registry,
    breaker::{BreakerState, Outcome},
};

use super::{error, ms};

const FLEET: &str = r#"
[fleet]
url = "redis://127.0.0.1:6379/"
prefix = "shop"
sync_every_ms = 200
store_timeout_ms = 20
lease_size = 5

[breakers.payment]
failure_threshold = 3
fleet = true

[budgets.payment]
ratio = 0.1
fleet = true

[budgets.local]
ratio = 0.2
fleet = false
"#;

#[test]
fn a_fleet_table_and_fleet_true_make_the_fleet_config() {
    let config = FleetConfig::from_toml(FLEET).unwrap().expect("the file has a [fleet] table");
    assert_eq!(
        config,
        FleetConfig {
            url: "redis://127.0.0.1:6379/".into(),
            prefix: "shop".into(),
            sync_every: ms(200),
            store_timeout: ms(20),
            lease_size: 5,
            breakers: vec!["payment".into()],
            budgets: vec!["payment".into()],
        }
    );
    let defaults = FleetConfig::from_toml("[fleet]\n[breakers.a]\nfleet = true").unwrap().unwrap();
    assert_eq!(defaults, FleetConfig { breakers: vec!["a".into()], ..Default::default() });
    assert_eq!(FleetConfig::from_toml("[breakers.a]").unwrap(), None, "no [fleet]: no fleet");
    Registry::new().load_toml(FLEET).expect("loading declares the guards; joining is separate");
}

#[test]
fn fleet_errors_say_where_and_what() {
    assert_eq!(error("[fleet]\nsync_every_ms = 0"), "<toml>:2:17: `sync_every_ms` must be at least 1 ms");
    assert_eq!(error("[fleet]\nlease_size = 0"), "<toml>:2:14: `lease_size` must be greater than zero");
    assert_eq!(
        error("[fleet]\nprefix = \"my app\""),
        r#"<toml>:2:10: `prefix` must be a non-empty name without spaces, got "my app""#
    );
    assert!(error("[fleet]\nurl = \"http://x\"").starts_with("<toml>:2:7: `url` is not a Redis URL"));
    assert!(
        error("[fleet]\nsync_every = 5")
            .starts_with("<toml>:2:1: `sync_every` is not a key of `[fleet]`; did you mean `sync_every_ms`?"),
        "{}",
        error("[fleet]\nsync_every = 5")
    );
    assert_eq!(error("[breakers.a]\nfleet = \"yes\""), "<toml>:2:9: `fleet` must be `true` or `false`");
    assert_eq!(
        error("[breakers.a]\nfleet = true"),
        r#"<toml>:2:9: `fleet = true` needs a `[fleet]` table saying where Redis is (`url = "redis://..."`)"#
    );
    assert_eq!(
        error("[fleet]\n[budgets.a]\ncapacity = 5\nfleet = true"),
        "<toml>:4:9: budget `a` cannot be shared: it is a token bucket; a fleet shares ratio budgets (a share of the fleet's traffic)"
    );
    assert_eq!(
        error("[fleet]\n[breakers.a]\nsuccess_threshold = 3\nfleet = true"),
        "<toml>:4:9: breaker `a` cannot be shared: its success_threshold (3) is above its half_open_max_calls (2), the fleet's probes per round: lower the one or raise the other"
    );
}

/// Every problem of a `[fleet]` table at once, as for any other table;
/// and a table with problems is not "missing" for the guards it shares.
#[test]
fn a_fleet_table_with_several_bad_values_reports_each_and_nothing_false() {
    let text = "[fleet]\nurl = \"http://x/\"\nsync_every_ms = 0\nlease_size = 0\nprefix = \"my app\"\n\n[breakers.payment]\nfleet = true\n";
    let all = error(text);
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), 4, "{all}");
    assert!(lines[0].starts_with("<toml>:2:7: `url` is not a Redis URL"), "{all}");
    assert_eq!(lines[1], "<toml>:3:17: `sync_every_ms` must be at least 1 ms");
    assert_eq!(lines[2], "<toml>:4:14: `lease_size` must be greater than zero");
    assert_eq!(lines[3], r#"<toml>:5:10: `prefix` must be a non-empty name without spaces, got "my app""#);
    // A value that cannot be read is said once, its default not blamed.
    assert_eq!(
        error("[fleet]\nsync_every_ms = \"soon\"\nlease_size = 0\n[budgets.a]\nratio = 0.1\nfleet = true"),
        "<toml>:2:17: `sync_every_ms` must be an integer, like `sync_every_ms = 100`\n<toml>:3:14: `lease_size` must be greater than zero"
    );
}

#[test]
fn a_reload_cannot_join_a_fleet() {
    let registry = Registry::new();
    registry.load_toml("[breakers.payment]").unwrap();
    let err = registry.reload_toml(FLEET).unwrap_err().to_string();
    assert!(
        err.starts_with("<toml>:2:2: `[fleet]`: this registry is in no fleet, and a reload cannot join one"),
        "{err}"
    );
    assert!(
        err.contains("<toml>:11:9: breaker `payment` has `fleet = true`, but this registry is in no fleet"),
        "{err}"
    );
}

/// A fleet started from the file: two registries (two replicas in one
/// process) load it and join; failures in one open the breaker in the
/// other; a reload that says what they joined with is taken, one that
/// changes the fleet is refused at the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_started_from_the_file_shares_its_breaker_and_a_reload_cannot_change_it() {
    let Some(server) = crate::server::Server::start("a_fleet_started_from_the_file_...") else { return };
    let dir = std::env::temp_dir().join(format!("stormproof-config-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("stormproof.toml");
    let text = format!(
        "[fleet]\nurl = \"{}\"\nprefix = \"from-file\"\nsync_every_ms = 50\n\n[breakers.payment]\nfailure_threshold = 3\nopen_for_ms = 60_000\nfleet = true\n",
        server.url()
    );
    std::fs::write(&path, &text).unwrap();
    let (a, b) = (Registry::new(), Registry::new());
    let mut fleets = Vec::new();
    for registry in [&a, &b] {
        registry.load_file(&path).unwrap();
        let config = FleetConfig::from_file(&path).unwrap().unwrap();
        fleets.push(Fleet::join(registry, config).unwrap());
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !fleets.iter().all(|f| f.is_linked()) {
        assert!(tokio::time::Instant::now() < deadline, "both replicas linked to the store");
        tokio::time::sleep(ms(10)).await;
    }
    let failing = a.breaker("payment").unwrap();
    for _ in 0..3 {
        failing.try_acquire().unwrap().record(Outcome::Failure);
    }
    assert_eq!(failing.state(), BreakerState::Open);
    let watching = b.breaker("payment").unwrap();
    while watching.state() != BreakerState::Open {
        assert!(tokio::time::Instant::now() < deadline, "the other replica's breaker opened from the fleet");
        tokio::time::sleep(ms(10)).await;
    }

    assert!(b.reload_file(&path).unwrap().is_empty(), "the file it joined with: nothing changes");
    std::fs::write(&path, text.replace("sync_every_ms = 50", "sync_every_ms = 500")).unwrap();
    let err = b.reload_file(&path).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{}:4:17: `sync_every_ms` is 500, but the fleet was joined with 50: a reload cannot change the fleet a registry joined (leave with `Fleet::leave().await` and join again, or restart)",
            path.display()
        )
    );
    std::fs::write(&path, text.replace("fleet = true\n", "")).unwrap();
    let err = b.reload_file(&path).unwrap_err().to_string();
    assert!(err.contains(":6:11: breaker `payment` is shared by the fleet this registry joined"), "{err}");
    // The fleet's rule holds for a shared breaker's new settings as at the join.
    std::fs::write(&path, text.replace("fleet = true\n", "success_threshold = 3\nfleet = true\n")).unwrap();
    let err = b.reload_file(&path).unwrap_err().to_string();
    assert!(err.contains("breaker `payment` cannot be shared: its success_threshold (3)"), "{err}");
    assert_eq!(watching.config().success_threshold, 2, "refused: nothing applied");

    for fleet in fleets {
        fleet.leave().await;
    }
    std::fs::write(&path, &text).unwrap();
    let err = b.reload_file(&path).unwrap_err().to_string();
    assert!(
        err.contains("this registry is in no fleet"),
        "left: the file's fleet is no longer what it is in: {err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
