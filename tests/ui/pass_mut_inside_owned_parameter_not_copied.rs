#![deny(warnings)]
//! A `&mut` inside an owned parameter compiles where no attempt copies it:
//! a pattern that binds none of it, one that borrows it with a shared
//! `ref` inside the pattern, a single attempt (which moves its parameters),
//! or a type that merely mentions a `&mut` (a fn pointer is `Copy`).

use resilient::{Rejection, resilient};

#[resilient(max_attempts = 3)]
async fn skipped((_, n): (&mut Vec<u8>, u8), (.., last): (&mut u8, u8)) -> Result<u8, Rejection> {
    Ok(n + last)
}

#[resilient(max_attempts = 3)]
async fn borrowed((ref pair, n): ((&mut u8, u8), u8)) -> Result<u8, Rejection> {
    Ok(*pair.0 + pair.1 + n)
}

#[resilient(max_attempts = 1)]
async fn once((buf, n): (&mut Vec<u8>, u8)) -> Result<usize, Rejection> {
    buf.push(n);
    Ok(buf.len())
}

#[resilient(max_attempts = 3)]
async fn callback(bump: fn(&mut u8), mut at: u8) -> Result<u8, Rejection> {
    bump(&mut at);
    Ok(at)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let (mut buf, mut one) = (vec![1], 1);
    assert_eq!(skipped((&mut buf, 2), (&mut one, 3)).await.unwrap(), 5);
    assert_eq!(borrowed(((&mut one, 4), 1)).await.unwrap(), 6);
    assert_eq!(once((&mut buf, 7)).await.unwrap(), 2);
    assert_eq!(buf, [1, 7]);
    assert_eq!(callback(|n| *n += 1, 1).await.unwrap(), 2);
}
