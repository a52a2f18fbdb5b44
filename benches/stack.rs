//! A five-layer stack side by side (issue 45, item 6): per-attempt timeout,
//! retry, circuit breaker, bulkhead and rate limit around the same
//! in-process `tower::service_fn` that answers at once, success path, in
//! one criterion run: ours (the tower layer and the attribute),
//! tower-resilience 0.13's layers and seatbelt 0.11's.
//!
//! ```sh
//! scripts/bench-stack.sh                                   # runs this, prints the table
//! cargo bench -p stormproof-benches --bench stack --features stack  # just the numbers
//! ```
//!
//! Every row makes one call the same way: `iters` calls back to back
//! through one instance of its stack (built once, as a client keeps its
//! stack), awaited on one current-thread tokio runtime (criterion's
//! `to_async`). Rows, in the `stack` group:
//! - `bare`: the inner service alone (made ready, then called);
//! - `stormproof_tower`: `ResilientLayer::cloning` with a `Policy` of
//!   4 attempts, a 1 s attempt timeout, and a named breaker, budget,
//!   bulkhead (64) and rate limit (never waits), global registry;
//! - `stormproof_attribute`: the same guards through `#[resilient]` on an
//!   `async fn` whose body calls the inner service;
//! - `tower_resilience`: tower-resilience's retry (4 attempts, its token
//!   bucket budget) → circuit breaker (defaults) → bulkhead (64) → rate
//!   limiter (never waits) → time limiter (1 s), each a tower layer;
//! - `seatbelt_3_layers`: seatbelt's retry (3 retries) → breaker (defaults)
//!   → timeout (1 s). Seatbelt 0.11 has no bulkhead and no rate limiter
//!   (its middleware: timeout, retry, hedging, breaker, fallback, chaos),
//!   so its stack has three layers;
//! - `stormproof_tower_3_layers` and `stormproof_attribute_3_layers`: ours
//!   with seatbelt's three (retry, breaker, 1 s attempt timeout; no budget,
//!   bulkhead or rate limit: `budget = "none"`), so that the comparison
//!   with seatbelt is like for like.
//!
//! All stacks put the layers in the same order as ours runs them: the
//! retry loop outside, then per attempt breaker, bulkhead, rate limit, and
//! the timeout innermost (around the inner service's call only).
//!
//! Before criterion runs, each row's heap allocations per call are counted
//! (10,000 calls after a warm-up, through a counting global allocator that
//! costs one relaxed load per allocation while it is off); with
//! `STACK_ALLOCS_OUT=path` they are also written there as JSON, which
//! `scripts/bench-stack.sh` reads.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt;
use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime};
use layered::Stack as _;
use stormproof::http::tower::ResilientLayer;
use stormproof::{
    Classify, ErrorClass, Policy, Rejection, breaker::BreakerConfig, budget::RatioBudget,
    bulkhead::BulkheadConfig, rate_limit::RateLimitConfig, registry, resilient,
};
use tower::{Layer, Service, ServiceExt, service_fn};

/// Counts heap allocations while [`COUNTING`] is on; otherwise the system allocator plus one relaxed load.
struct CountingAllocator;

/// Whether [`CountingAllocator`] counts.
static COUNTING: AtomicBool = AtomicBool::new(false);
/// Allocations (`alloc`, `alloc_zeroed`, `realloc`) counted while [`COUNTING`] was on.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// The system allocator, each allocation counted first.
// SAFETY: every method forwards to `System` with the caller's arguments unchanged.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded as received.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded as received.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded as received.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// The allocator of this benchmark binary.
#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// One allocation, counted if counting is on.
#[inline]
fn count() {
    if COUNTING.load(Ordering::Relaxed) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

/// The guards' names in the global registry (one of each kind, all named `stack`).
const GUARD: &str = "stack";
/// Attempts in all, the first included (every stack: 4, i.e. 3 retries).
const MAX_ATTEMPTS: u32 = 4;
/// Each attempt's timeout (every stack).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);
/// The first backoff (every stack; never waited on the success path).
const BASE_DELAY: Duration = Duration::from_millis(100);
/// Bulkhead places (ours and tower-resilience's).
const BULKHEAD: u32 = 64;
/// Rate-limit turns a second: the most ours allows, one a nanosecond, so no call ever waits.
const PER_SECOND: u32 = 1_000_000_000;
/// Rate-limit burst (turns allowed at once after a quiet spell).
const BURST: u32 = 1_000_000;
/// Calls counted for the allocations per call.
const COUNTED_CALLS: u64 = 10_000;

/// The inner service's error (never returned: every call succeeds). Small,
/// and every peer needs an error type it can carry: ours classifies it
/// and turns rejections into it, seatbelt's timeout and breaker build one.
#[derive(Debug, Clone)]
enum StackError {
    /// A stormproof guard refused the call.
    Rejected,
    /// Seatbelt's timeout fired.
    TimedOut,
}

/// For `std::error::Error` (tower's `BoxError` needs one).
impl fmt::Display for StackError {
    /// Names the variant.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// So that our tower layer can box it (`Into<BoxError>`).
impl std::error::Error for StackError {}

/// How our retry loop and breaker judge it.
impl Classify for StackError {
    /// Every variant is transient (never reached on the success path).
    fn classify(&self) -> ErrorClass {
        ErrorClass::Transient
    }
}

/// A refusal by one of our guards, as the attribute needs.
impl From<Rejection> for StackError {
    /// What the attribute returns when a guard refuses.
    fn from(_: Rejection) -> Self {
        StackError::Rejected
    }
}

/// The dependency every row calls: answers its request at once.
fn inner()
-> impl Service<u64, Response = u64, Error = StackError, Future: Send> + Copy + Send + Sync + 'static {
    service_fn(|n: u64| std::future::ready(Ok::<_, StackError>(black_box(n))))
}

/// Declares the named breaker (defaults: 5 failures in 10 s), budget
/// (`RatioBudget` defaults), bulkhead (64, waits) and rate limit (never
/// waits) in the global registry, which the tower layer and the attribute
/// both find at each call.
fn declare_guards() {
    let registry = registry();
    registry.declare_breaker(GUARD, BreakerConfig::default()).expect("breaker");
    registry.declare_budget(GUARD, RatioBudget::default()).expect("budget");
    registry
        .declare_bulkhead(GUARD, BulkheadConfig { max_concurrent: BULKHEAD, ..Default::default() })
        .expect("bulkhead");
    registry
        .declare_rate_limit(
            GUARD,
            RateLimitConfig { per_second: PER_SECOND, burst: BURST, max_wait: None, ..Default::default() },
        )
        .expect("rate limit");
}

/// Our policy for the tower layer: the attribute's arguments below, as a `Policy`.
fn policy() -> Policy {
    Policy::builder()
        .max_attempts(MAX_ATTEMPTS)
        .base(BASE_DELAY)
        .attempt_timeout(ATTEMPT_TIMEOUT)
        .breaker(GUARD)
        .budget(GUARD)
        .bulkhead(GUARD)
        .rate_limit(GUARD)
        .build()
        .expect("valid policy")
}

/// The `stormproof_attribute` row: the five guards through `#[resilient]`,
/// the body calling the same inner service (made ready, then called).
#[resilient(
    max_attempts = 4,
    base_ms = 100,
    attempt_timeout_ms = 1000,
    breaker = "stack",
    budget = "stack",
    bulkhead = "stack",
    rate_limit = "stack"
)]
async fn attribute_call(n: u64) -> Result<u64, StackError> {
    inner().oneshot(n).await
}

/// Our policy with seatbelt's three layers: retry, breaker and attempt
/// timeout (no budget, bulkhead or rate limit).
fn three_layer_policy() -> Policy {
    Policy::builder()
        .name("stack_3_layers")
        .max_attempts(MAX_ATTEMPTS)
        .base(BASE_DELAY)
        .attempt_timeout(ATTEMPT_TIMEOUT)
        .breaker(GUARD)
        .budget(stormproof::budget::NO_BUDGET)
        .build()
        .expect("valid policy")
}

/// The `stormproof_attribute_3_layers` row: [`three_layer_policy`] through `#[resilient]`.
#[resilient(max_attempts = 4, base_ms = 100, attempt_timeout_ms = 1000, breaker = "stack", budget = "none")]
async fn attribute_call_3_layers(n: u64) -> Result<u64, StackError> {
    inner().oneshot(n).await
}

/// The error tower-resilience's retry sees: each layer wraps the one inside it.
type TowerResilienceError = tower_resilience::circuitbreaker::CircuitBreakerError<
    tower_resilience::bulkhead::BulkheadServiceError<
        tower_resilience::ratelimiter::RateLimiterServiceError<
            tower_resilience::timelimiter::TimeLimiterError<StackError>,
        >,
    >,
>;

/// tower-resilience's five layers around the inner service, outermost
/// first: retry (4 attempts, exponential from 100 ms, its token-bucket
/// budget with the builder's defaults, as benches/storm/peers.rs sets it
/// up), circuit breaker (defaults: 50 % of a 100-call window), bulkhead (64
/// at once, waits), rate limiter (token bucket, 10^9 a second plus a burst
/// of 10^6: never waits), time limiter (1 s, cancels).
fn tower_resilience_stack()
-> impl Service<u64, Response = u64, Error = TowerResilienceError, Future: Send> + Clone + Send + 'static {
    use tower_resilience::bulkhead::BulkheadLayer;
    use tower_resilience::circuitbreaker::CircuitBreakerLayer;
    use tower_resilience::ratelimiter::RateLimiterLayer;
    use tower_resilience::retry::{RetryBudgetBuilder, RetryLayer};
    use tower_resilience::timelimiter::TimeLimiterLayer;

    let budget = RetryBudgetBuilder::new().token_bucket().build().expect("valid budget");
    let retry = RetryLayer::<u64, u64, TowerResilienceError>::builder()
        .name("stack")
        .max_attempts(MAX_ATTEMPTS as usize)
        .exponential_backoff(BASE_DELAY)
        .budget(budget)
        .build();
    let breaker = CircuitBreakerLayer::builder().name("stack").build().expect("valid breaker");
    let bulkhead = BulkheadLayer::builder()
        .name("stack")
        .max_concurrent_calls(BULKHEAD as usize)
        .build()
        .expect("valid bulkhead");
    let rate_limit = RateLimiterLayer::burst(PER_SECOND as usize, BURST as usize)
        .name("stack")
        .build()
        .expect("valid rate limiter");
    let timeout = TimeLimiterLayer::builder()
        .name("stack")
        .timeout_duration(ATTEMPT_TIMEOUT)
        .cancel_running_future(true)
        .build();
    retry.layer(breaker.layer(bulkhead.layer(rate_limit.layer(timeout.layer(inner())))))
}

/// What seatbelt's layers pass along: the inner service's result.
type SeatbeltOut = Result<u64, StackError>;

/// seatbelt's three layers (it has no bulkhead and no rate limiter)
/// around the inner service, outermost first: retry (3 retries,
/// exponential from 100 ms with jitter, every `Err` retried), breaker
/// (defaults: 10 % failures over 30 s once 100 calls were seen), timeout
/// (1 s). The inner tower service is called through `layered::tower::Adapter`
/// (ready, then call). Needs the runtime: its clock starts a task.
fn seatbelt_stack() -> impl layered::Service<u64, Out = SeatbeltOut> {
    use seatbelt::breaker::Breaker;
    use seatbelt::retry::{Backoff, Retry};
    use seatbelt::timeout::Timeout;
    use seatbelt::{RecoveryInfo, ResilienceContext};

    /// Ours too: an `Err` is a failure to retry and to count.
    fn recovery(out: &SeatbeltOut) -> RecoveryInfo {
        match out {
            Ok(_) => RecoveryInfo::never(),
            Err(_) => RecoveryInfo::retry(),
        }
    }

    let clock = tick::Clock::new_tokio();
    let context: ResilienceContext<u64, SeatbeltOut> = ResilienceContext::new(&clock).name("stack");
    (
        Retry::layer("stack_retry", &context)
            .clone_input()
            .recovery_with(|out: &SeatbeltOut, _| recovery(out))
            .max_retry_attempts(MAX_ATTEMPTS - 1) // retries, not attempts
            .backoff(Backoff::Exponential)
            .base_delay(BASE_DELAY)
            .use_jitter(true),
        Breaker::layer("stack_breaker", &context)
            .recovery_with(|out: &SeatbeltOut, _| recovery(out))
            .rejected_input_error(|_, _| StackError::Rejected),
        Timeout::layer("stack_timeout", &context)
            .timeout(ATTEMPT_TIMEOUT)
            .timeout_error(|_| StackError::TimedOut),
        layered::tower::Adapter(inner()),
    )
        .into_service()
}

/// A row's call through a tower `service`: made ready, then called, the answer checked.
fn tower_call<S>(service: &S) -> impl AsyncFnMut() + use<S>
where
    S: Service<u64, Response = u64> + Clone,
    S::Error: fmt::Debug,
{
    let mut service = service.clone();
    async move || {
        let answer = service.ready().await.unwrap().call(black_box(7)).await.unwrap();
        assert_eq!(black_box(answer), 7);
    }
}

/// A row's call of an annotated function (a function item: called
/// directly, as the attribute's callers do), the answer checked.
fn annotated_call<F, Fut>(function: F) -> impl AsyncFnMut()
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = Result<u64, StackError>>,
{
    async move || {
        let answer = function(black_box(7)).await.unwrap();
        assert_eq!(black_box(answer), 7);
    }
}

/// One row: `make` builds the row's call (its stack's instance) once per
/// sample; criterion times `iters` calls of it back to back, and before
/// that [`allocations_per_call`] counts its allocations.
fn row<C: AsyncFnMut()>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    rt: &tokio::runtime::Runtime,
    allocations: &mut Vec<(String, f64)>,
    name: &str,
    make: impl Fn() -> C,
) {
    allocations.push((name.to_owned(), allocations_per_call(rt, make())));
    group.bench_function(name, |b| {
        b.to_async(rt).iter_custom(|iters| {
            let mut call = make();
            async move {
                let started = Instant::now();
                for _ in 0..iters {
                    call().await;
                }
                started.elapsed()
            }
        })
    });
}

/// Heap allocations per call of `call`: [`COUNTED_CALLS`] calls counted after 1,000 uncounted.
fn allocations_per_call(rt: &tokio::runtime::Runtime, mut call: impl AsyncFnMut()) -> f64 {
    rt.block_on(async {
        for _ in 0..1_000 {
            call().await;
        }
        ALLOCATIONS.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::Relaxed);
        for _ in 0..COUNTED_CALLS {
            call().await;
        }
        COUNTING.store(false, Ordering::Relaxed);
    });
    ALLOCATIONS.load(Ordering::Relaxed) as f64 / COUNTED_CALLS as f64
}

/// Prints each row's allocations per call, and writes them as JSON to `$STACK_ALLOCS_OUT` if set.
fn report_allocations(allocations: &[(String, f64)]) {
    for (name, per_call) in allocations {
        println!("stack/{name}: {per_call:.2} allocations per call");
    }
    if let Some(path) = std::env::var_os("STACK_ALLOCS_OUT") {
        let fields: Vec<String> = allocations.iter().map(|(name, n)| format!("  \"{name}\": {n}")).collect();
        std::fs::write(&path, format!("{{\n{}\n}}\n", fields.join(",\n"))).expect("write STACK_ALLOCS_OUT");
    }
}

/// The `stack` group: every row, in one run.
fn stack(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    declare_guards();
    let mut allocations = Vec::new();
    let mut group = c.benchmark_group("stack");

    let bare = inner();
    row(&mut group, &rt, &mut allocations, "bare", || tower_call(&bare));

    let ours = ResilientLayer::cloning(policy()).layer(inner());
    row(&mut group, &rt, &mut allocations, "stormproof_tower", || tower_call(&ours));

    row(&mut group, &rt, &mut allocations, "stormproof_attribute", || annotated_call(attribute_call));

    let tower_resilience = tower_resilience_stack();
    row(&mut group, &rt, &mut allocations, "tower_resilience", || tower_call(&tower_resilience));

    let seatbelt = {
        let _runtime = rt.enter(); // seatbelt's clock spawns its timer driver here
        std::sync::Arc::new(seatbelt_stack())
    };
    row(&mut group, &rt, &mut allocations, "seatbelt_3_layers", || {
        let seatbelt = seatbelt.clone();
        async move || {
            let answer = layered::Service::execute(&*seatbelt, black_box(7)).await.unwrap();
            assert_eq!(black_box(answer), 7);
        }
    });

    let ours_3_layers = ResilientLayer::cloning(three_layer_policy()).layer(inner());
    row(&mut group, &rt, &mut allocations, "stormproof_tower_3_layers", || tower_call(&ours_3_layers));

    row(&mut group, &rt, &mut allocations, "stormproof_attribute_3_layers", || {
        annotated_call(attribute_call_3_layers)
    });

    group.finish();
    report_allocations(&allocations);
}

criterion_group!(benches, stack);
criterion_main!(benches);
