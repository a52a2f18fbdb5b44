use stormproof::{Rejection, resilient};

// The fallback must take the error and return the function's `Result`.
async fn cached_price(_product: u64) -> Result<u32, Rejection> {
    Ok(100)
}

#[resilient(fallback = cached_price)]
async fn price(product: u64) -> Result<u32, Rejection> {
    Ok(product as u32)
}

fn main() {}
