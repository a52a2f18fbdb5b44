//! gRPC's retry throttling (gRFC A6 `retryThrottling`, issue 44 item 5) as
//! a budget: each attempt that fails with a retryable error takes a token,
//! each success gives `token_ratio` back, and a retry (or a hedge) is
//! allowed only while the count is above half of `max_tokens`. Through the
//! attribute, `Policy::run` and the configuration file, on tokio's paused
//! clock, each test in its own registry.

use std::io::{Error as IoError, ErrorKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use stormproof::budget::{BudgetConfig, RetryThrottling};
use stormproof::{Error, Policy, Registry, resilient};

/// The dependency: whether it is up, and the attempts that reached it.
#[derive(Default)]
struct Dependency {
    up: AtomicBool,
    attempts: AtomicU32,
}

impl Dependency {
    fn answer(&self) -> Result<(), Error<IoError>> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        if self.up.load(Ordering::SeqCst) { Ok(()) } else { Err(IoError::from(ErrorKind::ConnectionReset))? }
    }

    /// The attempts one call made.
    async fn attempts_of<F: Future>(&self, call: F) -> u32 {
        let before = self.attempts.load(Ordering::SeqCst);
        call.await;
        self.attempts.load(Ordering::SeqCst) - before
    }
}

#[resilient(max_attempts = 3, base_ms = 10, budget = "grpc", breaker = "none")]
async fn call(dependency: Arc<Dependency>) -> Result<(), Error<IoError>> {
    dependency.answer()
}

/// gRFC A6's example settings, 10 tokens and 0.1: three calls to a
/// dependency that is down make 3, 2 and 1 attempts (the count goes 10 to
/// 7, to 5, to 4: a retry needs more than 5); thirty successes give three
/// tokens back, and retries resume.
#[tokio::test(start_paused = true)]
async fn failures_stop_retries_at_half_the_tokens_and_successes_bring_them_back() {
    let registry = Registry::new();
    registry.declare_budget("grpc", RetryThrottling { max_tokens: 10, token_ratio: 0.1 }).unwrap();
    let dependency = Arc::new(Dependency::default());
    let mut attempts = Vec::new();
    for _ in 0..3 {
        attempts.push(dependency.attempts_of(registry.scope(call(dependency.clone()))).await);
    }
    assert_eq!(attempts, [3, 2, 1]);
    let budget = registry.budget("grpc").unwrap();
    assert_eq!(budget.available(), 4, "whole tokens left");

    dependency.up.store(true, Ordering::SeqCst);
    for _ in 0..30 {
        registry.scope(call(dependency.clone())).await.unwrap();
    }
    assert_eq!(budget.available(), 7);
    dependency.up.store(false, Ordering::SeqCst);
    let attempts = dependency.attempts_of(registry.scope(call(dependency.clone()))).await;
    assert_eq!(attempts, 2, "7 to 6: a retry; 6 to 5: none");
}

/// `Policy::run` pays the same way; a permanent error takes no token (gRPC
/// counts only retryable codes).
#[tokio::test(start_paused = true)]
async fn a_permanent_error_takes_no_token() {
    let registry = Registry::new();
    registry.declare_budget("grpc", RetryThrottling { max_tokens: 4, token_ratio: 1.0 }).unwrap();
    let policy =
        Policy::builder().name("grpc-run").max_attempts(5).budget("grpc").breaker("none").build().unwrap();
    let refused = || async { Err::<(), _>(IoError::from(ErrorKind::PermissionDenied)) };
    for _ in 0..10 {
        assert!(registry.scope(policy.run(refused)).await.is_err());
    }
    let budget = registry.budget("grpc").unwrap();
    assert_eq!(budget.available(), 4, "no token taken");
    let attempts = AtomicU32::new(0);
    let reset = || {
        attempts.fetch_add(1, Ordering::SeqCst);
        async { Err::<(), _>(IoError::from(ErrorKind::ConnectionReset)) }
    };
    assert!(registry.scope(policy.run(reset)).await.is_err());
    assert_eq!(attempts.load(Ordering::SeqCst), 2, "4 to 3 (retry), 3 to 2 (not above half)");
}

/// The configuration file gives the form by its keys; a reload keeps the
/// count as a share of the new maximum and says what changed; the other
/// forms' keys beside it, or a ratio gRPC would not take, are errors at
/// the key.
#[tokio::test(start_paused = true)]
async fn a_file_declares_retry_throttling_and_a_reload_scales_its_count() {
    let registry = Registry::new();
    registry.load_toml("[budgets.grpc]\nmax_tokens = 10\ntoken_ratio = 0.1\n").unwrap();
    let budget = registry.budget("grpc").unwrap();
    assert_eq!(
        budget.config(),
        BudgetConfig::RetryThrottling(RetryThrottling { max_tokens: 10, token_ratio: 0.1 })
    );
    for _ in 0..6 {
        budget.record_failure();
    }
    let report = registry.reload_toml("[budgets.grpc]\nmax_tokens = 100\ntoken_ratio = 0.5\n").unwrap();
    assert!(report.to_string().contains("max_tokens 10 -> 100"), "{report}");
    assert_eq!(registry.budget("grpc").unwrap().available(), 40, "4 of 10 becomes 40 of 100");

    let fresh = Registry::new();
    let mixed = fresh.load_toml("[budgets.grpc]\nmax_tokens = 10\ncapacity = 5\n").unwrap_err().to_string();
    assert!(mixed.contains("but this budget also has"), "{mixed}");
    let fine = fresh.load_toml("[budgets.grpc]\ntoken_ratio = 0.0001\n").unwrap_err().to_string();
    assert!(fine.contains("token_ratio") && fine.contains("at least 0.001"), "{fine}");
}
