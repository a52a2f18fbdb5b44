//! Breakers, budgets and bulkheads by name, composed into the retry loop.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Attempts, TestError, ms};
use stormproof_runtime::{
    Jitter, Policy, Registry, RegistryError, Rejection,
    breaker::{BreakerConfig, BreakerState, Outcome},
    budget::{BudgetConfig, RatioBudget, RetryBudget, TokenBucket},
    bulkhead::BulkheadConfig,
    rate_limit::RateLimitConfig,
    throttle::ThrottleConfig,
};
use tokio::time::{Instant, sleep};

fn breaker_cfg(threshold: u32) -> BreakerConfig {
    BreakerConfig {
        failure_threshold: threshold,
        window: Duration::from_secs(10),
        open_for: Duration::from_secs(30),
        success_threshold: 2,
        half_open_max_calls: 2,
        ..Default::default()
    }
}

// Named after each caller's line (`#[track_caller]`), so that the tests
// running at once in this process do not share its own breaker and budget.
#[track_caller]
fn single(breaker: &'static str) -> Policy {
    Policy::builder().max_attempts(1).breaker(breaker).build().unwrap()
}

async fn fail(policy: &Policy, calls: &AtomicU32) -> Result<(), TestError> {
    policy
        .run(|| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(TestError::Transient) }
        })
        .await
}

async fn succeed(policy: &Policy, calls: &AtomicU32) -> Result<(), TestError> {
    policy
        .run(|| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Ok(()) }
        })
        .await
}

fn open_rejection(name: &str) -> Result<(), TestError> {
    Err(TestError::Rejected(Rejection::CircuitOpen { breaker: name.into() }))
}

#[tokio::test(start_paused = true)]
async fn the_breaker_opens_at_the_threshold_then_fails_fast_without_calling() {
    let registry = Registry::new();
    registry.declare_breaker("payment", breaker_cfg(3)).unwrap();
    let policy = single("payment");
    let calls = AtomicU32::new(0);
    registry
        .scope(async {
            for _ in 0..3 {
                assert_eq!(fail(&policy, &calls).await, Err(TestError::Transient));
            }
            assert_eq!(registry.breaker("payment").unwrap().state(), BreakerState::Open);
            assert_eq!(fail(&policy, &calls).await, open_rejection("payment"));
        })
        .await;
    assert_eq!(calls.load(Ordering::SeqCst), 3, "the open breaker did not call the operation");
}

#[tokio::test(start_paused = true)]
async fn a_failed_probe_reopens_and_the_success_threshold_closes() {
    let registry = Registry::new();
    registry.declare_breaker("db", breaker_cfg(2)).unwrap();
    let breaker = registry.breaker("db").unwrap();
    let policy = single("db");
    let calls = AtomicU32::new(0);
    registry
        .scope(async {
            fail(&policy, &calls).await.unwrap_err();
            fail(&policy, &calls).await.unwrap_err();
            assert_eq!(breaker.state(), BreakerState::Open);
            sleep(Duration::from_secs(30)).await;
            assert_eq!(breaker.state(), BreakerState::HalfOpen, "open_for elapsed");
            assert_eq!(fail(&policy, &calls).await, Err(TestError::Transient), "the probe ran");
            assert_eq!(breaker.state(), BreakerState::Open, "a failed probe reopens");
            sleep(Duration::from_secs(29)).await;
            assert_eq!(fail(&policy, &calls).await, open_rejection("db"), "open_for restarted");
            sleep(Duration::from_secs(1)).await;
            succeed(&policy, &calls).await.unwrap();
            assert_eq!(breaker.state(), BreakerState::HalfOpen, "one success of two");
            succeed(&policy, &calls).await.unwrap();
            assert_eq!(breaker.state(), BreakerState::Closed);
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn half_open_admits_a_limited_number_of_concurrent_probes() {
    let registry = Registry::new();
    registry.declare_breaker("probe", breaker_cfg(1)).unwrap();
    let policy = Arc::new(single("probe"));
    let calls = Arc::new(AtomicU32::new(0));
    registry.scope(fail(&policy, &calls)).await.unwrap_err();
    sleep(Duration::from_secs(30)).await;

    let mut tasks = Vec::new();
    for _ in 0..10 {
        let (policy, calls, registry) = (policy.clone(), calls.clone(), registry.clone());
        tasks.push(tokio::spawn(async move {
            registry
                .scope(policy.run(|| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    async {
                        sleep(ms(100)).await;
                        Ok::<_, TestError>(())
                    }
                }))
                .await
        }));
    }
    let mut rejected = 0;
    for task in tasks {
        if task.await.unwrap().is_err() {
            rejected += 1;
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1 + 2, "the first failure, then two probes");
    assert_eq!(rejected, 8);
    assert_eq!(registry.breaker("probe").unwrap().state(), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn the_window_forgets_old_failures_and_permanent_errors_never_count() {
    let registry = Registry::new();
    registry.declare_breaker("w", breaker_cfg(3)).unwrap();
    let breaker = registry.breaker("w").unwrap();
    let policy = single("w");
    let calls = AtomicU32::new(0);
    registry
        .scope(async {
            fail(&policy, &calls).await.unwrap_err();
            fail(&policy, &calls).await.unwrap_err();
            sleep(Duration::from_secs(10)).await;
            fail(&policy, &calls).await.unwrap_err();
            assert_eq!(breaker.state(), BreakerState::Closed, "the first two left the window");
            for _ in 0..10 {
                let permanent: Result<(), _> = policy.run(|| async { Err(TestError::Permanent) }).await;
                assert_eq!(permanent, Err(TestError::Permanent));
            }
            assert_eq!(breaker.state(), BreakerState::Closed, "permanent errors are neutral");
            fail(&policy, &calls).await.unwrap_err();
            fail(&policy, &calls).await.unwrap_err();
            assert_eq!(breaker.state(), BreakerState::Open);
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn failure_rate_mode_opens_on_the_success_that_reaches_minimum_calls() {
    let registry = Registry::new();
    let cfg = BreakerConfig { failure_rate_percent: Some(50), minimum_calls: 5, ..breaker_cfg(1000) };
    registry.declare_breaker("rate", cfg).unwrap();
    let breaker = registry.breaker("rate").unwrap();
    let policy = single("rate");
    let calls = AtomicU32::new(0);
    registry
        .scope(async {
            for _ in 0..3 {
                fail(&policy, &calls).await.unwrap_err();
            }
            succeed(&policy, &calls).await.unwrap();
            assert_eq!(breaker.state(), BreakerState::Closed, "4 calls: below minimum_calls");
            succeed(&policy, &calls).await.unwrap();
            assert_eq!(breaker.state(), BreakerState::Open, "5 calls, 3 failed: 60% >= 50%");
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn failure_rate_mode_opens_on_the_share_of_failed_calls() {
    let registry = Registry::new();
    let cfg = BreakerConfig { failure_rate_percent: Some(50), minimum_calls: 10, ..breaker_cfg(1000) };
    registry.declare_breaker("rate", cfg).unwrap();
    let breaker = registry.breaker("rate").unwrap();
    let policy = single("rate");
    let calls = AtomicU32::new(0);
    registry
        .scope(async {
            for _ in 0..6 {
                succeed(&policy, &calls).await.unwrap();
            }
            for _ in 0..3 {
                fail(&policy, &calls).await.unwrap_err();
            }
            assert_eq!(breaker.state(), BreakerState::Closed, "9 calls: below minimum_calls");
            fail(&policy, &calls).await.unwrap_err();
            assert_eq!(breaker.state(), BreakerState::Closed, "4 of 10 failed: 40%");
            fail(&policy, &calls).await.unwrap_err();
            fail(&policy, &calls).await.unwrap_err();
            assert_eq!(breaker.state(), BreakerState::Open, "6 of 12 failed: 50%");
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn the_loop_stops_at_once_when_its_failure_opened_the_breaker() {
    let registry = Registry::new();
    registry.declare_breaker("tight", breaker_cfg(2)).unwrap();
    let attempts = Attempts::new();
    let policy = Policy::builder().jitter(Jitter::None).max_attempts(10).breaker("tight").build().unwrap();
    let start = Instant::now();
    let result: Result<(), _> = registry
        .scope(policy.run(|| {
            attempts.mark();
            async { Err(TestError::Transient) }
        }))
        .await;
    assert_eq!(result, Err(TestError::Transient), "the failure that opened it, not CircuitOpen");
    assert_eq!(attempts.times(), [0, 100]);
    assert_eq!(start.elapsed(), ms(100), "no wait that could only end in a rejection");
}

#[tokio::test(start_paused = true)]
async fn first_attempts_pass_with_an_empty_budget_and_successes_refill_it() {
    let registry = Registry::new();
    registry
        .declare_budget(
            "api",
            TokenBucket { capacity: 2, retry_cost: 1, refill_per_success: 1, ..Default::default() },
        )
        .unwrap();
    let budget = registry.budget("api").unwrap();
    let attempts = Attempts::new();
    let policy =
        Policy::builder().jitter(Jitter::None).base(ms(1)).max_attempts(10).budget("api").build().unwrap();
    registry
        .scope(async {
            let exhausted: Result<(), _> = policy
                .run(|| {
                    attempts.mark();
                    async { Err(TestError::Transient) }
                })
                .await;
            assert_eq!(exhausted, Err(TestError::Transient), "the caller gets the last error");
            assert_eq!(attempts.count(), 3, "the first attempt, then two paid retries");
            assert_eq!(budget.available(), 0);

            let fresh = policy.run(|| async { Ok::<_, TestError>(7) }).await;
            assert_eq!(fresh, Ok(7), "an empty budget never refuses a first attempt");
            assert_eq!(budget.available(), 1, "the success refilled one token");
        })
        .await;
}

/// A retry's budget token is taken when the retry is decided, before its
/// wait. A retry that then cannot run gives it back: the budget pays for
/// retries that really happen, not for ones the bulkhead (full through its
/// `max_wait`) or the breaker (opened by other calls during the wait) refused.
#[tokio::test(start_paused = true)]
async fn a_retry_that_cannot_run_gives_its_budget_token_back() {
    let forms: [(BudgetConfig, u32); 2] = [
        (TokenBucket { capacity: 2, ..Default::default() }.into(), 2),
        (RatioBudget { ratio: 0.0, window: Duration::from_secs(10), min_per_sec: 1 }.into(), 10),
    ];
    for (form, full) in forms {
        for refused_by in ["bulkhead", "breaker"] {
            let registry = Registry::new();
            registry.declare_budget("api", form).unwrap();
            let one_place =
                BulkheadConfig { max_concurrent: 1, max_wait: Some(ms(10)), ..Default::default() };
            registry.declare_bulkhead("api", one_place).unwrap();
            registry.declare_breaker("api", breaker_cfg(2)).unwrap();
            let policy = Policy::builder().jitter(Jitter::None).base(ms(100)).budget("api");
            let policy = match refused_by {
                "bulkhead" => policy.bulkhead("api"),
                _ => policy.breaker("api"),
            };
            let policy = policy.build().unwrap();
            // During the first attempt's 100 ms backoff, another caller takes
            // the only place for a second, or fails and opens the breaker.
            let (bulkhead, breaker) = (registry.bulkhead("api").unwrap(), registry.breaker("api").unwrap());
            let other = tokio::spawn(async move {
                sleep(ms(50)).await;
                let _place = bulkhead.acquire().await.unwrap();
                breaker.try_acquire().unwrap().record(Outcome::Failure);
                sleep(Duration::from_secs(1)).await;
            });
            let attempts = Attempts::new();
            let result: Result<(), _> = registry
                .scope(policy.run(|| {
                    attempts.mark();
                    async { Err(TestError::Transient) }
                }))
                .await;
            let why = format!("{form:?}, the retry refused by the {refused_by}");
            assert_eq!((result, attempts.count()), (Err(TestError::Transient), 1), "{why}");
            assert_eq!(registry.budget("api").unwrap().available(), full, "{why}: the token is back");
            other.abort();
        }
    }
}

/// A registry with budget `form`, made ready by `prepare`, and a bulkhead of
/// one place, and a call that fails at once and is refused its retry at
/// 2 s: the place is taken at 1.9 s for a second. `meanwhile` runs beside it.
async fn refused_at_two_seconds(
    form: BudgetConfig,
    prepare: impl FnOnce(&RetryBudget),
    meanwhile: impl AsyncFnOnce(&Registry),
) -> Registry {
    let registry = Registry::new();
    registry.declare_budget("api", form).unwrap();
    prepare(&registry.budget("api").unwrap());
    let one_place = BulkheadConfig { max_concurrent: 1, max_wait: Some(ms(10)), ..Default::default() };
    registry.declare_bulkhead("api", one_place).unwrap();
    let bulkhead = registry.bulkhead("api").unwrap();
    let occupant = tokio::spawn(async move {
        sleep(ms(1_900)).await;
        let _place = bulkhead.acquire().await.unwrap();
        sleep(Duration::from_secs(1)).await;
    });
    let policy = Policy::builder().jitter(Jitter::None).base(Duration::from_secs(2)).max_attempts(2);
    let policy = policy.budget("api").bulkhead("api").build().unwrap();
    let attempts = Attempts::new();
    let (result, ()) = registry
        .scope(async {
            tokio::join!(
                policy.run(|| {
                    attempts.mark();
                    async { Err::<(), _>(TestError::Transient) }
                }),
                meanwhile(&registry)
            )
        })
        .await;
    assert_eq!((result, attempts.count()), (Err(TestError::Transient), 1), "{form:?}: refused");
    occupant.await.unwrap();
    registry
}

/// A ratio budget gives back a refused retry where it counted it: by then
/// other calls' retries may be counted in later slices of its window, and
/// forgetting the latest of them instead forgets one still in the window
/// once this one's slice has left it.
#[tokio::test(start_paused = true)]
async fn a_refused_retry_is_forgotten_from_the_ratio_window_where_it_was_counted() {
    let ratio = RatioBudget { ratio: 0.0, window: Duration::from_secs(10), min_per_sec: 1 };
    let registry = refused_at_two_seconds(
        ratio.into(),
        |_| {},
        async |registry: &Registry| {
            // Another call fails at 1.5 s, in a later slice, and retries at once.
            sleep(ms(1_500)).await;
            let other = Policy::builder().jitter(Jitter::None).base(ms(1)).budget("api").build().unwrap();
            let attempts = Attempts::new();
            let result = registry
                .scope(other.run(|| {
                    attempts.mark();
                    let failed = attempts.count() == 1;
                    async move { if failed { Err(TestError::Transient) } else { Ok(()) } }
                }))
                .await;
            assert_eq!((result, attempts.count()), (Ok(()), 2), "the other call retried");
        },
    )
    .await;
    let budget = registry.budget("api").unwrap();
    assert_eq!(budget.available(), 9, "10 over the window, the other call's retry taken");
    // The refused retry's slice (at 0) has left the window, the other's has not.
    sleep(ms(10_500) - ms(2_900)).await;
    assert_eq!(budget.available(), 9, "the other call's retry is still in the window");
}

/// A bucket gives back the tokens the refused retry took, not what a
/// retry costs once a reload has changed the cost.
#[tokio::test(start_paused = true)]
async fn a_refused_retry_gives_back_the_tokens_it_took() {
    let bucket = TokenBucket { capacity: 10, ..Default::default() };
    let registry = refused_at_two_seconds(
        bucket.into(),
        |_| {},
        async |registry: &Registry| {
            let budget = registry.budget("api").unwrap();
            assert!((0..4).all(|_| budget.try_withdraw()), "4 more spent");
            sleep(Duration::from_secs(1)).await;
            budget
                .reconfigure(TokenBucket {
                    capacity: 10,
                    retry_cost: 5,
                    refill_per_success: 1,
                    ..Default::default()
                })
                .unwrap();
        },
    )
    .await;
    assert_eq!(registry.budget("api").unwrap().available(), 6, "the refused retry's 1 token back, not 5");
}

/// Under a fleet's lease a retry takes a leased token as well: a refused
/// one gives it back to the lease it came from, as it gives the budget its
/// own share back. Kept spent, it would have been a share of the fleet's
/// retries that no retry used, and the replica short of one.
#[tokio::test(start_paused = true)]
async fn a_refused_retry_gives_its_leased_token_back_to_the_lease() {
    let registry =
        refused_at_two_seconds(RatioBudget::default().into(), |budget| budget.lease(1), async |_| {}).await;
    let budget = registry.budget("api").unwrap();
    assert_eq!(budget.leased(), Some(1), "the leased token is back");
    assert!(budget.try_withdraw(), "and pays for the next retry");
}

#[tokio::test(start_paused = true)]
async fn the_bulkhead_limits_concurrency_and_rejects_at_max_wait() {
    let registry = Registry::new();
    registry
        .declare_bulkhead(
            "pool",
            BulkheadConfig { max_concurrent: 2, max_wait: Some(ms(50)), ..Default::default() },
        )
        .unwrap();
    let policy = Arc::new(Policy::builder().max_attempts(1).bulkhead("pool").build().unwrap());
    let running = Arc::new(AtomicU32::new(0));
    let peak = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..5 {
        let (policy, running, peak, registry) =
            (policy.clone(), running.clone(), peak.clone(), registry.clone());
        tasks.push(tokio::spawn(async move {
            registry
                .scope(policy.run(|| {
                    let (running, peak) = (running.clone(), peak.clone());
                    async move {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        sleep(ms(100)).await;
                        running.fetch_sub(1, Ordering::SeqCst);
                        Ok::<_, TestError>(())
                    }
                }))
                .await
        }));
    }
    let mut full = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => {}
            Err(TestError::Rejected(Rejection::BulkheadFull { bulkhead })) => {
                assert_eq!(bulkhead, "pool");
                full += 1;
            }
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(peak.load(Ordering::SeqCst), 2);
    assert_eq!(full, 3, "three waited 50 ms and were rejected");
    assert_eq!(registry.bulkhead("pool").unwrap().in_use(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_bulkhead_permit_is_not_held_across_the_backoff_wait() {
    let registry = Registry::new();
    registry
        .declare_bulkhead("one", BulkheadConfig { max_concurrent: 1, max_wait: None, ..Default::default() })
        .unwrap();
    let bulkhead = registry.bulkhead("one").unwrap();
    let policy =
        Policy::builder().jitter(Jitter::None).base(ms(100)).max_attempts(2).bulkhead("one").build().unwrap();
    let observer = {
        let bulkhead = bulkhead.clone();
        tokio::spawn(async move {
            sleep(ms(50)).await;
            bulkhead.in_use()
        })
    };
    let _: Result<(), _> = registry.scope(policy.run(|| async { Err(TestError::Transient) })).await;
    assert_eq!(observer.await.unwrap(), 0, "during the wait no permit is held");
}

#[tokio::test(start_paused = true)]
async fn scoped_registries_are_isolated_from_each_other() {
    let policy = single("shared-name");
    let calls = AtomicU32::new(0);
    let (a, b) = (Registry::new(), Registry::new());
    a.declare_breaker("shared-name", breaker_cfg(1)).unwrap();
    b.declare_breaker("shared-name", breaker_cfg(1)).unwrap();
    a.scope(fail(&policy, &calls)).await.unwrap_err();
    assert_eq!(a.breaker("shared-name").unwrap().state(), BreakerState::Open);
    assert_eq!(b.breaker("shared-name").unwrap().state(), BreakerState::Closed);
    assert_eq!(b.scope(succeed(&policy, &calls)).await, Ok(()));
    assert_eq!(a.scope(succeed(&policy, &calls)).await, open_rejection("shared-name"));
}

#[tokio::test(start_paused = true)]
async fn an_undeclared_name_is_created_with_defaults_on_first_use() {
    let registry = Registry::new();
    let policy = Policy::builder().breaker("lazy").budget("lazy").bulkhead("lazy").build().unwrap();
    registry.scope(policy.run(|| async { Ok::<_, TestError>(()) })).await.unwrap();
    assert_eq!(registry.breaker("lazy").unwrap().config(), BreakerConfig::default());
    assert_eq!(registry.budget("lazy").unwrap().config(), BudgetConfig::default());
    assert_eq!(registry.bulkhead("lazy").unwrap().config(), BulkheadConfig::default());
    assert!(matches!(
        registry.declare_breaker("lazy", BreakerConfig::default()),
        Err(RegistryError::AlreadyDeclared { kind: "breaker", .. })
    ));
}

#[test]
fn each_config_error_is_reported_with_its_field() {
    let registry = Registry::new();
    let field = |err: RegistryError| match err {
        RegistryError::InvalidConfig { error, .. } => error.field,
        other => panic!("unexpected {other}"),
    };
    let breakers = [
        (BreakerConfig { failure_threshold: 0, ..Default::default() }, "failure_threshold"),
        (BreakerConfig { success_threshold: 0, ..Default::default() }, "success_threshold"),
        (BreakerConfig { half_open_max_calls: 0, ..Default::default() }, "half_open_max_calls"),
        (BreakerConfig { window: Duration::ZERO, ..Default::default() }, "window"),
        (BreakerConfig { open_for: Duration::ZERO, ..Default::default() }, "open_for"),
        (BreakerConfig { failure_rate_percent: Some(0), ..Default::default() }, "failure_rate_percent"),
        (BreakerConfig { failure_rate_percent: Some(101), ..Default::default() }, "failure_rate_percent"),
        (
            BreakerConfig { failure_rate_percent: Some(50), minimum_calls: 0, ..Default::default() },
            "minimum_calls",
        ),
    ];
    for (cfg, expected) in breakers {
        assert_eq!(field(registry.declare_breaker("b", cfg).unwrap_err()), expected);
    }
    let budget = TokenBucket { capacity: 0, ..Default::default() };
    assert_eq!(field(registry.declare_budget("b", budget).unwrap_err()), "capacity");
    let budget = TokenBucket { capacity: 1, retry_cost: 2, ..Default::default() };
    assert_eq!(field(registry.declare_budget("b", budget).unwrap_err()), "retry_cost");
    let bulkhead = BulkheadConfig { max_concurrent: 0, ..Default::default() };
    assert_eq!(field(registry.declare_bulkhead("b", bulkhead).unwrap_err()), "max_concurrent");
    assert!(registry.breaker("b").is_none(), "nothing half-declared");
    // An empty name, which no function could give, for every kind of guard.
    assert_eq!(field(registry.declare_breaker(" ", BreakerConfig::default()).unwrap_err()), "name");
    assert_eq!(field(registry.declare_budget("", BudgetConfig::default()).unwrap_err()), "name");
    assert_eq!(field(registry.declare_bulkhead("", BulkheadConfig::default()).unwrap_err()), "name");
    assert_eq!(field(registry.declare_throttle("", ThrottleConfig::default()).unwrap_err()), "name");
    assert_eq!(field(registry.declare_rate_limit("", RateLimitConfig::default()).unwrap_err()), "name");

    registry.declare_budget("dup", BudgetConfig::default()).unwrap();
    let dup = registry.declare_budget("dup", BudgetConfig::default()).unwrap_err();
    assert_eq!(dup, RegistryError::AlreadyDeclared { kind: "budget", name: "dup".into() });
    assert!(dup.to_string().contains("`dup`"));
}

/// What a hook added after `registry`'s others hears as breaker "hooked"
/// opens on a failure and closes again on a probe's success 30 s later.
async fn transitions_heard_through_a_cycle(registry: &Registry) -> Vec<(String, BreakerState, BreakerState)> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    registry.on_transition(move |t| log.lock().unwrap().push((t.breaker.to_owned(), t.from, t.to)));
    registry.declare_breaker("hooked", BreakerConfig { success_threshold: 1, ..breaker_cfg(1) }).unwrap();
    let policy = single("hooked");
    let calls = AtomicU32::new(0);
    registry
        .scope(async {
            // The failure that opens the breaker is the caller's answer,
            // whatever the hooks do.
            fail(&policy, &calls).await.unwrap_err();
            sleep(Duration::from_secs(30)).await;
            succeed(&policy, &calls).await.unwrap();
        })
        .await;
    seen.lock().unwrap().clone()
}

#[tokio::test(start_paused = true)]
async fn transition_hooks_hear_every_transition() {
    let seen = transitions_heard_through_a_cycle(&Registry::new()).await;
    use BreakerState::*;
    let name = || "hooked".to_owned();
    assert_eq!(seen, [(name(), Closed, Open), (name(), Open, HalfOpen), (name(), HalfOpen, Closed)]);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_hook_neither_fails_the_call_nor_silences_the_other_hooks() {
    let registry = Registry::new();
    registry.on_transition(|t| {
        if t.to == BreakerState::Open {
            panic!("a hook's own bug");
        }
    });
    let seen = transitions_heard_through_a_cycle(&registry).await;
    let seen: Vec<_> = seen.into_iter().map(|(_, from, to)| (from, to)).collect();
    use BreakerState::*;
    assert_eq!(seen, [(Closed, Open), (Open, HalfOpen), (HalfOpen, Closed)]);
}

/// A hook may add hooks: the new one hears the transitions after the one
/// being announced. Run on a thread of its own, so that a hook deadlocking
/// on the hooks' lock fails the test instead of hanging the run.
#[test]
fn a_hook_that_adds_a_hook_hears_on_and_so_does_the_new_one() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build();
        let registry = Registry::new();
        let later = Arc::new(Mutex::new(Vec::new()));
        let (adder, log) = (registry.clone(), later.clone());
        registry.on_transition(move |t| {
            if t.to == BreakerState::Open {
                let log = log.clone();
                adder.on_transition(move |t| log.lock().unwrap().push((t.from, t.to)));
            }
        });
        let seen = runtime.unwrap().block_on(transitions_heard_through_a_cycle(&registry));
        let later = later.lock().unwrap().clone();
        done.send((seen.len(), later)).unwrap();
    });
    let (seen, later) =
        finished.recv_timeout(Duration::from_secs(60)).expect("a hook adding a hook deadlocked");
    use BreakerState::*;
    assert_eq!(seen, 3, "the first hooks heard the whole cycle");
    assert_eq!(
        later,
        [(Open, HalfOpen), (HalfOpen, Closed)],
        "the added hook hears what follows its addition"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_tasks_of_ten_thousand_calls_leave_consistent_counts() {
    let registry = Registry::new();
    registry
        .declare_breaker("stress", BreakerConfig { failure_threshold: 1_000_000, ..Default::default() })
        .unwrap();
    registry
        .declare_budget(
            "stress",
            TokenBucket { capacity: 1_000, retry_cost: 1, refill_per_success: 1, ..Default::default() },
        )
        .unwrap();
    registry
        .declare_bulkhead(
            "stress",
            BulkheadConfig { max_concurrent: 3, max_wait: None, ..Default::default() },
        )
        .unwrap();
    let policy = Arc::new(
        Policy::builder()
            .max_attempts(3)
            .base(Duration::ZERO)
            .cap(Duration::ZERO)
            .breaker("stress")
            .budget("stress")
            .bulkhead("stress")
            .build()
            .unwrap(),
    );
    let executed = Arc::new(AtomicU32::new(0));
    let in_flight = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for task in 0..8u32 {
        let (policy, executed, in_flight) = (policy.clone(), executed.clone(), in_flight.clone());
        tasks.push(tokio::spawn(registry.scope(async move {
            let mut ok = 0u32;
            for call in 0..10_000u32 {
                let mut attempt = 0u32;
                let result = policy
                    .run(|| {
                        attempt += 1;
                        // Deterministic mix: every 7th call fails once, every 13th fails for good.
                        let fails = (call % 7 == 0 && attempt == 1) || (call + task) % 13 == 0;
                        let (executed, in_flight) = (executed.clone(), in_flight.clone());
                        async move {
                            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                            assert!(now <= 3, "the bulkhead admitted {now}");
                            executed.fetch_add(1, Ordering::SeqCst);
                            tokio::task::yield_now().await;
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                            if fails { Err(TestError::Transient) } else { Ok(()) }
                        }
                    })
                    .await;
                ok += u32::from(result.is_ok());
            }
            ok
        })));
    }
    let mut successes = 0;
    for task in tasks {
        successes += task.await.unwrap();
    }
    let bulkhead = registry.bulkhead("stress").unwrap();
    assert_eq!(bulkhead.in_use(), 0, "no permit lost");
    assert_eq!(registry.breaker("stress").unwrap().state(), BreakerState::Closed);
    let available = registry.budget("stress").unwrap().available();
    assert!(available <= 1_000);
    // Every call succeeded except the ones failing for good (after 3 attempts each).
    let hopeless: u32 = (0..8u32).map(|t| (0..10_000u32).filter(|c| (c + t) % 13 == 0).count() as u32).sum();
    assert_eq!(successes, 80_000 - hopeless);
    let once: u32 =
        (0..8u32).map(|t| (0..10_000u32).filter(|c| c % 7 == 0 && (c + t) % 13 != 0).count() as u32).sum();
    assert_eq!(
        executed.load(Ordering::SeqCst),
        80_000 + once + 2 * hopeless,
        "each attempt ran exactly once"
    );
}

#[tokio::test(start_paused = true)]
async fn the_breaker_counts_every_attempt_not_every_call() {
    let registry = Registry::new();
    registry.declare_breaker("per-attempt", breaker_cfg(3)).unwrap();
    let breaker = registry.breaker("per-attempt").unwrap();
    let attempts = Attempts::new();
    let policy = Policy::builder()
        .jitter(Jitter::None)
        .base(ms(1))
        .max_attempts(3)
        .breaker("per-attempt")
        .build()
        .unwrap();
    let one_call: Result<(), _> = registry
        .scope(policy.run(|| {
            attempts.mark();
            async { Err(TestError::Transient) }
        }))
        .await;
    assert_eq!(one_call, Err(TestError::Transient));
    assert_eq!(attempts.count(), 3);
    assert_eq!(breaker.state(), BreakerState::Open, "one call, three failed attempts, three failures");
}
