//! An error type's traits as one function pointer ([`TraitsOf`]): the
//! handling of `Policy::run`'s calls, whose futures carry no bound on the
//! error (see `run_loop`).

use std::error::Error as StdError;

use crate::classify::ErrorClass;
use crate::error::{ClassifyWith, ErrorHandling, ResilientError};
use crate::rejection::Rejection;
use crate::stop::Stopped;

/// [`ByTraits`] for one error type, whose traits were taken as functions
/// where the call was made (`Policy::run`), so that the call's future needs
/// no bound on `E` (see `call::run_loop`): one pointer, to the function
/// that gives them (four would make every call's future larger).
pub struct TraitsOf<E>(fn() -> ClassifyWith<E>);

impl<E: ResilientError> TraitsOf<E> {
    /// `E`'s traits.
    #[inline(always)]
    pub(crate) fn new() -> Self {
        TraitsOf(ClassifyWith::by_traits)
    }
}

impl<E> Clone for TraitsOf<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for TraitsOf<E> {}

impl<E> std::fmt::Debug for TraitsOf<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraitsOf").finish_non_exhaustive()
    }
}

impl<E> ErrorHandling<E> for TraitsOf<E> {
    fn class(&self, error: &E) -> ErrorClass {
        (self.0)().class(error)
    }

    fn reject(&self, rejection: Rejection) -> E {
        (self.0)().reject(rejection)
    }

    fn stopped(&self, error: E, stopped: Stopped) -> E {
        (self.0)().stopped(error, stopped)
    }

    fn view<'e>(&self, error: &'e E) -> Option<&'e (dyn StdError + 'static)> {
        (self.0)().view(error)
    }
}
