use stormproof::{Rejection, resilient};

// A suffix whose type cannot hold the value (rustc refuses `300u8` itself):
// 300 or the 44 it wraps to, the attribute does not guess.
#[resilient(base_ms = 300u8)]
async fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

#[resilient(deadline_ms = 70_000u16, attempt_timeout_ms = 200i8)]
async fn fetch_again() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
