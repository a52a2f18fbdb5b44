//! The attribute, reached through a renamed dependency, finds the facade
//! under its new name: the expansion says `::sp`, not `::stormproof`.

use std::sync::atomic::{AtomicU32, Ordering};

use sp::resilient;

static ATTEMPTS: AtomicU32 = AtomicU32::new(0);

#[resilient(max_attempts = 3, base_ms = 1, jitter = "none")]
async fn flaky() -> Result<u32, std::io::Error> {
    match ATTEMPTS.fetch_add(1, Ordering::SeqCst) {
        0 => Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
        n => Ok(n + 1),
    }
}

#[sp::resilient(max_attempts = 1)]
async fn once() -> Result<&'static str, std::io::Error> {
    Ok("once")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    println!("attempts {}", flaky().await.expect("the second attempt succeeds"));
    println!("{}", once().await.unwrap());
}
