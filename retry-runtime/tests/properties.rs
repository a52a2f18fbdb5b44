//! Properties of the retry loop over random settings and random outcomes,
//! each case on its own paused-time runtime.

mod common;

use std::time::Duration;

use common::{Attempts, TestError, ms};
use proptest::prelude::*;
use stormproof_runtime::breaker::NO_BREAKER;
use stormproof_runtime::{Jitter, Policy};
use tokio::time::{Instant, sleep};

#[derive(Debug, Clone)]
enum Outcome {
    Ok,
    Transient,
    Throttled(Option<u64>),
    /// A `Retry-After` in seconds, as a server sends it (and its parser saturates).
    ThrottledSeconds(Option<u64>),
    Permanent,
    Slow(u64),
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        1 => Just(Outcome::Ok),
        4 => Just(Outcome::Transient),
        2 => prop::option::of(0u64..5_000).prop_map(Outcome::Throttled),
        1 => Just(Outcome::Permanent),
        2 => (0u64..3_000).prop_map(Outcome::Slow),
    ]
}

fn jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![Just(Jitter::None), Just(Jitter::Full), Just(Jitter::Equal), Just(Jitter::Decorrelated)]
}

#[derive(Debug)]
struct Run {
    attempts: u32,
    elapsed: Duration,
    result: Result<u32, TestError>,
}

async fn run(policy: &Policy, outcomes: &[Outcome]) -> Run {
    let attempts = Attempts::new();
    let start = Instant::now();
    let result = policy
        .run(|| {
            let n = attempts.mark();
            let outcome = outcomes[(n as usize - 1) % outcomes.len()].clone();
            async move {
                match outcome {
                    Outcome::Ok => Ok(n),
                    Outcome::Transient => Err(TestError::Transient),
                    Outcome::Throttled(after) => Err(TestError::Throttled(after.map(Duration::from_millis))),
                    Outcome::ThrottledSeconds(after) => {
                        Err(TestError::Throttled(after.map(Duration::from_secs)))
                    }
                    Outcome::Permanent => Err(TestError::Permanent),
                    Outcome::Slow(d) => {
                        sleep(ms(d)).await;
                        Ok(n)
                    }
                }
            }
        })
        .await;
    Run { attempts: attempts.count(), elapsed: start.elapsed(), result }
}

/// Durations at the edges: zero, tiny, ordinary, around tokio's 30-year
/// horizon, and as long as a `Duration` or a `u64` of milliseconds goes.
fn extreme_duration() -> impl Strategy<Value = Duration> {
    let horizon = Duration::from_secs(86_400 * 365 * 30);
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::from_nanos(1)),
        (0u64..10_000).prop_map(ms),
        Just(horizon),
        Just(horizon + Duration::from_nanos(1)),
        Just(Duration::from_millis(u64::MAX)),
        Just(Duration::from_secs(u64::MAX)),
        Just(Duration::MAX),
        any::<u64>().prop_map(Duration::from_secs),
    ]
}

/// Outcomes whose `Retry-After` may be anything a server can send.
fn hostile_outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        1 => Just(Outcome::Ok),
        2 => Just(Outcome::Transient),
        4 => prop_oneof![Just(None), Just(Some(u64::MAX)), any::<u64>().prop_map(Some)].prop_map(Outcome::ThrottledSeconds),
        1 => (0u64..3_000).prop_map(Outcome::Slow),
    ]
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn attempts_never_exceed_max_attempts(
        max_attempts in 1u32..12,
        base in 0u64..500,
        extra in 0u64..5_000,
        jitter in jitter(),
        seed: u64,
        outcomes in prop::collection::vec(outcome(), 1..16),
    ) {
        // No breaker: the cases share the registry, and their failures
        // would open the operation's own; these properties are the loop's.
        let policy = Policy::builder()
            .breaker(NO_BREAKER)
            .max_attempts(max_attempts)
            .base(ms(base))
            .cap(ms(base + extra))
            .jitter(jitter)
            .seed(seed)
            .build()
            .unwrap();
        let run = paused().block_on(run(&policy, &outcomes));
        prop_assert!(run.attempts >= 1 && run.attempts <= max_attempts, "{run:?}");
        if let Ok(n) = run.result {
            prop_assert_eq!(n, run.attempts, "the success is the last attempt");
        }
    }

    #[test]
    fn no_call_runs_past_its_deadline(
        max_attempts in 1u32..20,
        base in 0u64..500,
        deadline in 1u64..10_000,
        timeout in prop::option::of(1u64..3_000),
        jitter in jitter(),
        seed: u64,
        outcomes in prop::collection::vec(outcome(), 1..16),
    ) {
        let mut builder = Policy::builder()
            .breaker(NO_BREAKER)
            .max_attempts(max_attempts)
            .base(ms(base))
            .cap(ms(base * 8))
            .jitter(jitter)
            .seed(seed)
            .deadline(ms(deadline));
        if let Some(timeout) = timeout.filter(|t| *t < deadline) {
            builder = builder.attempt_timeout(ms(timeout));
        }
        let policy = builder.build().unwrap();
        let run = paused().block_on(run(&policy, &outcomes));
        prop_assert!(run.elapsed <= ms(deadline), "{run:?} past the deadline of {deadline} ms");
        prop_assert!(run.attempts <= max_attempts);
    }

    #[test]
    fn extreme_retry_after_backoff_timeout_and_deadline_values_never_panic(
        max_attempts in 1u32..6,
        a in extreme_duration(),
        b in extreme_duration(),
        timeout in prop::option::of(extreme_duration()),
        deadline in prop::option::of(extreme_duration()),
        jitter in jitter(),
        seed: u64,
        outcomes in prop::collection::vec(hostile_outcome(), 1..8),
    ) {
        let mut builder =
            Policy::builder().breaker(NO_BREAKER).max_attempts(max_attempts).base(a.min(b)).cap(a.max(b)).jitter(jitter).seed(seed);
        if let Some(deadline) = deadline.filter(|d| !d.is_zero()) {
            builder = builder.deadline(deadline);
        }
        if let Some(timeout) = timeout.filter(|t| !t.is_zero() && deadline.is_none_or(|d| *t < d)) {
            builder = builder.attempt_timeout(timeout);
        }
        let policy = builder.build().unwrap();
        let run = paused().block_on(run(&policy, &outcomes));
        prop_assert!(run.attempts >= 1 && run.attempts <= max_attempts, "{run:?}");
    }
}
