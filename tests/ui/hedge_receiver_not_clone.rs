//! A hedged method clones an owned receiver for every attempt: one that is
//! not `Clone` is refused at its type.

use stormproof::{Rejection, resilient};

struct Client {
    sent: u32,
}

impl Client {
    #[resilient(hedge_after_ms = 50)]
    async fn fetch(self: Box<Self>) -> Result<u32, Rejection> {
        Ok(self.sent)
    }
}

fn main() {}
