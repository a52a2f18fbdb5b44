//! The rate limit: a turn before every attempt (retries too), waited for
//! holding no probe slot but holding a bulkhead place, within `max_wait` and
//! the deadline; a breaker that opened meanwhile still refuses.

use crate::support::*;

/// A rate limit alone: the attempt takes a turn before it runs, and with
/// no turn to be had within `max_wait` it never runs.
#[tokio::test(start_paused = true)]
async fn a_rate_limit_alone_is_honoured_through_the_global_registry() {
    for path in PATHS {
        let name = format!("direct-rate-limit-{path:?}");
        let one_turn = RateLimitConfig { per_second: 1, burst: 1, max_wait: None, ..Default::default() };
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
        let one_turn = RateLimitConfig { per_second: 1, burst: 1, max_wait: None, ..Default::default() };
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
    let config = RateLimitConfig { per_second: 10, burst: 1, max_wait: Some(max_wait), ..Default::default() };
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
        assert_eq!(probability_at_k_1(&throttle).await, (3.0 - 1.0) / 4.0, "{path:?}");
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
