//! An unguarded first attempt is its task's attempt and leaves no mark
//! however it ends; one polled inside a keyed attempt sees no key and leaves
//! the outer one; a keyed one runs, and is dropped, in its key.

use crate::support::*;

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

/// Notes the key its drop sees.
struct SeesKeyOnDrop<'a>(&'a std::sync::Mutex<Option<Key>>);

impl Drop for SeesKeyOnDrop<'_> {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = Some(stormproof::idempotency_key());
    }
}

/// A keyed call whose first attempt waits until it is dropped.
#[resilient(max_attempts = 2, idempotent = false, key = order)]
async fn keyed_waiting_forever(order: &str, seen: &std::sync::Mutex<Option<Key>>) -> Result<u32, Flaky> {
    let _sees = SeesKeyOnDrop(seen);
    std::future::pending::<()>().await;
    Ok(1)
}

/// A keyed call's first attempt runs plain, in the caller's frame, with its
/// key: polled in it, and dropped in it when the call is cancelled.
#[tokio::test(start_paused = true)]
async fn a_keyed_plain_attempt_cancelled_is_dropped_in_its_key() {
    let seen = std::sync::Mutex::new(None);
    {
        let mut call = std::pin::pin!(keyed_waiting_forever("order-7", &seen));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(call.as_mut().poll(&mut cx).is_pending());
    }
    assert_eq!(seen.lock().unwrap().clone(), Some(Some(Arc::from("order-7"))), "the key, as its drop ran");
    assert_eq!(stormproof::idempotency_key(), None, "and none outside it after");
}

/// A keyed call with an attempt timeout: its first attempt (plain, raced
/// with its timer) hangs until the timeout; the second answers. Each notes
/// the key it sees.
#[resilient(max_attempts = 2, base_ms = 10, jitter = "none", idempotent = false, key = order, attempt_timeout_ms = 100)]
async fn keyed_timing_out_once(order: &str, seen: &std::sync::Mutex<Vec<Key>>) -> Result<usize, Flaky> {
    let attempt = {
        let mut seen = seen.lock().unwrap();
        seen.push(stormproof::idempotency_key());
        seen.len()
    };
    if attempt == 1 {
        std::future::pending::<()>().await;
    }
    Ok(attempt)
}

/// The key is in effect on the first attempt, raced with its timer, and on
/// the retry after it timed out.
#[tokio::test(start_paused = true)]
async fn a_keyed_call_with_a_timeout_has_its_key_on_every_attempt() {
    let seen = std::sync::Mutex::new(Vec::new());
    let started = Instant::now();
    assert_eq!(keyed_timing_out_once("order-9", &seen).await, Ok(2));
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(110),
        "the first attempt timed out, then the backoff"
    );
    let key: Key = Some(Arc::from("order-9"));
    assert_eq!(*seen.lock().unwrap(), [key.clone(), key]);
}
