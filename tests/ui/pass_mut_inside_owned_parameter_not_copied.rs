#![deny(warnings)]
//! A `&mut` inside an owned parameter compiles where no attempt copies it:
//! a pattern that binds none of it, one that borrows it with a shared
//! `ref` inside the pattern (`ref rest @ ..` too), a single attempt (which
//! moves its parameters), a type that merely mentions a `&mut` (a fn
//! pointer is `Copy`), or a parameter compiled out, whose copies are too.

use stormproof::{Rejection, resilient};

#[resilient(max_attempts = 3)]
async fn skipped((_, n): (&mut Vec<u8>, u8), (.., last): (&mut u8, u8)) -> Result<u8, Rejection> {
    Ok(n + last)
}

#[resilient(max_attempts = 3)]
async fn borrowed((ref pair, n): ((&mut u8, u8), u8)) -> Result<u8, Rejection> {
    Ok(*pair.0 + pair.1 + n)
}

#[resilient(max_attempts = 3)]
async fn rest_borrowed([ref first, ref rest @ ..]: [&mut u8; 3]) -> Result<u8, Rejection> {
    Ok(**first + *rest[0] + *rest[1])
}

#[resilient(hedge_after_ms = 50)]
async fn hedged_rest_borrowed([_, ref rest @ ..]: [&mut u8; 3]) -> Result<u8, Rejection> {
    Ok(*rest[0] + *rest[1])
}

#[resilient(max_attempts = 3)]
async fn compiled_out(
    #[cfg(any())] (buf, n): (&mut Vec<u8>, u8),
    #[cfg_attr(all(), cfg(any()))] pair: (&mut u8, u8),
    m: u8,
) -> Result<u8, Rejection> {
    Ok(m)
}

#[resilient(hedge_after_ms = 50)]
async fn hedged_compiled_out(#[cfg(any())] (buf, n): (&mut Vec<u8>, u8), m: u8) -> Result<u8, Rejection> {
    Ok(m)
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
    let (mut a, mut b, mut c) = (1, 2, 3);
    assert_eq!(rest_borrowed([&mut a, &mut b, &mut c]).await.unwrap(), 6);
    assert_eq!(hedged_rest_borrowed([&mut a, &mut b, &mut c]).await.unwrap(), 5);
    assert_eq!(compiled_out(8).await.unwrap(), 8);
    assert_eq!(hedged_compiled_out(9).await.unwrap(), 9);
}
