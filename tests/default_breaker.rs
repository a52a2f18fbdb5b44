//! Safe by default (issue 45, item 5): every operation has its own circuit
//! breaker unless it names one or says `breaker = "none"`, so that a plain
//! `#[resilient(max_attempts = 4, base_ms = 100)]` stops sending calls to a
//! dependency that is down (or so slow that every attempt times out), and
//! the queue behind it can drain. Its own breaker is the registry's breaker
//! named after the operation, with `BreakerConfig::per_operation`'s
//! settings: open when half of the last 100 attempts failed, 1 s open
//! periods doubling while probes fail. A dependency that fails now and
//! then is never cut off. On tokio's paused clock, each test in its own
//! registry.

use std::io::{Error as IoError, ErrorKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use stormproof::breaker::{BreakerConfig, BreakerState, NO_BREAKER};
use stormproof::{Error, GuardKind, Policy, Registry, Rejection, resilient};
use tokio::time::Instant;

/// The dependency: whether it is up, how often it fails when up (in
/// thousandths, drawn by hashing the request's number: the same draws on
/// every run), and the requests that reached it.
struct Dependency {
    up: AtomicBool,
    failing_per_mille: u32,
    sent: AtomicU32,
}

impl Dependency {
    fn new(up: bool, failing_per_mille: u32) -> Arc<Self> {
        Arc::new(Dependency { up: AtomicBool::new(up), failing_per_mille, sent: AtomicU32::new(0) })
    }

    fn answer(&self) -> Result<(), Error<IoError>> {
        let request = self.sent.fetch_add(1, Ordering::SeqCst);
        let unlucky = splitmix64(u64::from(request)) % 1_000 < u64::from(self.failing_per_mille);
        if self.up.load(Ordering::SeqCst) && !unlucky {
            Ok(())
        } else {
            Err(IoError::from(ErrorKind::ConnectionReset))?
        }
    }
}

/// A well-mixed hash of `n` (SplitMix64's finaliser): uniform draws from
/// a counter.
fn splitmix64(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The README's first example: nothing named, so its own breaker and budget.
#[resilient(max_attempts = 4, base_ms = 100, name = "default_breaker::plain")]
async fn plain(dependency: Arc<Dependency>) -> Result<(), Error<IoError>> {
    dependency.answer()
}

/// The same with its breaker off: the budget alone.
#[resilient(max_attempts = 4, base_ms = 100, breaker = "none")]
async fn without_breaker(dependency: Arc<Dependency>) -> Result<(), Error<IoError>> {
    dependency.answer()
}

/// 2,000 calls, one every 500 us (2,000 a second, open loop), in
/// `registry`, all run to their end; the requests that reached the
/// dependency, and how many calls an open breaker refused.
async fn crowd<F>(
    registry: &Registry,
    dependency: &Arc<Dependency>,
    call: fn(Arc<Dependency>) -> F,
) -> (u32, u32)
where
    F: Future<Output = Result<(), Error<IoError>>> + Send + 'static,
{
    let mut calls = tokio::task::JoinSet::new();
    let before = dependency.sent.load(Ordering::SeqCst);
    for _ in 0..2_000 {
        calls.spawn(registry.scope(call(dependency.clone())));
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    let mut refused = 0;
    while let Some(result) = calls.join_next().await {
        if let Err(Error::Rejected(Rejection::CircuitOpen { .. })) = result.expect("no panic") {
            refused += 1;
        }
    }
    (dependency.sent.load(Ordering::SeqCst) - before, refused)
}

/// A dependency that is down: the budget alone lets the calls and a tenth
/// more through (2,300 of 2,000); the operation's own breaker opens once
/// half of the last 100 attempts failed and refuses the rest, so the
/// dependency sees about a twentieth of the calls.
#[tokio::test(start_paused = true)]
async fn a_plain_attribute_spares_a_dependency_that_is_down() {
    let down = Dependency::new(false, 0);
    let (budget_alone, refused) = crowd(&Registry::new(), &down, without_breaker).await;
    assert!((2_000..=2_300).contains(&budget_alone), "breaker = \"none\": {budget_alone} requests");
    assert_eq!(refused, 0, "no breaker, no refusal");

    let registry = Registry::new();
    let (sent, refused) = crowd(&registry, &down, plain).await;
    // 100 attempts to judge, then a probe at the end of each open period.
    assert!(sent <= 100 + 10, "{sent} requests for 2,000 calls");
    assert!(refused >= 1_900, "the open breaker refused {refused} calls");
    let breaker = registry.breaker("default_breaker::plain").expect("the operation's own, named after it");
    assert_eq!(breaker.config(), BreakerConfig::per_operation());
    assert_ne!(breaker.state(), BreakerState::Closed);
}

/// One attempt in five fails (seeded draws): the retries and the budget are
/// for that. The breaker never opens, and no call is refused.
#[tokio::test(start_paused = true)]
async fn a_dependency_that_fails_now_and_then_is_never_cut_off() {
    let registry = Registry::new();
    let flaky = Dependency::new(true, 200);
    for _ in 0..5 {
        let (sent, refused) = crowd(&registry, &flaky, plain).await;
        assert_eq!(refused, 0, "a refusal with {sent} requests sent");
    }
    let breaker = registry.breaker("default_breaker::plain").unwrap();
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// Down for 3 s under 200 calls a second, then up: the breaker opens within
/// the first tenth of a second, probes at 1, 2, 4 s periods, and lets the
/// recovered dependency back at its next probe: every call succeeds again
/// within 2 s of the recovery.
#[tokio::test(start_paused = true)]
async fn a_recovered_dependency_is_let_back_within_two_seconds() {
    let registry = Registry::new();
    let dependency = Dependency::new(false, 0);
    let start = Instant::now();
    let recovery = Duration::from_secs(3);
    let mut calls = tokio::task::JoinSet::new();
    while start.elapsed() < recovery + Duration::from_secs(5) {
        let began = start.elapsed();
        dependency.up.store(began >= recovery, Ordering::SeqCst);
        let call = registry.scope(plain(dependency.clone()));
        calls.spawn(async move { (began, call.await) });
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (mut last_failure, mut refused_while_down) = (Duration::ZERO, 0);
    while let Some(ended) = calls.join_next().await {
        match ended.expect("no panic") {
            (_, Ok(())) => {}
            (began, Err(Error::Rejected(Rejection::CircuitOpen { .. }))) if began < recovery => {
                refused_while_down += 1
            }
            (began, Err(_)) => last_failure = last_failure.max(began),
        }
    }
    assert!(refused_while_down >= 500, "the breaker refused {refused_while_down} calls of 600 in the outage");
    let back = last_failure.saturating_sub(recovery);
    assert!(back <= Duration::from_secs(2), "the last failed call began {back:?} after the recovery");
}

/// The operation's own breaker is a breaker like any other: declared under
/// the operation's name it takes those settings; a builder's policy has
/// one, named after the policy; `breaker = "none"` has none; and it is made
/// quietly: the start-up check does not report it as undeclared.
#[tokio::test(start_paused = true)]
async fn the_operations_own_breaker_is_the_breaker_named_after_it() {
    let registry = Registry::new();
    let hair_trigger = BreakerConfig { failure_threshold: 1, ..Default::default() };
    registry.declare_breaker("default_breaker::plain", hair_trigger).unwrap();
    let down = Dependency::new(false, 0);
    assert!(registry.scope(plain(down.clone())).await.is_err());
    assert_eq!(down.sent.load(Ordering::SeqCst), 1, "one failure opened the declared breaker");

    let policy = Policy::builder().name("orders").max_attempts(1).build().unwrap();
    assert_eq!((policy.guard_name(GuardKind::Breaker), policy.has_default_breaker()), (Some("orders"), true));
    let failing = || async { Err::<(), _>(IoError::from(ErrorKind::ConnectionReset)) };
    for _ in 0..100 {
        let _ = registry.scope(policy.run(failing)).await;
    }
    let open = registry.scope(policy.run(failing)).await.unwrap_err();
    assert!(open.to_string().contains("circuit breaker `orders` is open"), "{open}");
    let none = Policy::builder().name("orders").max_attempts(1).breaker(NO_BREAKER).build().unwrap();
    assert_eq!(none.guard_name(GuardKind::Breaker), None);
    assert!(registry.scope(none.run(failing)).await.unwrap_err().kind() == ErrorKind::ConnectionReset);

    let report = registry.check();
    assert!(report.undeclared.iter().all(|u| u.name != "orders"), "{report}");
}

/// A configuration file turns an operation's breaker off without a rebuild
/// (`breaker = "none"` in its `[operations."..."]` table) and back on when
/// the key goes; the reload says so; any other value is refused at the key.
/// Off, the budget alone governs a dead dependency (as with the attribute's
/// `breaker = "none"`) and nothing is refused; back on, the breaker, which
/// heard nothing meanwhile, opens on the next crowd as it would have.
#[tokio::test(start_paused = true)]
async fn a_file_turns_an_operations_breaker_off_and_on() {
    let registry = Registry::new();
    let off = "[operations.\"default_breaker::plain\"]\nmax_attempts = 4\nbreaker = \"none\"\n";
    let on = "[operations.\"default_breaker::plain\"]\nmax_attempts = 4\n";
    registry.load_toml(off).unwrap();
    let down = Dependency::new(false, 0);
    let (sent, refused) = crowd(&registry, &down, plain).await;
    assert!((2_000..=2_300).contains(&sent), "the file's breaker = \"none\": {sent} requests");
    assert_eq!(refused, 0, "no breaker asked, no refusal");
    let breaker = registry.breaker("default_breaker::plain");
    assert!(breaker.is_none_or(|b| b.state() == BreakerState::Closed), "it heard none of the failures");

    let report = registry.reload_toml(on).unwrap();
    assert!(report.to_string().contains("breaker none -> on"), "{report}");
    let (sent, refused) = crowd(&registry, &down, plain).await;
    assert!(sent <= 100 + 10, "the breaker is back: {sent} requests for 2,000 calls");
    assert!(refused >= 1_900, "the open breaker refused {refused} calls");

    let report = registry.reload_toml(off).unwrap();
    assert!(report.to_string().contains("breaker on -> none"), "{report}");
    let (sent, refused) = crowd(&registry, &down, plain).await;
    assert!(sent >= 2_000 && refused == 0, "off again, though open: {sent} requests, {refused} refused");

    let named = "[operations.\"default_breaker::plain\"]\nbreaker = \"payments\"\n";
    let error = registry.reload_toml(named).unwrap_err().to_string();
    assert!(error.contains(":2:11") && error.contains("`breaker` can only be \"none\" here"), "{error}");
}

/// An operation named only by this test, in the global registry.
#[resilient(max_attempts = 4, base_ms = 100, name = "default_breaker::global")]
async fn global(dependency: Arc<Dependency>) -> Result<(), Error<IoError>> {
    dependency.answer()
}

/// The file's switch in the global registry, where a call may make its
/// first attempt plain: one test, since both of its parts load files into
/// the one global registry (`cargo test` runs a binary's tests on threads
/// of one process).
#[tokio::test(start_paused = true)]
async fn in_the_global_registry_a_file_turns_the_breaker_off_for_every_attempt() {
    a_file_turns_the_breaker_off_for_the_plain_first_attempt_too().await;
    a_reload_during_the_first_attempt_turns_the_breaker_off_for_the_retries().await;
}

/// A call whose function names a breaker may make its first attempt
/// plain: the file's `breaker = "none"` makes it ask none there too (300
/// calls of a dead dependency, no refusal), and the breaker is back once
/// the key goes.
async fn a_file_turns_the_breaker_off_for_the_plain_first_attempt_too() {
    let registry = stormproof::registry();
    let off = "[operations.\"default_breaker::global\"]\nbreaker = \"none\"\n";
    registry.load_toml(off).unwrap();
    let down = Dependency::new(false, 0);
    let refused = async |calls: u32| {
        let mut refused = 0;
        for _ in 0..calls {
            if let Err(Error::Rejected(Rejection::CircuitOpen { .. })) = global(down.clone()).await {
                refused += 1;
            }
        }
        refused
    };
    assert_eq!(refused(300).await, 0, "the file's breaker = \"none\"");
    registry.reload_toml("").unwrap();
    assert!(refused(300).await >= 200, "the breaker is back");
}

/// Attempts of `midway`, and the gate its first attempt waits at.
static MIDWAY_ATTEMPTS: AtomicU32 = AtomicU32::new(0);
static MIDWAY_GATE: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// An operation of this test's own, in the global registry: its first
/// attempt waits at the gate; every attempt fails.
#[resilient(max_attempts = 3, base_ms = 100, name = "default_breaker::midway")]
async fn midway() -> Result<(), Error<IoError>> {
    if MIDWAY_ATTEMPTS.fetch_add(1, Ordering::SeqCst) == 0 {
        MIDWAY_GATE.notified().await;
    }
    Err(IoError::from(ErrorKind::ConnectionReset))?
}

/// A call whose first attempt started plain, with the breaker, when a
/// reload turns the breaker off: its retries run on the new settings, the
/// breaker off, so the breaker (forced open meanwhile) refuses none of them.
async fn a_reload_during_the_first_attempt_turns_the_breaker_off_for_the_retries() {
    let registry = stormproof::registry();
    let call = tokio::spawn(midway());
    while MIDWAY_ATTEMPTS.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    registry.load_toml("[operations.\"default_breaker::midway\"]\nbreaker = \"none\"\n").unwrap();
    registry.breaker("default_breaker::midway").expect("the operation's own").force_open();
    MIDWAY_GATE.notify_one();
    let result = call.await.expect("no panic");
    assert!(matches!(result, Err(Error::Inner(_))), "the last attempt's error, not a refusal: {result:?}");
    assert_eq!(MIDWAY_ATTEMPTS.load(Ordering::SeqCst), 3, "every retry ran");
    registry.reload_toml("").unwrap();
}
