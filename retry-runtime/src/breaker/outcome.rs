//! How an admitted attempt ended, as the breaker sees it: the vocabulary
//! both the state machine ([`state`](super::state)) and the closed
//! breaker's memory ([`window`](super::window)) read, so it sits below
//! them both rather than in either.

/// How an admitted attempt ended, from the breaker's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The call succeeded.
    Success,
    /// The call succeeded, but took at least the breaker's
    /// `slow_call_duration`: a success for the failure rate, a slow call
    /// for the slow-call rate; a half-open breaker reopens on it.
    Slow,
    /// A transient or throttled failure, an attempt timeout or a deadline cut.
    Failure,
    /// A permanent error: says nothing about the dependency's health.
    Neutral,
}

impl Outcome {
    /// Whether the call succeeded, slow or not.
    #[inline]
    pub fn succeeded(self) -> bool {
        matches!(self, Outcome::Success | Outcome::Slow)
    }
}
