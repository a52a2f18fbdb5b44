use stormproof::{Rejection, resilient};

#[resilient(crate = "")]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
