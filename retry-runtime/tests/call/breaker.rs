//! The breaker around one call: a probe slot held while a pending probe runs
//! and freed when it is cancelled; an open breaker fails fast without polling
//! the attempt.

use crate::support::*;

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
