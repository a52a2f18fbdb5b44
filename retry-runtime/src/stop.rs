//! Why a call stopped: [`StopReason`], and [`Stopped`], the reason with
//! the attempts made, carried beside the last attempt's error. Plain
//! values at the bottom of the crate: the decision, the classification,
//! the errors and the hooks all name them.

/// Why a call stopped without success: the `reason` field of the
/// `giving up` trace event and the `reason` label of the
/// `stormproof_stops_total` metric.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// assert_eq!(stormproof::StopReason::BudgetExhausted.label(), "budget_exhausted");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// The error was permanent.
    Permanent,
    /// `max_attempts` attempts were made.
    AttemptsExhausted,
    /// The next wait would have ended at or past the deadline (without a
    /// deadline: past 30 years, tokio's horizon, which only a server's
    /// `Retry-After` can ask for), the deadline passed while the next
    /// attempt waited for a bulkhead permit, or it cut an attempt short.
    Deadline,
    /// The breaker was open, or would still be open when the wait ended.
    CircuitOpen,
    /// The retry budget had no tokens for another retry.
    BudgetExhausted,
    /// No bulkhead permit came free within `max_wait`.
    BulkheadFull,
    /// The client-side throttle refused the next attempt.
    Throttled,
    /// The rate limiter had no turn for the next attempt within `max_wait`.
    RateLimited,
}

impl StopReason {
    /// Every reason, in the order the docs list them.
    pub const ALL: [StopReason; 8] = [
        StopReason::Permanent,
        StopReason::AttemptsExhausted,
        StopReason::Deadline,
        StopReason::CircuitOpen,
        StopReason::BudgetExhausted,
        StopReason::BulkheadFull,
        StopReason::Throttled,
        StopReason::RateLimited,
    ];

    /// Lower-case label, e.g. `budget_exhausted`.
    pub fn label(self) -> &'static str {
        match self {
            StopReason::Permanent => "permanent",
            StopReason::AttemptsExhausted => "attempts_exhausted",
            StopReason::Deadline => "deadline",
            StopReason::CircuitOpen => "circuit_open",
            StopReason::BudgetExhausted => "budget_exhausted",
            StopReason::BulkheadFull => "bulkhead_full",
            StopReason::Throttled => "throttled",
            StopReason::RateLimited => "rate_limited",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Why a call gave up while it still had attempts left and its last error
/// was not permanent: a guard or the deadline stopped it (the breaker
/// opened during the backoff, the budget had no token, the deadline would
/// pass, the bulkhead, throttle or rate limit refused the retry), after
/// this many attempts.
///
/// The caller still gets the last attempt's error, and can read this beside
/// it: [`Error::stop_reason`](crate::Error::stop_reason) for a
/// `stormproof::Error<E>`; for an `anyhow::Error`, as a context layer
/// (`err.downcast_ref::<Stopped>()`, while `err.downcast_ref` of the last
/// error's own type still finds it); for any error type, in the
/// `on_stop` hook. A call that ends because its error was permanent or its
/// attempts ran out gets none: that is the operation's own answer. A
/// guard that refuses the first attempt returns a
/// [`Rejection`](crate::Rejection), as before.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::time::Duration;
/// use stormproof::{Policy, StopReason, Stopped};
///
/// // A deadline of 150 ms leaves room for one retry after 100 ms, not for the next after 200.
/// let policy = Policy::builder().max_attempts(5).base(Duration::from_millis(100)).jitter(stormproof::Jitter::None)
///     .deadline(Duration::from_millis(150)).build().unwrap();
/// let err = policy.run(|| async { Err::<(), _>(anyhow::anyhow!("connection reset")) }).await.unwrap_err();
/// let stopped = err.downcast_ref::<Stopped>().expect("the deadline stopped the retries");
/// assert_eq!((stopped.reason(), stopped.attempts()), (StopReason::Deadline, 2));
/// assert_eq!(err.root_cause().to_string(), "connection reset", "the last error is kept");
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stopped {
    reason: StopReason,
    attempts: u32,
}

impl Stopped {
    pub(crate) fn new(reason: StopReason, attempts: u32) -> Stopped {
        Stopped { reason, attempts }
    }

    /// What stopped the retries.
    pub fn reason(&self) -> StopReason {
        self.reason
    }

    /// The attempts the call made.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Whether `reason` is a guard's or the deadline's, not the
    /// operation's own answer (a permanent error, the last attempt).
    pub(crate) fn stopped_early(reason: StopReason) -> bool {
        !matches!(reason, StopReason::Permanent | StopReason::AttemptsExhausted)
    }
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = if self.attempts == 1 { "" } else { "s" };
        let why = match self.reason {
            StopReason::Deadline => "the deadline would pass before the next attempt",
            StopReason::CircuitOpen => "the circuit breaker is open",
            StopReason::BudgetExhausted => "the retry budget is empty",
            StopReason::BulkheadFull => "the bulkhead is full",
            StopReason::Throttled => "the client-side throttle refused the retry",
            StopReason::RateLimited => "the rate limit refused the retry",
            StopReason::Permanent => "the error is permanent",
            StopReason::AttemptsExhausted => "no attempts are left",
        };
        write!(f, "gave up after {} attempt{plural}: {why}", self.attempts)
    }
}

impl std::error::Error for Stopped {}
