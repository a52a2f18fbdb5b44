#![deny(warnings)]
//! The future is `Send` whenever the body's is, even when the error type is
//! not `Send` (it holds a `Box<dyn Error>`): such an error is not kept
//! across the wait for the next attempt, so the call can still be spawned.

use stormproof::{Classify, ErrorClass, Rejection, resilient};

#[derive(Debug)]
struct Failure(Box<dyn std::error::Error>);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "failed: {}", self.0)
    }
}

impl Classify for Failure {
    fn classify(&self) -> ErrorClass {
        ErrorClass::Transient
    }
}

impl From<Rejection> for Failure {
    fn from(rejection: Rejection) -> Self {
        Failure(Box::new(rejection))
    }
}

#[resilient(max_attempts = 3, base_ms = 1, breaker = "non-send")]
async fn annotated(fail_first: u32) -> Result<u32, Failure> {
    tokio::task::yield_now().await;
    if fail_first > 0 { Err(Failure("no".into())) } else { Ok(7) }
}

#[tokio::main]
async fn main() {
    let ok = tokio::spawn(async { annotated(0).await.map_err(|e| e.to_string()) });
    assert_eq!(ok.await.unwrap(), Ok(7));
    let failed = tokio::spawn(async { annotated(1).await.map_err(|e| e.to_string()) });
    assert_eq!(failed.await.unwrap(), Err("failed: no".to_owned()));
}
