use stormproof::{Rejection, resilient};

#[resilient(attempt_timeout_ms = 2_000, deadline_ms = 1_000)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
