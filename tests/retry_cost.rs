//! Retry cost by class (issue 44, item 4; the AWS SDKs' retry quota): a
//! token bucket's retry may cost more after an attempt timeout
//! (`timeout_cost`) and less after a throttle (`throttled_cost`) than after
//! a transient error (`retry_cost`), and with `refund_on_success` a retry
//! that succeeds gives back what it took. `TokenBucket::aws_standard` is the
//! SDKs' standard quota: 500 tokens, 10 a retry after a transient error or
//! a timeout, 5 after a throttle. On tokio's paused clock, each test in its
//! own registry.

use std::time::Duration;

use stormproof::budget::TokenBucket;
use stormproof::{Classify, ErrorClass, Policy, Registry, Rejection};

/// How one attempt ends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// A 503, a reset.
    Unavailable,
    /// A 429.
    Throttled,
    /// Answers after a minute (the attempt timeout cuts it at 1 s).
    Hangs,
    Rejected,
}

impl Classify for Fault {
    fn classify(&self) -> ErrorClass {
        match self {
            Fault::Unavailable | Fault::Hangs | Fault::Rejected => ErrorClass::Transient,
            Fault::Throttled => ErrorClass::Throttled { retry_after: None },
        }
    }
}

impl From<Rejection> for Fault {
    fn from(_: Rejection) -> Self {
        Fault::Rejected
    }
}

/// One call of two attempts: the first ends with `first`, the second
/// succeeds; the attempts made.
async fn call(registry: &Registry, first: Fault) -> u32 {
    let policy = Policy::builder()
        .name("retry_cost::call")
        .max_attempts(2)
        .base(Duration::from_millis(10))
        .attempt_timeout(Duration::from_secs(1))
        .budget("quota")
        .breaker("none")
        .build()
        .unwrap();
    let mut attempts = 0;
    let result = registry
        .scope(policy.run(|| {
            attempts += 1;
            let this = attempts;
            async move {
                match (this, first) {
                    (1, Fault::Hangs) => {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        Ok(())
                    }
                    (1, fault) => Err(fault),
                    _ => Ok(()),
                }
            }
        }))
        .await;
    assert_eq!(result, Ok(()));
    attempts
}

/// A policy of `max_attempts` with no backoff, its retries paid from the
/// budget `quota`, with no breaker.
// Named after each caller's line (`#[track_caller]`), so that the tests
// running at once in this process do not share its own breaker and budget.
#[track_caller]
fn paid_from_quota(max_attempts: u32) -> Policy {
    Policy::builder()
        .max_attempts(max_attempts)
        .base(Duration::ZERO)
        .budget("quota")
        .breaker("none")
        .build()
        .unwrap()
}

fn available(registry: &Registry) -> u32 {
    registry.budget("quota").unwrap().available()
}

#[tokio::test(start_paused = true)]
async fn a_retry_costs_what_the_failure_before_it_says() {
    let registry = Registry::new();
    let quota = TokenBucket {
        capacity: 40,
        retry_cost: 5,
        refill_per_success: 0,
        timeout_cost: Some(10),
        throttled_cost: Some(2),
        refund_on_success: false,
    };
    registry.declare_budget("quota", quota).unwrap();
    assert_eq!(call(&registry, Fault::Unavailable).await, 2);
    assert_eq!(available(&registry), 35, "a transient error: retry_cost");
    assert_eq!(call(&registry, Fault::Throttled).await, 2);
    assert_eq!(available(&registry), 33, "a throttle: throttled_cost");
    assert_eq!(call(&registry, Fault::Hangs).await, 2);
    assert_eq!(available(&registry), 23, "an attempt timeout: timeout_cost");
    // Unset costs are the retry cost.
    let plain = TokenBucket { timeout_cost: None, throttled_cost: None, ..quota };
    registry.budget("quota").unwrap().reconfigure(plain).unwrap();
    assert_eq!(call(&registry, Fault::Hangs).await, 2);
    assert_eq!(call(&registry, Fault::Throttled).await, 2);
    assert_eq!(available(&registry), 13);
}

#[tokio::test(start_paused = true)]
async fn with_refunds_a_retry_that_succeeds_gives_back_what_it_took_and_one_that_fails_does_not() {
    let registry = Registry::new();
    let quota =
        TokenBucket { capacity: 20, retry_cost: 5, refund_on_success: true, ..TokenBucket::default() };
    registry.declare_budget("quota", quota).unwrap();
    let policy = paid_from_quota(2);
    // Both attempts fail: the retry's 5 are spent.
    let failed: Result<(), Fault> = registry.scope(policy.run(|| async { Err(Fault::Unavailable) })).await;
    assert_eq!(failed, Err(Fault::Unavailable));
    assert_eq!(available(&registry), 15);
    // The retry succeeds: its 5 come back, in place of the success's 1.
    assert_eq!(call(&registry, Fault::Unavailable).await, 2);
    assert_eq!(available(&registry), 15);
    // A first attempt's success returns `refill_per_success`, as ever.
    let succeeded: Result<(), Fault> = registry.scope(policy.run(|| async { Ok(()) })).await;
    assert_eq!(succeeded, Ok(()));
    assert_eq!(available(&registry), 16);
}

#[tokio::test(start_paused = true)]
async fn the_aws_quota_stops_retries_to_a_dead_dependency_after_50_and_to_a_throttling_one_after_100() {
    for (fault, retries) in [(Fault::Unavailable, 50), (Fault::Throttled, 100)] {
        let registry = Registry::new();
        registry.declare_budget("quota", TokenBucket::aws_standard()).unwrap();
        let policy = paid_from_quota(3);
        let mut attempts = 0;
        for _ in 0..200 {
            let result: Result<(), Fault> = registry
                .scope(policy.run(|| {
                    attempts += 1;
                    async move { Err(fault) }
                }))
                .await;
            assert_eq!(result, Err(fault));
        }
        assert_eq!(attempts - 200, retries, "{fault:?}: retries the 500 tokens paid for");
        assert_eq!(available(&registry), 0);
    }
}

#[test]
fn a_cost_above_the_capacity_is_an_error_naming_it() {
    let field = |bucket: TokenBucket| bucket.validate().unwrap_err().field;
    let small = TokenBucket { capacity: 5, ..TokenBucket::default() };
    assert_eq!(field(TokenBucket { timeout_cost: Some(6), ..small }), "timeout_cost");
    assert_eq!(field(TokenBucket { throttled_cost: Some(6), ..small }), "throttled_cost");
    assert!(TokenBucket { timeout_cost: Some(5), throttled_cost: Some(0), ..small }.validate().is_ok());
}

#[cfg(feature = "config")]
#[test]
fn the_costs_come_from_the_file_and_a_reload_reports_them() {
    let registry = Registry::new();
    registry.load_toml("[budgets.quota]\ncapacity = 500\nretry_cost = 10\n").unwrap();
    let aws = "[budgets.quota]\ncapacity = 500\nretry_cost = 10\ntimeout_cost = 10\nthrottled_cost = 5\nrefund_on_success = true\n";
    let report = registry.reload_toml(aws).unwrap();
    assert_eq!(
        report.to_string(),
        "budget `quota`: timeout_cost none -> 10, throttled_cost none -> 5, refund_on_success false -> true"
    );
    let config = registry.budget("quota").unwrap().config();
    assert_eq!(config, stormproof::budget::BudgetConfig::TokenBucket(TokenBucket::aws_standard()));
    let error =
        registry.reload_toml("[budgets.quota]\ncapacity = 5\ntimeout_cost = 6\n").unwrap_err().to_string();
    assert!(error.contains("`timeout_cost` must not exceed `capacity` (5), got 6"), "{error}");
}
