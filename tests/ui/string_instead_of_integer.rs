use stormproof::{Rejection, resilient};

#[resilient(cap_ms = "800")]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
