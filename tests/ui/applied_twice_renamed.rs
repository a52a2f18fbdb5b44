use stormproof::resilient as retry;
use stormproof::{Rejection, resilient};

// Under another name, the second application is not known by its name: it
// is told by the first's expansion, which it is given.
#[retry(max_attempts = 3)]
#[retry(breaker = "db")]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

#[resilient(max_attempts = 3)]
#[retry(breaker = "db")]
async fn fetch_again() -> Result<u32, Rejection> {
    Ok(1)
}

// An attribute between the two that wraps the body leaves the expansion in it.
#[retry(max_attempts = 3)]
#[tracing::instrument]
#[retry(breaker = "db")]
async fn fetch_traced() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
