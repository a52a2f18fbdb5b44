//! The attempt timeout and the deadline: each cancels the attempt in its
//! context, the earlier of the two first (the deadline wins a tie); a timeout
//! is an error the loop retries, the deadline ends the call; an attempt
//! finishing on the instant counts.

use crate::support::*;

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
