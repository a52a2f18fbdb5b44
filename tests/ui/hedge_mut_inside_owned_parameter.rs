//! A `&mut` inside a hedged fn's owned parameter is refused like a `&mut`
//! parameter (`hedge_mut_parameter`): every hedge would need a copy of it.

use stormproof::{Rejection, resilient};

#[resilient(hedge_after_ms = 50)]
async fn send((buf, n): (&mut Vec<u8>, u8)) -> Result<usize, Rejection> {
    buf.push(n);
    Ok(buf.len())
}

fn main() {}
