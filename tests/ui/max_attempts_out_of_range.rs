use stormproof::{Rejection, resilient};

#[resilient(max_attempts = 0)]
async fn never() -> Result<u32, Rejection> {
    Ok(1)
}

#[resilient(max_attempts = 101)]
async fn hammer() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
