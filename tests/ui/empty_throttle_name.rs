use stormproof::{Rejection, resilient};

#[resilient(throttle = " ")]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
