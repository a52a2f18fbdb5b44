use stormproof::{Rejection, resilient};

const ATTEMPTS: u32 = 3;

#[resilient(max_attempts = ATTEMPTS)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
