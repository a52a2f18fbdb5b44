//! The adaptive arguments of `#[resilient]`, through the attribute:
//! hedging, fallback, throttle and rate limit, on tokio's paused clock.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use stormproof::{
    Classify, ErrorClass, Registry, Rejection, rate_limit::RateLimitConfig, resilient,
    throttle::ThrottleConfig,
};
use tokio::time::{Instant, sleep};

#[derive(Debug, Clone, PartialEq, Eq)]
enum ApiError {
    Unavailable,
    Rejected(Rejection),
}

impl Classify for ApiError {
    fn classify(&self) -> ErrorClass {
        match self {
            ApiError::Unavailable => ErrorClass::Transient,
            ApiError::Rejected(rejection) => rejection.classify(),
        }
    }
}

impl From<Rejection> for ApiError {
    fn from(rejection: Rejection) -> Self {
        ApiError::Rejected(rejection)
    }
}

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// A replica set where the first request lands on a slow replica.
struct Replicas {
    started: Instant,
    requests: Mutex<Vec<(u64, String)>>,
}

impl Replicas {
    fn new() -> Self {
        Replicas { started: Instant::now(), requests: Mutex::new(Vec::new()) }
    }

    /// Answers after 400 ms for the first request, 30 ms for the others;
    /// logs when each came and under which key.
    async fn answer(&self, _order: &str) -> Result<usize, ApiError> {
        let n = {
            let mut requests = self.requests.lock().unwrap();
            let key = stormproof::idempotency_key().map(|key| key.to_string()).unwrap_or_default();
            requests.push((self.started.elapsed().as_millis() as u64, key));
            requests.len()
        };
        sleep(if n == 1 { ms(400) } else { ms(30) }).await;
        Ok(n)
    }
}

impl Replicas {
    #[resilient(idempotent = false, key = order, hedge_after_ms = 100, max_hedges = 2, max_attempts = 1)]
    async fn submit(&self, order: String) -> Result<usize, ApiError> {
        self.answer(&order).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_hedged_method_answers_from_the_hedge_under_the_same_key() {
    let replicas = Replicas::new();
    let start = Instant::now();
    assert_eq!(replicas.submit("order-9".to_owned()).await, Ok(2), "the first hedge answered");
    assert_eq!(start.elapsed(), ms(130), "hedge at 100 ms, answered 30 ms later");
    assert_eq!(
        *replicas.requests.lock().unwrap(),
        [(0, "order-9".to_owned()), (100, "order-9".to_owned())],
        "one hedge was enough: the second was never started; both carry the key"
    );
}

async fn cached_stock(error: ApiError) -> Result<u32, ApiError> {
    assert_eq!(error, ApiError::Unavailable, "the fallback gets the final error");
    Ok(17)
}

#[resilient(max_attempts = 3, base_ms = 10, fallback = cached_stock)]
async fn stock(calls: &AtomicU32) -> Result<u32, ApiError> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(ApiError::Unavailable)
}

#[tokio::test(start_paused = true)]
async fn the_fallback_answers_once_the_retries_are_spent() {
    let calls = AtomicU32::new(0);
    assert_eq!(stock(&calls).await, Ok(17));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[resilient(max_attempts = 1, throttle = "search")]
async fn search(calls: &AtomicU32) -> Result<(), ApiError> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(ApiError::Unavailable)
}

#[tokio::test(start_paused = true)]
async fn a_throttled_function_stops_calling_a_dependency_that_refuses_everything() {
    let registry = Registry::with_seed(3);
    // Uncapped: the book's formula stops calling it (the default lets one
    // request in five through as a probe: tests/throttle_recovery.rs).
    let uncapped = ThrottleConfig { max_refusal_percent: 100, ..Default::default() };
    registry.declare_throttle("search", uncapped).unwrap();
    let calls = AtomicU32::new(0);
    let mut throttled = 0;
    for _ in 0..200 {
        // A call every 5 ms: the throttle judges each tenth of its window
        // (50 ms) on the ones before it, so it refuses from the second on.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        if registry.scope(search(&calls)).await
            == Err(ApiError::Rejected(Rejection::Throttled { throttle: "search".into() }))
        {
            throttled += 1;
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst) + throttled, 200);
    assert!(throttled >= 180, "refused locally: {throttled} of 200");
}

#[resilient(max_attempts = 1, throttle = "search_globally", budget = "none", breaker = "none")]
async fn search_globally(calls: &AtomicU32) -> Result<(), ApiError> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(ApiError::Unavailable)
}

/// The same through the global registry, where a call whose guards all
/// admit at once runs plain (the throttle admits quietly while it refuses
/// nothing): once it refuses, it is asked properly, and refuses.
#[tokio::test(start_paused = true)]
async fn a_throttled_function_of_the_global_registry_stops_calling_it_too() {
    let uncapped = ThrottleConfig { max_refusal_percent: 100, ..Default::default() };
    stormproof::registry().declare_throttle("search_globally", uncapped).unwrap();
    let calls = AtomicU32::new(0);
    let mut throttled = 0;
    for _ in 0..200 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        if search_globally(&calls).await
            == Err(ApiError::Rejected(Rejection::Throttled { throttle: "search_globally".into() }))
        {
            throttled += 1;
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst) + throttled, 200);
    // The global registry's draws are unseeded: after the first tenth (10
    // calls, none refused) every call is refused with p >= 10/11, so those
    // let through are at most Binomial(190, 1/11): mean 17, standard
    // deviation 4; 40 let through would be six of them.
    assert!(throttled >= 150, "refused locally: {throttled} of 200");
}

#[resilient(
    max_attempts = 1,
    throttle = "prefetch",
    budget = "none",
    breaker = "none",
    priority = "sheddable"
)]
async fn prefetch() -> Result<(), ApiError> {
    Ok(())
}

/// Declares the throttle `name` on the global registry and has it see two
/// accepts in three requests, a tenth of its window ago: below a default
/// call's bar (k = 2), above a sheddable one's (k = 1).
async fn accepting_two_in_three(name: &str) {
    stormproof::registry().declare_throttle(name, ThrottleConfig::default()).unwrap();
    let throttle = stormproof::registry().throttle(name).unwrap();
    for n in 0..3_000 {
        throttle.answered(n % 3 != 0);
    }
    sleep(Duration::from_millis(50)).await;
    assert_eq!(throttle.refusal_probability(), 0.0, "a default call would not be refused");
}

/// How many of 300 calls made by `call` (its argument the call's number)
/// the throttle refused. The window's current tenth counts from the next:
/// p stays about 1/3 for these 300 draws (unseeded: the global
/// registry's), whose refusals are binomial with mean 100 and standard
/// deviation 8.2; 50..=150 is six of them.
async fn refused_of_300<F: std::future::Future<Output = Result<u64, ApiError>>>(
    call: impl Fn(u64) -> F,
) -> u32 {
    let mut refused = 0;
    for n in 0..300 {
        match call(n).await {
            Ok(_) => {}
            Err(ApiError::Rejected(Rejection::Throttled { .. })) => refused += 1,
            Err(other) => panic!("{other:?}"),
        }
    }
    refused
}

/// A sheddable call with a throttle is judged as sheddable, on the global
/// registry too (where calls whose guards admit at once run plain): with
/// two accepts in three requests, a default call is not refused (k = 2)
/// and a sheddable one is, about one in three (k = 1). (Admitted quietly,
/// as a default call would be, none was.)
#[tokio::test(start_paused = true)]
async fn a_sheddable_call_with_a_throttle_is_refused_as_sheddable() {
    accepting_two_in_three("prefetch").await;
    let refused = refused_of_300(|_| async { prefetch().await.map(|()| 0) }).await;
    assert!((50..=150).contains(&refused), "{refused} of 300 sheddable calls refused");
}

#[resilient(
    max_attempts = 1,
    throttle = "prefetch_per_tenant",
    breaker = "prefetch_tenants",
    per = tenant,
    budget = "none",
    priority = "sheddable"
)]
async fn prefetch_for(tenant: u64) -> Result<u64, ApiError> {
    Ok(tenant)
}

/// The same for a call whose key chooses its breaker (whose first attempt
/// runs plain with its key's guards, the throttle among them).
#[tokio::test(start_paused = true)]
async fn a_sheddable_call_with_a_throttle_and_a_breaker_per_key_is_refused_as_sheddable() {
    let breaker = stormproof::breaker::BreakerConfig::default();
    stormproof::registry().declare_breaker("prefetch_tenants", breaker).unwrap();
    accepting_two_in_three("prefetch_per_tenant").await;
    let refused = refused_of_300(|n| prefetch_for(n % 4)).await;
    assert!((50..=150).contains(&refused), "{refused} of 300 sheddable calls refused");
}

#[resilient(max_attempts = 1, rate_limit = "geo")]
async fn geocode(calls: &AtomicU32) -> Result<(), ApiError> {
    calls.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_rate_limited_function_is_refused_over_the_rate() {
    let registry = Registry::new();
    registry
        .declare_rate_limit(
            "geo",
            RateLimitConfig { per_second: 5, burst: 2, max_wait: None, ..Default::default() },
        )
        .unwrap();
    let calls = AtomicU32::new(0);
    let results: Vec<_> = futures_in_order(&registry, &calls, 3).await;
    assert_eq!(
        results,
        [Ok(()), Ok(()), Err(ApiError::Rejected(Rejection::RateLimited { limiter: "geo".into() }))],
        "a burst of two, then no turn for 200 ms"
    );
    sleep(ms(200)).await;
    assert_eq!(registry.scope(geocode(&calls)).await, Ok(()), "the next turn came");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

async fn futures_in_order(registry: &Registry, calls: &AtomicU32, n: usize) -> Vec<Result<(), ApiError>> {
    let mut results = Vec::new();
    for _ in 0..n {
        results.push(registry.scope(geocode(calls)).await);
    }
    results
}

/// A call's future is `Send` and `Sync` when its arguments and its body
/// are, guards that may wait (a throttle, a rate limit) included: a turn
/// waited for out of line is held in a box that is both.
#[test]
fn the_future_of_a_guarded_call_is_send_and_sync() {
    fn send_and_sync<F: std::future::Future + Send + Sync>(_: F) {}
    let calls = AtomicU32::new(0);
    send_and_sync(search(&calls));
    send_and_sync(geocode(&calls));
}

/// A replica that answers after 300 ms, hedged after 50 ms (twice), its
/// requests counted in `calls`; `nested` as the attribute's argument.
#[resilient(hedge_after_ms = 50, max_hedges = 2)]
async fn slow_read(calls: &AtomicU32) -> Result<u32, ApiError> {
    let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
    sleep(ms(300)).await;
    Ok(n)
}

#[resilient(hedge_after_ms = 50, max_hedges = 2, nested = "retry")]
async fn slow_read_hedging_nested(calls: &AtomicU32) -> Result<u32, ApiError> {
    let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
    sleep(ms(300)).await;
    Ok(n)
}

#[resilient(hedge_after_ms = 50, max_hedges = 2, attempt_timeout_ms = 100)]
async fn slow_read_timed(calls: &AtomicU32) -> Result<u32, ApiError> {
    let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
    sleep(ms(300)).await;
    Ok(n)
}

#[derive(Clone, Copy)]
enum Inner {
    Once,
    Retry,
    Timed,
}

/// A plain outer call that retries once, its attempt reading from the replica.
#[resilient(max_attempts = 2, base_ms = 1, jitter = "none")]
async fn page(calls: &AtomicU32, inner: Inner) -> Result<u32, ApiError> {
    match inner {
        Inner::Once => slow_read(calls).await,
        Inner::Retry => slow_read_hedging_nested(calls).await,
        Inner::Timed => slow_read_timed(calls).await,
    }
}

#[tokio::test(start_paused = true)]
async fn a_hedged_function_nested_once_makes_one_attempt_and_no_hedge() {
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    assert_eq!(page(&calls, Inner::Once).await, Ok(1));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "no hedge at 50 or 100 ms");
    assert_eq!(start.elapsed(), ms(300));
    assert_eq!(slow_read(&calls).await, Ok(2), "on its own it hedges");
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[tokio::test(start_paused = true)]
async fn a_hedged_function_nested_with_retry_still_hedges() {
    let calls = AtomicU32::new(0);
    assert_eq!(page(&calls, Inner::Retry).await, Ok(1), "equally slow: the first started answered");
    assert_eq!(calls.load(Ordering::SeqCst), 3, "two hedges beside the attempt");
}

#[tokio::test(start_paused = true)]
async fn a_hedged_function_nested_once_still_times_its_attempt_out() {
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    assert_eq!(
        page(&calls, Inner::Timed).await,
        Err(ApiError::Rejected(Rejection::AttemptTimeout { after: ms(100) }))
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one attempt per outer attempt");
    assert_eq!(start.elapsed(), ms(201), "each cut at 100 ms, the outer retry 1 ms after the first");
}
