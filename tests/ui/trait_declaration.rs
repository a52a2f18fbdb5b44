use stormproof::{Rejection, resilient};

trait Payments {
    #[resilient]
    async fn charge(&self, cents: u64) -> Result<u64, Rejection>;
}

fn main() {}
