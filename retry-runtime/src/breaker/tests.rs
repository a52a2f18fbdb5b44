//! What [`CircuitBreaker`]'s fast paths promise beyond the outcome: which
//! records leave the core's lock alone (the outcome itself is the same
//! either way, so only the count of lock acquisitions can tell).

use std::sync::atomic::Ordering;

use super::{BreakerConfig, BreakerState, CircuitBreaker, Outcome};

fn locks(breaker: &CircuitBreaker) -> u64 {
    breaker.counts.locks.load(Ordering::Relaxed)
}

fn breaker(failure_threshold: u32) -> CircuitBreaker {
    CircuitBreaker::new("locks", BreakerConfig { failure_threshold, ..Default::default() }).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_closed_breaker_with_nothing_to_clear_admits_and_records_a_success_without_its_lock() {
    let breaker = breaker(5);
    let before = locks(&breaker);
    breaker.try_acquire().expect("closed").record(Outcome::Success);
    breaker.try_acquire().expect("closed").record(Outcome::Neutral);
    assert_eq!(locks(&breaker), before, "the success path took the lock");
    assert_eq!(breaker.totals().calls, 2);
}

#[tokio::test(start_paused = true)]
async fn a_success_to_clear_a_failure_takes_the_lock() {
    let breaker = breaker(5);
    breaker.try_acquire().expect("closed").record(Outcome::Failure);
    let before = locks(&breaker);
    breaker.try_acquire().expect("closed").record(Outcome::Success);
    assert!(locks(&breaker) > before, "a failure on record must be cleared under the lock");
}

#[tokio::test(start_paused = true)]
async fn a_success_admitted_before_the_breaker_opened_is_ignored_without_its_lock() {
    // A breaker that just opened hears the successes of the attempts it
    // admitted while closed: each is of an earlier epoch, and changes nothing.
    let breaker = breaker(1);
    let earlier = breaker.try_acquire().expect("closed");
    breaker.try_acquire().expect("closed").record(Outcome::Failure);
    assert_eq!(breaker.state(), BreakerState::Open);
    let before = locks(&breaker);
    earlier.record(Outcome::Success);
    assert_eq!(locks(&breaker), before, "a stale success took the lock");
    assert_eq!(breaker.state(), BreakerState::Open, "a stale success closed the breaker");
    assert_eq!(breaker.totals().calls, 2, "it still counts as a call that ran");
}
