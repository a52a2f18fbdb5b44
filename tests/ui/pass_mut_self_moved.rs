#![deny(warnings)]
//! `&mut self` methods whose body moves `self`, alone and under
//! `#[tracing::instrument]` (whose `async move` moves `self`): each attempt
//! reborrows the receiver, as it does a `&mut T` parameter.

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

#[derive(Debug, Default)]
struct Counter {
    calls: u32,
}

mod helpers {
    pub fn bump(calls: &mut u32) -> u32 {
        *calls += 1;
        *calls
    }
}

impl Counter {
    #[resilient(jitter = "none", base_ms = 1)]
    async fn moved(&mut self) -> Result<u32, Flaky> {
        let this = self;
        // A path through `self::` is the module's, not the receiver's.
        let calls = self::helpers::bump(&mut this.calls);
        if calls < 3 { Err(Flaky) } else { Ok(calls) }
    }

    #[tracing::instrument]
    #[resilient(jitter = "none", base_ms = 1)]
    async fn instrumented(&mut self, by: u32) -> Result<u32, Flaky> {
        self.calls += by;
        assert!(self.calls > 0, "{}", self.calls);
        if self.calls < 9 { Err(Flaky) } else { Ok(self.calls) }
    }
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let mut counter = Counter::default();
    assert_eq!(counter.moved().await.unwrap(), 3);
    assert_eq!(counter.instrumented(2).await.unwrap(), 9);
}
