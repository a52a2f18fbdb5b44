//! The retry loop's contract, through `Policy::run`, on paused time.

mod common;

use std::time::Duration;

use common::{Attempts, TestError, ms};
use stormproof_runtime::breaker::NO_BREAKER;
use stormproof_runtime::budget::NO_BUDGET;
use stormproof_runtime::{Jitter, Policy, Registry, Rejection, idempotency_key};
use tokio::time::{Instant, sleep};

// Named after each caller's line (`#[track_caller]`), so that the tests
// running at once in this process do not share its own breaker and budget.
#[track_caller]
fn no_jitter() -> stormproof_runtime::PolicyBuilder {
    Policy::builder().jitter(Jitter::None)
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_returns_at_once() {
    let attempts = Attempts::new();
    let policy = no_jitter().max_attempts(5).build().unwrap();
    let result: Result<(), _> = policy
        .run(|| {
            attempts.mark();
            async { Err(TestError::Permanent) }
        })
        .await;
    assert_eq!(result, Err(TestError::Permanent));
    assert_eq!(attempts.times(), [0]);
}

#[tokio::test(start_paused = true)]
async fn the_caller_gets_the_last_error_after_max_attempts() {
    let attempts = Attempts::new();
    let policy = no_jitter().max_attempts(3).base(ms(10)).build().unwrap();
    let result: Result<(), _> = policy
        .run(|| {
            let n = attempts.mark();
            async move { Err(if n < 3 { TestError::Transient } else { TestError::Throttled(None) }) }
        })
        .await;
    assert_eq!(result, Err(TestError::Throttled(None)));
    assert_eq!(attempts.times(), [0, 10, 30], "no wait after the last attempt");
}

#[tokio::test(start_paused = true)]
async fn no_wait_follows_the_last_attempt() {
    let policy = no_jitter().max_attempts(2).base(ms(1000)).cap(ms(1000)).build().unwrap();
    let start = Instant::now();
    let _: Result<(), _> = policy.run(|| async { Err(TestError::Transient) }).await;
    assert_eq!(start.elapsed(), ms(1000), "one wait between two attempts, none after");
}

#[tokio::test(start_paused = true)]
async fn retry_after_beyond_the_cap_is_honoured() {
    let attempts = Attempts::new();
    let policy = no_jitter().max_attempts(3).base(ms(100)).cap(ms(200)).build().unwrap();
    let result = policy
        .run(|| {
            let n = attempts.mark();
            async move {
                match n {
                    1 => Err(TestError::Throttled(Some(Duration::from_secs(5)))),
                    2 => Err(TestError::Throttled(Some(ms(1)))),
                    _ => Ok(n),
                }
            }
        })
        .await;
    assert_eq!(result, Ok(3));
    // max(5 s, 100 ms) then max(1 ms, 200 ms).
    assert_eq!(attempts.times(), [0, 5000, 5200]);
}

#[tokio::test(start_paused = true)]
async fn a_wait_that_would_end_past_the_deadline_is_not_slept() {
    let attempts = Attempts::new();
    let policy = no_jitter().max_attempts(10).base(ms(100)).deadline(ms(350)).build().unwrap();
    let start = Instant::now();
    let result: Result<(), _> = policy
        .run(|| {
            attempts.mark();
            async { Err(TestError::Transient) }
        })
        .await;
    // Attempts at 0, 100, 300; the next wait (400 ms) would end at 700 > 350.
    assert_eq!(attempts.times(), [0, 100, 300]);
    assert_eq!(result, Err(TestError::Transient), "the last error, not a rejection");
    assert_eq!(start.elapsed(), ms(300), "ended at once, without sleeping toward the deadline");
}

#[tokio::test(start_paused = true)]
async fn a_wait_ending_exactly_at_the_deadline_is_not_slept() {
    let attempts = Attempts::new();
    let policy = no_jitter().max_attempts(10).base(ms(100)).deadline(ms(300)).build().unwrap();
    let _: Result<(), _> = policy
        .run(|| {
            attempts.mark();
            async { Err(TestError::Transient) }
        })
        .await;
    assert_eq!(attempts.times(), [0, 100], "the wait 100 -> 300 would end at the deadline");
}

#[tokio::test(start_paused = true)]
async fn the_deadline_cuts_a_running_attempt() {
    let attempts = Attempts::new();
    let policy = no_jitter().max_attempts(5).base(ms(100)).deadline(ms(250)).build().unwrap();
    let start = Instant::now();
    let result: Result<(), _> = policy
        .run(|| {
            let n = attempts.mark();
            async move {
                if n == 1 {
                    return Err(TestError::Transient);
                }
                sleep(Duration::from_secs(60)).await;
                Ok(())
            }
        })
        .await;
    assert_eq!(result, Err(TestError::Rejected(Rejection::DeadlineExceeded { after: ms(250) })));
    assert_eq!(start.elapsed(), ms(250));
    assert_eq!(attempts.times(), [0, 100]);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_that_is_not_reached_changes_nothing() {
    let policy = no_jitter().max_attempts(3).base(ms(100)).deadline(ms(10_000)).build().unwrap();
    let attempts = Attempts::new();
    let result = policy
        .run(|| {
            let n = attempts.mark();
            async move { if n < 3 { Err(TestError::Transient) } else { Ok(n) } }
        })
        .await;
    assert_eq!(result, Ok(3));
    assert_eq!(attempts.times(), [0, 100, 300]);
}

#[tokio::test(start_paused = true)]
async fn an_attempt_past_its_timeout_is_cancelled_and_retried() {
    struct DropFlag(std::sync::Arc<std::sync::atomic::AtomicU32>);
    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let dropped = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let attempts = Attempts::new();
    let policy = no_jitter().max_attempts(3).base(ms(100)).attempt_timeout(ms(50)).build().unwrap();
    let result = policy
        .run(|| {
            let n = attempts.mark();
            let flag = DropFlag(dropped.clone());
            async move {
                let _flag = flag;
                if n < 3 {
                    sleep(Duration::from_secs(3600)).await;
                }
                Ok::<_, TestError>(n)
            }
        })
        .await;
    assert_eq!(result, Ok(3));
    // 0: times out at 50, waits 100; 150: times out at 200, waits 200; 400: succeeds.
    assert_eq!(attempts.times(), [0, 150, 400]);
    assert_eq!(dropped.load(std::sync::atomic::Ordering::SeqCst), 3, "every attempt's future was dropped");
}

#[tokio::test(start_paused = true)]
async fn an_attempt_that_always_times_out_returns_attempt_timeout() {
    let policy = no_jitter().max_attempts(2).base(ms(10)).attempt_timeout(ms(50)).build().unwrap();
    let result: Result<(), TestError> = policy
        .run(|| async {
            sleep(Duration::from_secs(1)).await;
            Ok(())
        })
        .await;
    assert_eq!(result, Err(TestError::Rejected(Rejection::AttemptTimeout { after: ms(50) })));
}

#[tokio::test(start_paused = true)]
async fn on_the_same_instant_the_deadline_beats_the_attempt_timeout() {
    // The first attempt times out at 100 ms; after a 50 ms wait the second
    // one's timeout (250 ms) falls on the deadline's instant.
    let policy =
        no_jitter().max_attempts(3).base(ms(50)).attempt_timeout(ms(100)).deadline(ms(250)).build().unwrap();
    let result: Result<(), TestError> = policy
        .run(|| async {
            sleep(Duration::from_secs(1)).await;
            Ok(())
        })
        .await;
    assert_eq!(result, Err(TestError::Rejected(Rejection::DeadlineExceeded { after: ms(250) })));
}

#[tokio::test(start_paused = true)]
async fn decorrelated_waits_stay_between_base_and_cap() {
    let attempts = Attempts::new();
    let policy = Policy::builder()
        .jitter(Jitter::Decorrelated)
        .max_attempts(20)
        .base(ms(100))
        .cap(ms(1000))
        .seed(11)
        .build()
        .unwrap();
    let _: Result<(), _> = policy
        .run(|| {
            attempts.mark();
            async { Err(TestError::Transient) }
        })
        .await;
    let times = attempts.times();
    assert_eq!(times.len(), 20);
    for gap in times.windows(2).map(|w| w[1] - w[0]) {
        assert!((100..=1000).contains(&gap), "gap {gap}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_policy_seed_reproduces_the_waits() {
    async fn waits(seed: u64) -> Vec<u64> {
        let attempts = Attempts::new();
        let policy = Policy::builder().max_attempts(8).seed(seed).build().unwrap();
        let _: Result<(), _> = policy
            .run(|| {
                attempts.mark();
                async { Err(TestError::Transient) }
            })
            .await;
        attempts.times()
    }
    assert_eq!(waits(5).await, waits(5).await);
    assert_ne!(waits(5).await, waits(6).await);
}

#[tokio::test(start_paused = true)]
async fn a_seeded_registry_reproduces_the_waits() {
    async fn waits(registry: Registry) -> Vec<u64> {
        let attempts = Attempts::new();
        let policy = Policy::builder().max_attempts(8).build().unwrap();
        registry
            .scope(policy.run(|| {
                attempts.mark();
                async { Err::<(), _>(TestError::Transient) }
            }))
            .await
            .unwrap_err();
        attempts.times()
    }
    assert_eq!(waits(Registry::with_seed(1)).await, waits(Registry::with_seed(1)).await);
    assert_ne!(waits(Registry::with_seed(1)).await, waits(Registry::with_seed(2)).await);
}

/// Without a seed (neither the policy's nor the registry's), a call draws its
/// jitter from the thread's generator: the waits are uniform over
/// `[0, base]`, so 400 of them average 50 ms with a standard error of
/// 100 / sqrt(12 * 400) ~= 1.44 ms; the bounds below are 7 standard errors
/// wide, and a generator stuck at either end, or drawing the same value
/// for every call, is far outside them. 400 failing calls in 20 s are
/// beyond what the operation's own budget lets retry (its floor is 100
/// retries in 10 s): the waits are what this test reads, so it has none.
#[tokio::test(start_paused = true)]
async fn without_a_seed_full_jitter_draws_uniform_waits() {
    let policy = Policy::builder()
        .max_attempts(2)
        .base(ms(100))
        .cap(ms(100))
        .budget(NO_BUDGET)
        .breaker(NO_BREAKER)
        .build()
        .unwrap();
    let mut waits = Vec::new();
    for _ in 0..400 {
        let attempts = Attempts::new();
        let _: Result<(), _> = policy
            .run(|| {
                attempts.mark();
                async { Err(TestError::Transient) }
            })
            .await;
        waits.push(attempts.times()[1]);
    }
    assert!(waits.iter().all(|&wait| wait <= 100), "within [0, base]: {waits:?}");
    let mean = waits.iter().sum::<u64>() as f64 / waits.len() as f64;
    assert!((40.0..=60.0).contains(&mean), "mean wait {mean} ms");
    let mut distinct = waits.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() > 50, "{} distinct waits of 101 possible", distinct.len());
}

#[tokio::test(start_paused = true)]
async fn the_idempotency_key_is_the_same_on_every_attempt() {
    let policy = no_jitter().max_attempts(3).base(ms(1)).build().unwrap();
    let seen = std::sync::Mutex::new(Vec::new());
    let result = policy
        .run_with_key(format_args!("order-{}", 42), || {
            let key = idempotency_key();
            let n = {
                let mut seen = seen.lock().unwrap();
                seen.push(key);
                seen.len()
            };
            async move { if n < 3 { Err(TestError::Transient) } else { Ok(()) } }
        })
        .await;
    assert_eq!(result, Ok(()));
    let seen = seen.into_inner().unwrap();
    // The closure is called when its attempt starts (once admitted), in the
    // attempt's scope, so it sees the key too (a hedging policy calls it
    // outside: there, read the key in the future, as below).
    assert_eq!(seen, [Some("order-42".into()), Some("order-42".into()), Some("order-42".into())]);

    let inside = std::sync::Mutex::new(Vec::new());
    let attempts = Attempts::new();
    policy
        .run_with_key("order-42", || {
            let n = attempts.mark();
            let inside = &inside;
            async move {
                inside.lock().unwrap().push(idempotency_key());
                if n < 3 { Err(TestError::Transient) } else { Ok(()) }
            }
        })
        .await
        .unwrap();
    let inside = inside.into_inner().unwrap();
    assert_eq!(inside.len(), 3);
    assert!(inside.iter().all(|k| k.as_deref() == Some("order-42")));
    assert_eq!(idempotency_key(), None, "no key outside an attempt");
}

/// Notes the key its drop sees.
struct SeesKeyOnDrop<'a>(&'a std::sync::Mutex<Option<Option<std::sync::Arc<str>>>>);

impl Drop for SeesKeyOnDrop<'_> {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = Some(idempotency_key());
    }
}

/// `run_with_key`'s attempt, cancelled while it waits, is dropped in its
/// key.
#[tokio::test(start_paused = true)]
async fn a_keyed_runs_first_attempt_cancelled_is_dropped_in_its_key() {
    let policy = no_jitter().max_attempts(3).build().unwrap();
    let seen = std::sync::Mutex::new(None);
    {
        let call = policy.run_with_key("order-43", || {
            let sees = SeesKeyOnDrop(&seen);
            async move {
                let _sees = sees;
                std::future::pending::<()>().await;
                Ok::<(), TestError>(())
            }
        });
        let mut call = std::pin::pin!(call);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(call.as_mut().poll(&mut cx).is_pending());
    }
    assert_eq!(seen.into_inner().unwrap(), Some(Some("order-43".into())), "the key, as its drop ran");
    assert_eq!(idempotency_key(), None, "and none outside it after");
}

#[tokio::test(start_paused = true)]
async fn a_nested_call_makes_a_single_attempt_by_default() {
    let inner_attempts = Attempts::new();
    let outer = no_jitter().max_attempts(3).base(ms(1)).build().unwrap();
    let inner = no_jitter().max_attempts(3).base(ms(1)).build().unwrap();
    let retrying_inner =
        no_jitter().max_attempts(3).base(ms(1)).nested(stormproof_runtime::Nested::Retry).build().unwrap();
    let _: Result<(), _> = outer
        .run(|| async {
            inner
                .run(|| {
                    inner_attempts.mark();
                    async { Err::<(), _>(TestError::Transient) }
                })
                .await
        })
        .await;
    assert_eq!(inner_attempts.count(), 3, "3 outer x 1 inner, not 3 x 3");

    let multiplied = Attempts::new();
    let _: Result<(), _> = outer
        .run(|| async {
            retrying_inner
                .run(|| {
                    multiplied.mark();
                    async { Err::<(), _>(TestError::Transient) }
                })
                .await
        })
        .await;
    assert_eq!(multiplied.count(), 9, "nested = retry opts out");
}

/// A call first polled outside any scoped registry (its first attempt
/// admitted plain, by the global registry's guards) and awaited inside one
/// goes on as admitted after that attempt fails: its retry waits out its
/// backoff, and is admitted and recorded by the same guards.
#[tokio::test(start_paused = true)]
async fn a_call_first_polled_outside_a_scope_keeps_its_backoff_inside_one() {
    let attempts = Attempts::new();
    let policy = no_jitter().max_attempts(2).base(ms(100)).cap(ms(100)).build().unwrap();
    let mut call = Box::pin(policy.run(|| {
        let n = attempts.mark();
        async move {
            sleep(ms(10)).await;
            if n == 1 { Err(TestError::Transient) } else { Ok(n) }
        }
    }));
    let start = Instant::now();
    let first_poll = std::future::poll_fn(|cx| std::task::Poll::Ready(call.as_mut().poll(cx).is_pending()));
    assert!(first_poll.await, "the first attempt runs");
    assert_eq!(Registry::new().scope(call).await, Ok(2));
    assert_eq!(attempts.times(), [0, 110], "the retry after the first attempt's 10 ms and its 100 ms wait");
    assert_eq!(start.elapsed(), ms(120));
    let own =
        stormproof_runtime::registry().breaker(policy.operation()).expect("the operation's own breaker");
    let totals = own.totals();
    assert_eq!(
        (totals.calls, totals.failures),
        (2, 1),
        "both attempts in the guards that admitted the first"
    );
}
