//! Cancellation safety under concurrency: calls aborted at any await point
//! (waiting for a bulkhead permit, mid-attempt, mid-backoff, during a
//! half-open probe) release everything they hold and record nothing.
//!
//! Size with `RESILIENT_STRESS_CALLS` (default 100,000) for longer local runs.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use common::TestError;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use retry_runtime::{BreakerConfig, BreakerState, BudgetConfig, BulkheadConfig, Jitter, Policy, Registry};
use tokio::time::{sleep, timeout};

fn stress_calls() -> u32 {
    std::env::var("RESILIENT_STRESS_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
}

const BUDGET_CAPACITY: u32 = 50;

fn stressed_registry() -> Registry {
    let registry = Registry::new();
    registry
        .declare_breaker(
            "dep",
            BreakerConfig {
                failure_threshold: 20,
                window: Duration::from_millis(50),
                open_for: Duration::from_millis(5),
                success_threshold: 2,
                half_open_max_calls: 3,
                ..Default::default()
            },
        )
        .unwrap();
    registry
        .declare_budget(
            "dep",
            BudgetConfig { capacity: BUDGET_CAPACITY, retry_cost: 2, refill_per_success: 1 },
        )
        .unwrap();
    registry.declare_bulkhead("dep", BulkheadConfig { max_concurrent: 8, max_wait: None }).unwrap();
    registry
}

fn policy() -> Policy {
    Policy::builder()
        .max_attempts(4)
        .base(Duration::from_micros(200))
        .cap(Duration::from_millis(2))
        .jitter(Jitter::Full)
        .breaker("dep")
        .budget("dep")
        .bulkhead("dep")
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_calls_at_random_points_leaks_nothing() {
    let registry = stressed_registry();
    let policy = Arc::new(policy());
    let calls = stress_calls();
    let started = Arc::new(AtomicU64::new(0));
    let mut rng = SmallRng::seed_from_u64(7);
    let batch = 500;
    let mut aborted = 0u32;
    let mut done = 0u32;
    while done < calls {
        let n = batch.min(calls - done);
        let mut handles = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let seed: u64 = rng.random();
            let (policy, started) = (policy.clone(), started.clone());
            let handle = tokio::spawn(registry.scope(async move {
                let mut rng = SmallRng::seed_from_u64(seed);
                policy
                    .run(|| {
                        started.fetch_add(1, Ordering::Relaxed);
                        let roll: u32 = rng.random_range(0..100);
                        let pause = Duration::from_micros(rng.random_range(0..300));
                        async move {
                            sleep(pause).await;
                            match roll {
                                0..60 => Ok(()),
                                60..90 => Err(TestError::Transient),
                                _ => Err(TestError::Permanent),
                            }
                        }
                    })
                    .await
            }));
            handles.push((handle, rng.random_bool(0.5), rng.random_range(0..1_500u64)));
        }
        // Abort half of them after a random delay: some while they wait for
        // the bulkhead, some mid-attempt, some mid-backoff, some as probes.
        for (handle, abort, after_us) in &handles {
            if *abort {
                let handle = handle.abort_handle();
                let after = Duration::from_micros(*after_us);
                tokio::spawn(async move {
                    sleep(after).await;
                    handle.abort();
                });
            }
        }
        for (handle, _, _) in handles {
            match handle.await {
                Ok(_) => {}
                Err(e) if e.is_cancelled() => aborted += 1,
                Err(e) => panic!("a call panicked: {e}"),
            }
        }
        done += n;
    }
    assert!(aborted > calls / 10, "the test must really abort calls ({aborted} of {calls})");
    assert!(started.load(Ordering::Relaxed) >= u64::from(calls) / 2);

    let bulkhead = registry.bulkhead("dep").unwrap();
    assert_eq!(bulkhead.in_use(), 0, "every permit came back");
    let budget = registry.budget("dep").unwrap();
    assert!(budget.available() <= BUDGET_CAPACITY);

    // The breaker can still open, probe and close: no half-open slot leaked.
    let breaker = registry.breaker("dep").unwrap();
    let closing = Policy::builder().max_attempts(1).breaker("dep").build().unwrap();
    for _ in 0..20 {
        let _ = registry.scope(closing.run(|| async { Err::<(), _>(TestError::Transient) })).await;
    }
    sleep(Duration::from_millis(10)).await;
    for _ in 0..2 {
        registry.scope(closing.run(|| async { Ok::<_, TestError>(()) })).await.unwrap();
    }
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_attempt_records_nothing_in_the_breaker() {
    // Threshold 1: a single failure recorded for an attempt that was dropped
    // would open the breaker. Completed attempts all succeed.
    let registry = Registry::new();
    registry.declare_breaker("strict", BreakerConfig { failure_threshold: 1, ..Default::default() }).unwrap();
    let opened = Arc::new(AtomicU32::new(0));
    let counter = opened.clone();
    registry.on_transition(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let policy = Arc::new(Policy::builder().max_attempts(3).breaker("strict").build().unwrap());
    let completed = Arc::new(AtomicU32::new(0));
    let mut handles = Vec::new();
    for i in 0..2_000u64 {
        let (policy, completed) = (policy.clone(), completed.clone());
        let call = registry.scope(async move {
            policy
                .run(|| {
                    let completed = completed.clone();
                    async move {
                        // Odd calls hang until aborted.
                        if i % 2 == 1 {
                            sleep(Duration::from_secs(3600)).await;
                        }
                        completed.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, TestError>(())
                    }
                })
                .await
        });
        handles.push((i, tokio::spawn(call)));
    }
    sleep(Duration::from_millis(20)).await;
    for (i, handle) in handles {
        if i % 2 == 1 {
            handle.abort();
        }
        let _ = timeout(Duration::from_secs(30), handle).await.expect("every call ends");
    }
    assert_eq!(completed.load(Ordering::SeqCst), 1_000);
    assert_eq!(opened.load(Ordering::SeqCst), 0, "no dropped attempt was recorded as a failure");
    assert_eq!(registry.breaker("strict").unwrap().state(), BreakerState::Closed);
}
