use stormproof::{Rejection, resilient};

#[resilient(nested = "twice")]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
