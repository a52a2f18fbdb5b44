use stormproof::{Rejection, resilient};

#[resilient(idempotent = "false", key = "order_id")]
async fn charge(order_id: u64) -> Result<u64, Rejection> {
    Ok(order_id)
}

#[resilient(jitter = full, breaker = 7)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
