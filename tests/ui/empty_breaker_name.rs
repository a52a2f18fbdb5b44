use stormproof::{Rejection, resilient};

#[resilient(breaker = "")]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
