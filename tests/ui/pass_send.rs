#![deny(warnings)]
//! The returned future is `Send` whenever the body's is, so it can be spawned.

use std::sync::Arc;

use stormproof::{Rejection, resilient};
use tokio::sync::Mutex;

#[derive(Clone)]
struct Shared {
    hits: Arc<Mutex<u32>>,
}

impl Shared {
    #[resilient(max_attempts = 3, breaker = "shared", attempt_timeout_ms = 1_000)]
    async fn hit(&self, by: u32, label: String) -> Result<String, Rejection> {
        let mut hits = self.hits.lock().await;
        *hits += by;
        tokio::task::yield_now().await;
        Ok(format!("{label}{hits}"))
    }
}

#[resilient(idempotent = false, key = id, deadline_ms = 5_000)]
async fn keyed(id: String, payload: Vec<u8>) -> Result<usize, Rejection> {
    tokio::task::yield_now().await;
    Ok(id.len() + payload.len())
}

fn assert_send<T: Send>(value: T) -> T {
    value
}

#[tokio::main]
async fn main() {
    let shared = Shared { hits: Arc::default() };
    let task = {
        let shared = shared.clone();
        tokio::spawn(async move { shared.hit(2, "hits=".to_owned()).await })
    };
    assert_eq!(task.await.unwrap().unwrap(), "hits=2");
    let keyed = tokio::spawn(keyed("order-1".to_owned(), vec![1, 2]));
    assert_eq!(keyed.await.unwrap().unwrap(), 9);
    assert_send(shared.hit(1, String::new())).await.unwrap();
}
