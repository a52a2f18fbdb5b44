#![deny(warnings)]
//! A non-idempotent operation needs no key when it is never retried, and
//! with one attempt owned parameters need not be `Clone`: the body may move them.

use stormproof::{Rejection, resilient};

pub struct Payment {
    pub cents: u64,
}

#[resilient(idempotent = false, max_attempts = 1)]
async fn charge(payment: Payment) -> Result<u64, Rejection> {
    let Payment { cents } = payment;
    Ok(cents)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(charge(Payment { cents: 250 }).await.unwrap(), 250);
}
