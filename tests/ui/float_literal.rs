use stormproof::{Rejection, resilient};

#[resilient(max_attempts = 2.5)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
