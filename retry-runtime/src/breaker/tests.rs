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

/// A window of the last `window_calls` calls, judged once `minimum` are held.
fn last_calls(window_calls: u32, minimum_calls: u32) -> CircuitBreaker {
    let config = BreakerConfig {
        failure_rate_percent: Some(50),
        window_calls: Some(window_calls),
        minimum_calls,
        ..Default::default()
    };
    CircuitBreaker::new("last-calls", config).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_window_of_calls_counts_successes_without_its_lock_once_it_holds_enough_to_judge() {
    let breaker = last_calls(10, 4);
    // Below minimum_calls a success may complete a rate: under the lock.
    for _ in 0..4 {
        breaker.try_acquire().expect("closed").record(Outcome::Success);
    }
    let before = locks(&breaker);
    for _ in 0..1_000 {
        breaker.try_acquire().expect("closed").record(Outcome::Success);
    }
    assert_eq!(locks(&breaker), before, "a success took the lock");
    // The successes still count: the last 10 calls are 6 successes and 4
    // failures, 40 %; the fifth failure makes it 5 of 10, 50 %.
    for _ in 0..4 {
        breaker.try_acquire().expect("closed").record(Outcome::Failure);
    }
    assert_eq!(breaker.state(), BreakerState::Closed, "4 of the last 10");
    breaker.try_acquire().expect("closed").record(Outcome::Failure);
    assert_eq!(breaker.state(), BreakerState::Open, "5 of the last 10");
}

#[tokio::test(start_paused = true)]
async fn a_window_of_calls_counts_the_successes_between_failures() {
    let breaker = last_calls(10, 10);
    // F S S F S S F S S F: 4 of 10, closed; each success counted apart
    // once the window held ten, and handed over at the next failure.
    for round in 0..20 {
        breaker.try_acquire().expect("closed").record(Outcome::Failure);
        breaker.try_acquire().expect("closed").record(Outcome::Success);
        breaker.try_acquire().expect("closed").record(Outcome::Success);
        assert_eq!(breaker.state(), BreakerState::Closed, "round {round}: a third failed");
    }
    // A neutral outcome is no success: in F N N F N N ... the window
    // counts only the failures, and opens within five more.
    for outcome in [Outcome::Failure, Outcome::Neutral, Outcome::Neutral].repeat(5) {
        if let Some(permit) = breaker.try_acquire() {
            permit.record(outcome);
        }
    }
    assert_eq!(breaker.state(), BreakerState::Open);
}
