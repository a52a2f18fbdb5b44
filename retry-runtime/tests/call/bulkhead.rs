//! The bulkhead around one call: a place held while the attempt runs and
//! given back however it ends; a full one waited for without a probe slot,
//! refused after `max_wait`; an adaptive one hears each attempt.

use crate::support::*;

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
async fn a_place_is_given_back_when_the_closure_of_policy_run_panics() {
    // `Policy::run` calls its closure once the guards admitted the attempt,
    // holding its place: a closure that panics as it is called (not its
    // future) must not keep it, on the first attempt (the plain one) or a
    // retry's.
    bulkhead("run-closure-panics", 1, Some(Duration::ZERO));
    let places = registry().bulkhead("run-closure-panics").unwrap();
    let policy = Policy::builder()
        .max_attempts(2)
        .base(ms(1))
        .jitter(Jitter::None)
        .bulkhead("run-closure-panics")
        .build()
        .unwrap();
    for panics_at in [1, 2] {
        let mut calls = 0;
        {
            let mut run = std::pin::pin!(policy.run(|| {
                calls += 1;
                assert_ne!(calls, panics_at, "the closure panics (on purpose)");
                async { Err::<(), _>(TestError::Transient) }
            }));
            assert!(
                catch_unwind(run.as_mut()).await.is_err(),
                "attempt {panics_at}: the panic reaches the caller"
            );
            if panics_at == 1 {
                // The plain first attempt gives its place back at once, and
                // polled again after the caught panic, makes no attempt
                // without it.
                assert_eq!(places.in_use(), 0);
                assert!(catch_unwind(run.as_mut()).await.is_err());
            }
        }
        assert_eq!(calls, panics_at, "no attempt made but the one that panicked and those before it");
        assert_eq!(places.in_use(), 0, "attempt {panics_at}: its place is given back");
    }
    // The one place is free: a call gets it without waiting (max_wait is zero).
    assert_eq!(policy.run(|| async { Ok::<_, TestError>(3) }).await, Ok(3));
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
