use stormproof::{Rejection, resilient};

#[derive(Clone)]
struct OrderId(u64);

#[resilient(idempotent = false, key = order_id)]
async fn charge(order_id: OrderId) -> Result<u64, Rejection> {
    Ok(order_id.0)
}

fn main() {}
