//! The seam for a store that shares breakers and budgets between the
//! processes of a fleet (feature `fleet`): the Redis fleet of the
//! `stormproof-fleet` crate (`stormproof::fleet` with the facade's feature
//! `redis`) is built on it, and nothing else of the core's is open to it.
//!
//! What such a store uses, all public and documented where it lives:
//!
//! - a fleet's settings, [`FleetConfig`] (also read from a configuration
//!   file's `[fleet]` table), and why joining fails, [`FleetError`];
//! - the registry's one membership: [`Registry::claim_fleet`], then
//!   [`FleetClaim::join`], held as a [`FleetMembership`] while the store's
//!   task runs, which reports how it fares in a [`FleetStatus`] (read back
//!   as [`FleetSync`] by the dashboard);
//! - each breaker's totals and verdicts:
//!   [`CircuitBreaker::totals`](crate::breaker::CircuitBreaker::totals),
//!   [`trip_until`](crate::breaker::CircuitBreaker::trip_until),
//!   [`close`](crate::breaker::CircuitBreaker::close), and
//!   [`share`](crate::breaker::CircuitBreaker::share)/[`unshare`](crate::breaker::CircuitBreaker::unshare)
//!   for the rule a shared breaker keeps;
//! - each budget's totals and leases:
//!   [`RetryBudget::totals`](crate::budget::RetryBudget::totals),
//!   [`lease`](crate::budget::RetryBudget::lease),
//!   [`end_lease`](crate::budget::RetryBudget::end_lease),
//!   [`leased`](crate::budget::RetryBudget::leased);
//! - [`HORIZON`], past which a duration is "never" for tokio's timers.
//!
//! [`Registry::claim_fleet`]: crate::Registry::claim_fleet

pub use crate::clock::HORIZON;
pub use crate::config::fleet::{FleetConfig, FleetError};
pub use crate::registry::{FleetClaim, FleetMembership, FleetStatus, FleetSync};
