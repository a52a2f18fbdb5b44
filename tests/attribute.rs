//! Behaviour of `#[resilient]`, through the attribute: the backoff schedule,
//! jitter against a herd, idempotency keys, nesting, every function shape,
//! and the named guards of a scoped registry.
//!
//! Every test runs on tokio's paused clock, so seconds of backoff take
//! microseconds and every instant is exact.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stormproof::sim::{Storm, StormError, peak_in_bucket};
use stormproof::{
    Classify, ErrorClass, Registry, Rejection,
    breaker::{BreakerConfig, BreakerState},
    budget::TokenBucket,
    bulkhead::BulkheadConfig,
    resilient,
};
use tokio::time::Instant;

/// The error type of every function here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flaky {
    /// The dependency is down: transient, retried.
    Down,
    /// The request is wrong: permanent, never retried.
    Invalid,
    /// A guard of the retry loop said no.
    Rejected(Rejection),
}

impl Classify for Flaky {
    fn classify(&self) -> ErrorClass {
        match self {
            Flaky::Down => ErrorClass::Transient,
            Flaky::Invalid => ErrorClass::Permanent,
            Flaky::Rejected(rejection) => rejection.classify(),
        }
    }
}

impl From<Rejection> for Flaky {
    fn from(rejection: Rejection) -> Self {
        Flaky::Rejected(rejection)
    }
}

impl From<StormError> for Flaky {
    fn from(error: StormError) -> Self {
        match error {
            StormError::Storm { .. } => Flaky::Down,
            StormError::Rejected(rejection) => Flaky::Rejected(rejection),
        }
    }
}

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

// ---------------------------------------------------------------------------
// Backoff schedule

#[resilient(jitter = "none", base_ms = 100, cap_ms = 2_000, max_attempts = 5)]
async fn through_the_storm(storm: &Storm) -> Result<Duration, Flaky> {
    // `?` converts the storm's error through `From`: the attempt's output
    // type is the function's, even inside the generated async block.
    let delivered_at = storm.call().await?;
    Ok(delivered_at)
}

#[tokio::test(start_paused = true)]
async fn attempts_back_off_exponentially_until_the_storm_ends() {
    let storm = Storm::until(ms(1_500));
    assert_eq!(through_the_storm(&storm).await, Ok(ms(1_500)));
    assert_eq!(storm.calls(), [ms(0), ms(100), ms(300), ms(700), ms(1_500)]);
}

#[resilient(jitter = "none", base_ms = 100, cap_ms = 800, max_attempts = 7)]
async fn against_an_endless_storm(storm: &Storm) -> Result<Duration, Flaky> {
    Ok(storm.call().await?)
}

#[tokio::test(start_paused = true)]
async fn waits_are_capped_and_there_is_no_wait_after_the_last_attempt() {
    let storm = Storm::endless();
    let start = Instant::now();
    assert_eq!(against_an_endless_storm(&storm).await, Err(Flaky::Down));
    assert_eq!(storm.waits(), [ms(100), ms(200), ms(400), ms(800), ms(800), ms(800)]);
    assert_eq!(start.elapsed(), ms(3_100), "the call ends with the seventh attempt");
}

#[resilient(max_attempts = 5, base_ms = 1)]
async fn invalid(calls: &AtomicU32) -> Result<(), Flaky> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Flaky::Invalid)
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_is_returned_at_once() {
    let calls = AtomicU32::new(0);
    assert_eq!(invalid(&calls).await, Err(Flaky::Invalid));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

// ---------------------------------------------------------------------------
// A herd of clients

/// One client of a dependency whose first answer, to everyone, is "down".
/// Each client logs when its retry arrived.
async fn herd(client: fn(Arc<AtomicBool>, RetryLog, Instant) -> HerdCall) -> Vec<Duration> {
    let registry = Registry::with_seed(7);
    let retries = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let call = client(Arc::default(), retries.clone(), start);
        clients.spawn(registry.scope(call));
    }
    while let Some(done) = clients.join_next().await {
        assert_eq!(done.expect("the client task ran"), Ok(()));
    }
    let retries = retries.lock().unwrap().clone();
    assert_eq!(retries.len(), 100, "every client retried exactly once");
    retries
}

type HerdCall = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Flaky>> + Send>>;

/// When each client's retry arrived.
type RetryLog = Arc<Mutex<Vec<Duration>>>;

async fn first_attempt_fails(
    failed_once: &AtomicBool,
    retries: &Mutex<Vec<Duration>>,
    start: Instant,
) -> Result<(), Flaky> {
    if !failed_once.swap(true, Ordering::SeqCst) {
        return Err(Flaky::Down);
    }
    retries.lock().unwrap().push(start.elapsed());
    Ok(())
}

/// The breaker is off: a herd of 100 failures at once would open the
/// operation's own, and these tests are of the jitter alone.
#[resilient(jitter = "none", base_ms = 100, breaker = "none")]
async fn client_without_jitter(
    failed_once: Arc<AtomicBool>,
    retries: RetryLog,
    start: Instant,
) -> Result<(), Flaky> {
    first_attempt_fails(&failed_once, &retries, start).await
}

#[resilient(jitter = "full", base_ms = 100, breaker = "none")]
async fn client_with_full_jitter(
    failed_once: Arc<AtomicBool>,
    retries: RetryLog,
    start: Instant,
) -> Result<(), Flaky> {
    first_attempt_fails(&failed_once, &retries, start).await
}

#[tokio::test(start_paused = true)]
async fn without_jitter_every_first_retry_lands_in_one_bucket() {
    let retries = herd(|f, r, s| Box::pin(client_without_jitter(f, r, s))).await;
    assert_eq!(peak_in_bucket(&retries, ms(10)), 100);
}

#[tokio::test(start_paused = true)]
async fn full_jitter_spreads_the_first_retries() {
    let retries = herd(|f, r, s| Box::pin(client_with_full_jitter(f, r, s))).await;
    let peak = peak_in_bucket(&retries, ms(10));
    assert!(peak < 50, "the busiest 10 ms bucket holds {peak} of 100 retries");
    assert!(retries.iter().all(|t| *t <= ms(100)), "full jitter waits at most exp(0)");
}

// ---------------------------------------------------------------------------
// Idempotency keys

#[resilient(idempotent = false, key = order_id, jitter = "none", base_ms = 10)]
async fn charge(order_id: u64, seen: &Mutex<Vec<Option<Arc<str>>>>) -> Result<u64, Flaky> {
    let mut seen = seen.lock().unwrap();
    seen.push(stormproof::idempotency_key());
    if seen.len() < 3 { Err(Flaky::Down) } else { Ok(order_id) }
}

#[tokio::test(start_paused = true)]
async fn the_idempotency_key_is_the_same_on_every_attempt() {
    let seen = Mutex::new(Vec::new());
    assert_eq!(charge(17, &seen).await, Ok(17));
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|key| key.as_deref() == Some("17")), "{seen:?}");
}

/// An order as the caller passes it, destructured in the signature.
#[derive(Clone)]
struct Order {
    id: String,
    cents: u64,
}

#[resilient(idempotent = false, key = id, jitter = "none", base_ms = 10)]
async fn charge_order(
    Order { id, mut cents }: Order,
    seen: &Mutex<Vec<Option<Arc<str>>>>,
) -> Result<u64, Flaky> {
    cents += id.len() as u64;
    let mut seen = seen.lock().unwrap();
    seen.push(stormproof::idempotency_key());
    if seen.len() < 2 { Err(Flaky::Down) } else { Ok(cents) }
}

#[tokio::test(start_paused = true)]
async fn the_key_may_be_a_binding_of_a_destructured_parameter() {
    let seen = Mutex::new(Vec::new());
    assert_eq!(charge_order(Order { id: "A-1".to_owned(), cents: 250 }, &seen).await, Ok(253));
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|key| key.as_deref() == Some("A-1")), "{seen:?}");
}

#[resilient(max_attempts = 2)]
async fn without_key() -> Result<Option<Arc<str>>, Flaky> {
    Ok(stormproof::idempotency_key())
}

#[tokio::test(start_paused = true)]
async fn a_function_without_key_has_none() {
    assert_eq!(without_key().await, Ok(None));
}

// ---------------------------------------------------------------------------
// Nesting

#[resilient(max_attempts = 3, jitter = "none", base_ms = 1)]
async fn inner_once(calls: &AtomicU32) -> Result<(), Flaky> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Flaky::Down)
}

#[resilient(max_attempts = 3, jitter = "none", base_ms = 1, nested = "retry")]
async fn inner_retrying(calls: &AtomicU32) -> Result<(), Flaky> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Flaky::Down)
}

#[resilient(max_attempts = 3, jitter = "none", base_ms = 1)]
async fn outer(calls: &AtomicU32, inner_retries: bool) -> Result<(), Flaky> {
    if inner_retries { inner_retrying(calls).await } else { inner_once(calls).await }
}

#[tokio::test(start_paused = true)]
async fn nested_annotated_calls_do_not_multiply_attempts() {
    let calls = AtomicU32::new(0);
    assert_eq!(outer(&calls, false).await, Err(Flaky::Down));
    assert_eq!(calls.load(Ordering::SeqCst), 3, "3 outer attempts x 1 inner attempt");
}

#[tokio::test(start_paused = true)]
async fn nested_retry_opts_out_and_multiplies() {
    let calls = AtomicU32::new(0);
    assert_eq!(outer(&calls, true).await, Err(Flaky::Down));
    assert_eq!(calls.load(Ordering::SeqCst), 9, "3 outer attempts x 3 inner attempts");
}

#[tokio::test(start_paused = true)]
async fn a_call_on_its_own_retries_fully() {
    let calls = AtomicU32::new(0);
    assert_eq!(inner_once(&calls).await, Err(Flaky::Down));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// What a call made on a task of its own sees: its attempts, and its key.
#[resilient(max_attempts = 3, jitter = "none", base_ms = 1)]
async fn on_another_task(calls: &AtomicU32) -> Result<Option<Arc<str>>, Flaky> {
    let key = stormproof::idempotency_key();
    if calls.fetch_add(1, Ordering::SeqCst) < 2 { Err(Flaky::Down) } else { Ok(key) }
}

/// An attempt that drives a `LocalSet` whose task makes a resilient call.
#[resilient(max_attempts = 2, idempotent = false, key = order)]
async fn drives_a_local_set(order: &str, calls: Arc<AtomicU32>) -> Result<Option<Arc<str>>, Flaky> {
    let local = tokio::task::LocalSet::new();
    let task = local.spawn_local(async move { on_another_task(&calls).await });
    local.run_until(task).await.expect("the local task ran")
}

#[tokio::test(start_paused = true)]
async fn a_task_driven_inside_an_attempt_is_a_new_call_tree() {
    let calls = Arc::new(AtomicU32::new(0));
    let key = drives_a_local_set("order-9", calls.clone()).await;
    assert_eq!(key, Ok(None), "the local task does not see the outer call's key");
    assert_eq!(calls.load(Ordering::SeqCst), 3, "and it is not nested: it retries fully");
}

// ---------------------------------------------------------------------------
// Function shapes

/// A service whose first `failures` calls fail.
#[derive(Clone, Debug)]
struct Service {
    failures: u32,
    calls: u32,
    name: String,
}

impl Service {
    fn hit(&mut self) -> Result<u32, Flaky> {
        self.calls += 1;
        if self.calls <= self.failures { Err(Flaky::Down) } else { Ok(self.calls) }
    }

    #[resilient(jitter = "none", base_ms = 1)]
    async fn name(&self) -> Result<&str, Flaky> {
        Ok(&self.name)
    }

    #[resilient(jitter = "none", base_ms = 1)]
    async fn call(&mut self) -> Result<u32, Flaky> {
        tokio::task::yield_now().await;
        self.hit()
    }

    #[resilient(jitter = "none", base_ms = 1)]
    async fn call_logged(&mut self, log: &mut Vec<u32>) -> Result<u32, Flaky> {
        log.push(self.calls);
        self.hit()
    }

    #[resilient(jitter = "none", base_ms = 1)]
    async fn into_name(self) -> Result<String, Flaky> {
        Ok(self.name.clone())
    }
}

#[tokio::test(start_paused = true)]
async fn methods_taking_self_by_reference_by_mut_reference_and_by_value_are_retried() {
    let mut service = Service { failures: 2, calls: 0, name: "ledger".to_owned() };
    assert_eq!(service.name().await, Ok("ledger"));
    assert_eq!(service.call().await, Ok(3), "two failures, then the third call");
    service.failures = 5;
    let mut log = Vec::new();
    assert_eq!(service.call_logged(&mut log).await, Ok(6));
    assert_eq!(log, [3, 4, 5], "each attempt reborrows the `&mut` argument");
    assert_eq!(service.into_name().await, Ok("ledger".to_owned()));
}

/// Pinned state, as a hand-written future or stream keeps it: not `Unpin`,
/// so only reachable through a `Pin<&mut Self>`.
struct Pinned {
    calls: u32,
    _pinned: std::marker::PhantomPinned,
}

impl Pinned {
    fn calls(self: Pin<&mut Self>) -> &mut u32 {
        // SAFETY: `calls` is not structurally pinned; nothing is moved out.
        unsafe { &mut self.get_unchecked_mut().calls }
    }

    #[resilient(jitter = "none", base_ms = 1)]
    async fn poll_ready(mut self: Pin<&mut Self>, log: Pin<&mut Vec<u32>>) -> Result<u32, Flaky> {
        *self.as_mut().calls() += 1;
        let calls = *self.calls();
        // Consumed by `get_mut`: each attempt has its own reborrow.
        log.get_mut().push(calls);
        if calls < 3 { Err(Flaky::Down) } else { Ok(calls) }
    }
}

#[tokio::test(start_paused = true)]
async fn pinned_receivers_and_parameters_are_reborrowed_by_every_attempt() {
    let mut pinned = std::pin::pin!(Pinned { calls: 0, _pinned: std::marker::PhantomPinned });
    let mut log = Vec::new();
    let started = Instant::now();
    assert_eq!(
        pinned.as_mut().poll_ready(Pin::new(&mut log)).await,
        Ok(3),
        "two failures, then the third call"
    );
    assert_eq!(log, [1, 2, 3], "every attempt wrote through the same pinned borrows");
    assert_eq!(started.elapsed(), ms(1) + ms(2), "retried with backoff, not failed at compile time");
}

/// A type merely named `Pin` (here a pin of a chip) is not std's: a
/// parameter of it is cloned for every attempt, as any owned one is, and
/// not reborrowed with `Pin::as_mut`, which would not take it.
mod gpio {
    pub struct Pin<T>(pub u8, pub std::marker::PhantomData<T>);

    impl<T> Clone for Pin<T> {
        fn clone(&self) -> Self {
            Pin(self.0, std::marker::PhantomData)
        }
    }
}

#[resilient(jitter = "none", base_ms = 1)]
async fn read_line(line: gpio::Pin<&mut u8>, attempts: &AtomicU32) -> Result<u8, Flaky> {
    if attempts.fetch_add(1, Ordering::SeqCst) < 1 { Err(Flaky::Down) } else { Ok(line.0) }
}

#[tokio::test(start_paused = true)]
async fn a_parameter_of_a_type_merely_named_pin_is_cloned_like_any_owned_one() {
    let attempts = AtomicU32::new(0);
    assert_eq!(read_line(gpio::Pin(7, std::marker::PhantomData), &attempts).await, Ok(7));
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

/// Docs without an `# Errors` section: clippy's `missing_errors_doc`
/// applies to the function as written, so expecting it is fulfilled (and
/// `-D warnings` in CI would say otherwise).
#[resilient(jitter = "none", base_ms = 1)]
#[cfg_attr(test, expect(clippy::missing_errors_doc))]
pub async fn documented(attempts: &AtomicU32) -> Result<u32, Flaky> {
    if attempts.fetch_add(1, Ordering::SeqCst) < 1 { Err(Flaky::Down) } else { Ok(2) }
}

#[tokio::test(start_paused = true)]
async fn a_function_with_lint_expectations_retries_as_any_other() {
    let attempts = AtomicU32::new(0);
    assert_eq!(documented(&attempts).await, Ok(2));
}

#[resilient(jitter = "none", base_ms = 1)]
async fn append(mut buffer: Vec<u8>, byte: u8, attempts: &AtomicU32) -> Result<Vec<u8>, Flaky> {
    buffer.push(byte);
    if attempts.fetch_add(1, Ordering::SeqCst) < 2 {
        return Err(Flaky::Down);
    }
    Ok(buffer)
}

#[tokio::test(start_paused = true)]
async fn every_attempt_starts_from_fresh_clones_of_owned_arguments() {
    let attempts = AtomicU32::new(0);
    assert_eq!(append(vec![1], 2, &attempts).await, Ok(vec![1, 2]), "not [1, 2, 2, 2]");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
}

#[resilient(jitter = "none", base_ms = 1)]
#[allow(clippy::toplevel_ref_arg)]
async fn append_by_ref(ref mut buffer: Vec<u8>, byte: u8, attempts: &AtomicU32) -> Result<Vec<u8>, Flaky> {
    buffer.push(byte);
    if attempts.fetch_add(1, Ordering::SeqCst) < 2 {
        return Err(Flaky::Down);
    }
    Ok(buffer.clone())
}

#[tokio::test(start_paused = true)]
async fn a_ref_mut_binding_of_an_owned_argument_borrows_a_fresh_clone() {
    let attempts = AtomicU32::new(0);
    assert_eq!(append_by_ref(vec![1], 2, &attempts).await, Ok(vec![1, 2]), "not [1, 2, 2, 2]");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
}

#[resilient(jitter = "none", base_ms = 1)]
async fn append_destructured(
    (ref mut buffer, byte): (Vec<u8>, u8),
    ref mut whole @ (_, _): (Vec<u8>, u8),
    attempts: &AtomicU32,
) -> Result<(Vec<u8>, Vec<u8>), Flaky> {
    buffer.push(byte);
    whole.0.push(whole.1);
    if attempts.fetch_add(1, Ordering::SeqCst) < 2 {
        return Err(Flaky::Down);
    }
    Ok((buffer.clone(), whole.0.clone()))
}

#[tokio::test(start_paused = true)]
async fn a_ref_mut_binding_inside_a_pattern_borrows_a_fresh_clone() {
    let attempts = AtomicU32::new(0);
    let appended = append_destructured((vec![1], 2), (vec![3], 4), &attempts).await;
    assert_eq!(appended, Ok((vec![1, 2], vec![3, 4])), "not [1, 2, 2, 2], [3, 4, 4, 4]");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
}

/// A (shared) `ref` binding inside a pattern borrows the argument, as
/// before `ref mut` ones took fresh clones: no attempt can change it, so it
/// need not be `Clone` (`T`, an atomic), and what interior mutability
/// changes through it, the attempts share.
#[resilient(jitter = "none", base_ms = 1)]
async fn count_destructured<T: std::fmt::Display>(
    (ref calls, ref label, step): (AtomicU32, T, u32),
) -> Result<String, Flaky> {
    let calls = calls.fetch_add(step, Ordering::SeqCst) + step;
    if calls < 3 * step {
        return Err(Flaky::Down);
    }
    Ok(format!("{label}{calls}"))
}

#[tokio::test(start_paused = true)]
async fn a_ref_binding_inside_a_pattern_borrows_the_argument_which_need_not_be_clone() {
    let counted = count_destructured((AtomicU32::new(0), "calls: ", 2)).await;
    assert_eq!(counted, Ok("calls: 6".to_owned()), "every attempt added to the one counter passed");
}

#[resilient(jitter = "none", base_ms = 1, max_attempts = 3)]
#[allow(clippy::toplevel_ref_arg)]
async fn strip_by_ref(ref mut text: &str, seen: &Mutex<Vec<String>>) -> Result<(), Flaky> {
    *text = &text[1..];
    seen.lock().unwrap().push((*text).to_owned());
    Err(Flaky::Down)
}

#[tokio::test(start_paused = true)]
async fn a_ref_mut_binding_of_a_shared_reference_is_the_argument_again_on_every_attempt() {
    let seen = Mutex::new(Vec::new());
    assert_eq!(strip_by_ref("abc", &seen).await, Err(Flaky::Down));
    assert_eq!(*seen.lock().unwrap(), ["bc", "bc", "bc"], "not bc, c, \"\"");
}

#[resilient(jitter = "none", base_ms = 1, max_attempts = 3)]
async fn strip(mut text: &str, seen: &Mutex<Vec<String>>) -> Result<(), Flaky> {
    seen.lock().unwrap().push(text.to_owned());
    text = &text[1..];
    seen.lock().unwrap().push(text.to_owned());
    Err(Flaky::Down)
}

#[tokio::test(start_paused = true)]
async fn a_mut_binding_of_a_shared_reference_is_the_argument_again_on_every_attempt() {
    let seen = Mutex::new(Vec::new());
    assert_eq!(strip("abc", &seen).await, Err(Flaky::Down));
    assert_eq!(*seen.lock().unwrap(), ["abc", "bc", "abc", "bc", "abc", "bc"], "not abc, bc, bc, c, c, \"\"");
}

/// Takes its writer by value, as generic `Write` consumers do.
fn write_through(mut writer: impl std::io::Write, bytes: &[u8]) {
    writer.write_all(bytes).expect("room left");
}

#[resilient(jitter = "none", base_ms = 1, max_attempts = 3)]
async fn fill(mut buf: &mut [u8], room: &Mutex<Vec<usize>>) -> Result<(), Flaky> {
    room.lock().unwrap().push(buf.len());
    // `Write for &mut [u8]` advances the binding, then the binding is moved.
    std::io::Write::write_all(&mut buf, b"a").expect("room left");
    write_through(buf, b"b");
    Err(Flaky::Down)
}

#[tokio::test(start_paused = true)]
async fn a_mut_binding_of_a_mut_reference_is_reborrowed_afresh_and_may_be_moved() {
    let mut buf = [0; 4];
    let room = Mutex::new(Vec::new());
    assert_eq!(fill(&mut buf, &room).await, Err(Flaky::Down));
    assert_eq!(*room.lock().unwrap(), [4, 4, 4], "every attempt writes from the start");
    assert_eq!(buf, [b'a', b'b', 0, 0]);
}

#[resilient(jitter = "none", base_ms = 1, max_attempts = 3)]
async fn describe<'a, T>(
    label: &'a str,
    value: T,
    suffix: impl AsRef<str> + Clone,
    attempts: &AtomicU32,
) -> Result<(&'a str, String), Flaky>
where
    T: std::fmt::Display + Clone,
{
    if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
        return Err(Flaky::Down);
    }
    Ok((label, format!("{label}{value}{}", suffix.as_ref())))
}

#[tokio::test(start_paused = true)]
async fn generic_functions_with_lifetimes_and_impl_trait_arguments_are_retried() {
    let attempts = AtomicU32::new(0);
    assert_eq!(describe("n=", 7, "!", &attempts).await, Ok(("n=", "n=7!".to_owned())));
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

trait Ledger {
    async fn balance(&self, account: &str) -> Result<u64, Flaky>;
}

struct Books {
    attempts: AtomicU32,
}

impl Ledger for Books {
    #[resilient(jitter = "none", base_ms = 1)]
    async fn balance(&self, account: &str) -> Result<u64, Flaky> {
        if self.attempts.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(Flaky::Down);
        }
        Ok(account.len() as u64)
    }
}

#[tokio::test(start_paused = true)]
async fn async_fns_in_trait_impls_are_retried() {
    let books = Books { attempts: AtomicU32::new(0) };
    assert_eq!(books.balance("savings").await, Ok(7));
    assert_eq!(books.attempts.load(Ordering::SeqCst), 2);
}

#[resilient(jitter = "none", base_ms = 1, breaker = "spawned")]
async fn fetch_owned(name: String, storm: Storm) -> Result<String, Flaky> {
    storm.call().await?;
    Ok(name)
}

#[tokio::test(start_paused = true)]
async fn the_returned_future_can_be_spawned() {
    let storm = Storm::until(ms(2));
    let registry = Registry::new();
    let task = tokio::spawn(registry.scope(fetch_owned("a".to_owned(), storm.clone())));
    assert_eq!(task.await.expect("the task ran"), Ok("a".to_owned()));
    assert_eq!(storm.attempts(), 3);
}

/// `Send` but not `Sync`, as a `Cell` or a `Box<dyn Fn() + Send>` is: a
/// future that holds one is `Send`, one that holds a borrow of it is not.
struct Unshared {
    count: std::cell::Cell<u32>,
}

impl Unshared {
    #[resilient(max_attempts = 1)]
    async fn bump(self, by: std::cell::Cell<u32>) -> Result<u32, Flaky> {
        self.count.set(self.count.get() + by.get());
        tokio::task::yield_now().await;
        Ok(self.count.get())
    }
}

#[tokio::test(start_paused = true)]
async fn a_single_attempt_of_send_but_not_sync_arguments_can_be_spawned() {
    let tally = Unshared { count: std::cell::Cell::new(1) };
    let task = tokio::spawn(tally.bump(std::cell::Cell::new(2)));
    assert_eq!(task.await.expect("the task ran"), Ok(3));
}

/// Locks a single attempt's parameters hold: what its fallback finds of them.
static LEDGER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
static AUDIT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Names `ledger` in its body, and never `_audit`.
#[resilient(max_attempts = 1, fallback = locks_free)]
async fn hold_ledger(
    ledger: tokio::sync::MutexGuard<'static, ()>,
    _audit: tokio::sync::MutexGuard<'static, ()>,
) -> Result<[bool; 2], Flaky> {
    let () = *ledger;
    Err(Flaky::Down)
}

/// Whether each lock is free.
async fn locks_free(_: Flaky) -> Result<[bool; 2], Flaky> {
    Ok([LEDGER.try_lock().is_ok(), AUDIT.try_lock().is_ok()])
}

/// The price of the test above: the single attempt owns the parameters its
/// body names, so it drops them as it ends, before the fallback runs (a
/// future that borrowed them instead would not be `Send` for those that are
/// not `Sync`). A parameter the body never names lives until the call ends,
/// as every parameter does without the attribute. The README says so.
#[tokio::test(start_paused = true)]
async fn a_single_attempt_drops_the_parameters_its_body_names_before_the_fallback() {
    let held = hold_ledger(LEDGER.lock().await, AUDIT.lock().await).await;
    assert_eq!(held, Ok([true, false]));
}

// An owned receiver is borrowed by each attempt, as `&self` would be: every
// body below compiles with the attribute as it does without it (each was
// broken by a version that lent it as `&mut` instead, for a `Send` future
// with a receiver that is not `Sync`: see the README).

/// A format macro of the user's.
macro_rules! my_format {
    ($($t:tt)*) => { format!($($t)*) };
}

/// A field of the receiver it is given by name, as a `$this:ident`.
macro_rules! field_of {
    ($this:ident . $field:ident) => {
        $this.$field
    };
}

impl Unshared {
    #[resilient(jitter = "none", base_ms = 1)]
    async fn count_to_three(self) -> Result<String, Flaky> {
        self.count.set(self.count.get() + 1);
        tokio::task::yield_now().await;
        tracing::debug!(?self.count, "counted");
        let seen = format!("{self:?} {}", if self.count.get() >= 3 { "at" } else { "under" });
        if self.count.get() < 3 { Err(Flaky::Down) } else { Ok(seen) }
    }

    #[resilient(jitter = "none", base_ms = 1)]
    async fn replace_until_three(mut self) -> Result<u32, Flaky> {
        self = Unshared { count: std::cell::Cell::new(self.count.get() + 1) };
        tokio::task::yield_now().await;
        if self.count.get() < 3 { Err(Flaky::Down) } else { Ok(self.count.get()) }
    }

    #[resilient(jitter = "none", base_ms = 1, max_attempts = 3)]
    async fn described(self, fail_first: &AtomicU32) -> Result<String, Flaky> {
        self.count.set(self.count.get() + 1);
        if fail_first.fetch_sub(1, Ordering::SeqCst) > 0 {
            return Err(Flaky::Down);
        }
        Ok(my_format!("{self:?}"))
    }
}

impl std::fmt::Debug for Unshared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", self.count.get())
    }
}

/// A receiver whose fields a retrying method's body hands to `move`
/// closures, `async move` blocks and macros, and uses after them.
#[derive(Clone, Copy)]
struct Scale {
    factor: u32,
    offset: u32,
}

impl Scale {
    #[resilient(jitter = "none", base_ms = 1, max_attempts = 3)]
    async fn apply(self, items: &[u32], fail_first: &AtomicU32) -> Result<u32, Flaky> {
        let scaled: u32 = items.iter().map(move |i| i * self.factor).sum();
        let offset = async move { self.offset }.await;
        if fail_first.fetch_sub(1, Ordering::SeqCst) > 0 {
            return Err(Flaky::Down);
        }
        Ok(scaled + offset + self.factor)
    }

    /// The same captures, written in macros' arguments.
    #[resilient(jitter = "none", base_ms = 1, max_attempts = 3)]
    async fn apply_in_macros(self, items: &[u32], fail_first: &AtomicU32) -> Result<u32, Flaky> {
        assert!(items.iter().all(move |i| *i < self.factor * 100), "an item over the limit");
        let (scaled, offset) =
            tokio::join!(async move { items.iter().map(|i| i * self.factor).sum::<u32>() }, async move {
                self.offset
            });
        if fail_first.fetch_sub(1, Ordering::SeqCst) > 0 {
            return Err(Flaky::Down);
        }
        Ok(scaled + offset + self.factor)
    }

    #[resilient(jitter = "none", base_ms = 1, max_attempts = 3)]
    async fn given_to_macros(self, fail_first: &AtomicU32) -> Result<(&'static str, u32), Flaky> {
        if fail_first.fetch_sub(1, Ordering::SeqCst) > 0 {
            return Err(Flaky::Down);
        }
        Ok((stringify!(self), field_of!(self.factor) + self.offset))
    }
}

#[tokio::test(start_paused = true)]
async fn an_owned_receiver_is_the_bodys_self_in_closures_async_blocks_and_macros_as_without_the_attribute() {
    let tally = Unshared { count: std::cell::Cell::new(0) };
    assert_eq!(tally.count_to_three().await, Ok("#3 at".to_owned()));
    let tally = Unshared { count: std::cell::Cell::new(0) };
    assert_eq!(tally.replace_until_three().await, Ok(3));
    let two_attempts = || AtomicU32::new(1);
    let tally = Unshared { count: std::cell::Cell::new(0) };
    assert_eq!(tally.described(&two_attempts()).await, Ok("#2".to_owned()));
    let scale = Scale { factor: 2, offset: 5 };
    assert_eq!(scale.apply(&[1, 2, 3], &two_attempts()).await, Ok(12 + 5 + 2));
    assert_eq!(scale.apply_in_macros(&[1, 2, 3], &two_attempts()).await, Ok(12 + 5 + 2));
    assert_eq!(scale.given_to_macros(&two_attempts()).await, Ok(("self", 7)));
}

// ---------------------------------------------------------------------------
// Timeouts

#[resilient(jitter = "none", base_ms = 10, max_attempts = 3, attempt_timeout_ms = 50)]
async fn slow(calls: &AtomicU32) -> Result<(), Flaky> {
    calls.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(ms(1_000)).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn an_attempt_that_overruns_its_timeout_is_cancelled_and_retried() {
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let result = slow(&calls).await;
    assert_eq!(result, Err(Flaky::Rejected(Rejection::AttemptTimeout { after: ms(50) })));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(start.elapsed(), ms(50 + 10 + 50 + 20 + 50));
}

#[resilient(
    jitter = "none",
    base_ms = 10,
    max_attempts = 2,
    attempt_timeout_ms = 50,
    bulkhead = "attribute::one_place",
    breaker = "attribute::timed"
)]
async fn slow_once(calls: &AtomicU32) -> Result<u32, Flaky> {
    let n = calls.fetch_add(1, Ordering::SeqCst);
    if n == 0 {
        tokio::time::sleep(ms(1_000)).await;
    }
    Ok(n)
}

/// A plain first attempt that times out (it races its timer in the call's
/// own future) gives its bulkhead place back for the retry, which the one
/// place admits, and is a failure for the breaker. In the global registry,
/// where a first attempt is plain.
#[tokio::test(start_paused = true)]
async fn a_first_attempt_that_times_out_gives_its_place_to_the_retry() {
    let registry = stormproof::registry();
    // A place kept by the timed-out attempt would refuse the retry after 5 ms.
    let one_place = BulkheadConfig { max_concurrent: 1, max_wait: Some(ms(5)), ..Default::default() };
    registry.declare_bulkhead("attribute::one_place", one_place).unwrap();
    registry.declare_breaker("attribute::timed", BreakerConfig::default()).unwrap();
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    assert_eq!(slow_once(&calls).await, Ok(1));
    assert_eq!(start.elapsed(), ms(50 + 10));
    assert_eq!(registry.bulkhead("attribute::one_place").unwrap().in_use(), 0);
    let totals = registry.breaker("attribute::timed").unwrap().totals();
    assert_eq!((totals.calls, totals.failures), (2, 1));
}

#[resilient(jitter = "none", base_ms = 100, max_attempts = 10, deadline_ms = 1_000)]
async fn against_the_clock(storm: &Storm) -> Result<Duration, Flaky> {
    Ok(storm.call().await?)
}

#[tokio::test(start_paused = true)]
async fn the_deadline_ends_the_call_with_the_last_error() {
    let storm = Storm::endless();
    let start = Instant::now();
    assert_eq!(against_the_clock(&storm).await, Err(Flaky::Down));
    // 0, 100, 300, 700: the next wait (800 ms) would end past the deadline.
    assert_eq!(storm.calls(), [ms(0), ms(100), ms(300), ms(700)]);
    assert_eq!(start.elapsed(), ms(700));
}

#[resilient(
    jitter = "none",
    base_ms = 10,
    deadline_ms = 300,
    bulkhead = "attribute::cut_place",
    breaker = "attribute::cut"
)]
async fn hangs(calls: &AtomicU32) -> Result<(), Flaky> {
    calls.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3_600)).await;
    Ok(())
}

/// A function with a deadline starts plain too, its first attempt raced
/// with the deadline (the runtime's `call::timed`): one cut short ends the
/// call with `DeadlineExceeded` at the deadline, is a failure for the
/// breaker, and gives its place back, as the general path does.
#[tokio::test(start_paused = true)]
async fn a_first_attempt_the_deadline_cuts_short_ends_the_call() {
    let registry = stormproof::registry();
    registry.declare_breaker("attribute::cut", BreakerConfig::default()).unwrap();
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let deadline = Rejection::DeadlineExceeded { after: ms(300) };
    assert_eq!(hangs(&calls).await, Err(Flaky::Rejected(deadline)));
    assert_eq!((calls.load(Ordering::SeqCst), start.elapsed()), (1, ms(300)));
    assert_eq!(registry.bulkhead("attribute::cut_place").unwrap().in_use(), 0);
    let totals = registry.breaker("attribute::cut").unwrap().totals();
    assert_eq!((totals.calls, totals.failures), (1, 1));
}

// ---------------------------------------------------------------------------
// Named guards in a scoped registry

#[resilient(jitter = "none", base_ms = 10, max_attempts = 5, breaker = "attribute-payments")]
async fn pay(calls: &AtomicU32) -> Result<(), Flaky> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Flaky::Down)
}

#[tokio::test(start_paused = true)]
async fn the_named_breaker_opens_and_then_fails_calls_fast() {
    let registry = Registry::new();
    let config = BreakerConfig { failure_threshold: 3, ..Default::default() };
    registry.declare_breaker("attribute-payments", config).unwrap();
    let calls = AtomicU32::new(0);

    assert_eq!(registry.scope(pay(&calls)).await, Err(Flaky::Down));
    assert_eq!(calls.load(Ordering::SeqCst), 3, "the third failure opened the breaker");
    let breaker = registry.breaker("attribute-payments").unwrap();
    assert_eq!(breaker.state(), BreakerState::Open);

    let rejected = registry.scope(pay(&calls)).await;
    let open = Rejection::CircuitOpen { breaker: "attribute-payments".to_owned() };
    assert_eq!(rejected, Err(Flaky::Rejected(open)));
    assert_eq!(calls.load(Ordering::SeqCst), 3, "an open breaker runs nothing");
    assert!(
        stormproof::registry().breaker("attribute-payments").is_none(),
        "the scoped registry is honoured, the global one untouched"
    );
}

#[resilient(jitter = "none", base_ms = 10, max_attempts = 10, budget = "attribute-retries")]
async fn spend(calls: &AtomicU32) -> Result<(), Flaky> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Flaky::Down)
}

#[tokio::test(start_paused = true)]
async fn the_named_budget_stops_retries_but_never_first_attempts() {
    let registry = Registry::new();
    let config = TokenBucket { capacity: 2, retry_cost: 1, refill_per_success: 1, ..Default::default() };
    registry.declare_budget("attribute-retries", config).unwrap();
    let calls = AtomicU32::new(0);

    assert_eq!(registry.scope(spend(&calls)).await, Err(Flaky::Down));
    assert_eq!(calls.load(Ordering::SeqCst), 3, "one attempt and two paid retries");
    assert_eq!(registry.budget("attribute-retries").unwrap().available(), 0);

    assert_eq!(registry.scope(spend(&calls)).await, Err(Flaky::Down));
    assert_eq!(calls.load(Ordering::SeqCst), 4, "the first attempt is free");
}

#[resilient(max_attempts = 3, bulkhead = "attribute-db")]
async fn query(hold: Duration) -> Result<(), Flaky> {
    tokio::time::sleep(hold).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_named_bulkhead_rejects_what_it_cannot_admit() {
    let registry = Registry::new();
    let config = BulkheadConfig { max_concurrent: 1, max_wait: Some(ms(10)), ..Default::default() };
    registry.declare_bulkhead("attribute-db", config).unwrap();

    let (first, second) = registry.scope(async { tokio::join!(query(ms(50)), query(ms(50))) }).await;
    assert_eq!(first, Ok(()));
    let full = Rejection::BulkheadFull { bulkhead: "attribute-db".to_owned() };
    assert_eq!(second, Err(Flaky::Rejected(full)), "not retried: a full bulkhead fails fast");
    assert_eq!(registry.bulkhead("attribute-db").unwrap().in_use(), 0);
}

// ---------------------------------------------------------------------------
// Durations too long to represent

#[resilient(
    jitter = "none",
    base_ms = 1,
    attempt_timeout_ms = 18_446_744_073_709_551_614,
    deadline_ms = 18_446_744_073_709_551_615
)]
async fn hour_long_attempts(calls: &AtomicU32) -> Result<u32, Flaky> {
    tokio::time::sleep(Duration::from_secs(3_600)).await;
    let call = calls.fetch_add(1, Ordering::SeqCst) + 1;
    if call < 3 { Err(Flaky::Down) } else { Ok(call) }
}

#[tokio::test(start_paused = true)]
async fn deadline_and_timeout_literals_too_large_to_represent_never_fire() {
    let calls = AtomicU32::new(0);
    assert_eq!(hour_long_attempts(&calls).await, Ok(3));
}

// ---------------------------------------------------------------------------
// `&mut self` moved by the body

#[derive(Default)]
struct Account {
    attempts: u32,
}

impl Account {
    #[resilient(jitter = "none", base_ms = 1)]
    async fn debit(&mut self) -> Result<u32, Flaky> {
        let account = self;
        account.attempts += 1;
        if account.attempts < 3 { Err(Flaky::Down) } else { Ok(account.attempts) }
    }
}

#[tokio::test(start_paused = true)]
async fn a_mut_self_method_that_moves_self_is_retried_on_a_fresh_reborrow() {
    let mut account = Account::default();
    assert_eq!(account.debit().await, Ok(3));
    assert_eq!(account.attempts, 3);
}

/// Names its parameter and a local `__self`, as the macro once named the
/// reborrow of `self`.
#[derive(Default)]
struct Tally {
    total: u32,
    attempts: u32,
}

impl Tally {
    #[resilient(jitter = "none", base_ms = 1)]
    async fn add(&mut self, __self: u32) -> Result<u32, Flaky> {
        self.attempts += 1;
        self.total += __self;
        let __self = self.attempts;
        if __self < 2 { Err(Flaky::Down) } else { Ok(self.total) }
    }
}

#[tokio::test(start_paused = true)]
async fn a_parameter_or_local_named_like_the_receivers_reborrow_is_the_users_own() {
    let mut tally = Tally::default();
    assert_eq!(tally.add(5).await, Ok(10), "two attempts, each adding the parameter");
    assert_eq!(tally.attempts, 2);
}

// ---------------------------------------------------------------------------
// A hedged method on an owned receiver

/// Its first answer is slow; every later one is quick.
struct Mirror {
    name: String,
    calls: AtomicU32,
}

impl Mirror {
    #[resilient(jitter = "none", base_ms = 1, max_attempts = 2, hedge_after_ms = 100)]
    async fn fetch(self: Arc<Self>) -> Result<String, Flaky> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        if call == 0 {
            tokio::time::sleep(ms(1_000)).await;
        }
        let this = self; // The body may move its receiver.
        Ok(format!("{}#{call}", this.name))
    }
}

#[tokio::test(start_paused = true)]
async fn a_hedged_method_on_an_arc_receiver_gives_every_attempt_its_own_clone() {
    let mirror = Arc::new(Mirror { name: "m".to_owned(), calls: AtomicU32::new(0) });
    let start = Instant::now();
    assert_eq!(Arc::clone(&mirror).fetch().await, Ok("m#1".to_owned()), "the hedge answered");
    assert_eq!(start.elapsed(), ms(100), "started at 100 ms, answered at once");
    assert_eq!(mirror.calls.load(Ordering::SeqCst), 2);
    assert_eq!(Arc::strong_count(&mirror), 1, "the slow attempt and every clone were dropped");
}

// ---------------------------------------------------------------------------
// `tracing` fields named after `self`

/// The fields of every event and span recorded, as `name=value`.
#[derive(Clone, Default)]
struct Fields(Arc<Mutex<Vec<String>>>);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.lock().unwrap().push(format!("{}={value:?}", field.name()));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Fields {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() == module_path!() {
            event.record(&mut self.clone());
        }
    }

    fn on_new_span(
        &self,
        span: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if span.metadata().target() == module_path!() {
            span.record(&mut self.clone());
        }
    }
}

struct Traced {
    calls: u32,
}

impl Traced {
    #[resilient(jitter = "none", base_ms = 1, max_attempts = 2)]
    async fn traced(&mut self) -> Result<u32, Flaky> {
        self.calls += 1;
        tracing::info!(self.calls, ?self.calls, "attempt {}", self.calls);
        tracing::info!(self.calls = 0, doubled = self.calls * 2);
        let _span = tracing::info_span!("call", %self.calls);
        if self.calls < 2 { Err(Flaky::Down) } else { Ok(self.calls) }
    }
}

/// `tracing` names a field written as a path after the path: the body's
/// `self`, renamed for each attempt's reborrow, still gives it its name.
#[tokio::test(start_paused = true)]
async fn a_tracing_field_written_as_a_self_path_keeps_its_name() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let fields = Fields::default();
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(fields.clone()));
    assert_eq!(Traced { calls: 1 }.traced().await, Ok(2));
    let seen = fields.0.lock().unwrap().clone();
    assert_eq!(
        seen,
        ["message=attempt 2", "self.calls=2", "self.calls=2", "self.calls=0", "doubled=4", "self.calls=2"]
    );
}

// ---------------------------------------------------------------------------
// `self` spelt out by `stringify!`

struct Spelt {
    calls: u32,
}

impl Spelt {
    #[resilient(jitter = "none", base_ms = 1, max_attempts = 2)]
    async fn spell(&mut self) -> Result<[&'static str; 3], Flaky> {
        self.calls += 1;
        if self.calls < 2 {
            return Err(Flaky::Down);
        }
        Ok([stringify!(self), concat!("at ", stringify!(self.calls)), core::stringify!(&mut *self)])
    }
}

/// `stringify!` reads no name, so the `self` each attempt's reborrow is
/// renamed from is left in it: it spells `self`, as without the attribute.
#[tokio::test(start_paused = true)]
async fn stringify_spells_self_as_written() {
    assert_eq!(Spelt { calls: 0 }.spell().await, Ok(["self", "at self.calls", "&mut *self"]));
}
