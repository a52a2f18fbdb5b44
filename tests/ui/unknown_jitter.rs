use stormproof::{Rejection, resilient};

#[resilient(jitter = "ful")]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

#[resilient(jitter = "gaussian")]
async fn fetch_again() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
