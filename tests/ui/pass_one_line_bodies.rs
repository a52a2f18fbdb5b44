#![deny(warnings)]
//! One-line bodies, `{ Ok(n + 1) }`, in every form of the expansion: none
//! trips `unused_braces` (or any other lint) at the user's braces. A body's
//! value still coerces to the return type, as a tail does.

use std::fmt::Display;
use std::sync::Arc;

use stormproof::{Classify, ErrorClass, Rejection, resilient};

#[derive(Debug, PartialEq)]
struct Flaky;

impl Classify for Flaky {
    fn classify(&self) -> ErrorClass {
        ErrorClass::Transient
    }
}

impl From<Rejection> for Flaky {
    fn from(_: Rejection) -> Self {
        Flaky
    }
}

#[resilient]
async fn one_line(n: u32) -> Result<u32, Flaky> { Ok(n + 1) }

#[resilient(max_attempts = 1)]
async fn one_line_once(n: u32) -> Result<u32, Flaky> { Ok(n + 1) }

#[resilient(hedge_after_ms = 5)]
async fn one_line_hedged(n: u32) -> Result<u32, Flaky> { Ok(n + 1) }

#[resilient(deadline_ms = 1_000)]
async fn one_line_deadline(n: u32) -> Result<u32, Flaky> { Ok(n + 1) }

#[resilient(breaker = "one-line")]
async fn one_line_guarded(n: u32) -> Result<u32, Flaky> { Ok(n + 1) }

#[resilient]
async fn one_line_unsized(n: u32) -> Result<Box<dyn Display>, Flaky> { Ok(Box::new(n + 1)) }

#[resilient(hedge_after_ms = 5)]
async fn one_line_shared(n: u32) -> Result<Arc<[u32]>, Flaky> { Ok(Arc::new([n + 1])) }

#[resilient]
async fn one_line_never(_: u32) -> Result<u32, Flaky> { unimplemented!() }

struct Service;

impl Service {
    #[resilient]
    async fn one_line_method(&mut self, n: u32) -> Result<u32, Flaky> { Ok(n + 1) }
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    assert_eq!(one_line(1).await, Ok(2));
    assert_eq!(one_line_once(1).await, Ok(2));
    assert_eq!(one_line_hedged(1).await, Ok(2));
    assert_eq!(one_line_deadline(1).await, Ok(2));
    assert_eq!(one_line_guarded(1).await, Ok(2));
    assert_eq!(one_line_unsized(1).await.map(|n| n.to_string()), Ok("2".to_owned()));
    assert_eq!(one_line_shared(1).await.as_deref(), Ok(&[2][..]));
    let _ = one_line_never;
    assert_eq!(Service.one_line_method(1).await, Ok(2));
}
