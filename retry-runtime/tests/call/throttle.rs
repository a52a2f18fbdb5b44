//! The client-side throttle: asked before the attempt runs (a refusal takes
//! no place and never runs the attempt), and told how every attempt ended.

use crate::support::*;

/// The throttle counts every attempt that went out, when it ends, and an
/// accept for an answer that is not overload, on both paths alike: a
/// success and a permanent error are accepts; a transient error, an attempt
/// timeout and a deadline cut are not; a cancelled attempt is not counted.
#[tokio::test(start_paused = true)]
async fn the_throttle_hears_how_every_attempt_ended() {
    for path in PATHS {
        let name = format!("direct-throttle-{path:?}");
        // A minute's window: the reads below move the clock a tenth each.
        let calls = ThrottleConfig { k: 1000.0, window: Duration::from_secs(60), ..Default::default() };
        registry().declare_throttle(&name, calls).unwrap();
        let throttle = registry().throttle(&name).unwrap();
        let (places, guarded) = breaker_opening_after_and_one_place(&name, 100);
        let guarded = guarded.throttle(name.clone()).max_attempts(1);
        let plain = guarded.clone().build().unwrap();
        let timed = guarded.clone().attempt_timeout(ms(50)).build().unwrap();
        let deadline = guarded.deadline(ms(50)).build().unwrap();
        let expect = async |requests: f64, accepts: f64, what: &str| {
            let expected = (requests - accepts) / (requests + 1.0);
            assert_eq!(probability_at_k_1(&throttle).await, expected, "{path:?}, after {what}");
            assert_eq!(places.in_use(), 0, "{path:?}, after {what}: the place given back");
        };
        assert_eq!(call(&plain, None, path, || async { Ok(()) }).await, Ok(()));
        expect(1.0, 1.0, "a success").await;
        let transient = call(&plain, None, path, || async { Err::<(), _>(TestError::Transient) }).await;
        assert_eq!(transient, Err(TestError::Transient));
        expect(2.0, 1.0, "a transient error").await;
        let permanent = call(&plain, None, path, || async { Err::<(), _>(TestError::Permanent) }).await;
        assert_eq!(permanent, Err(TestError::Permanent));
        expect(3.0, 2.0, "a permanent error").await;
        let timed_out = call(&timed, None, path, || ok_after(ms(100))).await;
        assert_eq!(timed_out, Err(TestError::Rejected(Rejection::AttemptTimeout { after: ms(50) })));
        expect(4.0, 2.0, "an attempt timeout").await;
        let cut = call(&deadline, Some("k-th"), path, || ok_after(ms(100))).await;
        assert_eq!(cut, Err(TestError::Rejected(Rejection::DeadlineExceeded { after: ms(50) })));
        expect(5.0, 2.0, "a deadline cut").await;
        let cancelled = timeout(ms(10), call(&plain, None, path, || ok_after(ms(100)))).await;
        assert!(cancelled.is_err(), "{path:?}");
        expect(5.0, 2.0, "a cancelled attempt").await;
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
            // A tenth of the window apart: each call judged on the last ones.
            tokio::time::advance(ms(50)).await;
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
