// Shared by the runtime's integration tests (each test file includes it as a module).
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stormproof_runtime::{Classify, ErrorClass, Rejection};
use tokio::time::Instant;

/// An error whose class the test chooses.
#[derive(Debug, Clone, PartialEq)]
pub enum TestError {
    Transient,
    Throttled(Option<Duration>),
    Permanent,
    Rejected(Rejection),
}

impl Classify for TestError {
    fn classify(&self) -> ErrorClass {
        match self {
            TestError::Transient => ErrorClass::Transient,
            TestError::Throttled(retry_after) => ErrorClass::Throttled { retry_after: *retry_after },
            TestError::Permanent => ErrorClass::Permanent,
            TestError::Rejected(r) => r.classify(),
        }
    }
}

impl From<Rejection> for TestError {
    fn from(r: Rejection) -> Self {
        TestError::Rejected(r)
    }
}

pub fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Records when each attempt started, in ms since the recorder was made.
#[derive(Clone)]
pub struct Attempts {
    start: Instant,
    times: Arc<Mutex<Vec<u64>>>,
    count: Arc<AtomicU32>,
}

impl Attempts {
    pub fn new() -> Self {
        Attempts { start: Instant::now(), times: Arc::default(), count: Arc::default() }
    }

    /// Marks an attempt and returns its 1-based number.
    pub fn mark(&self) -> u32 {
        self.times.lock().unwrap().push(self.start.elapsed().as_millis() as u64);
        self.count.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub fn times(&self) -> Vec<u64> {
        self.times.lock().unwrap().clone()
    }

    pub fn count(&self) -> u32 {
        self.count.load(Ordering::SeqCst)
    }
}
