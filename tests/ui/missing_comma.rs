use stormproof::{Rejection, resilient};

// The argument after a missing `,` is read as if it were there: its own
// error is reported, and so is every later one.
#[resilient(max_attempts = 3 base_ms = 5s, bogus = 1)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

#[resilient(retries(3) jitter = "gaussian")]
async fn fetch_again() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
