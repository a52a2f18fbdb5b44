//! [`Stopped`]: why a call's retries ended before the operation gave its
//! own final answer, carried with the last attempt's error.

use crate::decision::StopReason;

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
