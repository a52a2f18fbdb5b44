//! A successful call allocates nothing when no tracing subscriber enables
//! DEBUG (none installed, or one filtered at INFO): a counting global
//! allocator proves it. Its own test binary, because the allocator is global.
//! The one exception is a hedging policy, whose round allocates: that count
//! is asserted too, so that what BENCHMARKS.md says of it stays true.
//!
//! Only allocations made on the test's own thread while it is counting are
//! counted (a thread-local flag), so the test harness, other tests of this
//! binary running in parallel and tokio's threads cannot disturb the count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Once;

use stormproof::{
    Classify, ErrorClass, Policy, Rejection, breaker::BreakerConfig, budget::BudgetConfig,
    bulkhead::BulkheadConfig, registry, resilient,
};

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Bytes allocated less bytes freed on this thread while counting.
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

fn note_allocation() {
    // `try_with`: a thread being torn down has no locals left; it is not counting.
    let _ = COUNTING.try_with(|counting| {
        if counting.get() {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

/// `bytes` more (or, negative, fewer) live on this thread, if it is counting.
fn note_live(bytes: i64) {
    let _ = COUNTING.try_with(|counting| {
        if counting.get() {
            let _ = LIVE.try_with(|live| live.set(live.get() + bytes));
        }
    });
}

// SAFETY: every method forwards to `System` unchanged; counting touches only
// `const` thread-locals, which neither allocate nor run destructors.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        note_live(layout.size() as i64);
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        note_live(layout.size() as i64);
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        note_live(new_size as i64 - layout.size() as i64);
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note_live(-(layout.size() as i64));
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap allocations made on this thread by `f`.
async fn allocations_in<F: Future>(f: impl FnOnce() -> F) -> u64 {
    ALLOCATIONS.set(0);
    COUNTING.set(true);
    f().await;
    COUNTING.set(false);
    ALLOCATIONS.get()
}

const CALLS: u32 = 1_000;

/// Heap allocations made on this thread by `CALLS` successful calls of
/// `call`, each checked to return its argument.
async fn allocations_in_calls<Fut>(call: impl Fn(u64) -> Fut) -> u64
where
    Fut: Future<Output = Result<u64, ApiError>>,
{
    allocations_in(|| async {
        for i in 0..u64::from(CALLS) {
            assert_eq!(call(i).await.unwrap(), i);
        }
    })
    .await
}

#[derive(Debug)]
enum ApiError {
    #[allow(dead_code)]
    Rejected(Rejection),
}

impl Classify for ApiError {
    fn classify(&self) -> ErrorClass {
        match self {
            ApiError::Rejected(r) => r.classify(),
        }
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> Self {
        ApiError::Rejected(r)
    }
}

/// One test of this binary at a time: tracing caches each callsite's
/// interest, and the level filter, globally, so calls made on another
/// test's thread while a subscriber comes or goes (the span is one callsite
/// for every call) could leave it disabled for the test that counts on it.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The guards, declared up front in the global registry (this binary's own).
fn declare() {
    static DECLARED: Once = Once::new();
    DECLARED.call_once(|| {
        registry().declare_breaker("alloc-breaker", BreakerConfig::default()).unwrap();
        registry().declare_budget("alloc-budget", BudgetConfig::default()).unwrap();
        registry().declare_bulkhead("alloc-bulkhead", BulkheadConfig::default()).unwrap();
    });
}

#[resilient(breaker = "alloc-breaker", budget = "alloc-budget")]
async fn guarded(x: u64) -> Result<u64, ApiError> {
    Ok(std::hint::black_box(x))
}

#[resilient]
async fn unguarded(x: u64) -> Result<u64, ApiError> {
    Ok(std::hint::black_box(x))
}

#[tokio::test(flavor = "current_thread")]
async fn a_successful_call_with_breaker_and_budget_allocates_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    declare();
    // Warm-up: resolves the guard handles once and registers tracing's callsites.
    for i in 0..10 {
        assert_eq!(guarded(i).await.unwrap(), i);
    }
    let n = allocations_in_calls(guarded).await;
    assert_eq!(n, 0, "{n} allocations in {CALLS} successful calls");
    let breaker = registry().breaker("alloc-breaker").unwrap();
    assert_eq!(breaker.state(), stormproof::breaker::BreakerState::Closed);
}

#[resilient(breaker = "alloc-breaker", budget = "alloc-budget", bulkhead = "alloc-bulkhead")]
async fn bulkheaded(x: u64) -> Result<u64, ApiError> {
    Ok(std::hint::black_box(x))
}

#[resilient(
    breaker = "alloc-breaker",
    budget = "alloc-budget",
    bulkhead = "alloc-bulkhead",
    attempt_timeout_ms = 60_000
)]
async fn bulkheaded_with_timeout(x: u64) -> Result<u64, ApiError> {
    Ok(std::hint::black_box(x))
}

/// With a deadline too: the first attempt races one timer for both (the
/// runtime's `call::timed`), armed only if the attempt waits.
#[resilient(
    breaker = "alloc-breaker",
    budget = "alloc-budget",
    bulkhead = "alloc-bulkhead",
    attempt_timeout_ms = 60_000,
    deadline_ms = 120_000
)]
async fn bulkheaded_with_deadline(x: u64) -> Result<u64, ApiError> {
    Ok(std::hint::black_box(x))
}

/// Hedging, with the attempt answering before any hedge is due.
#[resilient(breaker = "alloc-breaker", budget = "alloc-budget", hedge_after_ms = 60_000)]
async fn hedged(x: u64) -> Result<u64, ApiError> {
    Ok(std::hint::black_box(x))
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_successful_call_through_a_bulkhead_allocates_nothing_with_a_timeout_or_a_deadline() {
    let _one = ONE_AT_A_TIME.lock().await;
    declare();
    for i in 0..10 {
        bulkheaded(i).await.unwrap();
        bulkheaded_with_timeout(i).await.unwrap();
        bulkheaded_with_deadline(i).await.unwrap();
    }
    let direct = allocations_in_calls(bulkheaded).await;
    let timed = allocations_in_calls(bulkheaded_with_timeout).await;
    let general = allocations_in_calls(bulkheaded_with_deadline).await;
    assert_eq!((direct, timed, general), (0, 0, 0), "allocations in {CALLS} successful calls each");
    assert_eq!(registry().bulkhead("alloc-bulkhead").unwrap().in_use(), 0);
}

/// Hedging is the one guard whose success path allocates: a round keeps its
/// attempts in a `Vec` and boxes each attempt and the next hedge's timer
/// (BENCHMARKS.md lists it). Three per call; this keeps the listing true.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedging_call_allocates_its_round_three_times_per_call() {
    let _one = ONE_AT_A_TIME.lock().await;
    declare();
    for i in 0..10 {
        hedged(i).await.unwrap();
    }
    let n = allocations_in_calls(hedged).await;
    assert_eq!(n, 3 * u64::from(CALLS));
}

#[tokio::test(flavor = "current_thread")]
async fn a_successful_call_with_defaults_allocates_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    for i in 0..10 {
        unguarded(i).await.unwrap();
    }
    let n = allocations_in_calls(unguarded).await;
    assert_eq!(n, 0, "{n} allocations in {CALLS} successful calls");
}

#[tokio::test(flavor = "current_thread")]
async fn a_successful_policy_run_with_breaker_and_budget_allocates_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    declare();
    let policy = Policy::builder().breaker("alloc-breaker").budget("alloc-budget").build().unwrap();
    let call = |i: u64| policy.run(move || async move { Ok::<_, ApiError>(i) });
    for i in 0..10 {
        call(i).await.unwrap();
    }
    let n = allocations_in_calls(call).await;
    assert_eq!(n, 0, "{n} allocations in {CALLS} successful calls");
}

/// With an attempt timeout or a deadline too (the first attempt races one
/// timer, armed only if it waits; `policy_run_timed` in
/// `benches/instructions.rs` shows what that saves).
#[tokio::test(flavor = "current_thread")]
async fn a_successful_policy_run_with_a_timeout_or_a_deadline_allocates_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    declare();
    let minute = std::time::Duration::from_secs(60);
    let guarded = || Policy::builder().breaker("alloc-breaker").budget("alloc-budget");
    let limited = [
        ("an attempt timeout", guarded().attempt_timeout(minute)),
        ("a deadline", guarded().deadline(minute)),
        ("both", guarded().attempt_timeout(minute).deadline(2 * minute)),
    ];
    for (limit, policy) in limited {
        let policy = policy.build().unwrap();
        let call = |i: u64| policy.run(move || async move { Ok::<_, ApiError>(i) });
        for i in 0..10 {
            call(i).await.unwrap();
        }
        let n = allocations_in_calls(call).await;
        assert_eq!(n, 0, "{n} allocations in {CALLS} successful calls with {limit}");
    }
}

/// `Display` in pieces, as a `Uuid`'s is (`to_string` would grow its
/// `String` several times).
#[derive(Clone)]
struct OrderRef(u64, u64);

impl std::fmt::Display for OrderRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:08x}-{:04x}-order", self.0, self.1)
    }
}

#[resilient(breaker = "alloc-tenants", budget = "alloc-budget", per = tenant)]
async fn per_tenant(tenant: u64) -> Result<u64, ApiError> {
    Ok(std::hint::black_box(tenant))
}

#[tokio::test(flavor = "current_thread")]
async fn a_successful_call_with_a_breaker_per_key_allocates_nothing_for_a_key_held() {
    let _one = ONE_AT_A_TIME.lock().await;
    declare();
    for tenant in 0..16 {
        assert_eq!(per_tenant(tenant).await.unwrap(), tenant); // each key's breaker made once
    }
    let n = allocations_in(|| async {
        for i in 0..u64::from(CALLS) {
            assert_eq!(per_tenant(i % 16).await.unwrap(), i % 16);
        }
    })
    .await;
    assert_eq!(n, 0, "{n} allocations in {CALLS} successful calls over 16 tenants");
    assert_eq!(registry().keyed_breakers("alloc-tenants").unwrap().len(), 16);
}

/// `per_tenant` with a set of its own, so that the test above counts its
/// own keys when the tests share a process (`cargo test`).
#[resilient(breaker = "alloc-million", budget = "alloc-budget", per = tenant)]
async fn per_tenant_of_a_million(tenant: u64) -> Result<u64, ApiError> {
    Ok(std::hint::black_box(tenant))
}

/// A breaker per key holds at most `max_keys` keys: after a million
/// distinct tenants, the heap holds what it held after the first 50,000
/// (each new key evicts the least recently used one; by then the key map
/// has grown to the size its churn keeps it at, and the label set is full).
#[tokio::test(flavor = "current_thread")]
async fn a_million_distinct_keys_use_constant_memory() {
    let _one = ONE_AT_A_TIME.lock().await;
    declare();
    const WARM: u64 = 50_000;
    ALLOCATIONS.set(0);
    LIVE.set(0);
    COUNTING.set(true);
    for tenant in 1_000_000..1_000_000 + WARM {
        per_tenant_of_a_million(tenant).await.unwrap();
    }
    let after_warm = LIVE.get();
    for tenant in 1_000_000 + WARM..2_000_000 {
        per_tenant_of_a_million(tenant).await.unwrap();
    }
    let after_million = LIVE.get();
    COUNTING.set(false);
    let held = registry().keyed_breakers("alloc-million").unwrap().len();
    assert_eq!(held, 1_024, "max_keys");
    assert!(
        after_million <= after_warm + 4_096,
        "{after_warm} bytes live after {WARM} keys, {after_million} after a million"
    );
    assert!(after_warm > 1_024 * 1_000, "{after_warm} bytes: the breakers held are counted");
}

#[resilient(breaker = "alloc-breaker", budget = "alloc-budget", idempotent = false, key = order_id)]
async fn keyed_by_text(order_id: String) -> Result<u64, ApiError> {
    std::hint::black_box(order_id);
    Ok(stormproof::idempotency_key().map_or(0, |key| key.len() as u64))
}

/// `keyed_by_text` without its key: what the call costs without one (each
/// attempt gets its own clone of the `String`).
#[resilient(breaker = "alloc-breaker", budget = "alloc-budget")]
async fn unkeyed_text(order_id: String) -> Result<u64, ApiError> {
    Ok(std::hint::black_box(order_id).len() as u64)
}

#[resilient(breaker = "alloc-breaker", budget = "alloc-budget", idempotent = false, key = order_id)]
async fn keyed_by_integer(order_id: u64) -> Result<u64, ApiError> {
    std::hint::black_box(order_id);
    Ok(stormproof::idempotency_key().map_or(0, |key| key.len() as u64))
}

#[resilient(breaker = "alloc-breaker", budget = "alloc-budget", idempotent = false, key = order_id)]
async fn keyed_by_display(order_id: OrderRef) -> Result<u64, ApiError> {
    std::hint::black_box(order_id);
    Ok(stormproof::idempotency_key().map_or(0, |key| key.len() as u64))
}

/// Heap allocations made by a successful call for each of `arguments`
/// (built before counting), each checked to see its key of `key_len` bytes.
async fn allocations_per_call_of<A, Fut>(arguments: Vec<A>, key_len: u64, call: impl Fn(A) -> Fut) -> u64
where
    Fut: Future<Output = Result<u64, ApiError>>,
{
    let calls = arguments.len() as u64;
    let n = allocations_in(|| async {
        for argument in arguments {
            assert_eq!(call(argument).await.unwrap(), key_len);
        }
    })
    .await;
    n / calls
}

/// A keyed call makes its key's text once, in the `Arc<str>` its attempts
/// share: one allocation, whatever the key's type (not a `String` first and
/// then the `Arc`, which would be two, or more as the `String` grows). A
/// `String` argument is cloned for the attempt, keyed or not: that clone is
/// counted apart.
#[tokio::test(flavor = "current_thread")]
async fn a_keyed_call_allocates_its_key_once() {
    let _one = ONE_AT_A_TIME.lock().await;
    declare();
    keyed_by_integer(1).await.unwrap();

    let texts = || (0..CALLS).map(|i| format!("order-{i:06}")).collect();
    let clone = allocations_per_call_of(texts(), 12, unkeyed_text).await;
    assert_eq!(clone, 1, "the argument's clone");
    assert_eq!(allocations_per_call_of(texts(), 12, keyed_by_text).await - clone, 1, "text");
    let integers = (0..u64::from(CALLS)).map(|i| 1_000_000 + i).collect();
    assert_eq!(allocations_per_call_of(integers, 7, keyed_by_integer).await, 1, "integer");
    let refs = (0..u64::from(CALLS)).map(|i| OrderRef(0xdead_0000 + i, 0xbeef)).collect();
    assert_eq!(allocations_per_call_of(refs, 19, keyed_by_display).await, 1, "display");
}

/// Successful calls of `guarded` under `subscriber`, installed on this
/// thread only: the allocations they make, after a warm-up.
async fn allocations_under(subscriber: impl tracing::Subscriber + Send + Sync + 'static) -> u64 {
    let _one = ONE_AT_A_TIME.lock().await;
    declare();
    let _installed = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    // Warm-up: registers the callsites with this subscriber.
    for i in 0..10 {
        guarded(i).await.unwrap();
    }
    allocations_in_calls(guarded).await
}

/// A log line formatter that writes nowhere, at `level`.
fn fmt_subscriber(level: tracing::Level) -> impl tracing::Subscriber + Send + Sync + 'static {
    tracing_subscriber::fmt().with_max_level(level).with_writer(std::io::sink).finish()
}

#[tokio::test(flavor = "current_thread")]
async fn a_successful_call_under_an_info_level_fmt_subscriber_allocates_nothing() {
    // The `stormproof.call` span is DEBUG: an INFO filter disables it.
    let n = allocations_under(fmt_subscriber(tracing::Level::INFO)).await;
    assert_eq!(n, 0, "{n} allocations in {CALLS} successful calls");
}

#[tokio::test(flavor = "current_thread")]
async fn a_successful_call_under_an_info_env_filter_allocates_nothing() {
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new("info"))
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink));
    let n = allocations_under(subscriber).await;
    assert_eq!(n, 0, "{n} allocations in {CALLS} successful calls");
}

/// Where the claim ends: a subscriber that enables DEBUG enables each call's
/// span, and the subscriber allocates to record it. (Also shows that the
/// subscriber tests above really install their subscriber.)
#[tokio::test(flavor = "current_thread")]
async fn a_debug_level_subscriber_allocates_for_each_calls_span() {
    let n = allocations_under(fmt_subscriber(tracing::Level::DEBUG)).await;
    assert!(n >= u64::from(CALLS), "{n} allocations in {CALLS} successful calls");
}

/// The counter itself works: without this, a broken allocator hook would
/// make every test above pass.
#[tokio::test(flavor = "current_thread")]
async fn the_counter_sees_allocations() {
    let n = allocations_in(|| async {
        std::hint::black_box(Box::new(7u64));
    })
    .await;
    assert_eq!(n, 1);
}

/// The tower layer runs a plain call's first attempt in its own response
/// future, without a box (issue 42): around a service answering at once,
/// with a breaker and a budget, `ResilientLayer::cloning` allocates
/// nothing, and `ResilientLayer::new` nothing but the `Attempts` extension
/// it puts in the response (measured here the same way: one insert into an
/// empty response's extensions).
#[cfg(feature = "tower")]
mod tower_layer {
    use super::*;

    use bytes::Bytes;
    use http::{Request, Response};
    use http_body_util::Full;
    use stormproof::http::Attempts;
    use stormproof::http::tower::ResilientLayer;
    use tower::{Layer, Service, ServiceExt, service_fn};

    /// A value of `Attempts`'s size, which has no public constructor.
    #[derive(Clone)]
    struct SizeOfAttempts(#[allow(dead_code)] u32);

    fn policy() -> Policy {
        Policy::builder().max_attempts(4).breaker("alloc-breaker").budget("alloc-budget").build().unwrap()
    }

    /// Allocations made on this thread by `CALLS` calls of `service`, one
    /// request (made by `request`, outside the count) at a time.
    async fn allocations_through<S, R>(service: &mut S, request: impl Fn(u64) -> R) -> u64
    where
        S: Service<R>,
        S::Error: std::fmt::Debug,
    {
        let mut total = 0;
        for i in 0..u64::from(CALLS) {
            let request = request(i);
            total += allocations_in(|| async {
                let ready = service.ready().await.unwrap();
                std::hint::black_box(ready.call(request).await.unwrap());
            })
            .await;
        }
        total
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_successful_call_through_the_cloning_layer_allocates_nothing() {
        let _one = ONE_AT_A_TIME.lock().await;
        declare();
        let inner = service_fn(|n: u64| std::future::ready(Ok::<_, std::convert::Infallible>(n + 1)));
        let mut bare = inner;
        let mut layered = ResilientLayer::cloning(policy()).layer(inner);
        allocations_through(&mut layered, |i| i).await; // warm-up: resolves the guards
        let bare = allocations_through(&mut bare, |i| i).await;
        let layered = allocations_through(&mut layered, |i| i).await;
        assert_eq!((bare, layered), (0, 0), "allocations in {CALLS} successful calls");
    }

    /// With an attempt timeout or a deadline too: the first attempt races
    /// their timer in the response future, unboxed.
    #[tokio::test(flavor = "current_thread")]
    async fn a_successful_call_with_an_attempt_timeout_or_a_deadline_allocates_nothing() {
        let _one = ONE_AT_A_TIME.lock().await;
        declare();
        let inner = service_fn(|n: u64| std::future::ready(Ok::<_, std::convert::Infallible>(n + 1)));
        let guarded = || Policy::builder().max_attempts(4).breaker("alloc-breaker").budget("alloc-budget");
        let minute = std::time::Duration::from_secs(60);
        let limited = [
            ("an attempt timeout", guarded().attempt_timeout(minute)),
            ("a deadline", guarded().deadline(minute)),
            ("both", guarded().attempt_timeout(minute).deadline(2 * minute)),
        ];
        for (limit, policy) in limited {
            let mut layered = ResilientLayer::cloning(policy.build().unwrap()).layer(inner);
            allocations_through(&mut layered, |i| i).await; // warm-up: resolves the guards
            let layered = allocations_through(&mut layered, |i| i).await;
            assert_eq!(layered, 0, "allocations in {CALLS} successful calls with {limit}");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_successful_http_call_allocates_only_its_attempts_extension() {
        let _one = ONE_AT_A_TIME.lock().await;
        declare();
        type Body = Full<Bytes>;
        let inner = service_fn(|_: Request<Body>| {
            std::future::ready(Ok::<_, std::convert::Infallible>(Response::new(Full::new(
                Bytes::from_static(b"ok"),
            ))))
        });
        let request =
            |_| Request::get("http://in-process/").body(Full::new(Bytes::from_static(b""))).unwrap();
        let mut bare = inner;
        let mut layered = ResilientLayer::new(policy()).layer(inner);
        allocations_through(&mut layered, request).await; // warm-up
        let bare = allocations_through(&mut bare, request).await;
        let layered = allocations_through(&mut layered, request).await;
        let mut extension = 0;
        for _ in 0..CALLS {
            let mut response = Response::new(());
            extension +=
                allocations_in(|| async { response.extensions_mut().insert(SizeOfAttempts(1)) }).await;
        }
        assert!(extension > 0, "inserting the extension allocates");
        assert_eq!(size_of::<SizeOfAttempts>(), size_of::<Attempts>());
        assert_eq!(
            layered - bare,
            extension,
            "allocations in {CALLS} successful calls, beyond the bare service's"
        );
    }
}
