//! The runtime of [`stormproof`](https://docs.rs/stormproof): capped
//! exponential backoff with jitter, error classification, deadlines and
//! per-attempt timeouts, circuit breakers, retry budgets and bulkheads in a
//! named registry, idempotency keys, and observability.
//!
//! Users depend on the `stormproof` facade, which re-exports everything here
//! together with the `#[resilient]` attribute.
//!
//! Everything time-based runs on `tokio::time`, so under
//! `#[tokio::test(start_paused = true)]` hours of backoff take microseconds
//! and every result is exact.
//!
//! # Modules, and which way they depend
//!
//! Dependencies point one way, from the entry points down to pure logic;
//! no module uses a sibling that uses it back, directly or through others,
//! at any depth of the tree (`scripts/module-deps.sh` checks it, its allow-list
//! `scripts/module-circles.allow` empty).
//!
//! | layer | modules |
//! |---|---|
//! | entry points | `Policy::run` (`call::run`), the attribute's expansion, `http` (the tower layer and the reqwest middleware: one HTTP call driven through the loop, one set of HTTP rules); the dashboard is a crate of its own (`stormproof-admin`) on the public API |
//! | the call | `call` (one `Call`, one `Attempt` future: admission, run, record, decide, back off), `guard` (the `Guard` trait and the guard set's one admission and recording), `context` (key and nesting per attempt) |
//! | wiring | `fleet` (feature `fleet`: the seam a store that shares guards between processes uses; the Redis fleet is the `stormproof-fleet` crate), `operations` (every annotated fn, listed at link time; `Registry::check`), `file` (the TOML file: read, parse, check, apply, one way), `policy` (settings), `guards` (names resolved and cached per registry), `registry` (named guards, operation overrides) |
//! | guards | `breaker` (pure core + atomic wrapper), `budget`, `bulkhead` (with its adaptive limit), `throttle`, `rate_limit` |
//! | pure logic | `decision` (the retry decision), `backoff`, `classify`, `rejection`, `error` (what the loop needs of an error type), `errors` (the ecosystem's error types, and `Error<E>`), `settings`, `suggest`, `clock`, `config` |
//! | leaf | `observe` (traces and metrics, from plain labels), `attempts`, `counter` (per-thread counts of the success path) |
#![deny(missing_docs)]
// docs.rs marks what each feature adds.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

pub mod backoff;
pub mod breaker;
pub mod budget;
pub mod bulkhead;
mod call;
pub mod classify;
mod clock;
mod config;
mod context;
mod counter;
pub mod decision;
mod error;
mod errors;
#[cfg(feature = "config")]
mod file;
#[cfg(feature = "fleet")]
pub mod fleet;
#[cfg(feature = "tonic")]
pub mod grpc;
pub mod guard;
mod guards;
pub mod hooks;
#[cfg(any(feature = "reqwest", feature = "tower", feature = "reqwest-middleware"))]
pub mod http;
mod http_date;
pub mod keyed;
pub mod observe;
mod operations;
pub mod policy;
pub mod priority;
pub mod rate_limit;
mod registry;
mod rejection;
mod settings;
mod stop;
mod suggest;
pub mod throttle;

// What a user writes daily is at the root; the rest is in the concern
// modules above (`breaker::`, `budget::`, `policy::`, ...), one name each.
pub use backoff::Jitter;
pub use call::{Classified, ClassifyInner, ForKey, Run, RunOrElse};
pub use classify::{Classify, ErrorClass};
pub use config::ConfigError;
pub use context::idempotency_key;
pub use error::{ResilientError, RunError};
pub use errors::Error;
#[cfg(feature = "config")]
pub use file::{Change, ConfigFileError, Problem, Refusal, ReloadReport};
pub use operations::{CheckReport, OperationInfo, Undeclared, Unused, operations};
pub use policy::{Nested, Policy, PolicyBuilder};
pub use priority::Priority;
pub use registry::{GuardKind, Registry, RegistryError, registry};
pub use rejection::Rejection;
pub use stop::{StopReason, Stopped};

/// What only the code `#[resilient]` generates uses. Not a public API: it
/// may change in any release.
#[doc(hidden)]
pub mod __private {
    // Ten names: what the expansion names, and nothing else. The guard
    // slots of a call's shape (`Named`, `Unnamed`); the call (`Call`, which
    // also makes its parts and finds a breaker per key, and `Step`); the
    // policy's literal and its entry in the list of operations
    // (`AttributeConfig`, `Operation`, `inventory`); and `probe`, the types
    // and traits of the autoref probes, which the expansion imports by name
    // (`as _`) so that their methods resolve without naming anything in the
    // body's scope. `RejectionConverter` and `NoConverter` belong to the
    // probes but sit here: an error type that cannot carry a rejection is
    // refused by their names, and the compiler names an item by a path
    // through a `#[doc(hidden)]` module only one level deep (it would print
    // the runtime's private path, `stormproof_runtime::error::...`).
    pub use crate::call::{Call, Step};
    pub use crate::error::{NoConverter, RejectionConverter};
    pub use crate::guards::{Named, Unnamed};
    pub use crate::operations::Operation;
    pub use crate::policy::AttributeConfig;
    pub use inventory;

    /// What the expansion asks of the types it meets: the error type of a
    /// `Result` alias (`ResultType`), and by autoref specialization
    /// (`(&&&Probe::of(&x)).method()` takes the first trait whose bound the
    /// type meets) how a key becomes text, how the last error is kept across
    /// waits, how a rejection becomes the error type; and the types the
    /// call's own tests drive it with (`ByTraits`, `Kept`).
    pub mod probe {
        pub use crate::call::{
            ErrorProbe, ForgetOtherError, KeepSendError, Kept, KeyFromDisplay, KeyFromInteger, KeyFromText,
            KeyProbe,
        };
        pub use crate::error::{
            ByTraits, ConvertByFrom, ConvertByTraits, ConvertByWrapping, ConvertNot, RejectProbe,
        };

        /// The error type of a `Result`, named through an alias (`io::Result<T>`).
        pub trait ResultType {
            /// `E` of `Result<T, E>`.
            type Error;
        }

        impl<T, E> ResultType for Result<T, E> {
            type Error = E;
        }
    }
}
