//! An application that depends only on `my_lib`: `crate = "..."` tells
//! the attribute where the facade is.

use std::sync::atomic::{AtomicU32, Ordering};

static ATTEMPTS: AtomicU32 = AtomicU32::new(0);

#[my_lib::stormproof::resilient(crate = "::my_lib::stormproof", max_attempts = 3, base_ms = 1, jitter = "none")]
async fn flaky() -> Result<u32, std::io::Error> {
    match ATTEMPTS.fetch_add(1, Ordering::SeqCst) {
        0 => Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
        n => Ok(n + 1),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    println!("attempts {}", flaky().await.expect("the second attempt succeeds"));
}
