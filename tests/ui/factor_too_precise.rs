use stormproof::{Rejection, resilient};

#[resilient(factor = 1.2345)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
