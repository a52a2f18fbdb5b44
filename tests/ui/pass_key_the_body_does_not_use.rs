#![deny(warnings)]
//! A `key` parameter the body never reads is still used: the attribute makes
//! the call's idempotency key from it. Its per-attempt copies must not make
//! the compiler call it unused (and advise renaming it `_request_id`).

use stormproof::resilient;

#[resilient(max_attempts = 3, idempotent = false, key = request_id)]
async fn send_once(request_id: String) -> Result<Option<String>, std::io::Error> {
    Ok(stormproof::idempotency_key().map(|key| key.to_string()))
}

#[resilient(max_attempts = 3, idempotent = false, key = order, hedge_after_ms = 50)]
async fn hedged(order: u64) -> Result<Option<String>, std::io::Error> {
    Ok(stormproof::idempotency_key().map(|key| key.to_string()))
}

/// The way to quiet it before: an `#[expect]` there stays fulfilled.
#[resilient(max_attempts = 3, idempotent = false, key = request_id)]
async fn expected(#[expect(unused_variables)] request_id: String) -> Result<u32, std::io::Error> {
    Ok(1)
}

#[resilient(max_attempts = 3, idempotent = false, key = id)]
async fn borrowed(id: &str) -> Result<Option<String>, std::io::Error> {
    Ok(stormproof::idempotency_key().map(|key| key.to_string()))
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    assert_eq!(send_once("r-1".to_owned()).await.unwrap().as_deref(), Some("r-1"));
    assert_eq!(expected("e-3".to_owned()).await.unwrap(), 1);
    assert_eq!(borrowed("b-2").await.unwrap().as_deref(), Some("b-2"));
    assert_eq!(hedged(17).await.unwrap().as_deref(), Some("17"));
}
