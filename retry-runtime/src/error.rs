//! What the retry loop needs of an error type: to classify it, and to turn
//! the loop's own rejections into it.
//!
//! [`ResilientError`] is the one bound a user meets: every type that is
//! [`Classify`] and `From<Rejection>` has it, and so does
//! [`Error<E>`](crate::Error) for any classifiable `E`. Inside, the loop
//! asks an [`ErrorHandling`]: [`ByTraits`] uses those traits; a function
//! given with `classify = path` (or [`Policy::classify`](crate::Policy::classify))
//! replaces the classification.

use std::error::Error as StdError;
use std::time::Duration;

use crate::classify::{Classify, ErrorClass};
use crate::errors::Error;
use crate::rejection::Rejection;
use crate::stop::Stopped;

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
    /// This error marked with why a guard stopped the retries
    /// ([`Classify::mark_stopped`]).
    fn mark_stopped(self, stopped: Stopped) -> Self;
    /// This error as a `std::error::Error`, if it is one ([`Classify::as_error`]).
    fn as_error(&self) -> Option<&(dyn StdError + 'static)>;

    /// The handling of this error type through these traits, for the code
    /// `#[resilient]` generates: called as `<E as ResilientError>::handling()`,
    /// so that an error type without the traits is one error at that type,
    /// which names no function of the library.
    #[doc(hidden)]
    #[inline(always)]
    fn handling() -> ClassifyWith<Self> {
        ClassifyWith::by_traits()
    }
}

/// [`ResilientError`], as `Policy::run` and its kin ask it of the
/// closure's error type: implemented for every type that has it, so you
/// never implement it yourself. It exists so that a type without it is
/// one compile error in words, at the call, that speaks of `Policy::run`.
#[diagnostic::on_unimplemented(
    message = "the closure given to `Policy::run` returns errors of type `{Self}`, which the retry loop cannot classify or cannot turn its rejections into",
    label = "`{Self}` needs `Classify` and `From<stormproof::Rejection>`",
    note = "the retry loop classifies each error (transient, throttled, conflict, permanent) and turns its own rejections (open breaker, timeouts) into the error type",
    note = "the ways out: return `stormproof::Error<{Self}>` from the closure (`?` converts into it; `{Self}` then needs `Classify`), or call `.classify(fn(&{Self}) -> ErrorClass)` on the policy first and run that; or, if `{Self}` is your own type, implement `Classify` and `From<stormproof::Rejection>` for it",
    note = "`anyhow::Error`, `Box<dyn Error + Send + Sync>` and `io::Error` work as they are, and so does `tonic::Status`: `anyhow::Error` and `tonic::Status` need the feature of that name"
)]
pub trait RunError: ResilientError {}

#[diagnostic::do_not_recommend]
impl<E: ResilientError> RunError for E {}

impl<E: Classify + From<Rejection>> ResilientError for E {
    #[inline]
    fn error_class(&self) -> ErrorClass {
        self.classify()
    }

    #[inline]
    fn from_rejection(rejection: Rejection) -> Self {
        E::from(rejection)
    }

    fn mark_stopped(self, stopped: Stopped) -> Self {
        Classify::mark_stopped(self, stopped)
    }

    fn as_error(&self) -> Option<&(dyn StdError + 'static)> {
        Classify::as_error(self)
    }
}

/// `Error<E>` is classified by `E` (or by the rejection it carries).
#[diagnostic::do_not_recommend]
impl<E: Classify> ResilientError for Error<E> {
    #[inline]
    fn error_class(&self) -> ErrorClass {
        self.classify()
    }

    #[inline]
    fn from_rejection(rejection: Rejection) -> Self {
        Error::Rejected(rejection)
    }

    fn mark_stopped(self, stopped: Stopped) -> Self {
        Error::mark_stopped(self, stopped)
    }

    fn as_error(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Inner(error) | Error::Stopped(error, _) => error.as_error(),
            Error::Rejected(rejection) => Some(rejection),
        }
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

    /// `error`, the last attempt's, marked with why a guard or the
    /// deadline stopped the retries (see [`Stopped`]); unchanged by default.
    fn stopped(&self, error: E, stopped: Stopped) -> E {
        let _ = stopped;
        error
    }

    /// `error` as a `std::error::Error`, for the `on_retry` hook, if the
    /// handling can show it as one; `None` by default.
    fn view<'e>(&self, error: &'e E) -> Option<&'e (dyn StdError + 'static)> {
        let _ = error;
        None
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

    fn stopped(&self, error: E, stopped: Stopped) -> E {
        error.mark_stopped(stopped)
    }

    fn view<'e>(&self, error: &'e E) -> Option<&'e (dyn StdError + 'static)> {
        error.as_error()
    }
}

/// Classifies with a function (`classify = path`); converts rejections with
/// another, and marks a stopped call's error with a third.
pub struct ClassifyWith<E> {
    classify: fn(&E) -> ErrorClass,
    reject: fn(Rejection) -> E,
    stopped: fn(E, Stopped) -> E,
    view: for<'e> fn(&'e E) -> Option<&'e (dyn StdError + 'static)>,
}

impl<E> ClassifyWith<E> {
    /// Classification by `classify`, rejections made by `reject`, which
    /// also says how a stopped call's error is marked.
    pub fn new(classify: fn(&E) -> ErrorClass, reject: impl RejectionConverter<E>) -> Self {
        ClassifyWith {
            classify,
            reject: reject.converter(),
            stopped: reject.stopper(),
            view: reject.viewer(),
        }
    }

    /// Everything by `E`'s traits.
    pub(crate) fn by_traits() -> Self
    where
        E: ResilientError,
    {
        ClassifyWith {
            classify: E::error_class,
            reject: E::from_rejection,
            stopped: E::mark_stopped,
            view: <E as ResilientError>::as_error,
        }
    }
}

fn no_view<E>(_: &E) -> Option<&(dyn StdError + 'static)> {
    None
}

fn unmarked<E>(error: E, _: Stopped) -> E {
    error
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

    fn stopped(&self, error: E, stopped: Stopped) -> E {
        (self.stopped)(error, stopped)
    }

    fn view<'e>(&self, error: &'e E) -> Option<&'e (dyn StdError + 'static)> {
        (self.view)(error)
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
    fn converter(&self) -> fn(Rejection) -> E;
    /// How the last error of a call a guard stopped is marked: unchanged
    /// unless `E` can say so (a `stormproof::Error<X>`).
    fn stopper(&self) -> fn(E, Stopped) -> E {
        unmarked::<E>
    }

    /// How the `on_retry` hook sees an error as a `std::error::Error`:
    /// not at all unless `E` can say (its `Classify::as_error`).
    fn viewer(&self) -> for<'e> fn(&'e E) -> Option<&'e (dyn StdError + 'static)> {
        no_view::<E>
    }

    /// The handling that classifies with `classify` and converts with this.
    fn classify_with(self, classify: fn(&E) -> ErrorClass) -> ClassifyWith<E>
    where
        Self: Sized,
    {
        ClassifyWith::new(classify, self)
    }
}

#[diagnostic::do_not_recommend]
impl<E> RejectionConverter<E> for fn(Rejection) -> E {
    fn converter(&self) -> fn(Rejection) -> E {
        *self
    }
}

/// What [`RejectProbe`] finds for a type that is [`Classify`] and
/// `From<Rejection>` (a `classify = path` that overrides a type's own
/// classification): its `From`, and its own marking and view of an error.
pub struct ByTraitsConverter<E>(std::marker::PhantomData<fn() -> E>);

#[diagnostic::do_not_recommend]
impl<E: Classify + From<Rejection>> RejectionConverter<E> for ByTraitsConverter<E> {
    fn converter(&self) -> fn(Rejection) -> E {
        E::from
    }

    fn stopper(&self) -> fn(E, Stopped) -> E {
        <E as Classify>::mark_stopped
    }

    fn viewer(&self) -> for<'e> fn(&'e E) -> Option<&'e (dyn StdError + 'static)> {
        <E as Classify>::as_error
    }
}

/// First choice: `E` is `Classify` and `From<Rejection>`.
pub trait ConvertByTraits<E> {
    /// `E::from`, `E`'s marking and view.
    fn converter(&self) -> ByTraitsConverter<E>;
}

impl<E: Classify + From<Rejection>> ConvertByTraits<E> for &&&RejectProbe<E> {
    fn converter(&self) -> ByTraitsConverter<E> {
        ByTraitsConverter(std::marker::PhantomData)
    }
}

/// What [`RejectProbe`] finds for a [`stormproof::Error<X>`](Error):
/// rejections are `Error::Rejected`, and a stopped call's error `Error::Stopped`.
pub struct WrapInError<X>(std::marker::PhantomData<fn() -> X>);

#[diagnostic::do_not_recommend]
impl<X> RejectionConverter<Error<X>> for WrapInError<X> {
    fn converter(&self) -> fn(Rejection) -> Error<X> {
        Error::Rejected
    }

    fn stopper(&self) -> fn(Error<X>, Stopped) -> Error<X> {
        Error::mark_stopped
    }
}

/// Finds how rejections become `E` for `classify = path`:
/// `(&&&&RejectProbe::<E>::new()).converter()` is `E`'s traits when `E` is
/// `Classify` and `From<Rejection>`, `From<Rejection>` when `E`
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

/// Second choice: `E: From<Rejection>`.
pub trait ConvertByFrom<E> {
    /// `E::from`.
    fn converter(&self) -> fn(Rejection) -> E;
}

impl<E: From<Rejection>> ConvertByFrom<E> for &&RejectProbe<E> {
    fn converter(&self) -> fn(Rejection) -> E {
        E::from
    }
}

/// Third choice: `E` is `Error<X>`.
pub trait ConvertByWrapping<X> {
    /// `Error::Rejected`, and `Error::Stopped`.
    fn converter(&self) -> WrapInError<X>;
}

impl<X> ConvertByWrapping<X> for &RejectProbe<Error<X>> {
    fn converter(&self) -> WrapInError<X> {
        WrapInError(std::marker::PhantomData)
    }
}

/// Last resort: no conversion, which `RejectionConverter::classify_with` refuses.
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
