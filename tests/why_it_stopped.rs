//! Why a call stopped, read from the error the caller gets, without losing
//! the last attempt's error (issue 43, item 2): when a guard or the
//! deadline ends the retries (the breaker opened during the backoff, the
//! budget is empty, the deadline would pass), a `stormproof::Error<E>` is
//! `Error::Stopped` with `stop_reason()`, and an `anyhow::Error` carries a
//! `Stopped` context layer above the last error; when the operation gave
//! its own final answer (a permanent error, the last attempt) there is
//! none; a guard that refuses the first attempt still returns a
//! `Rejection`. On tokio's paused clock.

use std::io::{Error as IoError, ErrorKind};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use stormproof::{
    Error, Registry, Rejection, StopReason, Stopped,
    breaker::{BreakerConfig, Outcome},
    budget::TokenBucket,
    resilient,
};

fn reset() -> IoError {
    IoError::from(ErrorKind::ConnectionReset)
}

/// A registry whose breaker `dep` opens at its second failure and whose
/// budget `dep` holds one retry.
fn registry() -> Registry {
    let registry = Registry::new();
    registry.declare_breaker("dep", BreakerConfig { failure_threshold: 2, ..Default::default() }).unwrap();
    registry.declare_budget("dep", TokenBucket { capacity: 1, ..Default::default() }).unwrap();
    registry
}

#[resilient(max_attempts = 4, base_ms = 100, jitter = "none", breaker = "dep")]
async fn guarded(calls: &AtomicU32) -> Result<u32, Error<IoError>> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(reset())?
}

#[resilient(max_attempts = 4, base_ms = 100, jitter = "none", budget = "dep")]
async fn budgeted(calls: &AtomicU32) -> Result<u32, Error<IoError>> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(reset())?
}

#[resilient(max_attempts = 4, base_ms = 100, jitter = "none", deadline_ms = 250)]
async fn hurried() -> Result<u32, Error<IoError>> {
    Err(reset())?
}

#[resilient(max_attempts = 3, base_ms = 100, jitter = "none", breaker = "dep")]
async fn guarded_anyhow(calls: &AtomicU32) -> anyhow::Result<u32> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(anyhow::Error::from(reset()).context("fetching the quote"))
}

#[resilient(max_attempts = 3, base_ms = 100, jitter = "none")]
async fn failing(kind: ErrorKind) -> Result<u32, Error<IoError>> {
    Err(IoError::from(kind))?
}

#[resilient(max_attempts = 3, base_ms = 100, jitter = "none")]
async fn failing_anyhow(kind: ErrorKind) -> anyhow::Result<u32> {
    Err(IoError::from(kind).into())
}

/// The breaker opens at the second attempt's failure: the decision after
/// it sees a breaker that would still be open when the wait ends.
#[tokio::test(start_paused = true)]
async fn the_breaker_opening_stops_the_retries_and_the_caller_reads_why_beside_the_last_error() {
    let calls = AtomicU32::new(0);
    let error = registry().scope(guarded(&calls)).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(error.stop_reason(), Some(StopReason::CircuitOpen));
    assert_eq!(error.stopped().map(Stopped::attempts), Some(2));
    assert_eq!(error.inner().map(IoError::kind), Some(ErrorKind::ConnectionReset), "the last error is kept");
    assert!(matches!(&error, Error::Stopped(last, _) if last.kind() == ErrorKind::ConnectionReset));
    assert_eq!(error.to_string(), reset().to_string(), "still transparent");
}

/// Another caller's failure opens the breaker while this call waits for
/// its retry: the retry is refused at admission, and the call ends with its
/// own last error, marked.
#[tokio::test(start_paused = true)]
async fn a_breaker_opened_by_another_call_during_the_backoff_is_named_too() {
    let registry = registry();
    let breaker = registry.breaker("dep").unwrap();
    let calls = AtomicU32::new(0);
    let other = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        breaker.try_acquire().unwrap().record(Outcome::Failure);
    };
    let (error, ()) = tokio::join!(registry.scope(guarded(&calls)), other);
    let error = error.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the retry was refused");
    assert_eq!(error.stop_reason(), Some(StopReason::CircuitOpen));
    assert_eq!(error.stopped().map(Stopped::attempts), Some(1));
    assert_eq!(error.into_inner().map(|last| last.kind()), Some(ErrorKind::ConnectionReset));
}

#[tokio::test(start_paused = true)]
async fn an_empty_budget_is_named() {
    let calls = AtomicU32::new(0);
    let error = registry().scope(budgeted(&calls)).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one retry in the budget");
    assert_eq!(error.stop_reason(), Some(StopReason::BudgetExhausted));
    assert_eq!(error.stopped().map(Stopped::attempts), Some(2));
}

/// Waits of 100 and 200 ms: the second would end at 300, past the 250 ms deadline.
#[tokio::test(start_paused = true)]
async fn a_deadline_that_would_pass_is_named() {
    let error = hurried().await.unwrap_err();
    assert_eq!(error.stop_reason(), Some(StopReason::Deadline));
    assert_eq!(error.stopped().map(Stopped::attempts), Some(2));
    assert_eq!(error.inner().map(IoError::kind), Some(ErrorKind::ConnectionReset));
}

#[tokio::test(start_paused = true)]
async fn the_operations_own_answer_carries_no_stop_reason() {
    let permanent = failing(ErrorKind::NotFound).await.unwrap_err();
    assert!(matches!(&permanent, Error::Inner(e) if e.kind() == ErrorKind::NotFound), "{permanent:?}");
    assert_eq!(permanent.stop_reason(), None);
    let exhausted = failing(ErrorKind::ConnectionReset).await.unwrap_err();
    assert!(matches!(&exhausted, Error::Inner(e) if e.kind() == ErrorKind::ConnectionReset), "{exhausted:?}");
    assert_eq!(exhausted.stop_reason(), None);
}

#[tokio::test(start_paused = true)]
async fn a_refused_first_attempt_is_still_a_rejection() {
    let registry = registry();
    let breaker = registry.breaker("dep").unwrap();
    for _ in 0..2 {
        breaker.try_acquire().unwrap().record(Outcome::Failure);
    }
    let calls = AtomicU32::new(0);
    let error = registry.scope(guarded(&calls)).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(error.rejection(), Some(&Rejection::CircuitOpen { breaker: "dep".into() }));
    assert_eq!(error.stop_reason(), None);
}

#[tokio::test(start_paused = true)]
async fn anyhow_carries_a_stopped_layer_and_the_last_error_under_it() {
    let calls = AtomicU32::new(0);
    let error = registry().scope(guarded_anyhow(&calls)).await.unwrap_err();
    let stopped = error.downcast_ref::<Stopped>().expect("a Stopped layer");
    assert_eq!((stopped.reason(), stopped.attempts()), (StopReason::CircuitOpen, 2));
    assert_eq!(error.downcast_ref::<IoError>().map(IoError::kind), Some(ErrorKind::ConnectionReset));
    let chain: Vec<String> = error.chain().map(ToString::to_string).collect();
    assert_eq!(
        chain,
        ["gave up after 2 attempts: the circuit breaker is open", "fetching the quote", &reset().to_string()]
    );
}

#[tokio::test(start_paused = true)]
async fn anyhow_has_no_stopped_layer_for_the_operations_own_answer() {
    for kind in [ErrorKind::NotFound, ErrorKind::ConnectionReset] {
        let error = failing_anyhow(kind).await.unwrap_err();
        assert!(error.downcast_ref::<Stopped>().is_none(), "{kind:?}: {error:#}");
        assert_eq!(error.to_string(), IoError::from(kind).to_string());
    }
}

fn always_transient(_: &anyhow::Error) -> stormproof::ErrorClass {
    stormproof::ErrorClass::Transient
}

#[resilient(max_attempts = 4, base_ms = 100, jitter = "none", deadline_ms = 250, classify = always_transient)]
async fn classified_by_a_function() -> anyhow::Result<u32> {
    Err(anyhow::anyhow!("connection reset"))
}

/// A `classify = path` function replaces the classification only: the
/// error type still marks a stopped call its own way.
#[tokio::test(start_paused = true)]
async fn a_classify_function_keeps_the_stopped_layer() {
    let error = classified_by_a_function().await.unwrap_err();
    let stopped = error.downcast_ref::<Stopped>().expect("a Stopped layer");
    assert_eq!((stopped.reason(), stopped.attempts()), (StopReason::Deadline, 2));
}
