use stormproof::{Rejection, resilient};

struct Order(u64);

impl Order {
    #[resilient(idempotent = false, key = self)]
    async fn charge(&self) -> Result<u64, Rejection> {
        Ok(self.0)
    }
}

fn main() {}
