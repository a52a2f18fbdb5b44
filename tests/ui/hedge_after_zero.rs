use stormproof::{Rejection, resilient};

#[resilient(hedge_after_ms = 0)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
