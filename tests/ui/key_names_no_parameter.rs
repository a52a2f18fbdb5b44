use stormproof::{Rejection, resilient};

#[resilient(idempotent = false, key = order)]
async fn charge(order_id: u64, cents: u64) -> Result<u64, Rejection> {
    Ok(order_id + cents)
}

#[resilient(idempotent = false, key = invoice)]
async fn refund(order_id: u64, cents: u64) -> Result<u64, Rejection> {
    Ok(order_id + cents)
}

fn main() {}
