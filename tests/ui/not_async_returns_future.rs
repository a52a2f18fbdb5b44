//! A plain fn returning a future of a `Result` is told to be an `async fn`,
//! and nothing else: its output is a `Result` once it is one.

use std::future::Future;

use stormproof::{Rejection, resilient};

#[resilient]
fn fetch(n: u32) -> impl Future<Output = Result<u32, Rejection>> {
    async move { Ok(n) }
}

fn main() {}
