use stormproof::{Rejection, resilient};

// One attempt, so retrying is not the problem: the hedge is a second request.
#[resilient(max_attempts = 1, idempotent = false, hedge_after_ms = 50)]
async fn charge(order_id: u64, cents: u64) -> Result<u64, Rejection> {
    Ok(order_id + cents)
}

fn main() {}
