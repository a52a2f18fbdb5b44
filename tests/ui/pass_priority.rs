// Every priority compiles, beside a bulkhead and alone.
use stormproof::{Rejection, resilient};

#[resilient(priority = "critical", bulkhead = "db")]
async fn checkout() -> Result<u32, Rejection> {
    Ok(1)
}

#[resilient(priority = "default")]
async fn profile() -> Result<u32, Rejection> {
    Ok(1)
}

#[resilient(priority = "sheddable", rate_limit = "api")]
async fn prefetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
