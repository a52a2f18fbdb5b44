//! The admin router on a real loopback server: `/snapshot` and `/events`
//! agree with the registry while calls run, manual control needs the
//! router's token, unknown names are a 404 listing the known ones, and the
//! page renders every breaker and its state in a real headless Chromium.
//!
//! Real sockets need the real clock, so these tests run in real time. No
//! test sleeps: each waits for the event it needs (a tick comes once a
//! second), under a generous limit that only turns a hang into a failure.

#[path = "admin/browser.rs"]
mod browser;
/// The fleet tests' `redis-server` (a free loopback port, no persistence).
#[cfg(feature = "redis")]
#[allow(dead_code)]
#[path = "../retry-fleet/tests/fleet/server.rs"]
mod server;
#[path = "admin/support.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use stormproof::admin::{self, BreakerView, Counts, Snapshot, State, TransitionView};
use stormproof::{Rejection, breaker::BreakerState};
use support::{Events, Flaky, TOKEN, call, guards, post, serve, shed_over_the_rate, snapshot, totals};

/// An annotated function, for the page's operations: declared, never called.
#[stormproof::resilient(name = "admin::quote", max_attempts = 2, base_ms = 25)]
#[expect(dead_code, reason = "declared for its operation entry, never called")]
async fn quote() -> Result<(), std::io::Error> {
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snapshot_matches_the_registry_while_calls_run() {
    let registry = guards();
    let addr = serve(admin::router(&registry).into_router()).await;
    let stop = Arc::new(AtomicBool::new(false));
    let caller = tokio::spawn({
        let (registry, stop) = (registry.clone(), stop.clone());
        async move {
            let mut made = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // One in ten fails: not enough to open `alpha` (5 in 10 s is).
                let fail = made % 10 == 9 && made < 30;
                let _ = call(&registry, "alpha", if fail { Err(Flaky::Down) } else { Ok(()) }).await;
                made += 1;
                tokio::task::yield_now().await;
            }
            made
        }
    });

    for _ in 0..5 {
        let before = totals(&registry, "alpha");
        let snap = snapshot(addr).await;
        let after = totals(&registry, "alpha");
        let alpha = &snap.breakers[0];
        for (low, seen, high, what) in [
            (before.calls, alpha.totals.calls, after.calls, "calls"),
            (before.failures, alpha.totals.failures, after.failures, "failures"),
        ] {
            assert!(
                low <= seen && seen <= high,
                "{what}: {low} <= {seen} <= {high}, read around the request"
            );
        }
        assert_eq!(alpha.state, State::Closed);
    }
    stop.store(true, Ordering::Relaxed);
    let made = caller.await.unwrap();

    let snap = snapshot(addr).await;
    let names = |list: Vec<String>| list;
    assert_eq!(names(snap.breakers.iter().map(|b| b.name.clone()).collect()), ["alpha", "beta"]);
    assert_eq!(names(snap.budgets.iter().map(|b| b.name.clone()).collect()), ["alpha"]);
    assert_eq!(names(snap.bulkheads.iter().map(|b| b.name.clone()).collect()), ["alpha", "beta"]);
    assert_eq!(names(snap.throttles.iter().map(|t| t.name.clone()).collect()), ["alpha"]);
    assert_eq!(names(snap.rate_limits.iter().map(|r| r.name.clone()).collect()), ["alpha"]);
    assert_eq!(snap.fleet, None, "the registry is in no fleet");
    assert_eq!(snap.breakers[0].totals, totals(&registry, "alpha"));
    assert_eq!(snap.breakers[0].totals.calls, made, "every call made one attempt");
    assert_eq!(snap.breakers[0].totals.failures, made.min(30) / 10);
    assert_eq!(snap.budgets[0].available, registry.budget("alpha").unwrap().available());
    let fixed = &snap.bulkheads[0];
    assert_eq!((fixed.in_use, fixed.limit, fixed.max_concurrent, fixed.adaptive.is_none()), (0, 4, 4, true));
    let adaptive = &snap.bulkheads[1];
    let limit = registry.bulkhead("beta").unwrap().limit();
    assert_eq!((adaptive.limit, adaptive.max_concurrent), (limit, 8));
    let algorithm = adaptive.adaptive.as_ref().map(|a| (a.algorithm.as_str(), a.min));
    assert_eq!(algorithm, Some(("aimd", 2)));
    let throttle = &snap.throttles[0];
    assert_eq!(throttle.refusal_probability, registry.throttle("alpha").unwrap().refusal_probability());
    assert_eq!((throttle.k, throttle.window_ms, throttle.max_refusal_percent), (1.5, 500, 80));
    let rate = &snap.rate_limits[0];
    assert_eq!((rate.per_second, rate.burst, rate.max_wait_ms), (50, 5, Some(20)));
    assert_eq!(rate.refused, Default::default(), "nothing refused yet");
    let shed = shed_over_the_rate(&registry).await;
    let rate = snapshot(addr).await.rate_limits.remove(0);
    assert_eq!((rate.refused.critical, rate.refused.default, rate.refused.sheddable), (0, 0, shed));
    assert_eq!(snap.bulkheads[0].refused, Default::default());
    assert_eq!(snap.breakers[1].totals, Counts::default());
    assert!(!snap.control, "built without a token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_sends_a_snapshot_then_transitions_as_they_happen_and_counts_each_second() {
    let registry = guards();
    let addr = serve(admin::router(&registry).into_router()).await;
    let mut events = Events::connect(addr).await;
    let first: Snapshot = events.next_named("snapshot").await;
    assert_eq!(first.breakers.len(), 2);

    for _ in 0..5 {
        let _ = call(&registry, "alpha", Err(Flaky::Down)).await;
    }
    assert_eq!(registry.breaker("alpha").unwrap().state(), BreakerState::Open);
    let opened: TransitionView = events.next_named("transition").await;
    assert_eq!(
        (opened.breaker.as_str(), opened.from, opened.to, opened.forced),
        ("alpha", State::Closed, State::Open, None)
    );

    let made = 25;
    for _ in 0..made {
        call(&registry, "beta", Ok(())).await.unwrap();
    }
    // Each tick holds one second; together they hold every call since the
    // router was built, and each agrees with the registry's totals.
    let mut counted = Counts::default();
    while counted.calls < made {
        let tick: Snapshot = events.next_named("tick").await;
        assert!(tick.transitions.is_empty(), "transitions come as their own events");
        let beta = tick.breakers.iter().find(|b| b.name == "beta").unwrap();
        assert_eq!(beta.per_second.len(), 1, "a tick carries the second just ended");
        counted.calls += beta.per_second[0].calls;
        counted.failures += beta.per_second[0].failures;
        let alpha = tick.breakers.iter().find(|b| b.name == "alpha").unwrap();
        assert_eq!(alpha.state, State::Open, "open for a minute");
        assert_eq!(alpha.totals, totals(&registry, "alpha"));
        assert!(alpha.remaining_open_ms.is_some_and(|ms| ms > 0 && ms <= 60_000));
        assert_eq!(alpha.open_period_ms, 60_000, "open_for above max_open_for: no growth");
        assert_eq!((beta.open_period_ms, beta.config.max_open_for_ms), (1_000, 30_000), "closed: open_for");
    }
    assert_eq!(
        counted,
        Counts { calls: made, failures: 0, rejections: 0, slow_calls: 0 },
        "no call counted twice"
    );
    let quiet: Snapshot = events.next_named("tick").await;
    let beta = quiet.breakers.iter().find(|b| b.name == "beta").unwrap();
    assert_eq!(beta.per_second, [Counts::default()], "a second without calls counts none");
    let snap = snapshot(addr).await;
    let beta = snap.breakers.iter().find(|b| b.name == "beta").unwrap();
    assert_eq!(
        beta.per_second.iter().map(|s| s.calls).sum::<u64>(),
        made,
        "the snapshot's minute holds them too"
    );
    assert_eq!(snap.transitions, [opened]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_open_breaker_rejects_calls_until_reset_and_shows_it() {
    let registry = guards();
    let addr = serve(admin::router(&registry).with_token(TOKEN).unwrap().into_router()).await;
    let mut events = Events::connect(addr).await;
    let _: Snapshot = events.next_named("snapshot").await;

    let (status, body) = post(addr, "alpha", "force-open", Some(&format!("Bearer {TOKEN}"))).await;
    assert_eq!(status, 200, "{body}");
    let view: BreakerView = serde_json::from_str(&body).unwrap();
    assert_eq!((view.state, view.forced), (State::Open, Some(State::Open)));
    let ran = Arc::new(AtomicU64::new(0));
    let attempt = {
        let ran = ran.clone();
        move || {
            ran.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    };
    let refused = support::call_with(&registry, "alpha", attempt.clone()).await;
    assert_eq!(refused, Err(Flaky::Rejected(Rejection::CircuitOpen { breaker: "alpha".into() })));
    assert_eq!(ran.load(Ordering::Relaxed), 0, "the call never ran");
    let forced: TransitionView = events.next_named("transition").await;
    assert_eq!((forced.from, forced.to, forced.forced), (State::Closed, State::Open, Some(State::Open)));
    let snap = snapshot(addr).await;
    assert_eq!((snap.breakers[0].state, snap.breakers[0].forced), (State::Open, Some(State::Open)));
    assert!(snap.control);

    let (status, _) = post(addr, "alpha", "force-closed", Some(&format!("Bearer {TOKEN}"))).await;
    assert_eq!(status, 200);
    for _ in 0..8 {
        let _ = call(&registry, "alpha", Err(Flaky::Down)).await;
    }
    let snap = snapshot(addr).await;
    assert_eq!(
        (snap.breakers[0].state, snap.breakers[0].forced),
        (State::Closed, Some(State::Closed)),
        "failures do not open it"
    );

    let (status, body) = post(addr, "alpha", "reset", Some(&format!("Bearer {TOKEN}"))).await;
    assert_eq!(status, 200);
    let view: BreakerView = serde_json::from_str(&body).unwrap();
    assert_eq!((view.state, view.forced), (State::Closed, None));
    support::call_with(&registry, "alpha", attempt).await.unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_control_is_refused_without_the_routers_bearer_token() {
    let registry = guards();
    let with_token = serve(admin::router(&registry).with_token(TOKEN).unwrap().into_router()).await;
    let without_token = serve(admin::router(&registry).into_router()).await;
    let refusals = [
        (with_token, None, "no Authorization header"),
        (with_token, Some("Bearer not-the-token".to_owned()), "a wrong token"),
        (with_token, Some(format!("Bearer {TOKEN}x")), "the token with a character more"),
        (with_token, Some(format!("Bearer {}", &TOKEN[..TOKEN.len() - 1])), "a prefix of the token"),
        (with_token, Some(format!("Basic {TOKEN}")), "another scheme"),
        (without_token, Some(format!("Bearer {TOKEN}")), "a router built without a token"),
    ];
    for (addr, authorization, case) in refusals {
        for action in ["force-open", "force-closed", "reset"] {
            let (status, body) = post(addr, "alpha", action, authorization.as_deref()).await;
            assert_eq!(status, 401, "{action} with {case}: {body}");
        }
    }
    assert_eq!(registry.breaker("alpha").unwrap().forced(), None, "no refused request acted");
    let (status, _) = post(with_token, "alpha", "force-open", Some(&format!("bearer {TOKEN}"))).await;
    assert_eq!(status, 200, "the scheme's case does not matter");
    assert_eq!(registry.breaker("alpha").unwrap().forced(), Some(BreakerState::Open));
}

/// The README's nesting, as written: the page at `/resilience` (and at
/// `/resilience/` through the redirect), its data below it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_at_a_path_the_page_and_its_data_are_served_under_it() {
    let registry = guards();
    let admin = admin::router(&registry);
    let app = axum::Router::new().nest("/resilience", admin.into()).route(
        "/resilience/",
        axum::routing::get(|| async { axum::response::Redirect::permanent("/resilience") }),
    );
    let addr = serve(app).await;
    for path in ["/resilience", "/resilience/"] {
        let page = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
        assert_eq!((page.status().as_u16(), page.url().path()), (200, "/resilience"), "{path}");
        assert!(page.text().await.unwrap().contains("<html"), "{path}: the page");
    }
    let snapshot = reqwest::get(format!("http://{addr}/resilience/snapshot")).await.unwrap();
    assert_eq!(snapshot.status(), 200);
    let snapshot: Snapshot = snapshot.json().await.unwrap();
    assert_eq!(snapshot.breakers.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_name_is_a_404_that_lists_the_known_ones() {
    let registry = guards();
    let addr = serve(admin::router(&registry).with_token(TOKEN).unwrap().into_router()).await;
    let bearer = format!("Bearer {TOKEN}");
    let (status, body) = post(addr, "gamma", "force-open", Some(&bearer)).await;
    assert_eq!(status, 404);
    let refusal: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(refusal["known"], serde_json::json!(["alpha", "beta"]), "{body}");
    assert!(refusal["error"].as_str().unwrap().contains("gamma"), "{body}");

    let (status, body) = post(addr, "alpha", "explode", Some(&bearer)).await;
    assert_eq!(status, 404);
    let refusal: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(refusal["known"], serde_json::json!(["force-open", "force-closed", "reset"]), "{body}");

    let (status, body) = post(addr, "gamma", "force-open", None).await;
    assert_eq!(status, 401, "names are not told to a caller without the token: {body}");
    assert!(!body.contains("alpha"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_event_streams_ends_them_so_a_server_can_shut_down() {
    let registry = guards();
    let admin = admin::router(&registry);
    let streams = admin.event_streams();
    let addr = serve(admin.into_router()).await;
    let mut open = Events::connect(addr).await;
    let _: Snapshot = open.next_named("snapshot").await;
    streams.close();
    assert_eq!(open.next().await, None, "the open stream ended");
    let mut later = Events::connect(addr).await;
    let _: Snapshot = later.next_named("snapshot").await;
    assert_eq!(later.next().await, None, "a later stream ends after its snapshot");
    assert_eq!(snapshot(addr).await.breakers.len(), 2, "the other routes still answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_each_breaker_and_its_state_in_a_real_browser() {
    browser::renders_each_breaker_and_its_state().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_transitions_of_a_service_restarted_under_it() {
    browser::shows_the_transitions_of_a_restarted_service().await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_the_fleets_of_another_type_replaced_is_a_line_on_the_dashboard() {
    let Some(server) = server::Server::start("a_key_of_the_fleets_of_another_type_replaced_...") else {
        return;
    };
    browser::shows_a_key_of_the_fleets_of_another_type_replaced(&server).await;
}

/// `/snapshot` lists each annotated function with the settings in effect in
/// the router's registry, and where each came from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snapshot_lists_each_operation_with_its_settings_and_their_sources() {
    let registry = guards();
    registry
        .load_toml("[operations.\"admin::quote\"]\njitter = \"none\"\nmax_attempts = 3\nbudget = \"none\"\nbreaker = \"none\"\npriority = \"critical\"\n")
        .unwrap();
    let addr = serve(admin::router(&registry).into_router()).await;
    let snap = snapshot(addr).await;
    let quote = snap.operations.iter().find(|op| op.name == "admin::quote").expect("listed");
    let rows: Vec<(&str, &str, &str)> =
        quote.settings.iter().map(|s| (s.key.as_str(), s.value.as_str(), s.source.as_str())).collect();
    assert_eq!(
        rows,
        [
            ("max_attempts", "3", "<toml>:3"),
            ("base_ms", "25", "compiled"),
            ("cap_ms", "20000", "compiled"),
            ("factor", "2", "compiled"),
            ("jitter", "none", "<toml>:2"),
            ("attempt_timeout_ms", "none", "compiled"),
            ("deadline_ms", "none", "compiled"),
            ("budget", "none", "<toml>:4"),
            ("breaker", "none", "<toml>:5"),
            ("priority", "critical", "<toml>:6"),
        ]
    );
}

/// The sets of rate limits and bulkheads per key are shown with their
/// bounds and the keys whose guard refused the most, most first; a key
/// that refused nothing is not listed.
#[tokio::test(start_paused = true)]
async fn the_guards_per_key_are_shown_with_the_keys_that_refused_most() {
    use std::time::Duration;
    use stormproof::Policy;
    use stormproof::bulkhead::BulkheadConfig;
    use stormproof::rate_limit::RateLimitConfig;

    let registry = guards();
    let quota =
        RateLimitConfig { per_second: 1, burst: 1, max_wait: None, max_keys: 64, ..Default::default() };
    registry.declare_rate_limit("api", quota).unwrap();
    registry.declare_bulkhead("pool", BulkheadConfig { max_keys: 32, ..Default::default() }).unwrap();
    let policy =
        Policy::builder().max_attempts(1).rate_limit_per("api").bulkhead_per("pool").build().unwrap();
    // Within the second: each key's first call takes its one turn, the
    // others are refused (no wait over the rate).
    for (key, calls) in [("acme", 4), ("bravo", 2), ("calm", 1)] {
        for _ in 0..calls {
            let _ = registry.scope(policy.per(key).run(|| async { Ok::<(), Flaky>(()) })).await;
        }
    }
    tokio::time::advance(Duration::from_millis(1)).await;
    let addr = serve(admin::router(&registry).into_router()).await;
    let snap = snapshot(addr).await;
    let [limits] = &snap.keyed_rate_limits[..] else { panic!("{:?}", snap.keyed_rate_limits) };
    assert_eq!((limits.name.as_str(), limits.keys, limits.max_keys), ("api", 3, 64));
    let refusing: Vec<_> = limits.refusing.iter().map(|k| (k.key.as_str(), k.refused)).collect();
    assert_eq!(refusing, [("acme", 3), ("bravo", 1)]);
    let [pools] = &snap.keyed_bulkheads[..] else { panic!("{:?}", snap.keyed_bulkheads) };
    assert_eq!((pools.name.as_str(), pools.keys, pools.max_keys), ("pool", 3, 32));
    assert!(pools.refusing.is_empty(), "no key's bulkhead was full: {:?}", pools.refusing);
}
