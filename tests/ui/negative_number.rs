use stormproof::{Rejection, resilient};

#[resilient(base_ms = -5)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

#[resilient(max_attempts = -1)]
async fn fetch_again() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
