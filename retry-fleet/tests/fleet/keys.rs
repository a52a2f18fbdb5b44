//! Guard names in the store's keys: a name with `:` in it (`svc::db`) is
//! no part of another guard's keys, nor of another fleet's.

use std::time::Duration;

use stormproof_fleet::{Fleet, FleetConfig};
use stormproof_runtime::{
    Registry,
    breaker::{BreakerConfig, BreakerState, Outcome},
};

use super::SYNC_MS;
use super::faults::{serially, until};
use super::server::Server;

/// A registry whose breakers `names` (opened by one failure, counted over
/// `window`) fleet `prefix` shares.
fn joined(server: &Server, prefix: &str, names: &[&str], window: Duration) -> (Registry, Fleet) {
    let registry = Registry::new();
    for name in names {
        registry
            .declare_breaker(name, BreakerConfig { failure_threshold: 1, window, ..Default::default() })
            .unwrap();
    }
    let fleet = Fleet::join(
        &registry,
        FleetConfig {
            url: server.url(),
            prefix: prefix.into(),
            sync_every: Duration::from_millis(SYNC_MS),
            store_timeout: Duration::from_secs(2),
            breakers: names.iter().map(|name| name.to_string()).collect(),
            ..Default::default()
        },
    )
    .unwrap();
    (registry, fleet)
}

/// Waits until `fleet` has flushed `n` more times.
async fn flushed(fleet: &Fleet, n: u64) {
    let from = fleet.flushes();
    until("flushes", Duration::from_secs(5), || fleet.flushes() >= from + n).await;
}

#[test]
fn a_breaker_whose_name_has_colons_shares_no_state_with_another_fleets() {
    serially(another_fleets_breaker());
}

/// Fleet `p` shares breaker `a:breaker:b`; fleet `p:breaker:a` (another
/// service on the same Redis) shares breaker `b`. With the names written
/// into the keys as they are, both states were `p:breaker:a:breaker:b`:
/// a failure in the first fleet opened the second fleet's breaker. Nor
/// is a name the escaped form of another (`a%3Abreaker%3Ab`) that one.
async fn another_fleets_breaker() {
    let Some(server) = Server::start("a_breaker_whose_name_has_colons_...") else { return };
    let window = Duration::from_secs(10);
    let escaped = "a%3Abreaker%3Ab";
    let (first, first_fleet) = joined(&server, "p", &["a:breaker:b", escaped], window);
    let (second, second_fleet) = joined(&server, "p:breaker:a", &["b"], window);
    until("both linked", Duration::from_secs(5), || first_fleet.is_linked() && second_fleet.is_linked())
        .await;
    first.breaker("a:breaker:b").unwrap().try_acquire().unwrap().record(Outcome::Failure);
    // The first fleet opens at its next flush; the second hears the store
    // at each of its own.
    flushed(&first_fleet, 2).await;
    flushed(&second_fleet, 2).await;
    assert_eq!(first.breaker("a:breaker:b").unwrap().state(), BreakerState::Open);
    assert_eq!(first.breaker(escaped).unwrap().state(), BreakerState::Closed, "another breaker's failure");
    assert_eq!(
        second.breaker("b").unwrap().state(),
        BreakerState::Closed,
        "another fleet's failure opened it"
    );
    first_fleet.leave().await;
    second_fleet.leave().await;
}

#[test]
fn a_breaker_named_after_another_breakers_bucket_has_a_key_of_its_own() {
    serially(named_after_a_bucket());
}

/// Breaker `dep` counts its calls in `P:breaker:dep:EPOCH:BUCKET`; a
/// breaker named `dep:0:BUCKET` had its state in that same key. (A window
/// of 30 years has buckets of 3: the test knows which one is now.) Each
/// key of the fleet must be one guard's: a state (`epoch`) or counts (`c`),
/// never both.
async fn named_after_a_bucket() {
    let Some(server) = Server::start("a_breaker_named_after_another_...") else { return };
    let window = Duration::from_secs(86_400 * 365 * 30);
    let bucket = {
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut server.connection().unwrap()).unwrap();
        (secs * 1_000 + micros / 1_000) / (window.as_millis() as u64 / 10)
    };
    let twin = format!("dep:0:{bucket}");
    let (registry, fleet) = joined(&server, "one", &["dep", &twin], window);
    until("linked", Duration::from_secs(5), || fleet.is_linked()).await;
    registry.breaker("dep").unwrap().try_acquire().unwrap().record(Outcome::Success);
    registry.breaker(&twin).unwrap().try_acquire().unwrap().record(Outcome::Failure);
    flushed(&fleet, 2).await;
    let mut con = server.connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("one:breaker:*").query(&mut con).unwrap();
    assert!(keys.contains(&format!("one:breaker:{twin}")), "dep's call counted in its bucket: {keys:?}");
    for key in keys {
        let fields: Vec<String> = redis::cmd("HKEYS").arg(&key).query(&mut con).unwrap();
        let has = |field: &str| fields.iter().any(|f| f == field);
        assert!(
            !(has("epoch") && has("c")),
            "`{key}` holds a breaker's state and another's counts: {fields:?}"
        );
    }
    fleet.leave().await;
}
