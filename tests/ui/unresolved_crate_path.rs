use stormproof::{Rejection, resilient};

#[resilient(crate = "not_resilient")]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
