use stormproof::{Rejection, resilient};

#[resilient(max_attempts = 3, idempotent = false)]
async fn charge(order_id: u64, cents: u64) -> Result<u64, Rejection> {
    Ok(order_id + cents)
}

fn main() {}
