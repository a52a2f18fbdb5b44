//! What the guards say when they stop an attempt.

use std::time::Duration;

use crate::classify::{Classify, ErrorClass};

/// Why the library, not the dependency, ended an attempt or a call.
///
/// Your error type must implement `From<Rejection>` so that a call that
/// could not run still returns your error type.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::{Classify, ErrorClass, Rejection};
///
/// let timeout = Rejection::AttemptTimeout { after: Duration::from_millis(250) };
/// assert_eq!(timeout.classify(), ErrorClass::Transient);
/// assert_eq!(timeout.to_string(), "the attempt timed out after 250ms");
///
/// let open = Rejection::CircuitOpen { breaker: "payment".into() };
/// assert_eq!(open.classify(), ErrorClass::Permanent);
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// The named breaker is open (or half-open with every probe slot taken):
    /// the call failed fast without running. Not retried.
    CircuitOpen {
        /// The breaker's name.
        breaker: String,
    },
    /// The named bulkhead had no free permit within its `max_wait`. Not retried.
    BulkheadFull {
        /// The bulkhead's name.
        bulkhead: String,
    },
    /// The named client-side throttle refused the attempt locally: the
    /// dependency has been refusing most of what it was sent. Not retried.
    Throttled {
        /// The throttle's name.
        throttle: String,
    },
    /// The named rate limiter had no turn for the attempt within its
    /// `max_wait`. Not retried.
    RateLimited {
        /// The rate limiter's name.
        limiter: String,
    },
    /// The named retry budget had no token for a retry or a hedge: retries
    /// stop (the caller gets the last error; this appears in the trace and
    /// the metrics), and a hedge it cannot pay for is not started.
    BudgetExhausted {
        /// The budget's name.
        budget: String,
    },
    /// The attempt ran longer than `attempt_timeout` and was cancelled. Transient: retried.
    AttemptTimeout {
        /// The per-attempt timeout that fired.
        after: Duration,
    },
    /// The call's overall deadline cut an attempt short.
    DeadlineExceeded {
        /// The deadline, measured from the start of the call.
        after: Duration,
    },
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::CircuitOpen { breaker } => {
                write!(f, "circuit breaker `{breaker}` is open: the attempt was refused without running")
            }
            Rejection::BulkheadFull { bulkhead } => {
                write!(f, "bulkhead `{bulkhead}` is full: the attempt was refused without running")
            }
            Rejection::Throttled { throttle } => write!(
                f,
                "throttle `{throttle}` refused the attempt locally: the dependency has been refusing most requests"
            ),
            Rejection::RateLimited { limiter } => {
                write!(f, "rate limit `{limiter}` had no turn for the attempt within its `max_wait`")
            }
            Rejection::BudgetExhausted { budget } => {
                write!(f, "retry budget `{budget}` has no token for another attempt")
            }
            Rejection::AttemptTimeout { after } => {
                write!(f, "the attempt timed out after {after:?}")
            }
            Rejection::DeadlineExceeded { after } => {
                write!(f, "the call's deadline of {after:?} passed")
            }
        }
    }
}

impl std::error::Error for Rejection {}

impl Classify for Rejection {
    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self)
    }

    fn classify(&self) -> ErrorClass {
        match self {
            Rejection::AttemptTimeout { .. } => ErrorClass::Transient,
            _ => ErrorClass::Permanent,
        }
    }
}

impl Rejection {
    /// A short label for traces and metrics, e.g. `circuit_open`.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// assert_eq!(stormproof::Rejection::BulkheadFull { bulkhead: "db".into() }.label(), "bulkhead_full");
    /// ```
    pub fn label(&self) -> &'static str {
        match self {
            Rejection::CircuitOpen { .. } => "circuit_open",
            Rejection::BulkheadFull { .. } => "bulkhead_full",
            Rejection::Throttled { .. } => "throttled",
            Rejection::RateLimited { .. } => "rate_limited",
            Rejection::BudgetExhausted { .. } => "budget_exhausted",
            Rejection::AttemptTimeout { .. } => "attempt_timeout",
            Rejection::DeadlineExceeded { .. } => "deadline_exceeded",
        }
    }
}

impl Rejection {
    /// Why a call stops when this rejection ends it: the reason in the
    /// trace and the `stops` metric.
    pub(crate) fn stop_reason(&self) -> crate::stop::StopReason {
        use crate::stop::StopReason;
        match self {
            Rejection::CircuitOpen { .. } => StopReason::CircuitOpen,
            Rejection::BulkheadFull { .. } => StopReason::BulkheadFull,
            Rejection::Throttled { .. } => StopReason::Throttled,
            Rejection::RateLimited { .. } => StopReason::RateLimited,
            Rejection::BudgetExhausted { .. } => StopReason::BudgetExhausted,
            Rejection::AttemptTimeout { .. } | Rejection::DeadlineExceeded { .. } => StopReason::Deadline,
        }
    }
}

impl From<Rejection> for std::io::Error {
    /// Lets `std::io::Error` be the error type of a resilient call.
    fn from(rejection: Rejection) -> Self {
        let kind = match rejection {
            Rejection::AttemptTimeout { .. } | Rejection::DeadlineExceeded { .. } => {
                std::io::ErrorKind::TimedOut
            }
            _ => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, rejection)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_attempt_timeouts_are_retried() {
        let all = [
            Rejection::CircuitOpen { breaker: "b".into() },
            Rejection::BulkheadFull { bulkhead: "b".into() },
            Rejection::Throttled { throttle: "t".into() },
            Rejection::RateLimited { limiter: "r".into() },
            Rejection::BudgetExhausted { budget: "u".into() },
            Rejection::AttemptTimeout { after: Duration::from_secs(1) },
            Rejection::DeadlineExceeded { after: Duration::from_secs(1) },
        ];
        let retryable: Vec<_> = all.iter().filter(|r| r.classify().is_retryable()).collect();
        assert_eq!(retryable, [&all[5]]);
        for r in &all {
            assert!(!r.to_string().is_empty());
        }
    }

    #[test]
    fn io_errors_carry_the_rejection() {
        let err = std::io::Error::from(Rejection::AttemptTimeout { after: Duration::from_secs(1) });
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        // The io::Error's own classification keeps the timeout retryable.
        assert_eq!(err.classify(), ErrorClass::Transient);
    }
}
