//! Safe by default (issue 45, item 1): every operation has a retry budget
//! unless it names one or says `budget = "none"`, so that a plain
//! `#[resilient(max_attempts = 4, base_ms = 100)]` does not multiply the
//! load on a dependency that is down by four. Its own budget is the
//! registry's budget named after the operation (10 % of its calls over
//! 10 s, and at least 10 retries a second): a lone caller keeps every
//! retry (the seeds' numbers, `tests/attribute.rs`, stay exact), a crowd
//! of failing callers adds at most that share. On tokio's paused clock.

use std::io::{Error as IoError, ErrorKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use stormproof::breaker::NO_BREAKER;
use stormproof::budget::{NO_BUDGET, RatioBudget};
use stormproof::{Error, GuardKind, Policy, Registry, resilient};

/// Attempts that reached the dependency.
static PLAIN_ATTEMPTS: AtomicU64 = AtomicU64::new(0);
static UNBUDGETED_ATTEMPTS: AtomicU64 = AtomicU64::new(0);

/// The README's first example, against a dependency that is down, with
/// its breaker off: the budget alone (`tests/default_breaker.rs` has the
/// two together).
#[resilient(max_attempts = 4, base_ms = 100, name = "default_budget::plain", breaker = "none")]
async fn plain() -> Result<(), Error<IoError>> {
    PLAIN_ATTEMPTS.fetch_add(1, Ordering::SeqCst);
    Err(IoError::from(ErrorKind::ConnectionReset))?
}

/// The same, for the test of a lone caller: each test counts its own
/// attempts, since `cargo test` runs a binary's tests at once.
static LONE_ATTEMPTS: AtomicU64 = AtomicU64::new(0);
#[resilient(max_attempts = 4, base_ms = 100, name = "default_budget::lone", breaker = "none")]
async fn lone() -> Result<(), Error<IoError>> {
    LONE_ATTEMPTS.fetch_add(1, Ordering::SeqCst);
    Err(IoError::from(ErrorKind::ConnectionReset))?
}

/// The same, for the test of a budget declared under its name.
static DECLARED_ATTEMPTS: AtomicU64 = AtomicU64::new(0);
#[resilient(max_attempts = 4, base_ms = 100, name = "default_budget::declared")]
async fn declared() -> Result<(), Error<IoError>> {
    DECLARED_ATTEMPTS.fetch_add(1, Ordering::SeqCst);
    Err(IoError::from(ErrorKind::ConnectionReset))?
}

/// The same, for the test of a file that turns its budget off.
static FILED_ATTEMPTS: AtomicU64 = AtomicU64::new(0);
#[resilient(max_attempts = 4, base_ms = 100, name = "default_budget::filed", breaker = "none")]
async fn filed() -> Result<(), Error<IoError>> {
    FILED_ATTEMPTS.fetch_add(1, Ordering::SeqCst);
    Err(IoError::from(ErrorKind::ConnectionReset))?
}

/// The same, with the budget turned off (and the breaker: nothing stops
/// the retries).
#[resilient(max_attempts = 4, base_ms = 100, budget = "none", breaker = "none")]
async fn unbudgeted() -> Result<(), Error<IoError>> {
    UNBUDGETED_ATTEMPTS.fetch_add(1, Ordering::SeqCst);
    Err(IoError::from(ErrorKind::ConnectionReset))?
}

/// 2,000 calls, one every 500 us (2,000 a second, open loop), each in
/// `registry`, all run to their end; how many attempts the dependency saw.
async fn crowd<F>(registry: &Registry, call: fn() -> F, attempts: &AtomicU64) -> u64
where
    F: Future<Output = Result<(), Error<IoError>>> + Send + 'static,
{
    attempts.store(0, Ordering::SeqCst);
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..2_000 {
        calls.spawn(registry.scope(call()));
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    while let Some(result) = calls.join_next().await {
        assert!(result.expect("no panic").is_err(), "the dependency is down");
    }
    attempts.load(Ordering::SeqCst)
}

/// Without a budget, every failing call makes its four attempts: the
/// dependency sees 4x the load the callers offer (a retry storm). With the
/// operation's own budget it sees the calls plus at most 10 % of them and
/// the floor (10 a second over the 10 s window): 2,000 + 200 + 100.
#[tokio::test(start_paused = true)]
async fn the_operations_own_budget_keeps_a_dead_dependency_from_a_storm() {
    let unbudgeted = crowd(&Registry::new(), unbudgeted, &UNBUDGETED_ATTEMPTS).await;
    assert_eq!(unbudgeted, 8_000, "budget = \"none\": four attempts each");
    let registry = Registry::new();
    let attempts = crowd(&registry, plain, &PLAIN_ATTEMPTS).await;
    assert!(
        attempts <= 2_000 + 200 + 100,
        "{attempts} attempts for 2,000 calls: {:.2}x",
        attempts as f64 / 2e3
    );
    assert!(attempts > 2_000, "the floor's retries still happen: {attempts}");
    let budget = registry.budget("default_budget::plain").expect("the operation's own, named after it");
    assert_eq!(budget.totals().first_attempts, 2_000);
}

/// A lone caller keeps every retry: the floor (10 a second) is far above
/// what one call's three retries take.
#[tokio::test(start_paused = true)]
async fn a_lone_caller_keeps_its_retries() {
    let registry = Registry::new();
    for round in 1..=5 {
        LONE_ATTEMPTS.store(0, Ordering::SeqCst);
        assert!(registry.scope(lone()).await.is_err());
        assert_eq!(LONE_ATTEMPTS.load(Ordering::SeqCst), 4, "round {round}: all four attempts");
    }
}

/// The operation's own budget is a budget like any other: declared under
/// the operation's name (in code or in the configuration file) it takes
/// those settings; a builder's policy has one too, named after the
/// policy's name; `budget = "none"` has none; and it is made quietly: the
/// start-up check does not report it as undeclared.
#[tokio::test(start_paused = true)]
async fn the_operations_own_budget_is_the_budget_named_after_it() {
    let registry = Registry::new();
    registry
        .declare_budget(
            "default_budget::declared",
            RatioBudget { ratio: 0.0, min_per_sec: 0, ..Default::default() },
        )
        .unwrap();
    DECLARED_ATTEMPTS.store(0, Ordering::SeqCst);
    assert!(registry.scope(declared()).await.is_err());
    assert_eq!(DECLARED_ATTEMPTS.load(Ordering::SeqCst), 1, "a budget of nothing: no retry");

    let attempts = Arc::new(AtomicU64::new(0));
    let policy = Policy::builder()
        .name("orders")
        .max_attempts(3)
        .base(Duration::from_millis(10))
        .breaker(NO_BREAKER)
        .build()
        .unwrap();
    assert_eq!(policy.guard_name(GuardKind::Budget), Some("orders"));
    let count = attempts.clone();
    let _: Result<(), IoError> = registry
        .scope(policy.run(move || {
            count.fetch_add(1, Ordering::SeqCst);
            async { Err(IoError::from(ErrorKind::ConnectionReset)) }
        }))
        .await;
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    assert_eq!(registry.budget("orders").expect("made by the call").totals().first_attempts, 1);

    let none = Policy::builder().name("orders").budget(NO_BUDGET).build().unwrap();
    assert_eq!(none.guard_name(GuardKind::Budget), None);

    let report = registry.check();
    assert!(!report.to_string().contains("default_budget::declared"), "{report}");
    assert!(report.undeclared.iter().all(|u| u.name != "orders"), "{report}");
}

/// A configuration file turns an operation's budget off without a rebuild
/// (`budget = "none"` in its `[operations."..."]` table) and back on when
/// the key goes; the reload says so; any other value is refused at the key.
#[tokio::test(start_paused = true)]
async fn a_file_turns_an_operations_budget_off_and_on() {
    let registry = Registry::new();
    let off = "[operations.\"default_budget::filed\"]\nmax_attempts = 4\nbudget = \"none\"\n";
    let on = "[operations.\"default_budget::filed\"]\nmax_attempts = 4\n";
    registry.load_toml(off).unwrap();
    let storm = crowd(&registry, filed, &FILED_ATTEMPTS).await;
    assert_eq!(storm, 8_000, "the file's budget = \"none\": four attempts each");

    let report = registry.reload_toml(on).unwrap();
    // The budget counted the storm's calls all along (as it would count its
    // successes); with no retry taken from it since, its window spreads
    // them evenly over the time since its last retry, so past its 10 s it
    // still counts part of them: at most the 2,000 new calls' 10 % and the
    // storm's, beside the floor.
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert!(report.to_string().contains("budget none -> on"), "{report}");
    let attempts = crowd(&registry, filed, &FILED_ATTEMPTS).await;
    assert!(attempts <= 2_000 + 400 + 100, "the budget is back: {attempts} attempts for 2,000 calls");

    let report = registry.reload_toml(off).unwrap();
    assert!(report.to_string().contains("budget on -> none"), "{report}");

    let named = "[operations.\"default_budget::filed\"]\nbudget = \"payments\"\n";
    let error = registry.reload_toml(named).unwrap_err().to_string();
    assert!(error.contains(":2:10") && error.contains("`budget` can only be \"none\" here"), "{error}");
}
