use stormproof::{Rejection, resilient};

#[resilient(hedge_after_ms = 50)]
async fn fetch(id: u64, seen: &mut Vec<u64>) -> Result<u64, Rejection> {
    seen.push(id);
    Ok(id)
}

fn main() {}
