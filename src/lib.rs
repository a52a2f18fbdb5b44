//! # stormproof
//!
//! Make calls to flaky dependencies safe with one attribute: retries with
//! capped exponential backoff and jitter, error classification (with
//! `Retry-After`), deadlines and per-attempt timeouts, retry budgets,
//! circuit breakers and bulkheads held in a named registry, and idempotency
//! keys that the compiler insists on for non-idempotent operations.
//!
//! ```
//! use stormproof::{Classify, ErrorClass, Rejection, resilient};
//!
//! #[derive(Debug)]
//! enum ApiError { Unavailable, NotFound, Rejected(Rejection) }
//!
//! impl Classify for ApiError {
//!     fn classify(&self) -> ErrorClass {
//!         match self {
//!             ApiError::Unavailable => ErrorClass::Transient,
//!             ApiError::NotFound => ErrorClass::Permanent,
//!             ApiError::Rejected(r) => r.classify(),
//!         }
//!     }
//! }
//! impl From<Rejection> for ApiError {
//!     fn from(r: Rejection) -> Self { ApiError::Rejected(r) }
//! }
//!
//! #[resilient(max_attempts = 4, base_ms = 100, cap_ms = 20_000, breaker = "inventory")]
//! async fn stock(sku: &str) -> Result<u32, ApiError> {
//!     if sku.is_empty() { Err(ApiError::NotFound) } else { Ok(7) }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! assert_eq!(stock("A-1").await.unwrap(), 7);
//! # }
//! ```
//!
//! See the README for the full contract: the attribute's arguments, the
//! backoff formulas, what the caller gets back, and the guarantees.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub use stormproof_macros::resilient;
pub use stormproof_runtime::*;

#[cfg(feature = "axum")]
#[doc(inline)]
pub use stormproof_admin as admin;

#[cfg(feature = "sim")]
#[doc(inline)]
pub use stormproof_sim as sim;

/// Support for the code `#[resilient]` generates. Not a public API: it may
/// change in any release.
#[doc(hidden)]
pub mod __private {
    pub use stormproof_runtime::__private::*;
    pub use stormproof_runtime::{Classify, Jitter, Policy, Rejection, ResilientError};
}
