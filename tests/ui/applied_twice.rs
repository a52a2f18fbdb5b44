use stormproof::{Rejection, resilient};

#[resilient(max_attempts = 3)]
#[stormproof::resilient(breaker = "db")]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
