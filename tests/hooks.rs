//! `on_retry` and `on_stop` (issue 43, item 3), through the builder and the
//! attribute: once per retry with the failed attempt, its class, the wait
//! and the error; once per call that gives up, with why, the attempts and
//! the time it took; never on success; a panicking hook loses nothing. On
//! tokio's paused clock, so waits and elapsed times are exact.

use std::io::{Error as IoError, ErrorKind};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stormproof::hooks::{RetryEvent, StopEvent};
use stormproof::{
    Classify, ErrorClass, Jitter, Policy, PolicyBuilder, Registry, Rejection, StopReason,
    breaker::{BreakerConfig, Outcome},
    resilient,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

type Heard = Arc<Mutex<Vec<String>>>;

/// A policy of `max_attempts` with waits of 100, 200, 400 ms whose hooks
/// write what they hear into the returned list.
fn heard_policy(max_attempts: u32) -> (PolicyBuilder, Heard) {
    let heard: Heard = Arc::default();
    let (retries, stops) = (heard.clone(), heard.clone());
    let policy = Policy::builder()
        .name("quote")
        .max_attempts(max_attempts)
        .base(ms(100))
        .jitter(Jitter::None)
        .on_retry(move |event| retries.lock().unwrap().push(retry_line(event)))
        .on_stop(move |event| stops.lock().unwrap().push(stop_line(event)));
    (policy, heard)
}

fn retry_line(event: &RetryEvent) -> String {
    let error = event.error().map(ToString::to_string).unwrap_or_else(|| "-".into());
    format!(
        "{} retry: attempt {} failed ({:?}), next in {:?}: {error}",
        event.operation(),
        event.attempt(),
        event.class(),
        event.wait()
    )
}

fn stop_line(event: &StopEvent) -> String {
    format!(
        "{} stop: {} after {} attempts, {:?}",
        event.operation(),
        event.reason(),
        event.attempts(),
        event.elapsed()
    )
}

fn heard(heard: &Heard) -> Vec<String> {
    heard.lock().unwrap().clone()
}

#[tokio::test(start_paused = true)]
async fn each_retry_and_the_give_up_are_heard_once_with_what_happened() {
    let (policy, log) = heard_policy(3);
    let policy = policy.build().unwrap();
    let result = policy
        .run(|| async {
            tokio::time::sleep(ms(10)).await;
            Err::<(), _>(IoError::from(ErrorKind::ConnectionReset))
        })
        .await;
    assert_eq!(result.unwrap_err().kind(), ErrorKind::ConnectionReset, "the call's error is unchanged");
    let reset = IoError::from(ErrorKind::ConnectionReset).to_string();
    assert_eq!(
        heard(&log),
        [
            format!("quote retry: attempt 1 failed (Transient), next in 100ms: {reset}"),
            format!("quote retry: attempt 2 failed (Transient), next in 200ms: {reset}"),
            // Three attempts of 10 ms, waits of 100 and 200.
            "quote stop: attempts_exhausted after 3 attempts, 330ms".to_owned(),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn nothing_is_heard_on_success_and_only_the_retries_before_a_late_one() {
    let (policy, log) = heard_policy(4);
    let policy = policy.build().unwrap();
    assert_eq!(policy.run(|| async { Ok::<_, IoError>(1) }).await.unwrap(), 1);
    assert_eq!(heard(&log), Vec::<String>::new(), "a success is never heard");
    let calls = AtomicU32::new(0);
    let late = policy
        .run(|| async {
            let call = calls.fetch_add(1, Ordering::SeqCst);
            if call < 2 { Err(IoError::from(ErrorKind::TimedOut)) } else { Ok(call) }
        })
        .await;
    assert_eq!(late.unwrap(), 2);
    let lines = heard(&log);
    assert_eq!(lines.len(), 2, "two retries, no stop: {lines:?}");
    assert!(lines.iter().all(|line| line.contains("retry")), "{lines:?}");
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_stops_without_a_retry() {
    let (policy, log) = heard_policy(4);
    let policy = policy.build().unwrap();
    let _ = policy.run(|| async { Err::<(), _>(IoError::from(ErrorKind::NotFound)) }).await;
    assert_eq!(heard(&log), ["quote stop: permanent after 1 attempts, 0ns"]);
}

/// A guard that refuses the first attempt ends the call too: it gave up
/// after no attempt.
#[tokio::test(start_paused = true)]
async fn a_refused_first_attempt_is_a_stop_after_no_attempts() {
    let registry = Registry::new();
    registry.declare_breaker("dep", BreakerConfig { failure_threshold: 1, ..Default::default() }).unwrap();
    registry.breaker("dep").unwrap().try_acquire().unwrap().record(Outcome::Failure);
    let (policy, log) = heard_policy(4);
    let policy = policy.breaker("dep").build().unwrap();
    let error = registry.scope(policy.run(|| async { Ok::<_, IoError>(1) })).await.unwrap_err();
    assert!(error.get_ref().is_some_and(|inner| inner.is::<Rejection>()), "{error:?}");
    assert_eq!(heard(&log), ["quote stop: circuit_open after 0 attempts, 0ns"]);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_hook_loses_neither_the_retries_nor_the_result() {
    let policy = Policy::builder()
        .max_attempts(3)
        .base(ms(1))
        .on_retry(|_| panic!("a hook that panics"))
        .on_stop(|_| panic!("another"))
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let late = policy
        .run(|| async {
            let call = calls.fetch_add(1, Ordering::SeqCst);
            if call < 2 { Err(IoError::from(ErrorKind::TimedOut)) } else { Ok(call) }
        })
        .await;
    assert_eq!(late.unwrap(), 2, "retried through the panics");
    let error = policy.run(|| async { Err::<(), _>(IoError::from(ErrorKind::NotFound)) }).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound, "the error survives the stop hook's panic");
}

/// An error type of the user's own shows as an error where its `Classify`
/// says it is one, and not otherwise.
#[derive(Debug)]
enum Quote {
    Busy,
    Rejected(Rejection),
}

impl std::fmt::Display for Quote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("quote service busy")
    }
}

impl std::error::Error for Quote {}

impl Classify for Quote {
    fn classify(&self) -> ErrorClass {
        match self {
            Quote::Busy => ErrorClass::Throttled { retry_after: Some(ms(300)) },
            Quote::Rejected(rejection) => rejection.classify(),
        }
    }

    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self)
    }
}

impl From<Rejection> for Quote {
    fn from(rejection: Rejection) -> Self {
        Quote::Rejected(rejection)
    }
}

#[derive(Debug)]
struct Silent;

impl Classify for Silent {
    fn classify(&self) -> ErrorClass {
        ErrorClass::Transient
    }
}

impl From<Rejection> for Silent {
    fn from(_: Rejection) -> Self {
        Silent
    }
}

#[tokio::test(start_paused = true)]
async fn the_error_shows_where_its_type_allows_it() {
    let (policy, log) = heard_policy(2);
    let policy = policy.build().unwrap();
    let _ = policy.run(|| async { Err::<(), _>(Quote::Busy) }).await;
    let _ = policy.run(|| async { Err::<(), _>(Silent) }).await;
    let lines = heard(&log);
    assert_eq!(
        lines[0],
        "quote retry: attempt 1 failed (Throttled { retry_after: Some(300ms) }), next in 300ms: quote service busy"
    );
    assert_eq!(lines[2], "quote retry: attempt 1 failed (Transient), next in 100ms: -");
}

// The attribute: `on_retry = path` and `on_stop = path`.

static RETRIES: Mutex<Vec<String>> = Mutex::new(Vec::new());
static STOPS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn remember_retry(event: &RetryEvent) {
    RETRIES.lock().unwrap().push(retry_line(event));
}

fn remember_stop(event: &StopEvent) {
    STOPS.lock().unwrap().push(stop_line(event));
}

#[resilient(max_attempts = 3, base_ms = 100, jitter = "none", name = "annotated", on_retry = remember_retry, on_stop = remember_stop)]
async fn annotated(fail: u32, calls: &AtomicU32) -> Result<u32, IoError> {
    let call = calls.fetch_add(1, Ordering::SeqCst);
    if call < fail { Err(IoError::from(ErrorKind::ConnectionReset)) } else { Ok(call) }
}

#[tokio::test(start_paused = true)]
async fn the_attributes_hooks_hear_the_same() {
    let calls = AtomicU32::new(0);
    assert_eq!(annotated(0, &calls).await.unwrap(), 0);
    assert!(RETRIES.lock().unwrap().is_empty() && STOPS.lock().unwrap().is_empty(), "not on success");
    let calls = AtomicU32::new(0);
    assert!(annotated(5, &calls).await.is_err());
    let reset = IoError::from(ErrorKind::ConnectionReset).to_string();
    assert_eq!(
        *RETRIES.lock().unwrap(),
        [
            format!("annotated retry: attempt 1 failed (Transient), next in 100ms: {reset}"),
            format!("annotated retry: attempt 2 failed (Transient), next in 200ms: {reset}"),
        ]
    );
    assert_eq!(*STOPS.lock().unwrap(), ["annotated stop: attempts_exhausted after 3 attempts, 300ms"]);
    assert_eq!(StopReason::AttemptsExhausted.label(), "attempts_exhausted");
}

fn by_kind(error: &IoError) -> ErrorClass {
    if error.kind() == ErrorKind::NotFound { ErrorClass::Permanent } else { ErrorClass::Transient }
}

static CLASSIFIED_RETRIES: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn remember_classified_retry(event: &RetryEvent) {
    CLASSIFIED_RETRIES.lock().unwrap().push(retry_line(event));
}

#[resilient(max_attempts = 2, base_ms = 100, jitter = "none", name = "classified", classify = by_kind, on_retry = remember_classified_retry)]
async fn classified() -> Result<u32, IoError> {
    Err(IoError::from(ErrorKind::ConnectionReset))
}

/// With `classify = path`, the hook still sees the error where its type
/// shows one.
#[tokio::test(start_paused = true)]
async fn a_classify_function_leaves_the_error_visible_to_the_hook() {
    let _ = classified().await;
    let reset = IoError::from(ErrorKind::ConnectionReset).to_string();
    assert_eq!(
        *CLASSIFIED_RETRIES.lock().unwrap(),
        [format!("classified retry: attempt 1 failed (Transient), next in 100ms: {reset}")]
    );
}
