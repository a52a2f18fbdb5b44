//! What every file of this binary uses: a call stepped attempt by attempt
//! through `Call`, each scenario both ways (`attempt`, and `attempt_with`
//! a closure that makes the attempt), and the guards it declares.

#![allow(unused_imports)]

pub(crate) use std::future::Future;
pub(crate) use std::sync::Arc;
pub(crate) use std::sync::atomic::{AtomicU32, Ordering};
pub(crate) use std::time::Duration;

pub(crate) use crate::common::{TestError, ms};
pub(crate) use stormproof_runtime::__private::probe::{ByTraits, Kept};
pub(crate) use stormproof_runtime::__private::{Call, Step};
pub(crate) use stormproof_runtime::{
    Jitter, Nested, Policy, PolicyBuilder, Rejection,
    breaker::{BreakerConfig, BreakerState},
    bulkhead::{AdaptiveLimit, Bulkhead, BulkheadConfig},
    idempotency_key,
    rate_limit::{RateLimit, RateLimitConfig},
    registry,
    throttle::{Throttle, ThrottleConfig},
};
pub(crate) use tokio::time::{Instant, sleep, timeout};

/// How the entry point hands the attempt to the call: made (the attribute,
/// `Policy::run`), or made by a closure the call calls (a hedged function).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Handed {
    Made,
    ByClosure,
}

pub(crate) const PATHS: [Handed; 2] = [Handed::Made, Handed::ByClosure];

/// One attempt of `execution`, the way `path` says.
pub(crate) async fn step<T, F>(
    execution: &mut Call<'_, Kept<TestError>, ByTraits>,
    path: Handed,
    attempt: F,
) -> Step<T, TestError>
where
    F: Future<Output = Result<T, TestError>>,
{
    match path {
        Handed::Made => execution.attempt(attempt).await,
        Handed::ByClosure => execution.attempt_with(move || attempt).await,
    }
}

/// A whole call: attempts made by `make` until the loop says it is done.
pub(crate) async fn call<T, F>(
    policy: &Policy,
    key: Option<&str>,
    path: Handed,
    mut make: impl FnMut() -> F,
) -> Result<T, TestError>
where
    F: Future<Output = Result<T, TestError>>,
{
    let mut execution = policy.call(key.map(Arc::from), Kept::default(), ByTraits);
    loop {
        if let Step::Done(result) = step(&mut execution, path, make()).await {
            return result;
        }
    }
}

pub(crate) fn breaker(name: &str, open_for: Duration) {
    let config = BreakerConfig {
        failure_threshold: 1,
        open_for,
        success_threshold: 1,
        half_open_max_calls: 1,
        ..Default::default()
    };
    registry().declare_breaker(name, config).unwrap();
}

/// `catch_unwind` for a future, without the `futures` crate.
pub(crate) async fn catch_unwind<F: Future>(fut: F) -> std::thread::Result<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(move |cx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Ok(std::task::Poll::Ready(value)) => std::task::Poll::Ready(Ok(value)),
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        }
    })
    .await
}

/// Succeeds after `wait`.
pub(crate) async fn ok_after(wait: Duration) -> Result<(), TestError> {
    sleep(wait).await;
    Ok(())
}

/// Declares a bulkhead of `max_concurrent` places, waiting at most `max_wait`.
pub(crate) fn bulkhead(name: &str, max_concurrent: u32, max_wait: Option<Duration>) {
    let config = BulkheadConfig { max_concurrent, max_wait, ..Default::default() };
    registry().declare_bulkhead(name, config).unwrap();
}

/// The throttle's refusal probability with `k = 1`, read without changing
/// its counts: `(requests - accepts) / (requests + 1)`. The calls run with
/// `k = 1000`, so that no draw decides them (the probability is 0 once
/// the first answer was an accept).
pub(crate) async fn probability_at_k_1(throttle: &Throttle) -> f64 {
    // The answers so far count from the next tenth of the window on.
    tokio::time::advance(throttle.config().window / 10).await;
    let calls = ThrottleConfig { k: 1000.0, ..throttle.config() };
    throttle.reconfigure(ThrottleConfig { k: 1.0, ..calls }).unwrap();
    let p = throttle.refusal_probability();
    throttle.reconfigure(calls).unwrap();
    p
}

/// A breaker that opens at the third failure and a bulkhead of one place
/// with no waiting for it, both named `name`, and a policy builder naming
/// both: a place not given back when an attempt is cut short refuses the
/// next attempt.
pub(crate) fn breaker_and_one_place(name: &str) -> (Arc<Bulkhead>, PolicyBuilder) {
    breaker_opening_after_and_one_place(name, 3)
}

pub(crate) fn breaker_opening_after_and_one_place(
    name: &str,
    failure_threshold: u32,
) -> (Arc<Bulkhead>, PolicyBuilder) {
    let config = BreakerConfig { failure_threshold, ..Default::default() };
    registry().declare_breaker(name, config).unwrap();
    bulkhead(name, 1, Some(Duration::ZERO));
    let places = registry().bulkhead(name).unwrap();
    (places, Policy::builder().breaker(name.to_owned()).bulkhead(name.to_owned()))
}
