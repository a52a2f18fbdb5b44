use stormproof::{Rejection, resilient};

#[resilient(deadline_ms = 5s)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

#[resilient(base_ms = 250ms)]
async fn fetch_again() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
