use stormproof::{Rejection, resilient};

// A factor below 1 would shrink the waits.
#[resilient(factor = 0.5)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
