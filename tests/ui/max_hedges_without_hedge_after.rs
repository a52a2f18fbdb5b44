use stormproof::{Rejection, resilient};

#[resilient(max_hedges = 2)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
