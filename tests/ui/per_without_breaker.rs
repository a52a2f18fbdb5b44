// `per` chooses a breaker in the set `breaker` names: without a name, there is no set.
use stormproof::{Rejection, resilient};

#[resilient(per = tenant)]
async fn search(tenant: String) -> Result<u64, Rejection> {
    Ok(tenant.len() as u64)
}

fn main() {}
