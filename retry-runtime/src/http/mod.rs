//! HTTP, in one place: the classification of a response and of reqwest's
//! errors ([`error_for_status`] keeps a response's `Retry-After`, which
//! reqwest's own `error_for_status()` drops), the rule of which requests may be sent twice, and the two ways
//! to put a policy around an HTTP client without an attribute: the tower
//! layer ([`tower`], feature `tower`) and the reqwest middleware
//! ([`reqwest_middleware`], feature `reqwest-middleware`).
//!
//! Both are entry points to the same call as `Policy::run`: one HTTP call
//! driven through the retry loop (`exchange`), with one set of rules
//! (`rules`): a status below 400 is a success, any other is classified by
//! [`ErrorClass::from_http`](crate::ErrorClass::from_http) with its
//! `Retry-After`; the methods RFC 9110 calls idempotent are retried, any
//! other only with an `Idempotency-Key` header. A failed response's body is
//! read to its end before a retry so that its connection is reused
//! (`drain`). The attempts a call made are in the response's extensions
//! ([`Attempts`]).

mod attempts;
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
mod drain;
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
mod exchange;
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
mod guard_key;
#[cfg(feature = "reqwest")]
mod reqwest;
#[cfg(feature = "reqwest-middleware")]
pub mod reqwest_middleware;
mod rules;
#[cfg(feature = "reqwest")]
mod status;
#[cfg(feature = "tower")]
pub mod tower;

pub use attempts::Attempts;
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub use guard_key::GuardKey;
#[cfg(feature = "reqwest")]
pub use reqwest::classify_response;
#[cfg(feature = "reqwest")]
pub use status::{StatusError, error_for_status};
