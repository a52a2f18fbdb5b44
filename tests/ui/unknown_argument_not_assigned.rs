use stormproof::{Rejection, resilient};

// Written as other libraries spell it: the name is what to fix.
#[resilient(retries(3))]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

#[resilient(timeout: 30)]
async fn load() -> Result<u32, Rejection> {
    Ok(1)
}

// Each argument's error, not only the last one's.
#[resilient(colour = 1, breaker)]
async fn store() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
