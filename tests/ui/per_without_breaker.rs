// `per` chooses a breaker or a rate limit in the sets `breaker` and `rate_limit` name: with neither named, there is none.
use stormproof::{Rejection, resilient};

#[resilient(per = tenant)]
async fn search(tenant: String) -> Result<u64, Rejection> {
    Ok(tenant.len() as u64)
}

fn main() {}
