//! What the breaker's state machine answers an attempt, and what it hands
//! back: an admission with its ticket, and the transitions it makes.

use super::BreakerState;

/// What the breaker answers when asked to admit an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Run it. `ticket` must be handed back with the outcome (or abandoned).
    Allowed(Ticket),
    /// Fail fast: open, or half-open with every probe slot taken.
    Rejected,
}

/// Proof of admission: which epoch of the breaker admitted the attempt and
/// whether it holds a half-open probe slot.
///
/// An outcome only counts in the epoch that admitted it. Every transition
/// starts a new epoch, so a slow attempt admitted while closed cannot close
/// a breaker that has since opened, and a probe of an earlier half-open
/// period cannot free a slot of the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    /// The epoch that admitted the attempt.
    pub epoch: u64,
    /// Whether the attempt holds a half-open probe slot.
    pub probe: bool,
}

/// A state change, as `(from, to)`.
pub type Transition = (BreakerState, BreakerState);
