//! A `Pin<&mut>` is a `&mut` borrow: the attempts of a hedged round could
//! not all hold it, as they cannot hold a `&mut self` (`hedge_mut_self`).

use std::pin::Pin;

use stormproof::{Rejection, resilient};

struct Client {
    sent: u32,
}

impl Client {
    #[resilient(hedge_after_ms = 50)]
    async fn fetch(self: Pin<&mut Self>) -> Result<u32, Rejection> {
        let this = self.get_mut();
        this.sent += 1;
        Ok(this.sent)
    }
}

#[resilient(hedge_after_ms = 50)]
async fn count(counter: Pin<&mut u32>) -> Result<u32, Rejection> {
    Ok(*counter)
}

fn main() {}
