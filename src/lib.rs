#![doc = include_str!("../README.md")]
//!
//! ## Feature flags of this crate
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]
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

#[cfg(feature = "redis")]
#[doc(inline)]
pub use stormproof_fleet as fleet;

/// Support for the code `#[resilient]` generates. Not a public API: it may
/// change in any release.
#[doc(hidden)]
pub mod __private {
    pub use stormproof_runtime::__private::*;
}

/// The guide's pages (`docs/`), compiled and run as doc tests: every Rust
/// block in them is checked, as the README's are on the crate's front page.
#[cfg(doctest)]
mod guide {
    #[doc = include_str!("../docs/attribute.md")]
    struct Attribute;
    #[doc = include_str!("../docs/errors.md")]
    struct Errors;
    #[doc = include_str!("../docs/guards.md")]
    struct Guards;
    // Pages whose examples need features beyond the default ones and those
    // the tests turn on (`axum`, `sim`, `anyhow`, `reqwest`) are checked
    // with them, as `scripts/test.sh` (`--all-features`) does.
    #[cfg(all(feature = "tower", feature = "hyper-util", feature = "reqwest-middleware"))]
    #[doc = include_str!("../docs/http.md")]
    struct Http;
    #[cfg(feature = "redis")]
    #[doc = include_str!("../docs/configuration.md")]
    struct Configuration;
    #[doc = include_str!("../docs/observability.md")]
    struct Observability;
    #[doc = include_str!("../docs/payment-example.md")]
    struct PaymentExample;
    #[doc = include_str!("../docs/dashboard.md")]
    struct Dashboard;
    #[doc = include_str!("../docs/simulation.md")]
    struct Simulation;
    #[cfg(feature = "redis")]
    #[doc = include_str!("../docs/fleet.md")]
    struct Fleet;
    #[doc = include_str!("../docs/guarantees.md")]
    struct Guarantees;
    #[doc = include_str!("../docs/performance.md")]
    struct Performance;
    #[doc = include_str!("../docs/architecture.md")]
    struct Architecture;
    #[doc = include_str!("../docs/design-notes.md")]
    struct DesignNotes;
}
