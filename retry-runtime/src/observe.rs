//! Traces and metrics: every retry, every stop and every breaker transition
//! is visible.
//!
//! `tracing` (always on): a span per call named `resilient.call` with the
//! operation's name; a `DEBUG` event per retry (attempt, wait, error class);
//! an event per stop that gives up (why); an event per breaker transition
//! (name, from, to; opening is a `WARN`).
//!
//! With the `metrics` feature, through the `metrics` crate (labels are only
//! operation and registry names, so cardinality stays bounded):
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `resilient_retries_total` | counter | `operation`, `class` |
//! | `resilient_stops_total` | counter | `operation`, `reason` |
//! | `resilient_breaker_transitions_total` | counter | `breaker`, `from`, `to` |
//! | `resilient_breaker_state` | gauge (0 closed, 1 open, 2 half-open) | `breaker` |
//! | `resilient_budget_available` | gauge | `budget` |
//! | `resilient_bulkhead_in_use` | gauge | `bulkhead` |

use std::time::Duration;

use crate::breaker::BreakerState;
use crate::classify::ErrorClass;

/// Why a call stopped without success; the `reason` of traces and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// The error was permanent.
    Permanent,
    /// `max_attempts` attempts were made.
    AttemptsExhausted,
    /// The next wait would have ended at or past the deadline, or the deadline cut an attempt.
    Deadline,
    /// The breaker was open, or would still be open when the wait ended.
    CircuitOpen,
    /// The retry budget had no tokens for another retry.
    BudgetExhausted,
    /// No bulkhead permit came free within `max_wait`.
    BulkheadFull,
}

impl StopReason {
    /// Lower-case label, e.g. `budget_exhausted`.
    pub fn label(self) -> &'static str {
        match self {
            StopReason::Permanent => "permanent",
            StopReason::AttemptsExhausted => "attempts_exhausted",
            StopReason::Deadline => "deadline",
            StopReason::CircuitOpen => "circuit_open",
            StopReason::BudgetExhausted => "budget_exhausted",
            StopReason::BulkheadFull => "bulkhead_full",
        }
    }
}

pub(crate) fn retry(operation: &str, attempt: u32, wait: Duration, class: ErrorClass) {
    tracing::debug!(operation, attempt, wait_ms = wait.as_millis() as u64, class = class.label(), "retrying");
    #[cfg(feature = "metrics")]
    metrics::counter!("resilient_retries_total", "operation" => operation.to_owned(), "class" => class.label())
        .increment(1);
}

pub(crate) fn stop(operation: &str, attempts: u32, reason: StopReason) {
    tracing::debug!(operation, attempts, reason = reason.label(), "giving up");
    #[cfg(feature = "metrics")]
    metrics::counter!("resilient_stops_total", "operation" => operation.to_owned(), "reason" => reason.label())
        .increment(1);
}

pub(crate) fn retries_suppressed(operation: &str, max_attempts: u32) {
    tracing::debug!(
        operation,
        max_attempts,
        "nested inside another resilient call's attempt: making a single attempt so retries do not multiply"
    );
}

pub(crate) fn breaker_transition(name: &str, from: BreakerState, to: BreakerState) {
    if to == BreakerState::Open {
        tracing::warn!(breaker = name, from = from.label(), to = to.label(), "circuit breaker opened");
    } else {
        tracing::info!(breaker = name, from = from.label(), to = to.label(), "circuit breaker transition");
    }
    #[cfg(feature = "metrics")]
    {
        let name = name.to_owned();
        metrics::counter!("resilient_breaker_transitions_total", "breaker" => name.clone(), "from" => from.label(), "to" => to.label())
            .increment(1);
        let level = match to {
            BreakerState::Closed => 0.0,
            BreakerState::Open => 1.0,
            BreakerState::HalfOpen => 2.0,
        };
        metrics::gauge!("resilient_breaker_state", "breaker" => name).set(level);
    }
}

#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn budget_level(name: &str, available: u32) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("resilient_budget_available", "budget" => name.to_owned()).set(f64::from(available));
}

#[cfg(feature = "metrics")]
pub(crate) fn bulkhead_level(name: &str, in_use: usize) {
    metrics::gauge!("resilient_bulkhead_in_use", "bulkhead" => name.to_owned()).set(in_use as f64);
}
