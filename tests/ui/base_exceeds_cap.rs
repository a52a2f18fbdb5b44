use stormproof::{Rejection, resilient};

#[resilient(base_ms = 500, cap_ms = 200)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
