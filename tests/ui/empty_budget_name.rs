use stormproof::{Rejection, resilient};

#[resilient(budget = "")]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
