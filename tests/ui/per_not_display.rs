use stormproof::{Rejection, resilient};

#[derive(Clone)]
struct Tenant(u64);

#[resilient(breaker = "search", per = tenant)]
async fn search(tenant: Tenant) -> Result<u64, Rejection> {
    Ok(tenant.0)
}

fn main() {}
