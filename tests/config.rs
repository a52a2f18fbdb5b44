//! The configuration file: loading, errors that say where, atomic reloads
//! that keep every guard's state, per-operation overrides that cannot break
//! a compile-time promise, and `check()` catching a misspelt guard name.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use stormproof::policy::{SettingSource, SettingSources};

use stormproof::{
    Classify, ErrorClass, Registry, Rejection,
    breaker::{BreakerState, Outcome},
    budget::TokenBucket,
    resilient,
};
use tokio::time::{Instant, sleep};

#[derive(Debug, Clone, PartialEq)]
enum Fault {
    Down,
    Rejected(Rejection),
}

impl Classify for Fault {
    fn classify(&self) -> ErrorClass {
        match self {
            Fault::Down => ErrorClass::Transient,
            Fault::Rejected(rejection) => rejection.classify(),
        }
    }
}

impl From<Rejection> for Fault {
    fn from(rejection: Rejection) -> Self {
        Fault::Rejected(rejection)
    }
}

#[path = "config/guards.rs"]
mod guards;

#[path = "config/loading.rs"]
mod loading;

#[path = "config/reading.rs"]
mod reading;

#[path = "config/same_name.rs"]
mod same_name;

/// Held by each test that loads a file into the global registry: a reload
/// there replaces every override, another test's too.
static GLOBAL_OVERRIDES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[cfg(feature = "redis")]
#[path = "config/fleet.rs"]
mod fleet;

#[cfg(not(feature = "redis"))]
#[path = "config/no_fleet.rs"]
mod no_fleet;

/// The fleet tests' `redis-server` (a free loopback port, no persistence).
#[cfg(feature = "redis")]
#[allow(dead_code)]
#[path = "../retry-fleet/tests/fleet/server.rs"]
mod server;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

const FILE: &str = r#"
[breakers.payment]
failure_threshold = 8
open_for_ms = 5_000

[budgets.payment]
capacity = 50

[bulkheads.payment]
max_concurrent = 32
max_wait_ms = 100
"#;

#[test]
fn a_file_declares_its_guards() {
    let registry = Registry::new();
    registry.load_toml(FILE).unwrap();
    let breaker = registry.breaker("payment").unwrap().config();
    assert_eq!((breaker.failure_threshold, breaker.open_for), (8, ms(5_000)));
    assert_eq!(breaker.window, Duration::from_secs(10), "keys left out take the defaults");
    assert_eq!(
        registry.budget("payment").unwrap().config(),
        TokenBucket { capacity: 50, ..Default::default() }.into()
    );
    let bulkhead = registry.bulkhead("payment").unwrap().config();
    assert_eq!((bulkhead.max_concurrent, bulkhead.max_wait), (32, Some(ms(100))));
}

#[test]
fn a_file_is_read_from_disk_and_its_errors_name_it() {
    let dir = std::env::temp_dir().join(format!("stormproof-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("stormproof.toml");
    std::fs::write(&path, "[breakers.payment]\nfailure_threshold = 0\n").unwrap();
    let err = Registry::new().load_file(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}:2:21: `failure_threshold` must be greater than zero", path.display())
    );
    std::fs::write(&path, FILE).unwrap();
    Registry::new().load_file(&path).unwrap();
    let missing = Registry::new().load_file(dir.join("absent.toml")).unwrap_err();
    let absent = dir.join("absent.toml");
    assert!(
        missing.to_string().starts_with(&format!("{}: cannot read the file: ", absent.display())),
        "no line and column for a file that could not be read: {missing}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The one line of a file's error.
fn error(text: &str) -> String {
    Registry::new().load_toml(text).unwrap_err().to_string()
}

#[test]
fn every_error_says_file_line_column_field_and_what_is_wrong() {
    assert_eq!(
        error("[breakers.a]\nfailure_threshold = 0"),
        "<toml>:2:21: `failure_threshold` must be greater than zero"
    );
    assert_eq!(error("[budgets.a]\ncapacity = -3"), "<toml>:2:12: `capacity` must not be negative, got -3");
    assert_eq!(
        error("[budgets.a]\ncapacity = \"50\""),
        "<toml>:2:12: `capacity` must be an integer, like `capacity = 100`"
    );
    assert_eq!(
        error("[budgets.a]\ncapacity = 4294967296"),
        "<toml>:2:12: `capacity` must be at most 4294967295, got 4294967296"
    );
    assert_eq!(
        error("[budgets.a]\ncapacity = 2\nretry_cost = 3"),
        "<toml>:3:14: `retry_cost` must not exceed `capacity` (2), got 3"
    );
    assert_eq!(
        error("[breakers.a]\nfailure_rate_percent = 101"),
        "<toml>:2:24: `failure_rate_percent` must be at most 100, got 101"
    );
    assert_eq!(
        error("[bulkheads.a]\nmax_concurrent = 0"),
        "<toml>:2:18: `max_concurrent` must be greater than zero"
    );
    assert_eq!(
        error("[operations.\"x\"]\njitter = \"gaussian\""),
        r#"<toml>:2:10: `jitter` must be one of: "full", "equal", "decorrelated", "none""#
    );
    assert_eq!(
        error("[operations.\"x\"]\nbase_ms = 200\ncap_ms = 100"),
        "<toml>:2:11: `base_ms` must not exceed `cap_ms` (200 > 100)"
    );
    assert_eq!(
        error("[breakers.a\nfailure_threshold = 1"),
        "<toml>:1:12: not valid TOML: unclosed table, expected `]`"
    );
}

/// A key's maximum is a value it takes, not the first it refuses.
#[test]
fn a_value_of_exactly_a_keys_maximum_is_taken() {
    let registry = Registry::new();
    registry
        .load_toml("[budgets.a]\ncapacity = 4294967295\n[breakers.a]\nfailure_rate_percent = 100")
        .unwrap();
    assert!(registry.budget("a").is_some() && registry.breaker("a").is_some());
    let loaded = Registry::new().load_toml("[operations.\"x\"]\ncap_ms = 18446744073709551615");
    assert!(loaded.is_ok(), "the largest number of milliseconds: {loaded:?}");
}

/// A `max_wait_ms` longer than a guard counts (past u64::MAX nanoseconds,
/// about 584 years) is kept as the longest wait it counts: "wait without
/// end" in a file, where leaving the key out means no wait for a rate
/// limit. The file reloaded unchanged changes nothing, and says so: the
/// report compares what the guards keep.
#[test]
fn a_file_with_a_max_wait_past_584_years_reloaded_unchanged_reports_no_change() {
    let dir = std::env::temp_dir().join(format!("stormproof-config-max-wait-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("stormproof.toml");
    let forever = 20_000_000_000_000_u64; // milliseconds: about 634 years
    let file =
        format!("[bulkheads.db]\nmax_wait_ms = {forever}\n[rate_limits.api]\nmax_wait_ms = {forever}\n");
    std::fs::write(&path, &file).unwrap();
    let registry = Registry::new();
    registry.load_file(&path).unwrap();
    let longest = Some(Duration::from_nanos(u64::MAX - 1));
    assert_eq!(registry.bulkhead("db").unwrap().config().max_wait, longest);
    assert_eq!(registry.rate_limit("api").unwrap().config().max_wait, longest);
    for reload in 1..=2 {
        let report = registry.reload_file(&path).unwrap();
        assert!(report.is_empty(), "reload {reload} of the unchanged file: {report}");
    }
    // A real change is still reported, as what the guard keeps.
    std::fs::write(&path, file.replacen(&forever.to_string(), "100", 1)).unwrap();
    let report = registry.reload_file(&path).unwrap();
    assert_eq!(report.to_string(), "bulkhead `db`: max_wait_ms 18446744073709 -> 100");
    std::fs::write(&path, &file).unwrap();
    let report = registry.reload_file(&path).unwrap();
    assert_eq!(report.to_string(), "bulkhead `db`: max_wait_ms 100 -> 18446744073709");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unknown_key_gets_the_closest_known_key() {
    let message = error("[breakers.payment]\nfailur_threshold = 3");
    assert!(
        message.starts_with(
            "<toml>:2:1: `failur_threshold` is not a key here; did you mean `failure_threshold`?"
        ),
        "{message}"
    );
    let message = error("[breaker.payment]\nfailure_threshold = 3");
    assert!(
        message.starts_with("<toml>:1:2: `breaker` is not a section; did you mean `breakers`?"),
        "{message}"
    );
    assert_eq!(error("breakers = 3"), "<toml>:1:12: `breakers` must hold tables, like `[breakers.payment]`");
}

#[test]
fn all_problems_are_reported_together_and_nothing_is_applied() {
    let registry = Registry::new();
    registry.load_toml(FILE).unwrap();
    let bad = "[breakers.payment]\nfailure_threshold = 2\n\n[budgets.payment]\ncapacity = 0\n\n[bulkheads.other]\nmax_concurrent = -1\n";
    let err = registry.reload_toml(bad).unwrap_err();
    assert_eq!(err.problems.len(), 2, "{err}");
    assert_eq!((err.problems[0].line, err.problems[1].line), (5, 8));
    assert_eq!(
        registry.breaker("payment").unwrap().config().failure_threshold,
        8,
        "the good table was not applied"
    );
    assert!(registry.bulkhead("other").is_none());
}

/// Every problem of a file in one report, whichever step finds it: the
/// values parse cannot read, and what only the registry and the compiled
/// functions can judge. A file with three problems of its own used to be
/// refused before its `max_attempts = 0` was checked (issue 43).
#[test]
fn every_problem_of_a_file_is_reported_at_once_whichever_step_finds_it() {
    let registry = Registry::new();
    registry.load_toml(FILE).unwrap();
    let text = "[breakers.a]\nfailure_threshold = 0\n[budgets.b]\ncapacity = -1\n[bulkheads.c]\nmax_concurent = 3\n[breakers.payment]\n[operations.\"config::overridable\"]\nmax_attempts = 0\n";
    let err = registry.load_toml(text).unwrap_err();
    let all = err.to_string();
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), 5, "{err}");
    assert_eq!(lines[0], "<toml>:2:21: `failure_threshold` must be greater than zero");
    assert_eq!(lines[1], "<toml>:4:12: `capacity` must not be negative, got -1");
    assert!(
        lines[2].starts_with("<toml>:6:1: `max_concurent` is not a key here; did you mean `max_concurrent`?"),
        "{err}"
    );
    assert_eq!(
        lines[3],
        "<toml>:7:11: breaker `payment` already exists: loading declares, use reload to change it"
    );
    assert_eq!(lines[4], "<toml>:9:16: `max_attempts` must be in 1..=100, got 0");
    assert!(registry.breaker("a").is_none() && registry.bulkhead("c").is_none(), "nothing applied");
}

/// A table with a value that cannot be read is said once, and not judged
/// further: the check of the rest would take the compiled function's
/// `base_ms` (or a guard's default) for the file's and blame it.
#[test]
fn a_value_that_cannot_be_read_is_said_once_and_nothing_false_after_it() {
    assert_eq!(
        error("[operations.\"config::overridable\"]\nbase_ms = \"soon\"\ncap_ms = 0"),
        "<toml>:2:11: `base_ms` must be an integer, like `base_ms = 100`"
    );
    assert_eq!(
        error("[operations.\"config::once\"]\njitter = \"gaussian\"\nmax_attempts = 3"),
        r#"<toml>:2:10: `jitter` must be one of: "full", "equal", "decorrelated", "none""#
    );
    // Alone, each of those is a problem the check finds.
    assert_eq!(
        error("[operations.\"config::overridable\"]\ncap_ms = 0"),
        "<toml>:2:10: `base_ms` must not exceed `cap_ms` (1 > 0)"
    );
    assert!(error("[operations.\"config::once\"]\nmax_attempts = 3").contains("has no retry loop"));
}

#[test]
fn loading_refuses_a_guard_that_exists_and_reloading_changes_it() {
    let registry = Registry::new();
    registry.load_toml(FILE).unwrap();
    let err = registry.load_toml(FILE).unwrap_err();
    assert!(
        err.to_string()
            .contains("breaker `payment` already exists: loading declares, use reload to change it"),
        "{err}"
    );
    let report =
        registry.reload_toml(&FILE.replace("failure_threshold = 8", "failure_threshold = 3")).unwrap();
    assert_eq!(report.to_string(), "breaker `payment`: failure_threshold 8 -> 3");
    assert!(
        registry
            .reload_toml(&FILE.replace("failure_threshold = 8", "failure_threshold = 3"))
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(start_paused = true)]
async fn a_reload_keeps_an_open_breaker_open_and_recomputes_its_end() {
    let registry = Registry::new();
    registry.load_toml("[breakers.db]\nfailure_threshold = 1\nopen_for_ms = 30_000").unwrap();
    let breaker = registry.breaker("db").unwrap();
    breaker.try_acquire().unwrap().record(Outcome::Failure);
    sleep(ms(2_000)).await;
    let report = registry.reload_toml("[breakers.db]\nfailure_threshold = 1\nopen_for_ms = 5_000").unwrap();
    assert_eq!(report.to_string(), "breaker `db`: open_for_ms 30000 -> 5000");
    assert_eq!(breaker.state(), BreakerState::Open, "still open after the reload");
    assert_eq!(breaker.remaining_open(), Some(ms(3_000)), "5 s from when it opened, 2 s ago");
    sleep(ms(3_000)).await;
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
}

/// `max_open_for_ms` bounds the doubling of the open period by failed
/// probes; a reload that lowers it shortens the period in force, counted
/// from when the breaker opened (as a new `open_for_ms` does).
#[tokio::test(start_paused = true)]
async fn a_file_bounds_the_open_periods_growth_and_a_reload_moves_it() {
    let registry = Registry::new();
    let text = "[breakers.db]\nfailure_threshold = 1\nopen_for_ms = 1_000\nmax_open_for_ms = 8_000";
    registry.load_toml(text).unwrap();
    let breaker = registry.breaker("db").unwrap();
    assert_eq!(breaker.config().max_open_for, ms(8_000));
    breaker.try_acquire().unwrap().record(Outcome::Failure);
    for period in [2_000, 4_000, 8_000, 8_000] {
        sleep(breaker.remaining_open().unwrap()).await;
        breaker.try_acquire().expect("a probe").record(Outcome::Failure);
        assert_eq!(breaker.remaining_open(), Some(ms(period)), "a failed probe doubles it, up to 8 s");
    }
    sleep(ms(1_000)).await;
    let lower = "[breakers.db]\nfailure_threshold = 1\nopen_for_ms = 1_000\nmax_open_for_ms = 3_000";
    let report = registry.reload_toml(lower).unwrap();
    assert_eq!(report.to_string(), "breaker `db`: max_open_for_ms 8000 -> 3000");
    assert_eq!(breaker.remaining_open(), Some(ms(2_000)), "3 s from when it opened, 1 s ago");
}

#[tokio::test(start_paused = true)]
async fn a_reload_keeps_the_failure_history_and_judges_it_by_the_new_threshold() {
    let registry = Registry::new();
    registry.load_toml("[breakers.db]\nfailure_threshold = 5").unwrap();
    let breaker = registry.breaker("db").unwrap();
    for _ in 0..3 {
        breaker.try_acquire().unwrap().record(Outcome::Failure);
    }
    registry.reload_toml("[breakers.db]\nfailure_threshold = 4").unwrap();
    assert_eq!(breaker.state(), BreakerState::Closed, "judged at the next event");
    breaker.try_acquire().unwrap().record(Outcome::Failure);
    assert_eq!(breaker.state(), BreakerState::Open, "3 kept + 1 new reach the new threshold of 4");
}

#[test]
fn a_reload_keeps_budget_tokens_clamped_to_a_new_capacity() {
    let registry = Registry::new();
    registry.load_toml("[budgets.api]\ncapacity = 10").unwrap();
    let budget = registry.budget("api").unwrap();
    for _ in 0..3 {
        assert!(budget.try_withdraw());
    }
    registry.reload_toml("[budgets.api]\ncapacity = 20").unwrap();
    assert_eq!(budget.available(), 7, "tokens kept");
    registry.reload_toml("[budgets.api]\ncapacity = 4").unwrap();
    assert_eq!(budget.available(), 4, "clamped");
}

#[tokio::test(start_paused = true)]
async fn a_bulkhead_shrunk_under_load_loses_no_permit() {
    let registry = Registry::new();
    registry.load_toml("[bulkheads.pool]\nmax_concurrent = 4").unwrap();
    let bulkhead = registry.bulkhead("pool").unwrap();
    let held: Vec<_> = futures_like_acquire(&bulkhead, 4).await;
    registry.reload_toml("[bulkheads.pool]\nmax_concurrent = 2").unwrap();
    assert_eq!(bulkhead.in_use(), 4, "nobody was evicted");
    drop(held);
    assert_eq!(bulkhead.in_use(), 0);
    let again = futures_like_acquire(&bulkhead, 2).await;
    assert!(bulkhead.try_acquire().is_none(), "the new limit of 2 holds");
    drop(again);
    registry.reload_toml("[bulkheads.pool]\nmax_concurrent = 3").unwrap();
    let grown = futures_like_acquire(&bulkhead, 3).await;
    assert!(bulkhead.try_acquire().is_none());
    drop(grown);
    assert_eq!(bulkhead.in_use(), 0);
}

async fn futures_like_acquire(
    bulkhead: &stormproof::bulkhead::Bulkhead,
    n: usize,
) -> Vec<stormproof::bulkhead::BulkheadPermit<'_>> {
    let mut permits = Vec::new();
    for _ in 0..n {
        permits.push(bulkhead.acquire().await.unwrap());
    }
    permits
}

// ---------------------------------------------------------------------------
// Per-operation overrides

#[resilient(name = "config::overridable", max_attempts = 2, base_ms = 1, jitter = "none")]
async fn overridable(calls: &AtomicU32) -> Result<(), Fault> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Fault::Down)
}

#[resilient(name = "config::once", max_attempts = 1)]
#[expect(dead_code, reason = "declared for its configuration entry, never called")]
async fn once() -> Result<(), Fault> {
    Err(Fault::Down)
}

#[resilient(name = "config::charge", idempotent = false, max_attempts = 1)]
#[expect(dead_code, reason = "declared for its configuration entry, never called")]
async fn charge() -> Result<(), Fault> {
    Err(Fault::Down)
}

#[tokio::test(start_paused = true)]
async fn an_override_applies_from_the_next_call_and_its_removal_too() {
    let registry = Registry::new();
    let calls = AtomicU32::new(0);
    let _ = registry.scope(overridable(&calls)).await;
    assert_eq!(calls.swap(0, Ordering::SeqCst), 2, "compiled: 2 attempts");
    let report = registry
        .reload_toml("[operations.\"config::overridable\"]\nmax_attempts = 5\nbase_ms = 100")
        .unwrap();
    assert_eq!(report.to_string(), "operation `config::overridable`: max_attempts 2 -> 5, base_ms 1 -> 100");
    let start = Instant::now();
    let _ = registry.scope(overridable(&calls)).await;
    assert_eq!(calls.swap(0, Ordering::SeqCst), 5);
    assert_eq!(start.elapsed(), ms(100 + 200 + 400 + 800), "the overridden backoff");
    let _ = overridable(&calls).await;
    assert_eq!(calls.swap(0, Ordering::SeqCst), 2, "outside the registry that holds it, no override");
    let report = registry.reload_toml("").unwrap();
    assert_eq!(report.to_string(), "operation `config::overridable`: override removed");
    let _ = registry.scope(overridable(&calls)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2, "compiled again");
}

#[resilient(name = "config::tuned", max_attempts = 2, base_ms = 1, jitter = "none", breaker = "payment")]
async fn tuned(calls: &AtomicU32) -> Result<(), Fault> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Fault::Down)
}

/// An override that only tunes the retries leaves the first attempt plain
/// (the runtime's `execution::plain`: through the global registry, without
/// looking the override up); it must still govern the retries once that
/// attempt fails. One that sets a deadline is armed as the call starts.
#[tokio::test(start_paused = true)]
async fn an_override_in_the_global_registry_governs_the_retries_after_a_plain_first_attempt() {
    let _only_this_test = GLOBAL_OVERRIDES.lock().await;
    let breaker = stormproof::breaker::BreakerConfig { failure_threshold: 1_000, ..Default::default() };
    stormproof::registry().declare_breaker("payment", breaker).unwrap();
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let _ = tuned(&calls).await;
    assert_eq!((calls.swap(0, Ordering::SeqCst), start.elapsed()), (2, ms(1)), "compiled");

    let table = "[operations.\"config::tuned\"]\nmax_attempts = 4\nbase_ms = 100\n";
    stormproof::registry().reload_toml(table).unwrap();
    let info = tuned_info();
    assert_eq!((info.settings.max_attempts, info.effective.max_attempts), (2, 4), "compiled, and in effect");
    assert_eq!(info.effective.backoff.base, ms(100));
    let at = |line| SettingSource::File { file: "<toml>".into(), line };
    assert_eq!((info.sources.max_attempts.clone(), info.sources.base.clone()), (at(2), at(3)));
    assert_eq!(info.sources.cap, SettingSource::Compiled, "a key the table leaves out");
    assert_eq!(info.sources.base.to_string(), "<toml>:3");
    let start = Instant::now();
    let _ = tuned(&calls).await;
    assert_eq!(calls.swap(0, Ordering::SeqCst), 4, "the override's attempts");
    assert_eq!(start.elapsed(), ms(100 + 200 + 400), "the override's backoff");

    stormproof::registry().reload_toml(&format!("{table}deadline_ms = 250\n")).unwrap();
    let start = Instant::now();
    let _ = tuned(&calls).await;
    assert_eq!(
        calls.swap(0, Ordering::SeqCst),
        2,
        "the deadline, armed at the start, leaves no time for a third"
    );
    assert_eq!(start.elapsed(), ms(100), "it ends the call before the 200 ms wait");

    // Another registry's override, not in effect here, neither takes the
    // global one's away when it goes, nor stands in for it once the global
    // one's has gone (it keeps the operation looked up all the same).
    let elsewhere = Registry::new();
    elsewhere.load_toml(table).unwrap();
    elsewhere.reload_toml("").unwrap();
    let start = Instant::now();
    let _ = tuned(&calls).await;
    let still = (calls.swap(0, Ordering::SeqCst), start.elapsed());
    assert_eq!(still, (2, ms(100)), "the global registry's deadline, still");
    elsewhere.reload_toml(table).unwrap();
    stormproof::registry().reload_toml("").unwrap();
    let start = Instant::now();
    let _ = tuned(&calls).await;
    assert_eq!((calls.load(Ordering::SeqCst), start.elapsed()), (2, ms(1)), "compiled again");
    let info = tuned_info();
    assert_eq!((info.effective, info.sources), (info.settings, SettingSources::COMPILED), "compiled again");
    drop(elsewhere);
}

/// What `operations()` says of `config::tuned`.
fn tuned_info() -> stormproof::OperationInfo {
    stormproof::operations().into_iter().find(|op| op.name == "config::tuned").expect("linked")
}

#[test]
fn an_override_cannot_give_retries_to_a_function_without_a_retry_loop() {
    let err = error("[operations.\"config::once\"]\nmax_attempts = 3");
    assert_eq!(
        err,
        "<toml>:2:16: `config::once` was compiled with `max_attempts = 1`: it has no retry loop, so it cannot be given retries"
    );
}

#[test]
fn an_override_cannot_retry_a_non_idempotent_operation_without_a_key() {
    let err = error("[operations.\"config::charge\"]\nmax_attempts = 3");
    assert!(err.contains("`config::charge` is declared `idempotent = false` without a `key`"), "{err}");
    Registry::new().load_toml("[operations.\"config::charge\"]\ndeadline_ms = 500").unwrap();
}

#[test]
fn an_override_passes_the_attributes_checks() {
    let err = error("[operations.\"config::overridable\"]\nattempt_timeout_ms = 500\ndeadline_ms = 500");
    assert!(err.starts_with("<toml>:2:22: `attempt_timeout_ms` must be less than `deadline_ms`"), "{err}");
    let err = error("[operations.\"config::overridable\"]\nmax_attempts = 0");
    assert_eq!(err, "<toml>:2:16: `max_attempts` must be in 1..=100, got 0");
}

// ---------------------------------------------------------------------------
// check()

#[resilient(name = "config::misspelt", breaker = "paymnet", budget = "payment")]
#[expect(dead_code, reason = "declared for `Registry::check` to find, never called")]
async fn misspelt() -> Result<(), Fault> {
    Ok(())
}

#[resilient(
    name = "config::guarded",
    max_attempts = 3,
    breaker = "payment",
    budget = "payment",
    bulkhead = "payment"
)]
async fn guarded(calls: Arc<AtomicU32>) -> Result<(), Fault> {
    calls.fetch_add(1, Ordering::SeqCst);
    tokio::task::yield_now().await;
    Ok(())
}

#[test]
fn check_finds_a_misspelt_guard_name_and_suggests_the_declared_one() {
    let registry = Registry::new();
    registry.load_toml(FILE).unwrap();
    let report = registry.check();
    assert!(!report.is_clean());
    let text = report.to_string();
    assert!(
        text.contains(
            "breaker `paymnet` used by `config::misspelt` is not declared; did you mean `payment`?"
        ),
        "{text}"
    );
    let names = stormproof::operations().into_iter().map(|o| o.name).collect::<Vec<_>>();
    assert!(
        names.contains(&"config::misspelt".to_owned()) && names.contains(&"config::guarded".to_owned()),
        "{names:?}"
    );
}

#[test]
fn check_is_clean_when_every_name_is_declared_used_and_every_operation_exists() {
    let registry = Registry::new();
    registry
        .load_toml(&format!(
            "{FILE}\n[breakers.paymnet]\n\n[operations.\"config::overridable\"]\nmax_attempts = 3\n"
        ))
        .unwrap();
    let report = registry.check();
    assert!(report.is_clean(), "{report}");
    registry
        .reload_toml(&format!(
            "{FILE}\n[breakers.paymnet]\n[breakers.spare]\n[operations.\"config::nowhere\"]\n"
        ))
        .unwrap();
    let report = registry.check().to_string();
    assert!(report.contains("breaker `spare` is declared but nothing uses it"), "{report}");
    assert!(
        report.contains("operation `config::nowhere` is configured but no #[resilient] fn has that name"),
        "{report}"
    );
}

// ---------------------------------------------------------------------------
// Reloads racing calls

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_racing_calls_lose_no_permit_and_never_panic() {
    let registry = Registry::new();
    registry.load_toml(FILE).unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (registry, calls) = (registry.clone(), calls.clone());
        tasks.spawn(async move {
            for _ in 0..500 {
                registry.scope(guarded(calls.clone())).await.unwrap();
            }
        });
    }
    for round in 0..200u32 {
        let size = 1 + round % 7;
        let capacity = 10 + round % 40;
        let text = format!(
            "[bulkheads.payment]\nmax_concurrent = {size}\n[budgets.payment]\ncapacity = {capacity}\n[breakers.payment]\nfailure_threshold = {}",
            1 + round % 9
        );
        registry.reload_toml(&text).unwrap();
        tokio::task::yield_now().await;
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("no call panicked");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 8 * 500);
    let bulkhead = registry.bulkhead("payment").unwrap();
    assert_eq!(bulkhead.in_use(), 0, "every permit came back");
    let limit = bulkhead.config().max_concurrent as usize;
    let permits = futures_like_acquire(&bulkhead, limit).await;
    assert!(bulkhead.try_acquire().is_none(), "exactly the configured limit is free: none lost, none extra");
    drop(permits);
}

#[test]
fn a_budget_table_gives_one_form_and_a_reload_keeps_it() {
    let registry = Registry::new();
    registry.load_toml("[budgets.api]\nratio = 0.2\nwindow_ms = 5_000\nmin_per_sec = 1").unwrap();
    let ratio = stormproof::budget::RatioBudget { ratio: 0.2, window: ms(5_000), min_per_sec: 1 };
    assert_eq!(registry.budget("api").unwrap().config(), ratio.into());
    assert_eq!(
        error("[budgets.api]\nratio = 0.2\ncapacity = 5"),
        "<toml>:3:1: `capacity` is a token bucket's key, but this budget also has a ratio budget's keys (`ratio`, `window_ms`, `min_per_sec`): give one form's keys"
    );
    assert_eq!(
        error("[budgets.api]\nratio = \"high\""),
        "<toml>:2:9: `ratio` must be a number, like `ratio = 0.1`"
    );
    let err = registry.reload_toml("[budgets.api]\ncapacity = 5").unwrap_err().to_string();
    assert_eq!(
        err,
        "<toml>:1:10: budget `api` is a ratio budget: a reload cannot make it a token_bucket budget, its state would be lost (restart to change it)"
    );
    let report =
        registry.reload_toml("[budgets.api]\nratio = 0.5\nwindow_ms = 5_000\nmin_per_sec = 1").unwrap();
    assert_eq!(report.to_string(), "budget `api`: ratio 0.2 -> 0.5");
}
