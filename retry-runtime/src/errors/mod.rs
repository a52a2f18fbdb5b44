//! The error types real services already return, working as they are.
//!
//! | error type | how | classification |
//! |---|---|---|
//! | `Box<dyn Error + Send + Sync>`, `Box<dyn Error>` | as is | the source chain, see below |
//! | `anyhow::Error` (feature `anyhow`) | as is | the same walk over `chain()` |
//! | `std::io::Error` | as is | a carried `Rejection`'s class, else by kind |
//! | `tonic::Status` (feature `tonic`) | as is | by code, see the `tonic` impl |
//! | `hyper_util::client::legacy::Error` (feature `hyper-util`) | boxed (a tower stack's `BoxError`) | a failed connect, DNS included, transient; else its chain |
//! | `reqwest_middleware::Error` (feature `reqwest-middleware`) | return [`Error<E>`] | what it holds: its `reqwest::Error`, or its middleware error's chain |
//! | `reqwest::Error` and other foreign types | return [`Error<E>`] | `E`'s `Classify`, or `classify = ...` |
//!
//! **The source chain.** A boxed or `anyhow` error is classified by the
//! first error in its chain (itself, then each `source()`) that is a
//! [`Rejection`], a `std::io::Error`, a `reqwest::Error` (feature
//! `reqwest`), a `tonic::Status` (feature `tonic`), a
//! `hyper_util::client::legacy::Error` (feature `hyper-util`) or a
//! `reqwest_middleware::Error` (feature `reqwest-middleware`), or an [`Error<E>`]
//! of one of those (a resilient call's error, passed up with `?` by a
//! caller returning a boxed or `anyhow` error). An `Error<E>` of another
//! `E` is not recognised: it is transparent (its `source()` is its
//! content's), and a `dyn Error` can only be asked whether it is a type
//! named here; map it into one of these types first. When none is found
//! the error is **transient**: retried, as backon, Polly and resilience4j
//! retry every error by default. Wrap errors you know to be permanent in one
//! of those types, or classify them yourself with `classify = ...`.

#[cfg(feature = "reqwest")]
mod status_error;
mod wrapper;

#[cfg(feature = "anyhow")]
mod anyhow;
#[cfg(feature = "hyper-util")]
mod hyper_util;
#[cfg(feature = "tonic")]
pub(crate) mod tonic;

use std::error::Error as StdError;

#[cfg(feature = "reqwest")]
pub use status_error::StatusError;
pub use wrapper::Error;

use crate::classify::{Classify, ErrorClass};
use crate::rejection::Rejection;

/// The class of the first error in `error`'s chain that says what it is;
/// transient when none does.
pub(crate) fn classify_chain<'a>(error: &'a (dyn StdError + 'static)) -> ErrorClass {
    let mut current: Option<&'a (dyn StdError + 'static)> = Some(error);
    while let Some(error) = current {
        if let Some(class) = known_class(error) {
            return class;
        }
        current = error.source();
    }
    ErrorClass::Transient
}

/// The class of `error` if it is one of the types that know theirs, or a
/// resilient call's [`Error<E>`] of one (transparent, it would otherwise be
/// passed over with what it holds). One list of types for both.
fn known_class(error: &(dyn StdError + 'static)) -> Option<ErrorClass> {
    macro_rules! known {
        ($($(#[$cfg:meta])* $known:ty),*) => {$(
            $(#[$cfg])*
            if let Some(known) = error.downcast_ref::<$known>() {
                return Some(known.classify());
            }
            $(#[$cfg])*
            if let Some(wrapped) = error.downcast_ref::<Error<$known>>() {
                return Some(wrapped.classify());
            }
        )*};
    }
    known!(
        Rejection,
        std::io::Error,
        #[cfg(feature = "reqwest")]
        reqwest::Error,
        #[cfg(feature = "reqwest")]
        StatusError,
        #[cfg(feature = "tonic")]
        ::tonic::Status,
        #[cfg(feature = "hyper-util")]
        ::hyper_util::client::legacy::Error,
        #[cfg(feature = "reqwest-middleware")]
        ::reqwest_middleware::Error
    );
    None
}

/// Classified by its source chain (see the module docs); `From<Rejection>`
/// is std's, and the rejection is found again by the same walk.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{Classify, ErrorClass, Rejection};
/// let boxed: Box<dyn std::error::Error + Send + Sync> = "no idea".into();
/// assert_eq!(boxed.classify(), ErrorClass::Transient);
/// let open: Box<dyn std::error::Error + Send + Sync> = Rejection::CircuitOpen { breaker: "db".into() }.into();
/// assert_eq!(open.classify(), ErrorClass::Permanent);
/// ```
impl Classify for Box<dyn StdError + Send + Sync> {
    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&**self)
    }

    fn classify(&self) -> ErrorClass {
        classify_chain(&**self)
    }
}

/// As `Box<dyn Error + Send + Sync>`.
impl Classify for Box<dyn StdError> {
    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&**self)
    }

    fn classify(&self) -> ErrorClass {
        classify_chain(&**self)
    }
}

/// I/O errors carrying a [`Rejection`] (made by `From<Rejection>`) keep the
/// rejection's class; others are classified by kind: network hiccups and
/// timeouts are transient, "the input is wrong" and "not allowed" permanent.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::io::{Error, ErrorKind};
/// use stormproof::{Classify, ErrorClass, Rejection};
/// assert_eq!(Error::from(ErrorKind::ConnectionReset).classify(), ErrorClass::Transient);
/// assert_eq!(Error::from(ErrorKind::NotFound).classify(), ErrorClass::Permanent);
/// let cut = Error::from(Rejection::DeadlineExceeded { after: std::time::Duration::from_secs(1) });
/// assert_eq!(cut.classify(), ErrorClass::Permanent, "a deadline is not retried, although its kind is TimedOut");
/// ```
impl Classify for std::io::Error {
    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self)
    }

    fn classify(&self) -> ErrorClass {
        use std::io::ErrorKind::*;
        if let Some(rejection) = self.get_ref().and_then(|inner| inner.downcast_ref::<Rejection>()) {
            return rejection.classify();
        }
        match self.kind() {
            ConnectionRefused
            | ConnectionReset
            | ConnectionAborted
            | NotConnected
            | BrokenPipe
            | TimedOut
            | Interrupted
            | WouldBlock
            | UnexpectedEof
            | AddrInUse
            | AddrNotAvailable
            | HostUnreachable
            | NetworkUnreachable
            | NetworkDown
            | ResourceBusy
            | StaleNetworkFileHandle => ErrorClass::Transient,
            QuotaExceeded => ErrorClass::Throttled { retry_after: None },
            _ => ErrorClass::Permanent,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Error as IoError, ErrorKind};
    use std::time::Duration;

    use super::*;

    /// An error of our own that wraps another, as a service's error types do.
    #[derive(Debug)]
    struct Wrapped(Box<dyn StdError + Send + Sync>);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("wrapped")
        }
    }

    impl StdError for Wrapped {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&*self.0)
        }
    }

    #[test]
    fn io_errors_are_classified_by_kind() {
        assert_eq!(IoError::from(ErrorKind::TimedOut).classify(), ErrorClass::Transient);
        assert_eq!(IoError::from(ErrorKind::ConnectionRefused).classify(), ErrorClass::Transient);
        assert_eq!(IoError::from(ErrorKind::InvalidInput).classify(), ErrorClass::Permanent);
        assert_eq!(IoError::from(ErrorKind::PermissionDenied).classify(), ErrorClass::Permanent);
    }

    #[test]
    fn a_rejection_keeps_its_class_and_can_be_recovered_from_an_io_error() {
        let timeout = Rejection::AttemptTimeout { after: Duration::from_millis(5) };
        let cut = Rejection::DeadlineExceeded { after: Duration::from_millis(5) };
        for rejection in [timeout, cut] {
            let io = IoError::from(rejection.clone());
            assert_eq!(io.classify(), rejection.classify());
            assert_eq!(io.get_ref().and_then(|e| e.downcast_ref::<Rejection>()), Some(&rejection));
        }
    }

    #[test]
    fn the_chain_is_walked_to_the_first_error_that_knows_its_class() {
        let deep: Box<dyn StdError + Send + Sync> =
            Box::new(Wrapped(Box::new(Wrapped(Box::new(IoError::from(ErrorKind::NotFound))))));
        assert_eq!(deep.classify(), ErrorClass::Permanent, "the io::Error two levels down decides");
        let rejected: Box<dyn StdError + Send + Sync> =
            Box::new(Wrapped(Box::new(Rejection::BulkheadFull { bulkhead: "b".into() })));
        assert_eq!(rejected.classify(), ErrorClass::Permanent);
        let unknown: Box<dyn StdError + Send + Sync> = Box::new(Wrapped("plain text".into()));
        assert_eq!(unknown.classify(), ErrorClass::Transient, "none found: transient");
        let local: Box<dyn StdError> = Box::new(IoError::from(ErrorKind::ConnectionReset));
        assert_eq!(local.classify(), ErrorClass::Transient);
    }

    #[test]
    fn a_resilient_calls_error_passed_up_in_a_box_keeps_its_class() {
        let not_found: Box<dyn StdError + Send + Sync> =
            Box::new(Error::Inner(IoError::from(ErrorKind::NotFound)));
        assert_eq!(not_found.classify(), ErrorClass::Permanent, "not retried by an outer call");
        let open: Box<dyn StdError + Send + Sync> =
            Box::new(Error::<IoError>::Rejected(Rejection::CircuitOpen { breaker: "db".into() }));
        assert_eq!(open.classify(), ErrorClass::Permanent);
        let full: Box<dyn StdError + Send + Sync> =
            Box::new(Wrapped(Box::new(Error::<Rejection>::Rejected(Rejection::BulkheadFull {
                bulkhead: "b".into(),
            }))));
        assert_eq!(full.classify(), ErrorClass::Permanent, "found down the chain too");
    }
}
