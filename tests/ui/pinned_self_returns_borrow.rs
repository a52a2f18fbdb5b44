//! A `self: Pin<&mut Self>` method that returns a borrow of `self` cannot
//! retry, as a `&mut self` one cannot (`mut_self_returns_borrow`).

use std::pin::Pin;

use stormproof::resilient;

struct Cache {
    value: String,
}

impl Cache {
    #[resilient(max_attempts = 3)]
    async fn refresh(self: Pin<&mut Self>) -> Result<&str, std::io::Error> {
        let this = self.get_mut();
        this.value.push('!');
        Ok(&this.value)
    }

    // One attempt has no loop, so it may return a borrow.
    #[resilient(max_attempts = 1)]
    async fn once(self: Pin<&mut Self>) -> Result<&str, std::io::Error> {
        Ok(&self.get_mut().value)
    }
}

fn main() {}
