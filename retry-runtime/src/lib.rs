//! The runtime of [`resilient`](https://docs.rs/resilient): capped
//! exponential backoff with jitter, error classification, deadlines and
//! per-attempt timeouts, circuit breakers, retry budgets and bulkheads in a
//! named registry, idempotency keys, and observability.
//!
//! Users depend on the `resilient` facade, which re-exports everything here
//! together with the `#[resilient]` attribute.
//!
//! Everything time-based runs on `tokio::time`, so under
//! `#[tokio::test(start_paused = true)]` hours of backoff take microseconds
//! and every result is exact.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backoff;
mod breaker;
mod budget;
mod bulkhead;
mod classify;
mod config;
mod context;
mod execution;
#[cfg(feature = "reqwest")]
pub mod http;
pub mod observe;
mod policy;
mod registry;
mod rejection;
pub mod sim;

pub use backoff::{Backoff, Jitter, JitterRng, UnknownJitter};
pub use breaker::{
    Admission, BreakerConfig, BreakerCore, BreakerPermit, BreakerState, BreakerTransition, CircuitBreaker,
    Outcome, Ticket, Transition, TransitionHook,
};
pub use budget::{BudgetConfig, RetryBudget};
pub use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull, BulkheadPermit};
pub use classify::{Classify, ErrorClass, ResilientError, parse_retry_after, parse_retry_after_at};
pub use config::{ConfigError, PolicyError};
pub use context::idempotency_key;
pub use execution::{Execution, Step};
pub use policy::{AttributeConfig, MAX_ATTEMPTS_LIMIT, Nested, Policy, PolicyBuilder, key_of};
pub use registry::{Registry, RegistryError, registry};
pub use rejection::Rejection;
