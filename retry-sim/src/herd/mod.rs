//! The herd simulation: N clients, one dependency, virtual time.
//!
//! Every client is a small state machine; every network leg and every
//! backoff wait is an event in a queue on virtual time (see the module docs
//! of [`sim`](super) for why not tokio). A run is a pure function of its
//! [`HerdConfig`] and [`Strategy`]:
//!
//! - network delays come from one generator seeded by `seed`, drawn in event
//!   order, which is itself deterministic;
//! - each client draws its jitter from its own stream of the same seed, so
//!   one client's draws do not shift when another client's events move;
//! - simultaneous events are processed in the order they were scheduled.
//!
//! The strategies run on the library's own parts: [`Backoff::wait`](stormproof_runtime::backoff::Backoff::wait) for
//! every wait and the retry loop's own decision after every failure; for
//! [`Strategy::Recommended`] the library's budget and the pure breaker
//! [`BreakerCore`](stormproof_runtime::breaker::BreakerCore) fed virtual instants; for [`Strategy::Adaptive`] the
//! budget, the adaptive limit [`LimitCore`] behind a first-come,
//! first-served queue of permits, and optionally the throttle's
//! [`ThrottleWindow`]. They are applied in the order of the retry loop:
//! admission (throttle, breaker, bulkhead) before an attempt; after a
//! failure: attempts left, breaker still open when the wait would end,
//! budget token.
//!
//! [`LimitCore`]: crate::LimitCore
//! [`ThrottleWindow`]: crate::ThrottleWindow

mod admission;
mod answers;
mod config;
mod dependency;
mod engine;
mod guards;
mod priorities;
mod report;
mod strategy;
#[cfg(test)]
mod targets;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod turn_tests;
mod validate;

pub use config::{HerdConfig, Latency, Model};
pub use priorities::{PriorityMix, PriorityTally};
pub use report::HerdReport;
pub use strategy::Strategy;

use stormproof_runtime::ConfigError;

/// Runs `strategy` against the herd described by `config`.
///
/// Deterministic: the same config and strategy give an identical report,
/// bit for bit. Runs in microseconds to milliseconds for hundreds of
/// clients (it does no waiting; time is virtual).
///
/// # Errors
///
/// An invalid config (zero clients, or more than
/// [`HerdConfig::MAX_CLIENTS`]; zero attempts, or more than
/// [`HerdConfig::MAX_ATTEMPTS_IN_ALL`] in all; zero bucket, capacity, tick,
/// service time or timeout; `base > cap`; an invalid budget, breaker,
/// throttle or bulkhead) is an `Err` naming the field, never a panic. See
/// [`HerdConfig::validate`].
///
/// # Example
///
/// The AWS study's result: with 100 clients contending, full jitter does
/// far less work than backoff without jitter, and immediate retries the most.
///
/// ```
/// # mod stormproof { pub use stormproof_runtime::*; pub use stormproof_sim as sim; }
/// use stormproof::Jitter;
/// use stormproof::sim::{HerdConfig, Strategy, simulate};
///
/// let cfg = HerdConfig { clients: 100, seed: 42, ..HerdConfig::contention() };
/// let immediate = simulate(&cfg, Strategy::Immediate)?;
/// let no_jitter = simulate(&cfg, Strategy::Backoff(Jitter::None))?;
/// let full = simulate(&cfg, Strategy::Backoff(Jitter::Full))?;
///
/// assert_eq!(full.succeeded, 100);
/// assert!(full.attempts < no_jitter.attempts);
/// assert!(no_jitter.attempts < immediate.attempts);
/// // Reproducible: same seed, same report.
/// assert_eq!(full, simulate(&cfg, Strategy::Backoff(Jitter::Full))?);
/// # Ok::<(), stormproof::ConfigError>(())
/// ```
pub fn simulate(config: &HerdConfig, strategy: Strategy) -> Result<HerdReport, ConfigError> {
    config.validate()?;
    let mut run = engine::Run::new(config, strategy)?;
    for client in 0..config.clients {
        run.start_client(client);
    }
    run.run_to_end();
    Ok(run.report())
}
