//! What both benchmarks measure: the annotated functions, the baseline, the
//! guards they use and the wrappers we compare against. `overhead.rs` times
//! them with criterion, `instructions.rs` counts their instructions under
//! callgrind; defining them once keeps the two tables about the same code.
//!
//! Each benchmark binary compiles this module on its own, so a function here
//! still has exactly one call site per binary (see `overhead.rs` on why that
//! matters for inlining).

use std::cell::Cell;
use std::hint::black_box;
use std::time::Duration;

use backon::ExponentialBuilder;
use stormproof::{
    Classify, ErrorClass, Policy, Rejection, breaker::BreakerConfig, budget::RatioBudget,
    bulkhead::BulkheadConfig, rate_limit::RateLimitConfig, registry, resilient, throttle::ThrottleConfig,
};

pub const BREAKER: &str = "bench-breaker";
pub const BUDGET: &str = "bench-budget";
pub const BULKHEAD: &str = "bench-bulkhead";
pub const THROTTLE: &str = "bench-throttle";
pub const RATE_LIMIT: &str = "bench-rate-limit";

#[derive(Debug)]
pub enum BenchError {
    Transient,
    #[allow(dead_code)]
    Rejected(Rejection),
}

impl Classify for BenchError {
    fn classify(&self) -> ErrorClass {
        match self {
            BenchError::Transient => ErrorClass::Transient,
            BenchError::Rejected(r) => r.classify(),
        }
    }
}

impl From<Rejection> for BenchError {
    fn from(r: Rejection) -> Self {
        BenchError::Rejected(r)
    }
}

/// The baseline: the same body with no attribute.
pub async fn bare(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

#[resilient]
pub async fn defaults(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

/// The floor under `defaults`: `bare`'s body wrapped by hand in only what
/// the attribute's success path must do under its contract, however it is
/// written. It tests what decides that a call is plain (no configuration
/// override in force, DEBUG off, not inside another call's attempt), and
/// marks the attempt on this thread, with tokio's id of its task, for each
/// poll of the body (the nesting rule: a call made inside the attempt is
/// nested, a task polled inside it is not, and a suspended attempt marks
/// nothing), putting the outer mark back after. No retry, no execution, no
/// guards: what `defaults` spends above this is the attribute's own
/// structure. (Around this body alone, which never waits, the mark could be
/// set once; the attribute cannot know that of a body, nor can a wrapper.)
pub async fn floor(x: u64) -> Result<u64, BenchError> {
    if !floor::plain() {
        return floor::not_plain();
    }
    floor::Marked(async move { Ok(black_box(x)) }).await
}

/// [`floor`] with a ratio budget alone, the one every operation has unless
/// it says `budget = "none"` (`defaults`' own, `budget_alone`'s named one):
/// the handle cached once, the first attempt counted, and on success the
/// budget refilled. What `defaults` spends above it is the attribute's own
/// structure.
pub async fn floor_budgeted(x: u64) -> Result<u64, BenchError> {
    if !floor::plain() {
        return floor::not_plain();
    }
    let (_, budget) = floor::guards();
    budget.on_first_attempt();
    let result = floor::Marked(async move { Ok(black_box(x)) }).await;
    if result.is_ok() {
        budget.deposit();
    }
    result
}

/// [`floor`] with `breaker_budget`'s guards, through their public calls:
/// the handles cached once (as the attribute caches them), the breaker
/// asked, the ratio budget's first attempt counted, and on success the
/// breaker's permit recorded and the budget refilled. What `breaker_budget`
/// spends above it is the attribute's own structure again.
pub async fn floor_guarded(x: u64) -> Result<u64, BenchError> {
    if !floor::plain() {
        return floor::not_plain();
    }
    let (breaker, budget) = floor::guards();
    let Some(permit) = breaker.try_acquire() else {
        return floor::not_plain();
    };
    budget.on_first_attempt();
    let result = floor::Marked(async move { Ok(black_box(x)) }).await;
    if result.is_ok() {
        permit.record(stormproof::breaker::Outcome::Success);
        budget.deposit();
    }
    result
}

/// What [`floor`] tests and sets, as the runtime keeps it.
mod floor {
    use std::cell::Cell;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{Arc, OnceLock};
    use std::task::{Context, Poll};

    use stormproof::{breaker::CircuitBreaker, budget::RetryBudget};

    use tracing::level_filters::{LevelFilter, STATIC_MAX_LEVEL};

    use super::BenchError;

    /// How many configuration overrides are in force for the function.
    static OVERRIDES: AtomicU32 = AtomicU32::new(0);

    /// `breaker_budget`'s breaker and budget, looked up once.
    static GUARDS: OnceLock<(Arc<CircuitBreaker>, Arc<RetryBudget>)> = OnceLock::new();

    #[inline(always)]
    pub fn guards() -> &'static (Arc<CircuitBreaker>, Arc<RetryBudget>) {
        GUARDS.get_or_init(|| {
            let registry = stormproof::registry();
            (
                registry.breaker(super::BREAKER).expect("declared"),
                registry.budget(super::BUDGET).expect("declared"),
            )
        })
    }

    thread_local! {
        /// The attempt polled on this thread, if any: its task, and whether
        /// there is one (a full word: a `bool` would leave padding, copied
        /// byte by byte).
        static MARK: Cell<(Option<tokio::task::Id>, u64)> = const { Cell::new((None, 0)) };
    }

    #[inline(always)]
    pub fn plain() -> bool {
        let debug =
            tracing::Level::DEBUG <= STATIC_MAX_LEVEL && tracing::Level::DEBUG <= LevelFilter::current();
        OVERRIDES.load(Ordering::Relaxed) == 0 && !debug && MARK.get().1 == 0
    }

    /// Never taken in the benchmark; out of line, as the general path is.
    #[cold]
    #[inline(never)]
    pub fn not_plain() -> Result<u64, BenchError> {
        Err(BenchError::Transient)
    }

    /// A body polled with the mark set (see [`super::floor`]).
    pub struct Marked<F>(pub F);

    impl<F: Future> Future for Marked<F> {
        type Output = F::Output;

        #[inline(always)]
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            let outer = MARK.get();
            MARK.set((tokio::task::try_id(), 1));
            let _restore = Restore(outer);
            // SAFETY: the body is never moved out of `self`, which is pinned.
            unsafe { self.map_unchecked_mut(|marked| &mut marked.0) }.poll(cx)
        }
    }

    /// Puts the outer mark back when dropped (a panicking body included).
    struct Restore((Option<tokio::task::Id>, u64));

    impl Drop for Restore {
        #[inline(always)]
        fn drop(&mut self) {
            MARK.set(self.0);
        }
    }
}

/// A named budget alone (its breaker off): the cost of a budget on the
/// success path.
#[resilient(budget = "bench-budget", breaker = "none")]
pub async fn budget_alone(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

#[resilient(breaker = "bench-breaker", budget = "bench-budget")]
pub async fn breaker_budget(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

#[resilient(breaker = "bench-breaker", budget = "bench-budget", bulkhead = "bench-bulkhead")]
pub async fn with_bulkhead(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

#[resilient(
    breaker = "bench-breaker",
    budget = "bench-budget",
    bulkhead = "bench-bulkhead",
    attempt_timeout_ms = 60_000
)]
pub async fn with_timeout(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

/// `breaker_budget` with hedging: the attempt answers at once, so no hedge
/// starts; what is measured is what a hedging policy adds to every call.
#[resilient(breaker = "bench-breaker", budget = "bench-budget", hedge_after_ms = 60_000)]
pub async fn with_hedge(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

/// `breaker_budget` with an adaptive throttle, which never refuses here:
/// every answer is an accept.
#[resilient(breaker = "bench-breaker", budget = "bench-budget", throttle = "bench-throttle")]
pub async fn with_throttle(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

/// `breaker_budget` with a rate limit high enough that every call has a turn at once.
#[resilient(breaker = "bench-breaker", budget = "bench-budget", rate_limit = "bench-rate-limit")]
pub async fn with_rate_limit(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

/// `breaker_budget` again, but called from two places in each benchmark
/// binary (its benchmark and a warm-up): the compiler then keeps its `poll`
/// out of line, as it does for most functions of a real program.
#[resilient(breaker = "bench-breaker", budget = "bench-budget")]
pub async fn breaker_budget_out_of_line(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

/// An error type one word wide (`Result<u64, SmallError>` comes back in
/// registers), to show what the size of the caller's `Result` costs when
/// the call's `poll` is out of line.
#[derive(Debug)]
pub struct SmallError(#[allow(dead_code)] Box<Rejection>);

impl Classify for SmallError {
    fn classify(&self) -> ErrorClass {
        self.0.classify()
    }
}

impl From<Rejection> for SmallError {
    fn from(r: Rejection) -> Self {
        SmallError(Box::new(r))
    }
}

pub async fn bare_small(x: u64) -> Result<u64, SmallError> {
    Ok(black_box(x))
}

/// Called from two places, like `breaker_budget_out_of_line`.
#[resilient(breaker = "bench-breaker", budget = "bench-budget")]
pub async fn breaker_budget_small_out_of_line(x: u64) -> Result<u64, SmallError> {
    Ok(black_box(x))
}

/// `breaker_budget` whose retries a configuration file tunes (see
/// `declare`): the cost of an override in force that a plain first
/// attempt can honour (it is looked up only if the attempt fails).
#[resilient(name = "bench-overridden", breaker = "bench-breaker", budget = "bench-budget")]
pub async fn overridden(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

/// `breaker_budget` given a deadline by a configuration file: the override
/// is looked up as every call starts, and the deadline armed.
#[resilient(name = "bench-overridden-deadline", breaker = "bench-breaker", budget = "bench-budget")]
pub async fn overridden_deadline(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

/// `breaker_budget` with a deadline of its own: the clock read and the
/// timer armed as every call starts.
#[resilient(breaker = "bench-breaker", budget = "bench-budget", deadline_ms = 60_000)]
pub async fn with_deadline(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

/// `breaker_budget` made non-idempotent with an idempotency key: the key
/// is made from the parameter (`Display`, into an `Arc<str>`) and carried
/// into the attempt's context as every call starts.
#[resilient(breaker = "bench-breaker", budget = "bench-budget", idempotent = false, key = order_id)]
pub async fn keyed(order_id: u64) -> Result<u64, BenchError> {
    Ok(black_box(order_id))
}

/// The tenants the rows with many keys call in turn (`per_tenant`).
pub const TENANTS: u64 = 64;

/// `breaker_budget` with a breaker per key (`per = tenant`), its key's
/// breaker held already: the key's text is written on the stack and looked
/// up (one lock, one hash) as every call starts.
#[resilient(breaker = "bench-breaker", budget = "bench-budget", per = tenant)]
pub async fn per_tenant(tenant: u64) -> Result<u64, BenchError> {
    Ok(black_box(tenant))
}

/// `per_tenant` for the rows of 64 tenants in turn: a function of its own,
/// so that `per_tenant` keeps one caller (a function called from two places
/// is compiled otherwise: see `breaker_budget_out_of_line`).
#[resilient(breaker = "bench-breaker", budget = "bench-budget", per = tenant)]
pub async fn per_tenant_in_turn(tenant: u64) -> Result<u64, BenchError> {
    Ok(black_box(tenant))
}

thread_local! {
    /// Whether the next `fails_once` attempt fails: every other attempt does.
    static FAIL_NEXT: Cell<bool> = const { Cell::new(true) };
}

/// Fails its first attempt (transient) and succeeds on the retry, which
/// follows at once (`base_ms = 0`, `cap_ms = 0`: the wait is zero).
#[resilient(breaker = "bench-breaker", budget = "bench-budget", base_ms = 0, cap_ms = 0)]
pub async fn fails_once(x: u64) -> Result<u64, BenchError> {
    if FAIL_NEXT.replace(!FAIL_NEXT.get()) { Err(BenchError::Transient) } else { Ok(black_box(x)) }
}

/// The guards of the attribute lines, declared up front in the global
/// registry; the breaker stays closed, and the budget is the default form
/// (a share of traffic), whose success path counts the first attempt.
pub fn declare() {
    let registry = registry();
    registry.declare_breaker(BREAKER, BreakerConfig::default()).expect("declared once");
    // A floor high enough that retries in the `retry/` group never run it dry.
    let budget = RatioBudget { min_per_sec: 1_000_000, ..Default::default() };
    registry.declare_budget(BUDGET, budget).expect("declared once");
    registry.declare_bulkhead(BULKHEAD, BulkheadConfig::default()).expect("declared once");
    registry.declare_throttle(THROTTLE, ThrottleConfig::default()).expect("declared once");
    // Never out of turns: a billion a second, with as large a burst.
    let rate = RateLimitConfig { per_second: 1_000_000_000, burst: 1_000_000_000, ..Default::default() };
    registry.declare_rate_limit(RATE_LIMIT, rate).expect("declared once");
    // Overrides in force for `overridden` and `overridden_deadline` only:
    // every other function still runs on its compiled settings, after one
    // relaxed load that says so.
    let overrides = "[operations.\"bench-overridden\"]\nmax_attempts = 3\n\n\
                     [operations.\"bench-overridden-deadline\"]\nmax_attempts = 3\ndeadline_ms = 60_000\n";
    registry.load_toml(overrides).expect("valid overrides");
}

/// The second call sites of the `_out_of_line` functions, which keep their
/// `poll` out of line (each benchmark binary calls this once, before it
/// measures), and a check that the guards are in place.
pub async fn call_out_of_line_functions_once() {
    assert_eq!(breaker_budget_out_of_line(7).await.expect("succeeds"), 7);
    assert_eq!(breaker_budget_small_out_of_line(7).await.expect("succeeds"), 7);
}

/// `Policy::run` with the same guards as `breaker_budget` (call `declare`
/// first); the benchmarks run `bare` through it.
pub fn policy() -> Policy {
    Policy::builder().breaker(BREAKER).budget(BUDGET).build().expect("a valid policy")
}

/// [`policy`] with an attempt timeout and a deadline: a call's first
/// attempt races one timer, armed only if it waits (`call::timed`).
pub fn timed_policy() -> Policy {
    let limited =
        policy().to_builder().attempt_timeout(Duration::from_secs(60)).deadline(Duration::from_secs(120));
    limited.build().expect("a valid policy")
}

/// backon with the attribute's defaults: 4 attempts, 100 ms .. 20 s, jitter.
pub fn backon_defaults() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(20))
        .with_max_times(3)
        .with_jitter()
}

/// The benchmarks' runtime: current-thread, with the timer. With feature
/// `redis` IO too, with and without a fleet alike (the instruction rows
/// compare the two): a fleet's task connects through it, and joining
/// refuses a runtime without IO (on one, the task died at its first flush).
pub fn runtime() -> tokio::runtime::Runtime {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_time();
    #[cfg(feature = "redis")]
    builder.enable_io();
    builder.build().expect("a tokio runtime")
}

/// How every benchmark uses a call: awaits it and takes the value out, as a
/// caller would (the benchmark then `black_box`es the value). The same for
/// the baseline and for every wrapper, so the ratios compare like with like.
/// (Reached through `#[macro_use]` on the module: a `use` of it would clash
/// with the built-in `#[used]` attribute.)
macro_rules! used {
    ($call:expr) => {
        async { $call.await.expect("the call succeeds") }
    };
}
