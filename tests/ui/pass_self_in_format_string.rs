#![deny(warnings)]
//! `self` captured by a format string (`"{self:?}"`) is the attempt's
//! receiver, like every other `self` in the body: a `&mut self` method
//! reborrowed per attempt, and a hedged `self: Arc<Self>` cloned per attempt.
//! A formatting macro inside another macro's arguments too; a `"{self}"`
//! that is no format string (in `vec!`) stays as written.

use std::sync::Arc;

use stormproof::resilient;

#[derive(Debug, Clone, Default)]
struct Counter {
    calls: u32,
}

impl std::fmt::Display for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", self.calls)
    }
}

impl Counter {
    #[resilient(jitter = "none", base_ms = 1)]
    async fn describe(&mut self, tag: &str) -> Result<String, std::io::Error> {
        self.calls += 1;
        let text = format!("{self:?} {tag} {{self}} {self} {}", self.calls,);
        if self.calls < 2 { Err(std::io::ErrorKind::TimedOut.into()) } else { Ok(text) }
    }

    #[resilient(jitter = "none", base_ms = 1, hedge_after_ms = 5)]
    async fn shared(self: Arc<Self>) -> Result<String, std::io::Error> {
        let nested = vec![format!("{self}"), "{self}".to_owned()];
        assert!(!nested.is_empty(), "{self:?} {}", nested.len());
        Ok(nested.join(" "))
    }
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let mut counter = Counter::default();
    assert_eq!(counter.describe("t").await.unwrap(), "Counter { calls: 2 } t {self} #2 2");
    assert_eq!(Arc::new(counter).shared().await.unwrap(), "#2 {self}");
}
