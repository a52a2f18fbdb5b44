//! The plain first attempt: a call through the global registry with at
//! most a breaker, a budget and a bulkhead with a place free, no key, no
//! timeout, no deadline, not nested, has its first attempt awaited on its
//! own, without the step machine (see the runtime's `execution::plain`).
//! What the guards see must be what the step machine would have shown them:
//! a success recorded in the breaker and refilling the budget, a first
//! attempt counted by a ratio budget, a failure recorded and retried after
//! its wait, a refusal (a call whose breaker is not closed is not plain)
//! running nothing and counted once, a bulkhead place held exactly while
//! the attempt runs (not while it waits to retry) and given back however it
//! ends, and a full bulkhead waited for.
//!
//! The guards live in the global registry (a scoped registry's calls are
//! never plain), each test with names of its own.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use stormproof::{
    Classify, ErrorClass, Rejection,
    breaker::{BreakerConfig, BreakerState},
    budget::{RatioBudget, TokenBucket},
    bulkhead::BulkheadConfig,
    registry, resilient,
};
use tokio::time::Instant;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Flaky {
    Down,
    Rejected(Rejection),
}

impl Classify for Flaky {
    fn classify(&self) -> ErrorClass {
        match self {
            Flaky::Down => ErrorClass::Transient,
            Flaky::Rejected(rejection) => rejection.classify(),
        }
    }
}

impl From<Rejection> for Flaky {
    fn from(rejection: Rejection) -> Self {
        Flaky::Rejected(rejection)
    }
}

/// Counts its attempts; the first `failures` of them fail.
struct Dependency {
    attempts: AtomicU32,
    failures: u32,
}

impl Dependency {
    fn failing(failures: u32) -> Self {
        Dependency { attempts: AtomicU32::new(0), failures }
    }

    fn answer(&self) -> Result<u32, Flaky> {
        let attempt = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        if attempt <= self.failures { Err(Flaky::Down) } else { Ok(attempt) }
    }

    fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::SeqCst)
    }
}

#[resilient(budget = "plain-ratio")]
async fn counted(dependency: &Dependency) -> Result<u32, Flaky> {
    dependency.answer()
}

#[tokio::test(start_paused = true)]
async fn a_plain_first_attempt_counts_for_a_ratio_budget() {
    registry().declare_budget("plain-ratio", RatioBudget::default()).unwrap();
    let dependency = Dependency::failing(0);
    for _ in 0..5 {
        counted(&dependency).await.unwrap();
    }
    let budget = registry().budget("plain-ratio").unwrap();
    assert_eq!(budget.totals().first_attempts, 5, "each call's first attempt is counted once");
}

#[resilient(jitter = "none", base_ms = 1, max_attempts = 3, budget = "plain-bucket")]
async fn refilling(dependency: &Dependency) -> Result<u32, Flaky> {
    dependency.answer()
}

#[tokio::test(start_paused = true)]
async fn a_plain_success_puts_a_token_back_and_a_plain_failure_pays_for_its_retry() {
    let bucket = TokenBucket { capacity: 2, retry_cost: 1, refill_per_success: 1 };
    registry().declare_budget("plain-bucket", bucket).unwrap();
    let budget = registry().budget("plain-bucket").unwrap();

    let always_down = Dependency::failing(u32::MAX);
    assert_eq!(refilling(&always_down).await, Err(Flaky::Down));
    assert_eq!(always_down.attempts(), 3, "a plain first attempt, then two paid retries");
    assert_eq!(budget.available(), 0);

    let up = Dependency::failing(0);
    assert_eq!(refilling(&up).await, Ok(1));
    assert_eq!(budget.available(), 1, "the plain success refilled one token");
}

#[resilient(jitter = "none", base_ms = 100, max_attempts = 2, breaker = "plain-breaker")]
async fn guarded(dependency: &Dependency) -> Result<u32, Flaky> {
    dependency.answer()
}

#[tokio::test(start_paused = true)]
async fn a_plain_failure_is_recorded_and_retried_a_refusal_runs_nothing_a_probe_success_closes() {
    let config = BreakerConfig {
        failure_threshold: 3,
        open_for: Duration::from_secs(1),
        success_threshold: 1,
        half_open_max_calls: 1,
        ..Default::default()
    };
    registry().declare_breaker("plain-breaker", config).unwrap();
    let breaker = registry().breaker("plain-breaker").unwrap();
    let down = Dependency::failing(u32::MAX);

    let start = Instant::now();
    assert_eq!(guarded(&down).await, Err(Flaky::Down));
    assert_eq!(down.attempts(), 2, "the failed plain attempt was retried");
    assert_eq!(start.elapsed(), Duration::from_millis(100), "after its backoff, at once");
    assert_eq!(breaker.state(), BreakerState::Closed, "two failures recorded of three");

    assert_eq!(guarded(&down).await, Err(Flaky::Down), "the third failure opens the breaker");
    assert_eq!(down.attempts(), 3, "and the retry is refused, ending the call with its error");
    assert_eq!(breaker.state(), BreakerState::Open);
    let rejections = breaker.totals().rejections;

    let open = Rejection::CircuitOpen { breaker: "plain-breaker".to_owned() };
    assert_eq!(guarded(&down).await, Err(Flaky::Rejected(open)));
    assert_eq!(down.attempts(), 3, "an open breaker refuses the first attempt: nothing runs");
    assert_eq!(
        breaker.totals().rejections,
        rejections + 1,
        "one refusal, counted once (not plain, then refused on the general path)"
    );

    tokio::time::advance(Duration::from_secs(1)).await;
    let up = Dependency::failing(0);
    assert_eq!(guarded(&up).await, Ok(1));
    assert_eq!(breaker.state(), BreakerState::Closed, "the half-open probe's success was recorded");
}

/// The places in use in bulkhead `name` (declared with one place).
fn places_in_use(name: &str) -> usize {
    registry().bulkhead(name).unwrap().in_use()
}

fn one_place(name: &str) {
    let config = BulkheadConfig { max_concurrent: 1, ..Default::default() };
    registry().declare_bulkhead(name, config).unwrap();
}

#[resilient(jitter = "none", base_ms = 100, max_attempts = 2, bulkhead = "plain-place")]
async fn in_a_bulkhead(dependency: &Dependency, in_use: &AtomicUsize) -> Result<u32, Flaky> {
    in_use.store(places_in_use("plain-place"), Ordering::SeqCst);
    dependency.answer()
}

#[tokio::test(start_paused = true)]
async fn a_plain_attempt_holds_its_place_while_it_runs_and_not_while_it_waits_to_retry() {
    one_place("plain-place");
    let in_use = AtomicUsize::new(0);
    assert_eq!(in_a_bulkhead(&Dependency::failing(0), &in_use).await, Ok(1));
    assert_eq!(in_use.load(Ordering::SeqCst), 1, "the plain attempt ran holding the place");
    assert_eq!(places_in_use("plain-place"), 0, "and gave it back as it succeeded");

    let once_down = Dependency::failing(1);
    let start = Instant::now();
    let watch = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        (once_down.attempts(), places_in_use("plain-place"))
    };
    let (answer, (attempts, places)) = tokio::join!(in_a_bulkhead(&once_down, &in_use), watch);
    assert_eq!((attempts, places), (1, 0), "backing off after the failed plain attempt, holding no place");
    assert_eq!(answer, Ok(2));
    assert_eq!(start.elapsed(), Duration::from_millis(100), "retried after its backoff");
    assert_eq!(in_use.load(Ordering::SeqCst), 1, "the retry held the place again");
    assert_eq!(places_in_use("plain-place"), 0);
}

#[resilient(max_attempts = 2, breaker = "plain-place-breaker", bulkhead = "plain-place-refused")]
async fn refused_in_a_bulkhead(dependency: &Dependency) -> Result<u32, Flaky> {
    dependency.answer()
}

#[tokio::test(start_paused = true)]
async fn a_call_its_breaker_refuses_holds_no_place() {
    one_place("plain-place-refused");
    let config =
        BreakerConfig { failure_threshold: 1, open_for: Duration::from_secs(60), ..Default::default() };
    registry().declare_breaker("plain-place-breaker", config).unwrap();
    let down = Dependency::failing(u32::MAX);
    assert_eq!(refused_in_a_bulkhead(&down).await, Err(Flaky::Down), "the failure opens the breaker");
    assert_eq!(places_in_use("plain-place-refused"), 0, "a failed plain attempt gives its place back");

    let open = Rejection::CircuitOpen { breaker: "plain-place-breaker".to_owned() };
    assert_eq!(refused_in_a_bulkhead(&down).await, Err(Flaky::Rejected(open)));
    assert_eq!(down.attempts(), 1, "the refused attempt never ran");
    assert_eq!(places_in_use("plain-place-refused"), 0, "and holds no place");
}

#[resilient(bulkhead = "plain-place-hanging")]
async fn hanging_in_a_bulkhead(ran: &AtomicU32) -> Result<u32, Flaky> {
    ran.fetch_add(1, Ordering::SeqCst);
    std::future::pending::<()>().await;
    Ok(0)
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_plain_attempt_gives_its_place_back_and_a_full_bulkhead_is_waited_for() {
    one_place("plain-place-hanging");
    let ran = AtomicU32::new(0);
    let cancelled = tokio::time::timeout(Duration::from_millis(10), hanging_in_a_bulkhead(&ran)).await;
    assert!(cancelled.is_err(), "the call was cancelled mid-attempt");
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(places_in_use("plain-place-hanging"), 0, "the cancelled plain attempt gave its place back");

    let bulkhead = registry().bulkhead("plain-place-hanging").unwrap();
    let held = bulkhead.try_acquire().expect("the one place");
    let waiting = tokio::time::timeout(Duration::from_millis(10), hanging_in_a_bulkhead(&ran)).await;
    assert!(waiting.is_err());
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "a full bulkhead: the call waited for a place, running nothing"
    );
    assert_eq!(places_in_use("plain-place-hanging"), 1, "and took none while it waited");
    drop(held);
    let started = tokio::time::timeout(Duration::from_millis(10), hanging_in_a_bulkhead(&ran)).await;
    assert!(started.is_err());
    assert_eq!(ran.load(Ordering::SeqCst), 2, "a place free again: the attempt ran");
    assert_eq!(places_in_use("plain-place-hanging"), 0);
}

/// `Policy::run` takes the plain path too, for whatever guards its policy
/// names (found out as it runs): the same records, the closure called only
/// for an admitted attempt, a key making the call not plain.
#[tokio::test(start_paused = true)]
async fn policy_run_is_plain_without_a_key_and_calls_its_closure_only_when_admitted() {
    one_place("plain-run-place");
    let breaker =
        BreakerConfig { failure_threshold: 2, open_for: Duration::from_secs(60), ..Default::default() };
    registry().declare_breaker("plain-run-breaker", breaker).unwrap();
    registry().declare_budget("plain-run-budget", RatioBudget::default()).unwrap();
    let policy = stormproof::Policy::builder()
        .max_attempts(2)
        .base(Duration::from_millis(100))
        .jitter(stormproof::Jitter::None)
        .breaker("plain-run-breaker")
        .budget("plain-run-budget")
        .bulkhead("plain-run-place")
        .build()
        .unwrap();
    let budget = registry().budget("plain-run-budget").unwrap();
    let calls = AtomicU32::new(0);
    let in_use = AtomicUsize::new(0);
    // Each closure counts its calls as it is called, before its future is polled.
    let up = || {
        calls.fetch_add(1, Ordering::SeqCst);
        async {
            in_use.store(places_in_use("plain-run-place"), Ordering::SeqCst);
            Ok::<_, Flaky>(7)
        }
    };

    assert_eq!(policy.run(up).await, Ok(7));
    assert_eq!(in_use.load(Ordering::SeqCst), 1, "the attempt held the bulkhead's place");
    assert_eq!(places_in_use("plain-run-place"), 0, "and gave it back");
    assert_eq!(budget.totals().first_attempts, 1, "the first attempt counted once");
    assert_eq!(policy.run_with_key("order-1", up).await, Ok(7), "with a key: not plain, the same answer");
    assert_eq!(budget.totals().first_attempts, 2);

    let start = Instant::now();
    let down = || {
        calls.fetch_add(1, Ordering::SeqCst);
        async { Err::<u32, _>(Flaky::Down) }
    };
    assert_eq!(
        policy.run(down).await,
        Err(Flaky::Down),
        "the plain failure, then the retry's, opening the breaker"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(start.elapsed(), Duration::from_millis(100), "the retry ran after the backoff");
    assert_eq!(places_in_use("plain-run-place"), 0);

    let open = Rejection::CircuitOpen { breaker: "plain-run-breaker".to_owned() };
    assert_eq!(policy.run(up).await, Err(Flaky::Rejected(open)));
    assert_eq!(calls.load(Ordering::SeqCst), 4, "a refused plain attempt never calls the closure");
    assert_eq!(places_in_use("plain-run-place"), 0, "and its place went back");
}

/// An error whose classification has a bug: it panics.
#[derive(Debug)]
struct Unclassifiable;

impl Classify for Unclassifiable {
    fn classify(&self) -> ErrorClass {
        panic!("a classifier with a bug")
    }
}

impl From<Rejection> for Unclassifiable {
    fn from(_: Rejection) -> Self {
        Unclassifiable
    }
}

#[resilient(bulkhead = "plain-place-panicking")]
async fn classified_by_a_bug() -> Result<u32, Unclassifiable> {
    Err(Unclassifiable)
}

#[tokio::test(start_paused = true)]
async fn a_panicking_classifier_still_gives_the_place_back() {
    one_place("plain-place-panicking");
    for _ in 0..2 {
        let call = tokio::spawn(classified_by_a_bug()).await;
        assert!(call.unwrap_err().is_panic(), "the classifier's panic reaches the task's owner");
        assert_eq!(places_in_use("plain-place-panicking"), 0, "and the place went back all the same");
    }
}

/// Panics when dropped: an attempt's state with a bug in its `Drop`.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("a drop with a bug")
    }
}

#[resilient(bulkhead = "plain-place-bad-drop")]
async fn holding_a_bad_drop() -> Result<u32, Flaky> {
    let _state = PanicsOnDrop;
    std::future::pending::<()>().await;
    Ok(0)
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_attempt_whose_drop_panics_still_gives_the_place_back() {
    one_place("plain-place-bad-drop");
    let call = tokio::spawn(holding_a_bad_drop());
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(places_in_use("plain-place-bad-drop"), 1, "the attempt runs, holding the place");
    call.abort();
    assert!(call.await.unwrap_err().is_panic(), "its drop panicked as the call was cancelled");
    assert_eq!(places_in_use("plain-place-bad-drop"), 0, "and the place went back all the same");
}

// ---------------------------------------------------------------------------
// A function that names no guard: its plain first attempt is the attempt
// alone (`UnguardedRun`), polled in its context all the same.

#[resilient(max_attempts = 3, jitter = "none", base_ms = 1)]
async fn always_down(calls: &AtomicU32) -> Result<u32, Flaky> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Flaky::Down)
}

/// Makes a call inside its own (plain, unguarded) attempt and succeeds.
#[resilient]
async fn unguarded_around(calls: &AtomicU32) -> Result<bool, Flaky> {
    Ok(always_down(calls).await.is_err())
}

#[resilient]
async fn unguarded_with_a_bug() -> Result<u32, Flaky> {
    panic!("an attempt with a bug")
}

#[tokio::test(start_paused = true)]
async fn an_unguarded_plain_attempt_is_its_tasks_attempt_and_leaves_no_mark_however_it_ends() {
    let calls = AtomicU32::new(0);
    assert_eq!(unguarded_around(&calls).await, Ok(true));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "a call inside the attempt is nested: one attempt");
    assert_eq!(always_down(&calls).await, Err(Flaky::Down));
    assert_eq!(calls.load(Ordering::SeqCst), 4, "after the call, a call is not nested: three attempts");

    let mut buggy = std::pin::pin!(unguarded_with_a_bug());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| buggy.as_mut().poll(&mut cx)));
    assert!(polled.is_err(), "the attempt panicked");
    assert_eq!(always_down(&calls).await, Err(Flaky::Down));
    assert_eq!(calls.load(Ordering::SeqCst), 7, "a panicking attempt took its mark away too");
}

/// The key its attempt sees, after a first poll that yields.
#[resilient]
async fn key_seen_after_a_yield() -> Result<Option<Arc<str>>, Flaky> {
    tokio::task::yield_now().await;
    Ok(stormproof::idempotency_key())
}

type Key = Option<Arc<str>>;
type Started = std::pin::Pin<Box<dyn Future<Output = Result<Key, Flaky>>>>;

/// Finishes a call started elsewhere inside its attempt, which has a key.
#[resilient(max_attempts = 1, idempotent = false, key = order)]
async fn finishing_inside_a_keyed_attempt(order: &str, started: Started) -> Result<(Key, Key), Flaky> {
    let inner = started.await?;
    Ok((inner, stormproof::idempotency_key()))
}

#[tokio::test(start_paused = true)]
async fn a_plain_attempt_polled_inside_a_keyed_attempt_sees_no_key_and_leaves_the_outer_one() {
    let mut started: Started = Box::pin(key_seen_after_a_yield());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(started.as_mut().poll(&mut cx).is_pending(), "started outside attempts: a plain call");
    let (inner, outer) = finishing_inside_a_keyed_attempt("order-5", started).await.unwrap();
    assert_eq!(inner, None, "a call without a key of its own, started outside attempts, has none");
    assert_eq!(outer.as_deref(), Some("order-5"), "the outer attempt's key is still its own after");
}
