//! What the retry loop needs of an error type: to classify it, and to turn
//! the loop's own rejections into it.

use crate::classify::{Classify, ErrorClass};
use crate::rejection::Rejection;

/// What the retry loop needs of an error type; implemented for every type
/// that is [`Classify`] and `From<`[`Rejection`](Rejection)`>`, so
/// you never implement it yourself.
///
/// It exists for the compiler's sake: a function bound on it reports a
/// missing `Classify` or `From<Rejection>` in one plain sentence.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the error type of a #[resilient] fn: implement `Classify` and `From<resilient::Rejection>`",
    label = "this error type lacks `Classify` or `From<resilient::Rejection>`",
    note = "the retry loop classifies each error (transient, throttled, permanent) and turns its own rejections (open breaker, timeouts) into your error type"
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
