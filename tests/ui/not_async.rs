use stormproof::{Rejection, resilient};

#[resilient]
fn fetch() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
