//! What the caller gets, whatever the timing: the last error an attempt
//! produced, once any attempt has produced one, even when the retry then
//! cannot run (the breaker opened during the backoff, the bulkhead stayed
//! full, the deadline passed while the retry queued). A rejection only when
//! no attempt could run, or the deadline cut one short.
//!
//! Also here: huge server-controlled waits and configured durations never
//! panic, and a half-open probe slot is not held while its attempt queues
//! for a bulkhead permit; an attempt timeout is transient and a breaker
//! failure whatever a `classify` function says of other errors.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestError, ms};
use stormproof_runtime::__private::probe::{ByTraits, Kept};
use stormproof_runtime::__private::{Call, Step};
use stormproof_runtime::{
    ErrorClass, Jitter, Policy, Registry, Rejection,
    breaker::{BreakerConfig, BreakerState},
    bulkhead::BulkheadConfig,
    classify::parse_retry_after,
    registry,
};
use tokio::sync::Notify;
use tokio::time::{Instant, sleep};

// Named after each caller's line (`#[track_caller]`), so that the tests
// running at once in this process do not share its own breaker and budget.
#[track_caller]
fn no_jitter() -> stormproof_runtime::PolicyBuilder {
    Policy::builder().jitter(Jitter::None)
}

#[tokio::test(start_paused = true)]
async fn a_huge_retry_after_with_a_deadline_ends_the_call_at_once_with_the_throttled_error() {
    // The server controls this header: about u64::MAX seconds.
    let retry_after = parse_retry_after("99999999999999999999");
    assert_eq!(retry_after, Some(Duration::from_secs(u64::MAX)));
    let policy = no_jitter().deadline(Duration::from_secs(10)).build().unwrap();
    let start = Instant::now();
    let mut attempts = 0;
    let result: Result<(), _> = policy
        .run(|| {
            attempts += 1;
            async move { Err(TestError::Throttled(retry_after)) }
        })
        .await;
    assert_eq!(result, Err(TestError::Throttled(retry_after)));
    assert_eq!((attempts, start.elapsed()), (1, Duration::ZERO), "the wait cannot end before the deadline");
}

/// Without a deadline, a long `Retry-After` is waited as the server asks;
/// one past 30 years (tokio's horizon: slept, it would be cut to 30 years
/// and retried early) means never, and ends the call at once.
#[tokio::test(start_paused = true)]
async fn without_a_deadline_a_long_retry_after_is_waited_and_a_never_ends_the_call_at_once() {
    let a_year = Duration::from_secs(86_400 * 365);
    let never = parse_retry_after("99999999999999999999");
    for (retry_after, expected, waited) in
        [(Some(a_year), Ok(2), a_year), (never, Err(TestError::Throttled(never)), Duration::ZERO)]
    {
        let policy = no_jitter().max_attempts(2).build().unwrap();
        let start = Instant::now();
        let mut attempts = 0;
        let result = policy
            .run(|| {
                attempts += 1;
                let attempt = attempts;
                async move { if attempt == 1 { Err(TestError::Throttled(retry_after)) } else { Ok(attempt) } }
            })
            .await;
        assert_eq!(result, expected, "Retry-After {retry_after:?}");
        assert_eq!(start.elapsed(), waited, "Retry-After {retry_after:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn deadlines_and_timeouts_too_far_to_represent_never_fire() {
    let policy = no_jitter()
        .max_attempts(3)
        .base(ms(10))
        .deadline(Duration::MAX)
        .attempt_timeout(Duration::MAX - Duration::from_nanos(1))
        .build()
        .unwrap();
    let mut attempts = 0;
    let result = policy
        .run(|| {
            attempts += 1;
            let attempt = attempts;
            async move {
                sleep(Duration::from_secs(3_600)).await;
                if attempt < 3 { Err(TestError::Transient) } else { Ok(attempt) }
            }
        })
        .await;
    assert_eq!(result, Ok(3), "no deadline cut the hour-long attempts");
}

/// One step of `execution` on the direct path (`attempt`) or the general one.
async fn step(
    execution: &mut Call<'_, Kept<TestError>, ByTraits>,
    direct: bool,
    outcome: Result<u32, TestError>,
) -> Step<u32, TestError> {
    if direct {
        execution.attempt(async move { outcome }).await
    } else {
        execution.attempt_with(move || async move { outcome }).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_breaker_opened_during_the_backoff_ends_the_call_with_the_last_error() {
    for direct in [true, false] {
        // The direct path needs the global registry; each run its own name.
        let name = format!("opened-during-backoff-{direct}");
        let config = BreakerConfig { failure_threshold: 2, ..Default::default() };
        registry().declare_breaker(&name, config).unwrap();
        let policy = no_jitter().base(ms(100)).breaker(name.clone()).build().unwrap();
        let mut first = policy.call(None, Kept::default(), ByTraits);
        assert!(matches!(step(&mut first, direct, Err(TestError::Transient)).await, Step::Retry));
        // Meanwhile another call's failure opens the breaker (2 failures in all).
        let breaker = registry().breaker(&name).unwrap();
        breaker.try_acquire().unwrap().record(stormproof_runtime::breaker::Outcome::Failure);
        assert_eq!(breaker.state(), BreakerState::Open);
        let Step::Done(result) = step(&mut first, direct, Ok(1)).await else { panic!("the breaker refuses") };
        assert_eq!(result, Err(TestError::Transient), "direct path: {direct}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_first_attempt_refused_by_an_open_breaker_gets_circuit_open() {
    let registry = Registry::new();
    registry.declare_breaker("down", BreakerConfig { failure_threshold: 1, ..Default::default() }).unwrap();
    registry
        .breaker("down")
        .unwrap()
        .try_acquire()
        .unwrap()
        .record(stormproof_runtime::breaker::Outcome::Failure);
    let policy = no_jitter().breaker("down").build().unwrap();
    let result: Result<(), TestError> = registry.scope(policy.run(|| async { Ok(()) })).await;
    let rejection = Rejection::CircuitOpen { breaker: "down".into() };
    assert_eq!(result, Err(TestError::Rejected(rejection.clone())));
    assert!(!rejection.to_string().contains("not attempted"), "{rejection}");
}

#[tokio::test(start_paused = true)]
async fn run_calls_its_closure_only_for_an_attempt_the_guards_admitted() {
    // The global registry's guards: the direct path (breaker only).
    registry().declare_breaker("closure-refused", BreakerConfig::default()).unwrap();
    registry().breaker("closure-refused").unwrap().force_open();
    let policy = no_jitter().breaker("closure-refused").build().unwrap();
    let mut calls = 0;
    let result: Result<(), TestError> = policy
        .run(|| {
            calls += 1;
            async { Ok(()) }
        })
        .await;
    assert_eq!(
        result,
        Err(TestError::Rejected(Rejection::CircuitOpen { breaker: "closure-refused".into() }))
    );
    assert_eq!(calls, 0, "refused on the direct path: no attempt made");

    // A scoped registry's full bulkhead: the general path.
    let registry = one_at_a_time(Some(Duration::ZERO));
    let bulkhead = registry.bulkhead("db").unwrap();
    let _held = bulkhead.acquire().await.unwrap();
    let policy = no_jitter().bulkhead("db").build().unwrap();
    let result: Result<(), TestError> = registry
        .scope(policy.run(|| {
            calls += 1;
            async { Ok(()) }
        }))
        .await;
    assert!(matches!(result, Err(TestError::Rejected(Rejection::BulkheadFull { .. }))), "{result:?}");
    assert_eq!(calls, 0, "refused on the general path: no attempt made");

    // A hedging policy's call inside another call's attempt does not hedge
    // (`Nested::Once`): its one attempt is made once admitted, like any.
    let hedging = no_jitter().hedge(ms(10), 1).breaker("closure-refused").build().unwrap();
    let outer = no_jitter().max_attempts(1).build().unwrap();
    let made = std::cell::Cell::new(0);
    let nested: Result<(), TestError> = outer
        .run(|| async {
            hedging
                .run(|| {
                    made.set(made.get() + 1);
                    async { Ok(()) }
                })
                .await
        })
        .await;
    assert_eq!(
        nested,
        Err(TestError::Rejected(Rejection::CircuitOpen { breaker: "closure-refused".into() }))
    );
    assert_eq!(made.get(), 0, "refused inside another call: no attempt made");
}

#[tokio::test(start_paused = true)]
async fn a_run_polled_after_it_finished_panics_and_makes_no_other_attempt() {
    use std::future::Future;
    use std::task::{Context, Waker};
    // A success, and a failure that ends the call (one attempt allowed),
    // with the operation's own guards and with none at all.
    let guarded = no_jitter().max_attempts(1).build().unwrap();
    let unguarded = no_jitter().max_attempts(1).breaker("none").budget("none").build().unwrap();
    for (policy, answer) in [
        (&guarded, Ok(7)),
        (&guarded, Err(TestError::Transient)),
        (&unguarded, Ok(7)),
        (&unguarded, Err(TestError::Transient)),
    ] {
        let mut calls = 0;
        {
            let mut run = std::pin::pin!(policy.run(|| {
                calls += 1;
                let answer = answer.clone();
                async move { answer }
            }));
            assert_eq!(std::future::poll_fn(|cx| run.as_mut().poll(cx)).await, answer);
            let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run.as_mut().poll(&mut Context::from_waker(Waker::noop()))
            }));
            assert!(again.is_err(), "{answer:?}: a finished call is not polled again (`Future`'s rule)");
        }
        assert_eq!(calls, 1, "{answer:?}: no attempt made by the poll after the end");
    }
}

#[tokio::test(start_paused = true)]
async fn run_or_else_hands_the_final_error_to_the_fallback_once_and_only_on_failure() {
    let policy = no_jitter().max_attempts(3).base(ms(1)).breaker("none").budget("none").build().unwrap();
    let (mut attempts, mut fallbacks) = (0, Vec::new());
    let result = policy
        .run_or_else(
            || {
                attempts += 1;
                let n = attempts;
                async move { Err::<u32, _>(if n < 3 { TestError::Transient } else { TestError::Permanent }) }
            },
            |error| {
                fallbacks.push(error);
                async { Ok(100) }
            },
        )
        .await;
    assert_eq!(result, Ok(100), "the fallback's answer");
    assert_eq!(attempts, 3);
    assert_eq!(fallbacks, [TestError::Permanent], "called once, with the last error");

    let mut fallback_called = false;
    let result = policy
        .run_or_else(
            || async { Ok::<u32, TestError>(7) },
            |_| {
                fallback_called = true;
                async { Ok(100) }
            },
        )
        .await;
    assert_eq!((result, fallback_called), (Ok(7), false), "a success never asks the fallback");
}

/// A registry whose bulkhead `db` admits one attempt at a time.
fn one_at_a_time(max_wait: Option<Duration>) -> Registry {
    let registry = Registry::new();
    registry
        .declare_bulkhead("db", BulkheadConfig { max_concurrent: 1, max_wait, ..Default::default() })
        .unwrap();
    registry
}

/// Holds the bulkhead's only permit from `from` for `hold`.
fn occupy(registry: &Registry, from: Duration, hold: Duration) -> tokio::task::JoinHandle<()> {
    let bulkhead = registry.bulkhead("db").unwrap();
    tokio::spawn(async move {
        sleep(from).await;
        let _permit = bulkhead.acquire().await.unwrap();
        sleep(hold).await;
    })
}

#[tokio::test(start_paused = true)]
async fn a_full_bulkhead_on_the_retry_ends_the_call_with_the_last_error() {
    let registry = one_at_a_time(Some(ms(10)));
    // Takes the permit during the first attempt's 100 ms backoff, for a second.
    let holder = occupy(&registry, ms(50), Duration::from_secs(1));
    let policy = no_jitter().base(ms(100)).bulkhead("db").build().unwrap();
    let result: Result<(), _> = registry.scope(policy.run(|| async { Err(TestError::Transient) })).await;
    assert_eq!(result, Err(TestError::Transient), "not BulkheadFull: an attempt did run");
    holder.abort();
}

#[tokio::test(start_paused = true)]
async fn the_deadline_passing_while_the_retry_queues_ends_the_call_with_the_last_error() {
    let registry = one_at_a_time(None);
    let holder = occupy(&registry, ms(50), Duration::from_secs(10));
    let policy = no_jitter().base(ms(100)).deadline(Duration::from_secs(1)).bulkhead("db").build().unwrap();
    let start = Instant::now();
    let result: Result<(), _> = registry.scope(policy.run(|| async { Err(TestError::Transient) })).await;
    assert_eq!(result, Err(TestError::Transient), "not DeadlineExceeded: no attempt was cut");
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    holder.abort();
}

#[tokio::test(start_paused = true)]
async fn a_half_open_probe_slot_is_not_held_while_its_attempt_queues_for_the_bulkhead() {
    let registry = one_at_a_time(None);
    let config = BreakerConfig {
        failure_threshold: 1,
        open_for: ms(100),
        success_threshold: 1,
        half_open_max_calls: 1,
        ..Default::default()
    };
    registry.declare_breaker("api", config).unwrap();
    let breaker = registry.breaker("api").unwrap();
    breaker.try_acquire().unwrap().record(stormproof_runtime::breaker::Outcome::Failure);
    sleep(ms(100)).await;
    assert_eq!(breaker.state(), BreakerState::HalfOpen);

    // The bulkhead is saturated, with no `max_wait`: a queued probe would stall recovery.
    let bulkhead = registry.bulkhead("db").unwrap();
    let held = bulkhead.acquire().await.unwrap();
    let queued_policy = no_jitter().max_attempts(1).breaker("api").bulkhead("db").build().unwrap();
    let queued = tokio::spawn(
        registry.scope(async move { queued_policy.run(|| async { Ok::<_, TestError>("queued") }).await }),
    );
    tokio::task::yield_now().await;

    // Another caller of the same dependency, not behind the bulkhead, probes and closes it.
    let probe = no_jitter().max_attempts(1).breaker("api").build().unwrap();
    let probed: Result<&str, TestError> = registry.scope(probe.run(|| async { Ok("probe") })).await;
    assert_eq!(probed, Ok("probe"), "the queued attempt did not hold the only probe slot");
    assert_eq!(breaker.state(), BreakerState::Closed);

    drop(held);
    assert_eq!(queued.await.unwrap(), Ok("queued"));
}

#[tokio::test(start_paused = true)]
async fn a_spawned_task_carries_the_scope_through_registry_current() {
    let isolated = Registry::new();
    let policy = Arc::new(no_jitter().breaker("carried").build().unwrap());
    let done = Arc::new(Notify::new());
    isolated
        .scope(async {
            // `scope` reaches this task only; the spawned one re-enters it.
            let current = Registry::current();
            let policy = policy.clone();
            let done = done.clone();
            tokio::spawn(current.scope(async move {
                policy.run(|| async { Ok::<_, TestError>(()) }).await.unwrap();
                done.notify_one();
            }));
        })
        .await;
    done.notified().await;
    assert!(isolated.breaker("carried").is_some(), "the spawned task used the scoped registry");
    assert!(registry().breaker("carried").is_none(), "and not the global one");
}

/// An error type whose `classify` function, like the one in
/// `Policy::classify`'s example, calls every error it does not know
/// permanent (here, all of them): the runtime's own `AttemptTimeout` included.
#[derive(Debug)]
enum DbError {
    Rejected(Rejection),
}

impl From<Rejection> for DbError {
    fn from(rejection: Rejection) -> Self {
        DbError::Rejected(rejection)
    }
}

fn classify_db(error: &DbError) -> ErrorClass {
    match error {
        DbError::Rejected(_) => ErrorClass::Permanent,
    }
}

/// The runtime's timeout is a transient failure (DESIGN.md: retried, and a
/// breaker failure), not what the user's function says of a rejection it
/// was not written for; on the general path (a scoped registry), the direct
/// one (the global registry) and the hedged one.
#[tokio::test(start_paused = true)]
async fn an_attempt_timeout_is_retried_and_a_breaker_failure_whatever_a_classify_function_says() {
    for (path, hedged, scoped) in [("general", false, true), ("direct", false, false), ("hedged", true, true)]
    {
        let name = format!("timeouts-{path}");
        let config = BreakerConfig { failure_threshold: 2, ..Default::default() };
        let scope = Registry::new();
        let registry = if scoped { &scope } else { registry() };
        registry.declare_breaker(&name, config).unwrap();
        let mut builder =
            no_jitter().max_attempts(2).base(ms(10)).attempt_timeout(ms(50)).breaker(name.clone());
        if hedged {
            builder = builder.hedge(ms(60), 1);
        }
        let policy = builder.build().unwrap();
        let mut attempts = 0;
        let classified = policy.classify(classify_db);
        let call = classified.run(|| {
            attempts += 1;
            async {
                sleep(ms(1_000)).await;
                Ok::<(), DbError>(())
            }
        });
        let result = if scoped { scope.scope(call).await } else { call.await };
        assert!(
            matches!(result, Err(DbError::Rejected(Rejection::AttemptTimeout { .. }))),
            "{path}: {result:?}"
        );
        assert_eq!(attempts, 2, "{path}: the timeout was retried");
        assert_eq!(registry.breaker(&name).unwrap().state(), BreakerState::Open, "{path}: two failures");
    }
}
