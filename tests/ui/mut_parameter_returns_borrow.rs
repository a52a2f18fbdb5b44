//! A fn that returns a borrow of a `&mut T` parameter cannot retry.

use std::io;

use stormproof::resilient;

#[resilient(max_attempts = 3)]
async fn first(buf: &mut Vec<u8>) -> Result<&mut u8, io::Error> {
    buf.first_mut().ok_or_else(|| io::Error::other("empty"))
}

#[resilient(max_attempts = 3)]
async fn named<'a>(label: &'static str, buf: &'a mut [u8]) -> Result<(&'static str, &'a [u8]), io::Error> {
    Ok((label, buf))
}

// One attempt has no loop, so it may return a borrow.
#[resilient(max_attempts = 1)]
async fn once(buf: &mut Vec<u8>) -> Result<&mut u8, io::Error> {
    buf.first_mut().ok_or_else(|| io::Error::other("empty"))
}

struct Cache;

impl Cache {
    // Elided, the output borrows from `&self`, not from the `&mut` parameter.
    #[resilient(max_attempts = 3)]
    async fn from_self(&self, buf: &mut Vec<u8>) -> Result<&Self, io::Error> {
        buf.push(1);
        Ok(self)
    }
}

fn main() {}
