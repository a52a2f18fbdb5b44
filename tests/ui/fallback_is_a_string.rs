use stormproof::{Rejection, resilient};

async fn cached_price(_error: Rejection) -> Result<u32, Rejection> {
    Ok(100)
}

#[resilient(fallback = "cached_price")]
async fn price(product: u64) -> Result<u32, Rejection> {
    Ok(product as u32)
}

fn main() {}
