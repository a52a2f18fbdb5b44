use stormproof::{Rejection, resilient};

#[resilient(max_attempts = 2, base_ms = 50, max_attempts = 3)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
