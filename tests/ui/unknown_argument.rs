use stormproof::{Rejection, resilient};

#[resilient(retry_forever = true)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
