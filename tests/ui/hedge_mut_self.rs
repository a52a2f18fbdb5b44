use stormproof::{Rejection, resilient};

struct Client {
    sent: u32,
}

impl Client {
    #[resilient(hedge_after_ms = 50)]
    async fn fetch(&mut self) -> Result<u32, Rejection> {
        self.sent += 1;
        Ok(self.sent)
    }
}

fn main() {}
