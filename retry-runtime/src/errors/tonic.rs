//! `tonic::Status` works as it is (feature `tonic`).
//!
//! | code | class |
//! |---|---|
//! | `Unavailable`, `DeadlineExceeded` | transient; with a `grpc-retry-pushback-ms` trailer, as `ResourceExhausted` with one |
//! | `Cancelled` made by tonic from its own timeout (`Endpoint::timeout`, `grpc-timeout`: a `TimeoutExpired` in its source chain) | transient, as a deadline |
//! | `ResourceExhausted` | throttled, `retry_after` from the `grpc-retry-pushback-ms` trailer; a negative, unreadable or repeated pushback means "do not retry": permanent |
//! | `Aborted` | conflict |
//! | every other code | permanent |
//!
//! A [`Rejection`] converted into a `Status` gets the matching code and is
//! kept as the status's `source()`, so it keeps its class and can be
//! recovered.

use std::sync::Arc;
use std::time::Duration;

use tonic::{Code, Status};

use crate::classify::{Classify, ErrorClass};
use crate::rejection::Rejection;

/// The trailer a gRPC server sets to push back on retries (gRFC A6).
const PUSHBACK: &str = "grpc-retry-pushback-ms";

/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{Classify, ErrorClass};
/// use tonic::Status;
/// assert_eq!(Status::unavailable("down").classify(), ErrorClass::Transient);
/// assert_eq!(Status::aborted("stale version").classify(), ErrorClass::Conflict);
/// assert_eq!(Status::not_found("no such order").classify(), ErrorClass::Permanent);
/// // What a channel's `Endpoint::timeout` returns when it fires.
/// let timed_out = Status::from_error(Box::new(tonic::TimeoutExpired(())));
/// assert_eq!((timed_out.code(), timed_out.classify()), (tonic::Code::Cancelled, ErrorClass::Transient));
/// let mut busy = Status::resource_exhausted("slow down");
/// busy.metadata_mut().insert("grpc-retry-pushback-ms", "250".parse().unwrap());
/// assert_eq!(busy.classify(), ErrorClass::Throttled { retry_after: Some(std::time::Duration::from_millis(250)) });
/// ```
impl Classify for Status {
    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self)
    }

    fn classify(&self) -> ErrorClass {
        if let Some(rejection) = std::error::Error::source(self).and_then(|e| e.downcast_ref::<Rejection>()) {
            return rejection.classify();
        }
        match self.code() {
            // The pushback is read on every code retried, as gRFC A6 and
            // grpc-go read it: a server that says when to come back (or
            // not to) is obeyed, as a 503's Retry-After is.
            Code::Unavailable | Code::DeadlineExceeded => match pushback(self) {
                Pushback::DoNotRetry => ErrorClass::Permanent,
                Pushback::After(None) => ErrorClass::Transient,
                Pushback::After(after) => ErrorClass::Throttled { retry_after: after },
            },
            Code::Cancelled if timed_out(self) => ErrorClass::Transient,
            Code::ResourceExhausted => match pushback(self) {
                Pushback::DoNotRetry => ErrorClass::Permanent,
                Pushback::After(after) => ErrorClass::Throttled { retry_after: after },
            },
            Code::Aborted => ErrorClass::Conflict,
            _ => ErrorClass::Permanent,
        }
    }
}

/// Whether tonic made this status from its own timeout: a channel's
/// `Endpoint::timeout`, or a request's `grpc-timeout`, fires as
/// `TimeoutExpired`, which tonic reports as `Cancelled` with the error
/// that carries it as the status's source. It is the attempt's deadline
/// (what gRPC calls `DEADLINE_EXCEEDED`), not a caller that gave up.
fn timed_out(status: &Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        if error.is::<tonic::TimeoutExpired>() {
            return true;
        }
        source = error.source();
    }
    false
}

pub(crate) enum Pushback {
    /// Retry, after this long if the server said.
    After(Option<Duration>),
    /// The server asked not to retry.
    DoNotRetry,
}

/// The server's pushback: milliseconds as a decimal integer, as gRFC A6
/// and gRPC's own clients read it. A value that is not one (junk, a
/// fraction, no digits) or a trailer given twice means "do not retry", as
/// grpc-go and grpc-java read them: the server said something about
/// retrying that cannot be obeyed, and retrying anyway is the unsafe
/// reading. Anything from the network is hostile: surrounding spaces are
/// allowed, huge values saturate, and no arithmetic here can overflow.
pub(crate) fn pushback(status: &Status) -> Pushback {
    let mut values = status.metadata().get_all(PUSHBACK).iter();
    let Some(value) = values.next() else {
        return Pushback::After(None);
    };
    if values.next().is_some() {
        return Pushback::DoNotRetry;
    }
    let Ok(value) = value.to_str() else {
        return Pushback::DoNotRetry;
    };
    let value = value.trim();
    let (negative, digits) = match value.as_bytes().first() {
        Some(b'-') => (true, &value[1..]),
        Some(b'+') => (false, &value[1..]),
        _ => (false, value),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Pushback::DoNotRetry;
    }
    // "-0" is zero, not negative (grpc-go's Atoi reads it so): no wait.
    if negative && !digits.bytes().all(|b| b == b'0') {
        return Pushback::DoNotRetry;
    }
    Pushback::After(Some(Duration::from_millis(digits.parse().unwrap_or(u64::MAX))))
}

/// The gRPC code that says what a rejection says; the rejection itself is
/// the status's source.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{Classify, ErrorClass, Rejection};
/// use tonic::{Code, Status};
/// let status = Status::from(Rejection::CircuitOpen { breaker: "inventory".into() });
/// assert_eq!(status.code(), Code::Unavailable);
/// // Unavailable alone would be transient; the rejection keeps its class.
/// assert_eq!(status.classify(), ErrorClass::Permanent);
/// ```
impl From<Rejection> for Status {
    fn from(rejection: Rejection) -> Self {
        let code = match rejection {
            Rejection::CircuitOpen { .. } => Code::Unavailable,
            // Local refusals under load, as gRPC's own client-side limits say.
            Rejection::BulkheadFull { .. }
            | Rejection::Throttled { .. }
            | Rejection::RateLimited { .. }
            | Rejection::BudgetExhausted { .. } => Code::ResourceExhausted,
            Rejection::AttemptTimeout { .. } | Rejection::DeadlineExceeded { .. } => Code::DeadlineExceeded,
        };
        let mut status = Status::new(code, rejection.to_string());
        status.set_source(Arc::new(rejection));
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exhausted(pushback: &str) -> Status {
        let mut status = Status::resource_exhausted("busy");
        status.metadata_mut().insert(PUSHBACK, pushback.parse().unwrap());
        status
    }

    #[test]
    fn the_pushback_trailer_sets_the_wait_or_forbids_the_retry() {
        let throttled = |ms| ErrorClass::Throttled { retry_after: Some(Duration::from_millis(ms)) };
        assert_eq!(exhausted("0").classify(), throttled(0));
        assert_eq!(exhausted(" 1500 ").classify(), throttled(1500));
        assert_eq!(exhausted("99999999999999999999999").classify(), throttled(u64::MAX));
        assert_eq!(exhausted("-1").classify(), ErrorClass::Permanent);
        assert_eq!(exhausted("-0010").classify(), ErrorClass::Permanent);
        assert_eq!(exhausted("-0").classify(), throttled(0), "zero is not negative");
        assert_eq!(exhausted("-000").classify(), throttled(0));
        assert_eq!(exhausted("+3").classify(), throttled(3), "a sign, as Atoi and Integer.valueOf take it");
        // What cannot be obeyed is a refusal, as grpc-go and grpc-java read it.
        for junk in ["", "-", "+", "1.5", "soon", "-x", "3 4"] {
            assert_eq!(exhausted(junk).classify(), ErrorClass::Permanent, "{junk:?}");
        }
        let mut twice = exhausted("100");
        twice.metadata_mut().append(PUSHBACK, "200".parse().unwrap());
        assert_eq!(twice.classify(), ErrorClass::Permanent, "a trailer given twice");
        assert_eq!(
            Status::resource_exhausted("no trailer").classify(),
            ErrorClass::Throttled { retry_after: None }
        );
    }

    /// gRFC A6 reads the pushback on any status the client would retry, as
    /// grpc-go and grpc-java do, not only on `ResourceExhausted`: an
    /// `Unavailable` (a server draining for maintenance, say) or a
    /// `DeadlineExceeded` that asks not to be retried was retried anyway,
    /// and one that says when to come back was retried after our own
    /// backoff, sooner than asked. Without a pushback they stay transient.
    #[test]
    fn every_retryable_code_obeys_the_pushback() {
        for code in [Code::Unavailable, Code::DeadlineExceeded] {
            let with = |pushback: &str| {
                let mut status = Status::new(code, "busy");
                status.metadata_mut().insert(PUSHBACK, pushback.parse().unwrap());
                status.classify()
            };
            assert_eq!(with("-1"), ErrorClass::Permanent, "{code:?}: do not retry");
            assert_eq!(with("soon"), ErrorClass::Permanent, "{code:?}: unreadable");
            assert_eq!(
                with("250"),
                ErrorClass::Throttled { retry_after: Some(Duration::from_millis(250)) },
                "{code:?}: retried after that long"
            );
            assert_eq!(Status::new(code, "").classify(), ErrorClass::Transient, "{code:?}: no pushback");
        }
    }

    /// An error that holds another, as a channel's transport error holds
    /// the timeout that fired.
    #[derive(Debug)]
    struct Holding(Box<dyn std::error::Error + Send + Sync>);

    impl std::fmt::Display for Holding {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("transport error")
        }
    }

    impl std::error::Error for Holding {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&*self.0)
        }
    }

    /// A channel with `Endpoint::timeout` (or a request with a
    /// `grpc-timeout`) whose timeout fires gets what tonic makes of its
    /// `TimeoutExpired`: a `Cancelled` status holding it as its source. It
    /// was read by its code alone, as a cancellation: permanent, and a slow
    /// server's timeouts were never retried, unlike a `DeadlineExceeded`,
    /// an attempt timeout or an I/O timeout. A cancellation that is not
    /// a timeout stays permanent.
    #[test]
    fn tonics_own_timeout_is_transient_like_every_timeout() {
        let timed_out = Status::from_error(Box::new(tonic::TimeoutExpired(())));
        assert_eq!(timed_out.code(), Code::Cancelled, "tonic's code for its own timeout");
        assert_eq!(timed_out.classify(), ErrorClass::Transient);
        let held = Status::from_error(Box::new(Holding(Box::new(tonic::TimeoutExpired(())))));
        assert_eq!(held.code(), Code::Cancelled);
        assert_eq!(held.classify(), ErrorClass::Transient, "found down the source chain");
        assert_eq!(Status::cancelled("Timeout expired").classify(), ErrorClass::Permanent, "no timeout held");
        let other = Status::from_error(Box::new(Holding("the caller went away".into())));
        assert_eq!(other.classify(), ErrorClass::Permanent, "{other:?}");
    }

    #[test]
    fn every_code_falls_into_the_table() {
        use Code::*;
        for code in [
            Ok,
            Cancelled,
            Unknown,
            InvalidArgument,
            NotFound,
            AlreadyExists,
            PermissionDenied,
            FailedPrecondition,
            OutOfRange,
            Unimplemented,
            Internal,
            DataLoss,
            Unauthenticated,
        ] {
            assert_eq!(Status::new(code, "").classify(), ErrorClass::Permanent, "{code:?}");
        }
        assert_eq!(Status::new(Unavailable, "").classify(), ErrorClass::Transient);
        assert_eq!(Status::new(DeadlineExceeded, "").classify(), ErrorClass::Transient);
        assert_eq!(Status::new(Aborted, "").classify(), ErrorClass::Conflict);
    }

    #[test]
    fn a_rejection_keeps_its_class_and_can_be_recovered() {
        for rejection in [
            Rejection::CircuitOpen { breaker: "b".into() },
            Rejection::BulkheadFull { bulkhead: "b".into() },
            Rejection::Throttled { throttle: "t".into() },
            Rejection::RateLimited { limiter: "r".into() },
            Rejection::AttemptTimeout { after: Duration::from_secs(1) },
            Rejection::DeadlineExceeded { after: Duration::from_secs(1) },
        ] {
            let status = Status::from(rejection.clone());
            assert_eq!(status.classify(), rejection.classify(), "{rejection:?}");
            let recovered = std::error::Error::source(&status).and_then(|e| e.downcast_ref::<Rejection>());
            assert_eq!(recovered, Some(&rejection));
        }
    }
}
