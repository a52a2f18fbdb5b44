//! A place is held exactly while an attempt runs (not while it waits to
//! retry) and given back however it ends: refused by the breaker, cancelled,
//! a classifier that panics, an attempt whose drop panics; a full bulkhead is
//! waited for.

use crate::support::*;

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
