use stormproof::{Rejection, resilient};

#[resilient(rate_limit = "")]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
