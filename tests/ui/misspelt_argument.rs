use stormproof::{Rejection, resilient};

#[resilient(max_attemps = 3)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

#[resilient(retries = 3)]
async fn fetch_again() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
