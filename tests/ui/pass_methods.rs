#![deny(warnings)]
//! `&self`, `&mut self`, `self` and `&mut T` parameters, all retried.

use stormproof::{Classify, ErrorClass, Rejection, resilient};

#[derive(Debug)]
struct Flaky;

impl Classify for Flaky {
    fn classify(&self) -> ErrorClass {
        ErrorClass::Transient
    }
}

impl From<Rejection> for Flaky {
    fn from(_: Rejection) -> Self {
        Flaky
    }
}

#[derive(Clone)]
struct Client {
    calls: u32,
    name: String,
}

impl Client {
    #[resilient(jitter = "none", base_ms = 1)]
    async fn name(&self) -> Result<&str, Flaky> {
        Ok(&self.name)
    }

    #[resilient(jitter = "none", base_ms = 1)]
    async fn call(&mut self) -> Result<u32, Flaky> {
        self.calls += 1;
        if self.calls < 3 { Err(Flaky) } else { Ok(self.calls) }
    }

    #[resilient(jitter = "none", base_ms = 1)]
    async fn bump(&mut self, log: &mut Vec<u32>) -> Result<usize, Flaky> {
        self.calls += 1;
        log.push(self.calls);
        // Moving the `&mut` into a binding still leaves it for the next attempt.
        let log_again = log;
        if log_again.len() < 2 { Err(Flaky) } else { Ok(log_again.len()) }
    }

    #[resilient(jitter = "none", base_ms = 1)]
    async fn into_name(self) -> Result<String, Flaky> {
        Ok(self.name.clone())
    }
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let mut client = Client { calls: 0, name: "payments".to_owned() };
    assert_eq!(client.name().await.unwrap(), "payments");
    assert_eq!(client.call().await.unwrap(), 3);
    let mut log = Vec::new();
    assert_eq!(client.bump(&mut log).await.unwrap(), 2);
    assert_eq!(log, [4, 5]);
    assert_eq!(client.into_name().await.unwrap(), "payments");
}
