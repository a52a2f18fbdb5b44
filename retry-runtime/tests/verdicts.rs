//! Verdicts from outside the process (what a fleet tells a replica's
//! breaker and budget), on the concurrent wrappers: `trip_until`, `close`,
//! probe totals, leased retry tokens.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use stormproof_runtime::{
    Registry,
    breaker::{BreakerConfig, BreakerState, CircuitBreaker, Outcome},
    budget::{RatioBudget, RetryBudget},
};
use tokio::time::{Instant, advance};

fn breaker() -> CircuitBreaker {
    CircuitBreaker::new("db", BreakerConfig { failure_threshold: 3, ..Default::default() }).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_tripped_breaker_admits_only_the_granted_probes_and_counts_their_outcomes() {
    let b = breaker();
    b.trip_until(Instant::now(), Some(2));
    let first = b.try_acquire().expect("probe one");
    let second = b.try_acquire().expect("probe two");
    assert!(first.is_probe() && second.is_probe());
    first.record(Outcome::Success);
    assert!(b.try_acquire().is_none(), "two granted in all, though one slot is free again");
    second.record(Outcome::Failure);
    let totals = b.totals();
    assert_eq!((totals.probe_successes, totals.probe_failures, totals.calls, totals.failures), (1, 1, 2, 1));
    assert_eq!(b.state(), BreakerState::Open, "a failed probe reopens, on the local rule");
    assert_eq!(
        b.remaining_open(),
        Some(Duration::from_secs(2)),
        "open_for (1 s), doubled by the failed probe"
    );
}

#[tokio::test(start_paused = true)]
async fn trip_until_moves_an_open_breakers_end_and_close_ends_it() {
    let b = breaker();
    b.trip_until(Instant::now() + Duration::from_secs(90), None);
    assert_eq!(b.remaining_open(), Some(Duration::from_secs(90)));
    b.trip_until(Instant::now() + Duration::from_secs(1), None);
    assert_eq!(b.remaining_open(), Some(Duration::from_secs(1)), "moved earlier too");
    advance(Duration::from_secs(1)).await;
    assert_eq!(b.state(), BreakerState::HalfOpen);
    b.close();
    assert_eq!(b.state(), BreakerState::Closed);
    b.force_open();
    b.close();
    b.trip_until(Instant::now(), Some(1));
    assert_eq!((b.state(), b.forced()), (BreakerState::Open, Some(BreakerState::Open)), "forced wins");
}

#[tokio::test(start_paused = true)]
async fn verdicts_reach_the_registrys_transition_hooks() {
    let registry = Registry::new();
    registry.declare_breaker("db", BreakerConfig::default()).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    registry.on_transition(move |t| log.lock().unwrap().push((t.from, t.to)));
    let b = registry.breaker("db").unwrap();
    b.trip_until(Instant::now() + Duration::from_secs(5), None);
    b.close();
    assert_eq!(
        *seen.lock().unwrap(),
        [(BreakerState::Closed, BreakerState::Open), (BreakerState::Open, BreakerState::Closed)]
    );
}

#[test]
fn a_budget_counts_its_first_attempts_and_retries_and_ends_a_lease() {
    let budget =
        RetryBudget::new("db", RatioBudget { ratio: 1.0, min_per_sec: 0, ..Default::default() }).unwrap();
    for _ in 0..4 {
        budget.on_first_attempt();
    }
    budget.lease(2);
    assert_eq!(budget.available(), 2, "the lease is smaller than the local leave (4)");
    assert!(budget.try_withdraw() && budget.try_withdraw() && !budget.try_withdraw());
    assert_eq!(budget.end_lease(), 0);
    assert!(budget.try_withdraw(), "local again: 2 of 4 left");
    let totals = budget.totals();
    assert_eq!((totals.first_attempts, totals.retries), (4, 3));
}
