//! The router's lifecycle: its sampler and its hook live no longer than it.

use std::sync::Arc;
use std::time::Duration;

use super::sampler::PERIOD;
use super::snapshot::{Counts, State};
use super::{Shared, router, routes};
use crate::breaker::{BreakerConfig, Outcome};
use crate::registry::Registry;

fn registry_with(breaker: &str) -> Registry {
    let registry = Registry::new();
    registry.declare_breaker(breaker, BreakerConfig { failure_threshold: 3, ..Default::default() }).unwrap();
    registry
}

fn calls(registry: &Registry, breaker: &str, successes: u64, failures: u64) {
    let breaker = registry.breaker(breaker).unwrap();
    for _ in 0..successes {
        breaker.try_acquire().unwrap().record(Outcome::Success);
    }
    for _ in 0..failures {
        breaker.try_acquire().unwrap().record(Outcome::Failure);
    }
}

/// Lets every task that is ready run.
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn each_second_holds_what_the_breaker_counted_in_it() {
    let registry = registry_with("db");
    calls(&registry, "db", 4, 0); // before the router: not in its first second
    let shared = Shared::start(router(&registry));
    calls(&registry, "db", 5, 2);
    tokio::time::sleep(PERIOD + Duration::from_millis(1)).await;
    calls(&registry, "db", 1, 0);
    tokio::time::sleep(PERIOD).await;
    let snapshot = shared.snapshot();
    assert_eq!(
        snapshot.breakers[0].per_second,
        [Counts { calls: 7, failures: 2, rejections: 0 }, Counts { calls: 1, failures: 0, rejections: 0 }]
    );
    assert_eq!(snapshot.breakers[0].totals, Counts { calls: 12, failures: 2, rejections: 0 });
}

#[tokio::test(start_paused = true)]
async fn a_breaker_made_after_the_router_counts_from_its_first_call() {
    let registry = Registry::new();
    let shared = Shared::start(router(&registry));
    registry.declare_breaker("late", BreakerConfig::default()).unwrap();
    calls(&registry, "late", 3, 0);
    tokio::time::sleep(PERIOD + Duration::from_millis(1)).await;
    assert_eq!(shared.snapshot().breakers[0].per_second, [Counts { calls: 3, failures: 0, rejections: 0 }]);
}

#[tokio::test(start_paused = true)]
async fn transitions_are_recorded_with_their_forced_state() {
    let registry = registry_with("db");
    let shared = Shared::start(router(&registry));
    calls(&registry, "db", 0, 3);
    registry.breaker("db").unwrap().force_closed();
    let seen: Vec<_> =
        shared.snapshot().transitions.into_iter().map(|t| (t.seq, t.from, t.to, t.forced)).collect();
    assert_eq!(
        seen,
        [(1, State::Closed, State::Open, None), (2, State::Open, State::Closed, Some(State::Closed))]
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_the_router_ends_its_sampler_and_silences_its_hook() {
    let registry = registry_with("db");
    let shared = Shared::start(router(&registry));
    let sampler = shared.sampler.get().cloned().expect("built inside a runtime: the sampler started");
    let router: axum::Router = routes(shared.clone());
    let weak = Arc::downgrade(&shared);
    drop(shared);
    settle().await;
    assert!(!sampler.is_finished(), "the router still holds it");
    drop(router);
    assert!(weak.upgrade().is_none(), "nothing but the router held it: not the sampler, not the hook");
    settle().await;
    assert!(sampler.is_finished(), "the sampler ended with the router, without waiting for its next tick");
    // The registry keeps the hook, which now does nothing.
    calls(&registry, "db", 0, 3);
    registry.breaker("db").unwrap().reset();
}

#[test]
fn a_runtime_shutting_down_ends_the_sampler_and_the_router_can_still_be_dropped() {
    let registry = registry_with("db");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let shared = runtime.block_on(async { Shared::start(router(&registry)) });
    let sampler = shared.sampler.get().cloned().unwrap();
    drop(runtime);
    assert!(sampler.is_finished());
    drop(shared);
}

#[test]
fn a_router_built_outside_a_runtime_starts_its_sampler_with_its_first_request() {
    let registry = registry_with("db");
    let shared = Shared::start(router(&registry));
    assert!(shared.sampler.get().is_none(), "no runtime to run it on yet");
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    runtime.block_on(async {
        shared.ensure_sampler();
        calls(&registry, "db", 2, 0);
        tokio::time::sleep(PERIOD + Duration::from_millis(1)).await;
        assert_eq!(
            shared.snapshot().breakers[0].per_second,
            [Counts { calls: 2, failures: 0, rejections: 0 }]
        );
    });
}
