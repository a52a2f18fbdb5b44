//! `Execution::attempt` polls an attempt in place when the call uses the
//! global registry and asks for no bulkhead place that must be waited for
//! (the "direct" path, what the attribute mostly runs on); everything else goes through
//! `attempt_with`. Each scenario here runs both ways and must behave the
//! same: breaker permits held across polls and freed on cancellation, the
//! idempotency key and nesting seen inside the attempt (also while it is
//! dropped, and after a panic), fail-fast on an open breaker, backoff, and
//! the attempt timeout and the deadline (which cancel the attempt in its
//! context, the earlier of the two first), the throttle (asked first,
//! told how every attempt ended) and the rate limit (a turn waited for
//! holding nothing, within `max_wait` and the deadline). The bulkhead
//! scenarios (a place held while the attempt runs, a full one waited for
//! without a probe slot, refused after `max_wait`, an adaptive one sampled)
//! run both ways too, so that they hold whichever path a bulkhead takes.
//!
//! The guards live in this binary's global registry (the direct path needs
//! it); every test uses names of its own.

mod common;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::{TestError, ms};
use stormproof_runtime::__private::{ByTraits, Call, Kept, Step};
use stormproof_runtime::{
    Jitter, Nested, Policy, PolicyBuilder, Rejection,
    breaker::{BreakerConfig, BreakerState},
    bulkhead::{AdaptiveLimit, Bulkhead, BulkheadConfig},
    idempotency_key,
    rate_limit::{RateLimit, RateLimitConfig},
    registry,
    throttle::{Throttle, ThrottleConfig},
};
use tokio::time::{Instant, sleep, timeout};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Path {
    Direct,
    General,
}

const PATHS: [Path; 2] = [Path::Direct, Path::General];

/// One attempt of `execution`, the way `path` says.
async fn step<T, F>(
    execution: &mut Call<'_, Kept<TestError>, ByTraits>,
    path: Path,
    attempt: F,
) -> Step<T, TestError>
where
    F: Future<Output = Result<T, TestError>>,
{
    match path {
        Path::Direct => execution.attempt(attempt).await,
        Path::General => execution.attempt_with(move || attempt).await,
    }
}

/// A whole call: attempts made by `make` until the loop says it is done.
async fn call<T, F>(
    policy: &Policy,
    key: Option<&str>,
    path: Path,
    mut make: impl FnMut() -> F,
) -> Result<T, TestError>
where
    F: Future<Output = Result<T, TestError>>,
{
    let mut execution = policy.call(key.map(Arc::from), Kept::default(), ByTraits);
    loop {
        if let Step::Done(result) = step(&mut execution, path, make()).await {
            return result;
        }
    }
}

fn breaker(name: &str, open_for: Duration) {
    let config = BreakerConfig {
        failure_threshold: 1,
        open_for,
        success_threshold: 1,
        half_open_max_calls: 1,
        ..Default::default()
    };
    registry().declare_breaker(name, config).unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_pending_probe_holds_its_slot_and_frees_it_when_cancelled() {
    for path in PATHS {
        let name = format!("direct-probe-{path:?}");
        breaker(&name, ms(100));
        let policy = Policy::builder().max_attempts(1).breaker(name.clone()).build().unwrap();
        let failed = call(&policy, None, path, || async { Err::<(), _>(TestError::Transient) }).await;
        assert_eq!(failed, Err(TestError::Transient));
        sleep(ms(100)).await;

        // The probe waits (Pending) and holds the only half-open slot.
        let probe = call(&policy, None, path, || ok_after(ms(50)));
        let second = async {
            sleep(ms(10)).await;
            call(&policy, None, path, || async { Ok(()) }).await
        };
        let (cancelled, second) = tokio::join!(timeout(ms(20), probe), second);
        assert!(cancelled.is_err(), "{path:?}: the probe was cancelled by the timeout");
        let breaker_name = name.clone();
        assert_eq!(
            second,
            Err(TestError::Rejected(Rejection::CircuitOpen { breaker: breaker_name })),
            "{path:?}: the slot was taken"
        );

        // Cancelled, the probe recorded nothing and gave its slot back.
        let breaker = registry().breaker(&name).unwrap();
        assert_eq!(breaker.state(), BreakerState::HalfOpen, "{path:?}");
        assert_eq!(call(&policy, None, path, || async { Ok(7) }).await, Ok(7), "{path:?}");
        assert_eq!(breaker.state(), BreakerState::Closed, "{path:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_fails_fast_without_polling_the_attempt() {
    for path in PATHS {
        let name = format!("direct-open-{path:?}");
        breaker(&name, Duration::from_secs(60));
        let policy =
            Policy::builder().breaker(name.clone()).base(ms(10)).jitter(Jitter::None).build().unwrap();
        let polled = AtomicU32::new(0);
        let attempt = || async {
            polled.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(TestError::Transient)
        };
        // The failure opens the breaker; the loop stops at once (the breaker
        // would still be open when the wait ends).
        assert_eq!(call(&policy, None, path, attempt).await, Err(TestError::Transient));
        assert_eq!(
            call(&policy, None, path, attempt).await,
            Err(TestError::Rejected(Rejection::CircuitOpen { breaker: name }))
        );
        assert_eq!(polled.load(Ordering::SeqCst), 1, "{path:?}");
    }
}

/// A rate limit alone: the attempt takes a turn before it runs, and with
/// no turn to be had within `max_wait` it never runs.
#[tokio::test(start_paused = true)]
async fn a_rate_limit_alone_is_honoured_through_the_global_registry() {
    for path in PATHS {
        let name = format!("direct-rate-limit-{path:?}");
        let one_turn = RateLimitConfig { per_second: 1, burst: 1, max_wait: None };
        registry().declare_rate_limit(&name, one_turn).unwrap();
        let policy = Policy::builder().rate_limit(name.clone()).max_attempts(1).build().unwrap();
        let ran = AtomicU32::new(0);
        let attempt = || async {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok::<_, TestError>(())
        };
        assert_eq!(call(&policy, None, path, attempt).await, Ok(()));
        let refused = Err(TestError::Rejected(Rejection::RateLimited { limiter: name }));
        assert_eq!(call(&policy, None, path, attempt).await, refused, "{path:?}: no turn left");
        assert_eq!(ran.load(Ordering::SeqCst), 1, "{path:?}: the refused attempt never ran");
    }
}

/// Every attempt of a call with a rate limit takes a turn, the retries too:
/// once the call's state is built (at its first failure, or at its start
/// for a call with a key or a deadline), its retries still ask for one.
#[tokio::test(start_paused = true)]
async fn a_rate_limit_is_asked_again_for_every_retry() {
    for (path, key) in PATHS.into_iter().flat_map(|path| [(path, None), (path, Some("k-r"))]) {
        let name = format!("direct-rate-limit-retry-{path:?}-{key:?}");
        let one_turn = RateLimitConfig { per_second: 1, burst: 1, max_wait: None };
        registry().declare_rate_limit(&name, one_turn).unwrap();
        let policy = Policy::builder()
            .rate_limit(name.clone())
            .max_attempts(3)
            .base(ms(10))
            .jitter(Jitter::None)
            .build()
            .unwrap();
        let ran = AtomicU32::new(0);
        let attempt = || async {
            ran.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(TestError::Transient)
        };
        // The first attempt takes the one turn; 10 ms later the retry finds
        // none, and the call ends with the error the attempt produced.
        let case = format!("{path:?}, key {key:?}");
        assert_eq!(call(&policy, key, path, attempt).await, Err(TestError::Transient), "{case}");
        assert_eq!(ran.load(Ordering::SeqCst), 1, "{case}: the retry never ran");
    }
}

/// Declares a rate limit of one turn every 100 ms, none stored up.
fn one_turn_per_100_ms(name: &str, max_wait: Duration) -> Arc<RateLimit> {
    let config = RateLimitConfig { per_second: 10, burst: 1, max_wait: Some(max_wait) };
    registry().declare_rate_limit(name, config).unwrap();
    registry().rate_limit(name).unwrap()
}

/// A turn that comes within `max_wait` is waited for holding no probe
/// slot; then the breaker is asked again, and the attempt's timeout counts
/// from the attempt, not from the wait.
#[tokio::test(start_paused = true)]
async fn a_turn_is_waited_for_without_a_probe_slot_and_the_timeout_starts_after_it() {
    for path in PATHS {
        let name = format!("direct-turn-{path:?}");
        breaker(&name, ms(100));
        let limit = one_turn_per_100_ms(&name, ms(150));
        let policy = Policy::builder()
            .max_attempts(1)
            .breaker(name.clone())
            .rate_limit(name.clone())
            .attempt_timeout(ms(50))
            .build()
            .unwrap();
        // Open the breaker (taking the turn), then let it go half-open.
        let failed = call(&policy, None, path, || async { Err::<(), _>(TestError::Transient) }).await;
        assert_eq!(failed, Err(TestError::Transient));
        sleep(ms(10)).await;
        let breaker = registry().breaker(&name).unwrap();
        sleep(ms(90)).await;
        assert_eq!(breaker.state(), BreakerState::HalfOpen, "{path:?}");
        assert!(limit.try_acquire(), "{path:?}: the turn at 100 ms");

        let start = Instant::now();
        let waiting = call(&policy, None, path, || async {
            // 40 ms of the attempt's own, 140 ms after the call began.
            sleep(ms(40)).await;
            Ok(start.elapsed())
        });
        let meanwhile = async {
            sleep(ms(30)).await;
            // The waiting call holds no probe slot: the breaker has one to give.
            breaker.try_acquire().map(drop).is_some()
        };
        let (ran, slot_was_free) = tokio::join!(waiting, meanwhile);
        assert!(slot_was_free, "{path:?}: no half-open slot held while waiting for a turn");
        assert_eq!(ran, Ok(ms(140)), "{path:?}: the turn at 100 ms, then 40 ms under a 50 ms timeout");
        assert_eq!(breaker.state(), BreakerState::Closed, "{path:?}: the breaker was asked again, and heard");
    }
}

/// A call waiting for a turn holds its bulkhead place: the place is taken
/// before the turn, so that a turn is never spent on an attempt the
/// bulkhead then refuses (a turn cannot be given back). Such a call takes
/// the general path whichever way it is stepped. A turn that does not come
/// within the limit's `max_wait` gives the place back.
#[tokio::test(start_paused = true)]
async fn a_call_waiting_for_a_turn_holds_its_bulkhead_place() {
    for path in PATHS {
        let name = format!("direct-turn-place-{path:?}");
        let limit = one_turn_per_100_ms(&name, ms(150));
        bulkhead(&name, 1, None);
        let places = registry().bulkhead(&name).unwrap();
        let policy = Policy::builder()
            .max_attempts(1)
            .rate_limit(name.clone())
            .bulkhead(name.clone())
            .build()
            .unwrap();
        assert!(limit.try_acquire(), "{path:?}");
        let start = Instant::now();
        let waiting = call(&policy, None, path, || async { Ok(start.elapsed()) });
        let meanwhile = async {
            sleep(ms(50)).await;
            places.in_use()
        };
        let (ran, in_use) = tokio::join!(waiting, meanwhile);
        assert_eq!(in_use, 1, "{path:?}: the place is held while waiting for the turn");
        assert_eq!(ran, Ok(ms(100)), "{path:?}");
        assert_eq!(places.in_use(), 0, "{path:?}");
        // The next turn is 100 ms away: past a max_wait of 50 ms.
        let shorter = RateLimitConfig { max_wait: Some(ms(50)), ..limit.config() };
        limit.reconfigure(shorter).unwrap();
        let refused = call(&policy, None, path, || async { Ok(()) }).await;
        assert_eq!(refused, Err(TestError::Rejected(Rejection::RateLimited { limiter: name.clone() })));
        assert_eq!(places.in_use(), 0, "{path:?}: the refused turn gave the place back");
    }
}

/// A throttled, keyed call with a deadline, through turns it must wait
/// for: the first attempt (at its turn, 100 ms) fails, the retry waits out
/// its backoff and then the next turn (200 ms), and the deadline cuts it at
/// 250 ms. Each attempt sees the key, the throttle hears each once, the
/// breaker records both as failures.
#[tokio::test(start_paused = true)]
async fn a_throttled_keyed_call_waits_for_a_turn_before_each_attempt_until_the_deadline() {
    for path in PATHS {
        let name = format!("direct-turns-{path:?}");
        registry().declare_throttle(&name, ThrottleConfig { k: 1000.0, ..Default::default() }).unwrap();
        let throttle = registry().throttle(&name).unwrap();
        // One accept up front: at k = 1000 the calls below are never refused.
        throttle.answered(true);
        let config = BreakerConfig { failure_threshold: 10, ..Default::default() };
        registry().declare_breaker(&name, config).unwrap();
        let limit = one_turn_per_100_ms(&name, Duration::from_secs(1));
        let policy = Policy::builder()
            .max_attempts(3)
            .base(ms(10))
            .jitter(Jitter::None)
            .throttle(name.clone())
            .rate_limit(name.clone())
            .breaker(name.clone())
            .deadline(ms(250))
            .build()
            .unwrap();
        assert!(limit.try_acquire(), "{path:?}: the turn at 0 ms");
        let start = Instant::now();
        let seen = std::sync::Mutex::new(Vec::new());
        let result = call(&policy, Some("k-turns"), path, || async {
            let first = {
                let mut seen_now = seen.lock().unwrap();
                seen_now.push((start.elapsed(), idempotency_key()));
                seen_now.len() == 1
            };
            if first { Err(TestError::Transient) } else { ok_after(ms(500)).await }
        })
        .await;
        let after = ms(250);
        assert_eq!(result, Err(TestError::Rejected(Rejection::DeadlineExceeded { after })), "{path:?}");
        assert_eq!(start.elapsed(), ms(250), "{path:?}");
        let key = Some(Arc::from("k-turns"));
        assert_eq!(*seen.lock().unwrap(), [(ms(100), key.clone()), (ms(200), key)], "{path:?}");
        // One accept up front, then two requests that were not accepts.
        assert_eq!(probability_at_k_1(&throttle), (3.0 - 1.0) / 4.0, "{path:?}");
        let totals = registry().breaker(&name).unwrap().totals();
        assert_eq!((totals.calls, totals.failures), (2, 2), "{path:?}");
    }
}

/// The breaker is asked again once the turn comes, and its refusal then
/// ends the call: the attempt never runs.
#[tokio::test(start_paused = true)]
async fn a_breaker_that_opened_during_the_wait_for_a_turn_refuses_the_attempt() {
    for path in PATHS {
        let name = format!("direct-turn-opened-{path:?}");
        registry().declare_breaker(&name, BreakerConfig::default()).unwrap();
        let limit = one_turn_per_100_ms(&name, ms(150));
        let policy =
            Policy::builder().max_attempts(1).breaker(name.clone()).rate_limit(name.clone()).build().unwrap();
        assert!(limit.try_acquire(), "{path:?}");
        let breaker = registry().breaker(&name).unwrap();
        let polled = AtomicU32::new(0);
        let start = Instant::now();
        let waiting = call(&policy, None, path, || async {
            polled.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        let meanwhile = async {
            sleep(ms(50)).await;
            breaker.force_open();
        };
        let (refused, ()) = tokio::join!(waiting, meanwhile);
        let open = Err(TestError::Rejected(Rejection::CircuitOpen { breaker: name.clone() }));
        assert_eq!((refused, start.elapsed()), (open, ms(100)), "{path:?}");
        assert_eq!(polled.load(Ordering::SeqCst), 0, "{path:?}");
    }
}

/// A turn further away than `max_wait` is refused at once, and one within
/// it but past the deadline ends the call at once with the deadline's
/// rejection (no wait is started that can only end in it); neither runs
/// the attempt or takes the turn, and a cancelled wait takes no turn.
#[tokio::test(start_paused = true)]
async fn a_turn_past_max_wait_or_the_deadline_is_refused_and_a_cancelled_wait_takes_none() {
    for path in PATHS {
        let name = format!("direct-turn-refused-{path:?}");
        let limit = one_turn_per_100_ms(&name, ms(50));
        let config = limit.config();
        let bounded = Policy::builder().max_attempts(1).rate_limit(name.clone()).build().unwrap();
        let polled = AtomicU32::new(0);
        let attempt = || async {
            polled.fetch_add(1, Ordering::SeqCst);
            Ok(())
        };
        assert!(limit.try_acquire(), "{path:?}");
        let start = Instant::now();
        let refused = call(&bounded, None, path, attempt).await;
        let rate_limited = Err(TestError::Rejected(Rejection::RateLimited { limiter: name.clone() }));
        assert_eq!((refused, start.elapsed()), (rate_limited, ms(0)), "{path:?}: 100 ms away, over 50");

        limit.reconfigure(RateLimitConfig { max_wait: Some(Duration::from_secs(1)), ..config }).unwrap();
        let deadline = Policy::builder().max_attempts(1).rate_limit(name.clone()).deadline(ms(30));
        let cut = call(&deadline.build().unwrap(), None, path, attempt).await;
        let after = ms(30);
        assert_eq!(cut, Err(TestError::Rejected(Rejection::DeadlineExceeded { after })), "{path:?}");
        assert_eq!((start.elapsed(), polled.load(Ordering::SeqCst)), (ms(0), 0), "{path:?}");

        let waits = Policy::builder().max_attempts(1).rate_limit(name.clone()).build().unwrap();
        let cancelled = timeout(ms(20), call(&waits, None, path, attempt)).await;
        assert!(cancelled.is_err(), "{path:?}: still waiting at 20 ms");
        // The turn at 100 ms is still there for the next call.
        assert_eq!(call(&waits, None, path, attempt).await, Ok(()), "{path:?}");
        assert_eq!((start.elapsed(), polled.load(Ordering::SeqCst)), (ms(100), 1), "{path:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn retries_wait_out_the_backoff() {
    for path in PATHS {
        let policy = Policy::builder()
            .max_attempts(4)
            .base(ms(100))
            .cap(ms(250))
            .jitter(Jitter::None)
            .build()
            .unwrap();
        let start = Instant::now();
        let times = std::sync::Mutex::new(Vec::new());
        let result = call(&policy, None, path, || {
            let mut times = times.lock().unwrap();
            times.push(start.elapsed());
            let n = times.len();
            async move { if n < 4 { Err(TestError::Transient) } else { Ok(n) } }
        })
        .await;
        assert_eq!(result, Ok(4), "{path:?}");
        assert_eq!(*times.lock().unwrap(), [ms(0), ms(100), ms(300), ms(550)], "{path:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_key_and_nesting_are_seen_across_polls() {
    for path in PATHS {
        let outer = Policy::builder().max_attempts(3).build().unwrap();
        let inner = Policy::builder().max_attempts(3).nested(Nested::Once).build().unwrap();
        let inner_attempts = AtomicU32::new(0);
        let seen = call(&outer, Some("order-1"), path, || async {
            sleep(ms(1)).await; // the key survives a Pending poll
            let before = idempotency_key();
            // Nested calls make one attempt, and inherit the key.
            let failed = call(&inner, None, path, || async {
                inner_attempts.fetch_add(1, Ordering::SeqCst);
                sleep(ms(1)).await;
                Err::<(), _>(TestError::Transient)
            })
            .await;
            let inherited = call(&inner, None, path, || async { Ok(idempotency_key()) }).await;
            Ok((before, failed, inherited, idempotency_key()))
        })
        .await
        .unwrap();
        let key: Option<Arc<str>> = Some(Arc::from("order-1"));
        assert_eq!(seen, (key.clone(), Err(TestError::Transient), Ok(key.clone()), key), "{path:?}");
        assert_eq!(inner_attempts.load(Ordering::SeqCst), 1, "{path:?}: nested calls make one attempt");
        assert_eq!(idempotency_key(), None, "{path:?}: nothing leaks out of the attempt");
    }
}

fn bulkhead(name: &str, max_concurrent: u32, max_wait: Option<Duration>) {
    let config = BulkheadConfig { max_concurrent, max_wait, ..Default::default() };
    registry().declare_bulkhead(name, config).unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_bulkhead_place_is_held_while_the_attempt_runs_and_given_back() {
    for path in PATHS {
        let name = format!("direct-bulkhead-{path:?}");
        bulkhead(&name, 2, None);
        let policy = Policy::builder().bulkhead(name.clone()).build().unwrap();
        let places = registry().bulkhead(&name).unwrap();
        let running = call(&policy, None, path, || async {
            sleep(ms(10)).await;
            Ok(places.in_use())
        });
        assert_eq!(running.await, Ok(1), "{path:?}: the attempt held one place");
        assert_eq!(places.in_use(), 0, "{path:?}: given back on success");
        let failed = call(&policy, None, path, || async { Err::<(), _>(TestError::Permanent) }).await;
        assert_eq!(failed, Err(TestError::Permanent));
        assert_eq!(places.in_use(), 0, "{path:?}: given back on failure");
        let cancelled = timeout(ms(5), call(&policy, None, path, || ok_after(ms(50)))).await;
        assert!(cancelled.is_err());
        assert_eq!(places.in_use(), 0, "{path:?}: given back on cancellation");
    }
}

#[tokio::test(start_paused = true)]
async fn a_place_is_given_back_when_the_breaker_refuses_or_the_attempt_panics() {
    for path in PATHS {
        let (breaker_name, bulkhead_name) =
            (format!("direct-refused-b-{path:?}"), format!("direct-refused-{path:?}"));
        registry().declare_breaker(&breaker_name, BreakerConfig::default()).unwrap();
        bulkhead(&bulkhead_name, 1, Some(Duration::ZERO));
        let places = registry().bulkhead(&bulkhead_name).unwrap();
        let policy =
            Policy::builder().breaker(breaker_name.clone()).bulkhead(bulkhead_name.clone()).build().unwrap();
        registry().breaker(&breaker_name).unwrap().force_open();
        let refused = call(&policy, None, path, || async { Ok(()) }).await;
        assert_eq!(
            refused,
            Err(TestError::Rejected(Rejection::CircuitOpen { breaker: breaker_name.clone() }))
        );
        assert_eq!(places.in_use(), 0, "{path:?}: a refused attempt holds no place");

        registry().breaker(&breaker_name).unwrap().reset();
        let attempt = || async {
            panic!("the attempt panics (on purpose)");
            #[allow(unreachable_code)]
            Ok(())
        };
        assert!(catch_unwind(call(&policy, None, path, attempt)).await.is_err());
        assert_eq!(places.in_use(), 0, "{path:?}: a panicking attempt gives its place back");
        // The one place is free: a call gets it without waiting (max_wait is zero).
        assert_eq!(call(&policy, None, path, || async { Ok(3) }).await, Ok(3), "{path:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_full_bulkhead_is_waited_for_without_a_probe_slot_then_the_breaker_is_asked_again() {
    for path in PATHS {
        let (breaker_name, bulkhead_name) =
            (format!("direct-queue-b-{path:?}"), format!("direct-queue-{path:?}"));
        breaker(&breaker_name, ms(100));
        bulkhead(&bulkhead_name, 1, None);
        let policy = Policy::builder()
            .max_attempts(1)
            .breaker(breaker_name.clone())
            .bulkhead(bulkhead_name.clone())
            .build()
            .unwrap();
        // Open the breaker, then let it go half-open (one probe slot).
        let failed = call(&policy, None, path, || async { Err::<(), _>(TestError::Transient) }).await;
        assert_eq!(failed, Err(TestError::Transient));
        let places = registry().bulkhead(&bulkhead_name).unwrap();
        assert_eq!(places.in_use(), 0, "{path:?}: a failed attempt gives its place back");
        sleep(ms(100)).await;
        let breaker = registry().breaker(&breaker_name).unwrap();
        assert_eq!(breaker.state(), BreakerState::HalfOpen);

        let held = places.acquire().await.unwrap();
        let start = Instant::now();
        let queued = call(&policy, None, path, || async { Ok(start.elapsed()) });
        let meanwhile = async {
            sleep(ms(30)).await;
            // The queued call holds no probe slot: the breaker has one to give.
            let slot = breaker.try_acquire().map(drop).is_some();
            drop(held);
            slot
        };
        let (ran_after, slot_was_free) = tokio::join!(queued, meanwhile);
        assert!(slot_was_free, "{path:?}: no half-open slot held while queued");
        assert_eq!(ran_after, Ok(ms(30)), "{path:?}: ran once the place came free");
        assert_eq!(breaker.state(), BreakerState::Closed, "{path:?}: the breaker was asked again, and heard");
        assert_eq!(places.in_use(), 0, "{path:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_bulkhead_full_past_max_wait_refuses_and_a_cancelled_wait_takes_no_place() {
    for path in PATHS {
        let name = format!("direct-full-{path:?}");
        bulkhead(&name, 1, Some(ms(20)));
        let policy = Policy::builder().bulkhead(name.clone()).build().unwrap();
        let places = registry().bulkhead(&name).unwrap();
        let held = places.acquire().await.unwrap();
        let polled = AtomicU32::new(0);
        let start = Instant::now();
        let refused = call(&policy, None, path, || async {
            polled.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .await;
        assert_eq!(refused, Err(TestError::Rejected(Rejection::BulkheadFull { bulkhead: name.clone() })));
        assert_eq!((start.elapsed(), polled.load(Ordering::SeqCst)), (ms(20), 0), "{path:?}");

        let cancelled = timeout(ms(5), call(&policy, None, path, || async { Ok(()) })).await;
        assert!(cancelled.is_err(), "{path:?}: still queued");
        drop(held);
        assert_eq!(places.in_use(), 0, "{path:?}: the cancelled wait took no place");
        assert_eq!(call(&policy, None, path, || async { Ok(1) }).await, Ok(1), "{path:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_adaptive_bulkhead_hears_each_attempt() {
    for path in PATHS {
        let name = format!("direct-adaptive-{path:?}");
        let config = BulkheadConfig {
            max_concurrent: 8,
            adaptive: Some(AdaptiveLimit::aimd(2)),
            ..Default::default()
        };
        registry().declare_bulkhead(&name, config).unwrap();
        let policy = Policy::builder().max_attempts(1).bulkhead(name.clone()).build().unwrap();
        let places = registry().bulkhead(&name).unwrap();
        assert_eq!(places.limit(), 8);
        // Overload signals (transient failures) make an AIMD limit back off.
        for _ in 0..3 {
            let failed = call(&policy, None, path, || async { Err::<(), _>(TestError::Transient) }).await;
            assert_eq!(failed, Err(TestError::Transient));
        }
        assert!(places.limit() < 8, "{path:?}: the failures were sampled (limit {})", places.limit());
    }
}

/// The future's output if its first poll finishes it, else `None`.
async fn on_first_poll<F: Future>(fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(move |cx| match fut.as_mut().poll(cx) {
        std::task::Poll::Ready(value) => std::task::Poll::Ready(Some(value)),
        std::task::Poll::Pending => std::task::Poll::Ready(None),
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn a_zero_wait_is_no_wait_the_retry_runs_in_the_same_poll() {
    // Half a millisecond past a tick: a timer, even of zero, ends at the
    // timer's next tick, so a first poll that armed one would be Pending.
    tokio::time::advance(Duration::from_micros(500)).await;
    for path in PATHS {
        let policy =
            Policy::builder().max_attempts(3).base(Duration::ZERO).cap(Duration::ZERO).build().unwrap();
        let attempts = AtomicU32::new(0);
        let call = call(&policy, None, path, || async {
            let n = attempts.fetch_add(1, Ordering::SeqCst) + 1;
            if n < 3 { Err(TestError::Transient) } else { Ok(n) }
        });
        assert_eq!(on_first_poll(call).await, Some(Ok(3)), "{path:?}: no timer between the attempts");
        // Still half a millisecond past a tick for the next path.
        tokio::time::advance(ms(1)).await;
    }
}

/// An error holding a token: while it lives, the token has two owners.
#[derive(Debug)]
struct Holding(#[allow(dead_code)] Arc<()>);

impl stormproof_runtime::Classify for Holding {
    fn classify(&self) -> stormproof_runtime::ErrorClass {
        stormproof_runtime::ErrorClass::Transient
    }
}

impl From<Rejection> for Holding {
    fn from(_: Rejection) -> Self {
        Holding(Arc::new(()))
    }
}

#[tokio::test(start_paused = true)]
async fn the_last_error_is_dropped_as_the_next_attempt_begins_not_held_while_it_runs() {
    for path in PATHS {
        let policy = Policy::builder().max_attempts(2).base(ms(10)).jitter(Jitter::None).build().unwrap();
        let token = Arc::new(());
        let mut execution = policy.call(None, Kept::default(), ByTraits);
        let first = match path {
            Path::Direct => execution.attempt(async { Err::<usize, _>(Holding(token.clone())) }).await,
            Path::General => {
                execution.attempt_with(|| async { Err::<usize, _>(Holding(token.clone())) }).await
            }
        };
        assert!(matches!(first, Step::Retry), "{path:?}");
        assert_eq!(Arc::strong_count(&token), 2, "{path:?}: kept across the wait");
        let owners = async { Ok::<_, Holding>(Arc::strong_count(&token)) };
        let second = match path {
            Path::Direct => execution.attempt(owners).await,
            Path::General => execution.attempt_with(|| owners).await,
        };
        let Step::Done(Ok(owners_while_running)) = second else {
            panic!("{path:?}: the second attempt succeeds")
        };
        assert_eq!(
            owners_while_running, 1,
            "{path:?}: the superseded error was dropped when the attempt began"
        );
    }
}

/// Reads the key when dropped.
struct KeyOnDrop(Arc<std::sync::Mutex<Option<Option<Arc<str>>>>>);

impl Drop for KeyOnDrop {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = Some(idempotency_key());
    }
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_attempt_is_dropped_in_its_context() {
    for path in PATHS {
        let policy = Policy::builder().build().unwrap();
        let seen = Arc::new(std::sync::Mutex::new(None));
        let guard = seen.clone();
        let cancelled = timeout(
            ms(5),
            call(&policy, Some("k-2"), path, move || {
                let guard = KeyOnDrop(guard.clone());
                async move {
                    let _guard = guard;
                    sleep(ms(50)).await;
                    Ok(())
                }
            }),
        )
        .await;
        assert!(cancelled.is_err());
        assert_eq!(*seen.lock().unwrap(), Some(Some(Arc::from("k-2"))), "{path:?}");
        assert_eq!(idempotency_key(), None, "{path:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_panicking_attempt_leaves_no_context_behind() {
    for path in PATHS {
        let policy = Policy::builder().build().unwrap();
        let attempt = || async {
            assert!(idempotency_key().is_some());
            panic!("the attempt panics (on purpose)");
            #[allow(unreachable_code)]
            Ok(())
        };
        let caught = catch_unwind(call(&policy, Some("k-3"), path, attempt)).await;
        let panicked = (caught, idempotency_key());
        assert!(panicked.0.is_err(), "{path:?}");
        assert_eq!(panicked.1, None, "{path:?}: the key was restored by the unwinding");
    }
}

/// When an attempt was dropped, and the key in effect then.
type Drops = Arc<std::sync::Mutex<Vec<(Duration, Option<Arc<str>>)>>>;

/// When dropped, records how long after `start`, and with which key in effect.
struct DropSeen {
    start: Instant,
    drops: Drops,
}

impl Drop for DropSeen {
    fn drop(&mut self) {
        self.drops.lock().unwrap().push((self.start.elapsed(), idempotency_key()));
    }
}

/// A breaker that opens at the third failure and a bulkhead of one place
/// with no waiting for it, both named `name`, and a policy builder naming
/// both: a place not given back when an attempt is cut short refuses the
/// next attempt.
fn breaker_and_one_place(name: &str) -> (Arc<Bulkhead>, PolicyBuilder) {
    breaker_opening_after_and_one_place(name, 3)
}

fn breaker_opening_after_and_one_place(name: &str, failure_threshold: u32) -> (Arc<Bulkhead>, PolicyBuilder) {
    let config = BreakerConfig { failure_threshold, ..Default::default() };
    registry().declare_breaker(name, config).unwrap();
    bulkhead(name, 1, Some(Duration::ZERO));
    let places = registry().bulkhead(name).unwrap();
    (places, Policy::builder().breaker(name.to_owned()).bulkhead(name.to_owned()))
}

#[tokio::test(start_paused = true)]
async fn an_attempt_timeout_cancels_the_attempt_in_its_context_then_the_retry_runs() {
    for path in PATHS {
        let name = format!("direct-timeout-{path:?}");
        let (places, guarded) = breaker_and_one_place(&name);
        let policy = guarded
            .max_attempts(2)
            .base(ms(100))
            .jitter(Jitter::None)
            .attempt_timeout(ms(50))
            .build()
            .unwrap();
        let start = Instant::now();
        let drops = Drops::default();
        let attempts = AtomicU32::new(0);
        let result = call(&policy, Some("k-t"), path, || {
            let first = attempts.fetch_add(1, Ordering::SeqCst) == 0;
            let guard = DropSeen { start, drops: drops.clone() };
            let places = &places;
            async move {
                let _guard = guard;
                if first {
                    sleep(Duration::from_secs(1)).await;
                }
                Ok((places.in_use(), start.elapsed()))
            }
        })
        .await;
        // The second attempt ran after the timeout (50 ms) and the backoff (100 ms).
        assert_eq!(result, Ok((1, ms(150))), "{path:?}");
        // The first attempt was dropped as its timeout passed, with the
        // call's key in effect; the second as it finished.
        let key = Some(Arc::from("k-t"));
        assert_eq!(*drops.lock().unwrap(), [(ms(50), key.clone()), (ms(150), key)], "{path:?}");
        assert_eq!(places.in_use(), 0, "{path:?}: every place given back");
        let totals = registry().breaker(&name).unwrap().totals();
        assert_eq!((totals.calls, totals.failures), (2, 1), "{path:?}: the timeout is a failure");
    }
}

#[tokio::test(start_paused = true)]
async fn the_last_attempt_timing_out_ends_the_call_and_one_finishing_on_the_instant_counts() {
    for path in PATHS {
        let name = format!("direct-timeout-last-{path:?}");
        registry().declare_breaker(&name, BreakerConfig::default()).unwrap();
        let policy =
            Policy::builder().max_attempts(1).attempt_timeout(ms(50)).breaker(name.clone()).build().unwrap();
        let start = Instant::now();
        let late = call(&policy, None, path, || ok_after(ms(51))).await;
        let after = ms(50);
        assert_eq!(late, Err(TestError::Rejected(Rejection::AttemptTimeout { after })), "{path:?}");
        assert_eq!(start.elapsed(), ms(50), "{path:?}: cancelled as the timeout passed");
        // The attempt is polled before its timer, so one that ends as the
        // timeout passes has its result taken.
        assert_eq!(call(&policy, None, path, || ok_after(ms(50))).await, Ok(()), "{path:?}");

        // A breaker that refuses: the attempt is never polled, and no timer outlives the call.
        registry().breaker(&name).unwrap().force_open();
        let polled = AtomicU32::new(0);
        let refused = call(&policy, None, path, || async {
            polled.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .await;
        assert_eq!(refused, Err(TestError::Rejected(Rejection::CircuitOpen { breaker: name })), "{path:?}");
        assert_eq!(polled.load(Ordering::SeqCst), 0, "{path:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_deadline_cuts_a_running_attempt_in_its_context_and_ends_the_call() {
    for path in PATHS {
        let name = format!("direct-deadline-{path:?}");
        let (places, guarded) = breaker_and_one_place(&name);
        let policy =
            guarded.max_attempts(5).base(ms(50)).jitter(Jitter::None).deadline(ms(120)).build().unwrap();
        let start = Instant::now();
        let drops = Drops::default();
        let attempts = AtomicU32::new(0);
        let result = call(&policy, Some("k-d"), path, || {
            let first = attempts.fetch_add(1, Ordering::SeqCst) == 0;
            let guard = DropSeen { start, drops: drops.clone() };
            async move {
                let _guard = guard;
                if first {
                    return Err(TestError::Transient);
                }
                sleep(Duration::from_secs(1)).await;
                Ok(())
            }
        })
        .await;
        // The first attempt failed at once; the second, after the 50 ms
        // backoff, ran until the deadline cut it short.
        let after = ms(120);
        assert_eq!(result, Err(TestError::Rejected(Rejection::DeadlineExceeded { after })), "{path:?}");
        let key = Some(Arc::from("k-d"));
        assert_eq!(*drops.lock().unwrap(), [(ms(0), key.clone()), (ms(120), key)], "{path:?}");
        assert_eq!(places.in_use(), 0, "{path:?}: the cut attempt's place given back");
        let totals = registry().breaker(&name).unwrap().totals();
        assert_eq!((totals.calls, totals.failures), (2, 2), "{path:?}: the cut is a failure");
    }
}

#[tokio::test(start_paused = true)]
async fn an_attempt_runs_under_the_earlier_of_its_timeout_and_the_deadline_which_wins_a_tie() {
    // The first attempt times out; the second's timeout would end at 100 ms
    // with a 50 ms timeout (with the deadline: a tie), at 120 ms with a
    // 60 ms one (after it): either way the deadline cuts it at 100 ms.
    for (path, timeout) in PATHS.into_iter().flat_map(|path| [(path, 50), (path, 60)]) {
        let name = format!("direct-deadline-tie-{path:?}-{timeout}");
        let config = BreakerConfig { failure_threshold: 5, ..Default::default() };
        registry().declare_breaker(&name, config).unwrap();
        // A zero backoff: the retry starts as the timeout ends the first attempt.
        let policy = Policy::builder()
            .max_attempts(5)
            .base(Duration::ZERO)
            .cap(Duration::ZERO)
            .jitter(Jitter::None)
            .attempt_timeout(ms(timeout))
            .deadline(ms(100))
            .breaker(name.clone())
            .build()
            .unwrap();
        let start = Instant::now();
        let attempts = AtomicU32::new(0);
        let result = call(&policy, None, path, || {
            attempts.fetch_add(1, Ordering::SeqCst);
            ok_after(Duration::from_secs(1))
        })
        .await;
        let after = ms(100);
        let case = format!("{path:?}, {timeout} ms timeout");
        assert_eq!(result, Err(TestError::Rejected(Rejection::DeadlineExceeded { after })), "{case}");
        assert_eq!((attempts.load(Ordering::SeqCst), start.elapsed()), (2, ms(100)), "{case}");
        let totals = registry().breaker(&name).unwrap().totals();
        assert_eq!((totals.calls, totals.failures), (2, 2), "{case}");

        // The attempt is polled before the timer: one that ends as the
        // deadline passes has its result taken.
        let start = Instant::now();
        let attempts = AtomicU32::new(0);
        let result = call(&policy, None, path, || {
            let first = attempts.fetch_add(1, Ordering::SeqCst) == 0;
            ok_after(if first { Duration::from_secs(1) } else { ms(100 - timeout) })
        })
        .await;
        assert_eq!((result, start.elapsed()), (Ok(()), ms(100)), "{case}");
    }
}

/// The throttle's refusal probability with `k = 1`, read without changing
/// its counts: `(requests - accepts) / (requests + 1)`. The calls run with
/// `k = 1000`, so that no draw decides them (the probability is 0 once
/// the first answer was an accept).
fn probability_at_k_1(throttle: &Throttle) -> f64 {
    let calls = ThrottleConfig { k: 1000.0, ..Default::default() };
    throttle.reconfigure(ThrottleConfig { k: 1.0, ..calls }).unwrap();
    let p = throttle.refusal_probability();
    throttle.reconfigure(calls).unwrap();
    p
}

/// The throttle counts every attempt that went out, when it ends, and an
/// accept for an answer that is not overload, on both paths alike: a
/// success and a permanent error are accepts; a transient error, an attempt
/// timeout and a deadline cut are not; a cancelled attempt is not counted.
#[tokio::test(start_paused = true)]
async fn the_throttle_hears_how_every_attempt_ended() {
    for path in PATHS {
        let name = format!("direct-throttle-{path:?}");
        let calls = ThrottleConfig { k: 1000.0, ..Default::default() };
        registry().declare_throttle(&name, calls).unwrap();
        let throttle = registry().throttle(&name).unwrap();
        let (places, guarded) = breaker_opening_after_and_one_place(&name, 100);
        let guarded = guarded.throttle(name.clone()).max_attempts(1);
        let plain = guarded.clone().build().unwrap();
        let timed = guarded.clone().attempt_timeout(ms(50)).build().unwrap();
        let deadline = guarded.deadline(ms(50)).build().unwrap();
        let expect = |requests: f64, accepts: f64, what: &str| {
            let expected = (requests - accepts) / (requests + 1.0);
            assert_eq!(probability_at_k_1(&throttle), expected, "{path:?}, after {what}");
            assert_eq!(places.in_use(), 0, "{path:?}, after {what}: the place given back");
        };
        assert_eq!(call(&plain, None, path, || async { Ok(()) }).await, Ok(()));
        expect(1.0, 1.0, "a success");
        let transient = call(&plain, None, path, || async { Err::<(), _>(TestError::Transient) }).await;
        assert_eq!(transient, Err(TestError::Transient));
        expect(2.0, 1.0, "a transient error");
        let permanent = call(&plain, None, path, || async { Err::<(), _>(TestError::Permanent) }).await;
        assert_eq!(permanent, Err(TestError::Permanent));
        expect(3.0, 2.0, "a permanent error");
        let timed_out = call(&timed, None, path, || ok_after(ms(100))).await;
        assert_eq!(timed_out, Err(TestError::Rejected(Rejection::AttemptTimeout { after: ms(50) })));
        expect(4.0, 2.0, "an attempt timeout");
        let cut = call(&deadline, Some("k-th"), path, || ok_after(ms(100))).await;
        assert_eq!(cut, Err(TestError::Rejected(Rejection::DeadlineExceeded { after: ms(50) })));
        expect(5.0, 2.0, "a deadline cut");
        let cancelled = timeout(ms(10), call(&plain, None, path, || ok_after(ms(100)))).await;
        assert!(cancelled.is_err(), "{path:?}");
        expect(5.0, 2.0, "a cancelled attempt");
    }
}

/// A throttle that refuses ends the call with `Throttled` before the
/// breaker is asked or the attempt polled, and gives the bulkhead place
/// back. Refusals are draws: with every answer overload the probability is
/// at least 1/2 from the second call on, so that 40 calls with no refusal
/// would happen with a chance below 2^-39.
#[tokio::test(start_paused = true)]
async fn a_throttle_refuses_before_the_attempt_runs_and_takes_no_place() {
    for path in PATHS {
        let name = format!("direct-throttle-refuses-{path:?}");
        registry().declare_throttle(&name, ThrottleConfig { k: 1.0, ..Default::default() }).unwrap();
        // A throttled answer is overload: not an accept, and a failure for
        // the breaker, which must stay closed here.
        let (places, guarded) = breaker_opening_after_and_one_place(&name, 100);
        let policy = guarded.throttle(name.clone()).max_attempts(1).build().unwrap();
        let ran = AtomicU32::new(0);
        let mut refused = 0;
        for _ in 0..40 {
            let result = call(&policy, None, path, || async {
                ran.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>(TestError::Throttled(None))
            })
            .await;
            match result {
                Err(TestError::Throttled(None)) => {}
                Err(TestError::Rejected(Rejection::Throttled { throttle })) => {
                    assert_eq!(throttle, name);
                    refused += 1;
                }
                other => panic!("{path:?}: {other:?}"),
            }
            assert_eq!(places.in_use(), 0, "{path:?}: the place given back");
        }
        assert!(refused > 0, "{path:?}");
        assert_eq!(ran.load(Ordering::SeqCst), 40 - refused, "{path:?}: a refused attempt never ran");
        let breaker = registry().breaker(&name).unwrap();
        assert_eq!(breaker.totals().calls, u64::from(40 - refused), "{path:?}: the breaker never asked");
    }
}

/// `catch_unwind` for a future, without the `futures` crate.
async fn catch_unwind<F: Future>(fut: F) -> std::thread::Result<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(move |cx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Ok(std::task::Poll::Ready(value)) => std::task::Poll::Ready(Ok(value)),
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        }
    })
    .await
}

/// Succeeds after `wait`.
async fn ok_after(wait: Duration) -> Result<(), TestError> {
    sleep(wait).await;
    Ok(())
}
