//! A company's own crate: it re-exports the facade for its services.
pub use stormproof;
