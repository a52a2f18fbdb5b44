#![deny(warnings)]
//! Every argument at once, with `_` separators and integer suffixes.

use stormproof::{Rejection, resilient};

#[resilient(
    max_attempts = 5,
    base_ms = 50u64,
    cap_ms = 2_000u16, // a narrower type than `u64` that holds the value
    factor = 1.5,
    jitter = "decorrelated",
    attempt_timeout_ms = 250,
    deadline_ms = 10_000,
    breaker = "payment",
    budget = "payment",
    bulkhead = "payment",
    idempotent = false,
    key = order_id,
    nested = "retry",
    crate = "::stormproof",
)]
async fn charge(order_id: u64, cents: u64) -> Result<u64, Rejection> {
    Ok(order_id * 1_000 + cents)
}

#[resilient(jitter = "none", max_attempts = 100)]
async fn no_jitter() -> Result<(), Rejection> {
    Ok(())
}

#[resilient(jitter = "equal", max_attempts = 1, base_ms = 0, cap_ms = 0)]
async fn equal() -> Result<(), Rejection> {
    Ok(())
}

#[resilient(jitter = "full", nested = "once", idempotent = true)]
async fn full() -> Result<(), Rejection> {
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(charge(7, 250).await.unwrap(), 7_250);
    no_jitter().await.unwrap();
    equal().await.unwrap();
    full().await.unwrap();
}
