//! What the retry loop needs of an error type: to classify it, and to turn
//! the loop's own rejections into it.
//!
//! [`ResilientError`] is the one bound a user meets: every type that is
//! [`Classify`] and `From<Rejection>` has it, and so does
//! [`Error<E>`](crate::Error) for any classifiable `E`. Inside, the loop
//! asks an [`ErrorHandling`]: [`ByTraits`] uses those traits; a function
//! given with `classify = path` (or [`Policy::classify`](crate::Policy::classify))
//! replaces the classification.

use std::time::Duration;

use crate::classify::{Classify, ErrorClass};
use crate::errors::Error;
use crate::rejection::Rejection;

/// What the retry loop needs of an error type; implemented for every type
/// that is [`Classify`] and `From<`[`Rejection`](Rejection)`>`, and for
/// [`stormproof::Error<E>`](crate::Error) when `E` is [`Classify`], so you
/// never implement it yourself.
///
/// It exists for the compiler's sake: a function bound on it says in words
/// what is missing, and where to go instead.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the error type of a #[resilient] fn",
    label = "this error type cannot be classified or cannot carry a rejection",
    note = "the retry loop classifies each error (transient, throttled, conflict, permanent) and turns its own rejections (open breaker, timeouts) into the error type",
    note = "the ways out: return `stormproof::Error<{Self}>` (`?` converts into it), classified by `{Self}`'s `Classify` or, if it has none, by `classify = <fn(&stormproof::Error<{Self}>) -> ErrorClass>` in the attribute; or, if `{Self}` is your own type, implement `From<stormproof::Rejection>` for it, and `Classify` (or give `classify = <fn(&{Self}) -> ErrorClass>`)",
    note = "`anyhow::Error`, `Box<dyn Error + Send + Sync>` and `io::Error` work as they are, and so does `tonic::Status`: `anyhow::Error` and `tonic::Status` need the feature of that name"
)]
pub trait ResilientError: Sized {
    /// The class of this error ([`Classify::classify`]).
    fn error_class(&self) -> ErrorClass;
    /// The error a rejection becomes (`From<Rejection>`).
    fn from_rejection(rejection: Rejection) -> Self;
}

impl<E: Classify + From<Rejection>> ResilientError for E {
    #[inline]
    fn error_class(&self) -> ErrorClass {
        self.classify()
    }

    #[inline]
    fn from_rejection(rejection: Rejection) -> Self {
        E::from(rejection)
    }
}

/// `Error<E>` is classified by `E` (or by the rejection it carries).
impl<E: Classify> ResilientError for Error<E> {
    #[inline]
    fn error_class(&self) -> ErrorClass {
        self.classify()
    }

    #[inline]
    fn from_rejection(rejection: Rejection) -> Self {
        Error::Rejected(rejection)
    }
}

/// How one call classifies its errors and turns rejections into them.
pub trait ErrorHandling<E> {
    /// The class of `error`.
    fn class(&self, error: &E) -> ErrorClass;
    /// The error `rejection` becomes.
    fn reject(&self, rejection: Rejection) -> E;

    /// How long before the end of the wait after `error` the next attempt
    /// is admitted, to do work of the client's own inside the wait before
    /// its request goes out (an HTTP layer reads the failed response and
    /// pauses for its pool: see `middleware::call`), for attempts under
    /// `attempt_timeout`. The loop waits that much less (never less than
    /// nothing), and the attempt waits out the rest: its request goes out
    /// when the wait ends (`Execution::take_retry_due`). None by default.
    #[inline(always)]
    fn lead(&self, error: &E, attempt_timeout: Option<Duration>) -> Duration {
        let _ = (error, attempt_timeout);
        Duration::ZERO
    }
}

/// Classifies with [`Classify`] and converts with `From<Rejection>`, through
/// [`ResilientError`]: what calls do unless told otherwise.
#[derive(Debug, Clone, Copy, Default)]
pub struct ByTraits;

impl<E: ResilientError> ErrorHandling<E> for ByTraits {
    #[inline]
    fn class(&self, error: &E) -> ErrorClass {
        error.error_class()
    }

    #[inline]
    fn reject(&self, rejection: Rejection) -> E {
        E::from_rejection(rejection)
    }
}

/// Classifies with a function (`classify = path`); converts rejections with
/// another.
pub struct ClassifyWith<E> {
    classify: fn(&E) -> ErrorClass,
    reject: fn(Rejection) -> E,
}

impl<E> ClassifyWith<E> {
    /// Classification by `classify`, rejections made by `reject`.
    pub fn new(classify: fn(&E) -> ErrorClass, reject: impl RejectionConverter<E>) -> Self {
        ClassifyWith { classify, reject: reject.converter() }
    }
}

impl<E> Clone for ClassifyWith<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for ClassifyWith<E> {}

impl<E> std::fmt::Debug for ClassifyWith<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClassifyWith").finish_non_exhaustive()
    }
}

impl<E> ErrorHandling<E> for ClassifyWith<E> {
    #[inline]
    fn class(&self, error: &E) -> ErrorClass {
        (self.classify)(error)
    }

    #[inline]
    fn reject(&self, rejection: Rejection) -> E {
        (self.reject)(rejection)
    }
}

/// Turns rejections into `E`: a `fn(Rejection) -> E`.
#[diagnostic::on_unimplemented(
    message = "`{E}` cannot carry the retry loop's rejections",
    label = "`{E}` has no `From<stormproof::Rejection>`",
    note = "implement `From<stormproof::Rejection>` for `{E}`, or return `stormproof::Error<{E}>`, which carries either"
)]
pub trait RejectionConverter<E> {
    /// The conversion.
    fn converter(self) -> fn(Rejection) -> E;
}

impl<E> RejectionConverter<E> for fn(Rejection) -> E {
    fn converter(self) -> fn(Rejection) -> E {
        self
    }
}

/// Finds how rejections become `E` for `classify = path`:
/// `(&&&RejectProbe::<E>::new()).converter()` is `From<Rejection>` when `E`
/// has it, `Error::Rejected` when `E` is an [`Error<X>`], and otherwise a
/// [`NoConverter`] the compiler refuses in words.
pub struct RejectProbe<E>(std::marker::PhantomData<fn() -> E>);

impl<E> RejectProbe<E> {
    /// A probe for `E`.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        RejectProbe(std::marker::PhantomData)
    }
}

/// First choice: `E: From<Rejection>`.
pub trait ConvertByFrom<E> {
    /// `E::from`.
    fn converter(&self) -> fn(Rejection) -> E;
}

impl<E: From<Rejection>> ConvertByFrom<E> for &&RejectProbe<E> {
    fn converter(&self) -> fn(Rejection) -> E {
        E::from
    }
}

/// Second choice: `E` is `Error<X>`.
pub trait ConvertByWrapping<E> {
    /// `Error::Rejected`.
    fn converter(&self) -> fn(Rejection) -> E;
}

impl<X> ConvertByWrapping<Error<X>> for &RejectProbe<Error<X>> {
    fn converter(&self) -> fn(Rejection) -> Error<X> {
        Error::Rejected
    }
}

/// Last resort: no conversion, which [`ClassifyWith::new`] refuses.
pub trait ConvertNot<E> {
    /// A value that is not a [`RejectionConverter`].
    fn converter(&self) -> NoConverter<E>;
}

impl<E> ConvertNot<E> for RejectProbe<E> {
    fn converter(&self) -> NoConverter<E> {
        NoConverter(std::marker::PhantomData)
    }
}

/// What [`RejectProbe`] finds for a type that cannot carry a rejection.
pub struct NoConverter<E>(std::marker::PhantomData<fn() -> E>);
