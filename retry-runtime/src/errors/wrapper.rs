//! [`Error<E>`]: a foreign error type `E`, or the retry loop's rejection.

use crate::classify::{Classify, ErrorClass};
use crate::rejection::Rejection;
use crate::stop::{StopReason, Stopped};

/// The error type of a resilient call whose own error type `E` cannot carry
/// a [`Rejection`] (a foreign type such as `reqwest::Error`): either the
/// attempt's `E`, or the rejection the loop ended the call with, or the
/// last attempt's `E` with why a guard or the deadline stopped the retries
/// ([`stop_reason`](Self::stop_reason)).
///
/// `?` on a `Result<_, E>` converts into it, so the body of an annotated
/// function reads as before:
///
/// ```
/// # use stormproof_runtime as stormproof;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use stormproof::{Error, Policy};
///
/// // `io::Error` stands in for any foreign error type that is `Classify`.
/// async fn fetch() -> Result<u32, std::io::Error> { Err(std::io::ErrorKind::NotFound.into()) }
///
/// let policy = Policy::builder().build().unwrap();
/// let result: Result<u32, Error<std::io::Error>> = policy.run(|| async { Ok(fetch().await?) }).await;
/// let Err(Error::Inner(not_found)) = result else { panic!() };
/// assert_eq!(not_found.kind(), std::io::ErrorKind::NotFound);
/// # }
/// ```
///
/// Its `Display` and `source()` are the inner error's (or the rejection's):
/// it is transparent, as `thiserror`'s `#[error(transparent)]` is.
///
/// It classifies as `E` does, or as the rejection does, through the
/// inherent [`classify`](Self::classify) method. (It cannot also implement
/// the [`Classify`] trait: with `From<E>` for `?`, the compiler could not
/// tell it apart from an error type that is `Classify` and
/// `From<Rejection>` when `E` is `Rejection` itself.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error<E> {
    /// The error an attempt produced.
    Inner(E),
    /// The loop ended the call: no attempt could run, or the deadline cut one.
    Rejected(Rejection),
    /// The last attempt's error, when a guard or the deadline stopped the
    /// retries (the breaker opened during the backoff, the budget was
    /// empty, the deadline would pass, ...): not the operation's own final
    /// answer, which is `Inner`. See [`Stopped`].
    Stopped(E, Stopped),
}

impl<E> Error<E> {
    /// The attempt's error, if this is one.
    pub fn into_inner(self) -> Option<E> {
        match self {
            Error::Inner(error) | Error::Stopped(error, _) => Some(error),
            Error::Rejected(_) => None,
        }
    }

    /// The attempt's error, by reference.
    pub fn inner(&self) -> Option<&E> {
        match self {
            Error::Inner(error) | Error::Stopped(error, _) => Some(error),
            Error::Rejected(_) => None,
        }
    }

    /// The loop's rejection, if this is one.
    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            Error::Inner(_) | Error::Stopped(..) => None,
            Error::Rejected(rejection) => Some(rejection),
        }
    }

    /// Why a guard or the deadline stopped the retries, when one did
    /// (the error is then the last attempt's, [`inner`](Self::inner)):
    /// `None` when the call ended on the operation's own answer (a
    /// permanent error, the last attempt) or with a rejection.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use std::time::Duration;
    /// use stormproof::{Error, Policy, StopReason};
    ///
    /// let policy = Policy::builder().max_attempts(5).base(Duration::from_millis(100))
    ///     .jitter(stormproof::Jitter::None).deadline(Duration::from_millis(150)).build().unwrap();
    /// let reset = || std::io::Error::from(std::io::ErrorKind::ConnectionReset);
    /// let result: Result<(), Error<std::io::Error>> = policy.run(|| async { Err(reset().into()) }).await;
    /// let error = result.unwrap_err();
    /// assert_eq!(error.stop_reason(), Some(StopReason::Deadline));
    /// assert_eq!(error.inner().unwrap().kind(), std::io::ErrorKind::ConnectionReset);
    /// # }
    /// ```
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.stopped().map(Stopped::reason)
    }

    /// Why and after how many attempts a guard or the deadline stopped the
    /// retries, when one did (see [`stop_reason`](Self::stop_reason)).
    pub fn stopped(&self) -> Option<&Stopped> {
        match self {
            Error::Stopped(_, stopped) => Some(stopped),
            Error::Inner(_) | Error::Rejected(_) => None,
        }
    }

    /// This error marked as stopped by a guard: an attempt's error becomes
    /// `Stopped`; a rejection, or one already marked, stays as it is.
    pub(crate) fn mark_stopped(self, stopped: Stopped) -> Self {
        match self {
            Error::Inner(error) => Error::Stopped(error, stopped),
            other => other,
        }
    }

    /// The class of this error: `E`'s, or the rejection's.
    pub fn classify(&self) -> ErrorClass
    where
        E: Classify,
    {
        match self {
            Error::Inner(error) | Error::Stopped(error, _) => error.classify(),
            Error::Rejected(rejection) => rejection.classify(),
        }
    }
}

impl<E> From<E> for Error<E> {
    fn from(error: E) -> Self {
        Error::Inner(error)
    }
}

impl<E: std::fmt::Display> std::fmt::Display for Error<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Inner(error) | Error::Stopped(error, _) => error.fmt(f),
            Error::Rejected(rejection) => rejection.fmt(f),
        }
    }
}

impl<E: std::error::Error> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Inner(error) | Error::Stopped(error, _) => error.source(),
            Error::Rejected(rejection) => std::error::Error::source(rejection),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_transparent_and_classifies_as_what_it_holds() {
        let inner: Error<std::io::Error> = std::io::Error::from(std::io::ErrorKind::ConnectionReset).into();
        assert_eq!(inner.classify(), ErrorClass::Transient);
        assert_eq!(inner.to_string(), std::io::Error::from(std::io::ErrorKind::ConnectionReset).to_string());
        let rejected: Error<std::io::Error> = Error::Rejected(Rejection::CircuitOpen { breaker: "b".into() });
        assert_eq!(rejected.classify(), ErrorClass::Permanent);
        assert!(rejected.to_string().contains("circuit breaker `b` is open"));
        assert_eq!(rejected.rejection(), Some(&Rejection::CircuitOpen { breaker: "b".into() }));
        assert!(rejected.into_inner().is_none());
    }
}
