//! Every attempt takes its own copy of an owned parameter, and a `&mut`
//! inside its tuple or array cannot be copied: said at the `&mut`, for each
//! such parameter, rather than as "`&mut Vec<u8>: Clone` is not satisfied".

use stormproof::{Rejection, resilient};

#[resilient(max_attempts = 3)]
async fn send(
    (buf, n): (&mut Vec<u8>, u8),
    both: [&mut u8; 2],
    ref pair: (u8, (u8, &mut u8)),
) -> Result<usize, Rejection> {
    buf.push(n);
    Ok(buf.len() + usize::from(*both[0] + pair.0))
}

fn main() {}
