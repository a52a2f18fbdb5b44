//! What every file of this binary uses: a dependency that fails its
//! first attempts, its error, and the bulkhead's helpers.

#![allow(unused_imports)]

pub(crate) use std::future::Future;
pub(crate) use std::sync::Arc;
pub(crate) use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
pub(crate) use std::time::Duration;

pub(crate) use stormproof::{
    Classify, ErrorClass, Rejection,
    breaker::{BreakerConfig, BreakerState},
    budget::{RatioBudget, TokenBucket},
    bulkhead::BulkheadConfig,
    registry, resilient,
};
pub(crate) use tokio::time::Instant;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Flaky {
    Down,
    Rejected(Rejection),
}

impl Classify for Flaky {
    fn classify(&self) -> ErrorClass {
        match self {
            Flaky::Down => ErrorClass::Transient,
            Flaky::Rejected(rejection) => rejection.classify(),
        }
    }
}

impl From<Rejection> for Flaky {
    fn from(rejection: Rejection) -> Self {
        Flaky::Rejected(rejection)
    }
}

/// Counts its attempts; the first `failures` of them fail.
pub(crate) struct Dependency {
    attempts: AtomicU32,
    failures: u32,
}

impl Dependency {
    pub(crate) fn failing(failures: u32) -> Self {
        Dependency { attempts: AtomicU32::new(0), failures }
    }

    pub(crate) fn answer(&self) -> Result<u32, Flaky> {
        let attempt = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        if attempt <= self.failures { Err(Flaky::Down) } else { Ok(attempt) }
    }

    pub(crate) fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::SeqCst)
    }
}

/// The places in use in bulkhead `name` (declared with one place).
pub(crate) fn places_in_use(name: &str) -> usize {
    registry().bulkhead(name).unwrap().in_use()
}

pub(crate) fn one_place(name: &str) {
    let config = BulkheadConfig { max_concurrent: 1, ..Default::default() };
    registry().declare_bulkhead(name, config).unwrap();
}
