use stormproof::{Rejection, resilient};

struct Tenant;

impl Tenant {
    #[resilient(breaker = "search", per = self)]
    async fn search(&self) -> Result<u64, Rejection> {
        Ok(1)
    }
}

fn main() {}
