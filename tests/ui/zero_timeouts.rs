use stormproof::{Rejection, resilient};

#[resilient(attempt_timeout_ms = 0, deadline_ms = 0)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
