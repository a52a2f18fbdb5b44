//! A `&mut self` method that returns a borrow of `self` cannot retry.

use stormproof::resilient;

struct Cache {
    value: String,
}

impl Cache {
    #[resilient(max_attempts = 3)]
    async fn refresh(&mut self) -> Result<&str, std::io::Error> {
        self.value.push('!');
        Ok(&self.value)
    }

    // One attempt has no loop, so it may return a borrow.
    #[resilient(max_attempts = 1)]
    async fn once(&mut self) -> Result<&str, std::io::Error> {
        Ok(&self.value)
    }
}

fn main() {}
