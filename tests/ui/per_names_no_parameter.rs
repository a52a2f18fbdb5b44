use stormproof::{Rejection, resilient};

#[resilient(breaker = "search", per = tennant)]
async fn search(tenant: String) -> Result<u64, Rejection> {
    Ok(tenant.len() as u64)
}

fn main() {}
