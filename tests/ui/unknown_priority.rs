// A priority that is none of the three: refused at the value, with the choices.
use stormproof::{Rejection, resilient};

#[resilient(priority = "critcal")]
async fn checkout() -> Result<u32, Rejection> {
    Ok(1)
}

#[resilient(priority = "urgent")]
async fn alert() -> Result<u32, Rejection> {
    Ok(1)
}

fn main() {}
