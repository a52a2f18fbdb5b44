// `per` chooses a breaker, rate limit or bulkhead in the sets those arguments name: with none named, there is nothing to choose.
use stormproof::{Rejection, resilient};

#[resilient(per = tenant)]
async fn search(tenant: String) -> Result<u64, Rejection> {
    Ok(tenant.len() as u64)
}

fn main() {}
