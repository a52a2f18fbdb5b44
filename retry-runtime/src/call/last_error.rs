//! Where a call keeps the last error an attempt produced while it waits to
//! make the next attempt.
//!
//! The caller gets the last error an attempt produced, whatever the timing:
//! if the breaker opens during the backoff, or the bulkhead stays full, or
//! the deadline passes while the retry is queued, the call ends with that
//! error, not with a rejection that says less. So the error must outlive
//! the wait, and a value kept across an `.await` makes the call's future
//! `Send` only if the value is `Send`.
//!
//! [`Kept`] keeps it. For an error type that is not `Send` (one holding a
//! `Box<dyn Error>`, say), keeping it would make every annotated function
//! returning it unspawnable even though the body's own future is `Send`;
//! for those the attribute picks [`Forgotten`], which drops the error when
//! the wait starts, so a retry that then cannot run ends with the
//! [`Rejection`](crate::Rejection) that stopped it. The attribute chooses
//! by the error type's `Send`-ness at compile time (autoref
//! specialization on [`ErrorProbe`]); `Policy::run` always keeps.

use std::marker::PhantomData;

/// Keeps (or not) the last error across the wait for the next attempt.
pub trait LastError<E>: Default {
    /// Holds `error` until the next attempt runs or the call ends.
    fn keep(&mut self, error: E);
    /// The kept error, if any (leaving none).
    fn take(&mut self) -> Option<E>;
    /// Drops the kept error, if any: the next attempt supersedes it.
    #[inline]
    fn clear(&mut self) {
        drop(self.take());
    }
}

/// Keeps the last error: the call's future is `Send` only if `E` is.
#[derive(Debug)]
pub struct Kept<E>(Option<E>);

impl<E> Default for Kept<E> {
    fn default() -> Self {
        Kept(None)
    }
}

impl<E> LastError<E> for Kept<E> {
    #[inline]
    fn keep(&mut self, error: E) {
        self.0 = Some(error);
    }

    #[inline]
    fn take(&mut self) -> Option<E> {
        self.0.take()
    }
}

/// Drops the last error when the wait starts: the call's future stays
/// `Send` whatever `E` is.
#[derive(Debug)]
pub struct Forgotten<E>(PhantomData<fn() -> E>);

impl<E> Default for Forgotten<E> {
    fn default() -> Self {
        Forgotten(PhantomData)
    }
}

impl<E> LastError<E> for Forgotten<E> {
    #[inline]
    fn keep(&mut self, error: E) {
        drop(error);
    }

    #[inline]
    fn take(&mut self) -> Option<E> {
        None
    }
}

/// Chooses the slot for error type `E`: `(&ErrorProbe::<E>::new()).slot()`
/// is a [`Kept`] when `E: Send` and a `Forgotten` otherwise, with both
/// [`KeepSendError`] and [`ForgetOtherError`] in scope.
pub struct ErrorProbe<E>(PhantomData<fn() -> E>);

impl<E> ErrorProbe<E> {
    /// A probe for `E`.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        ErrorProbe(PhantomData)
    }
}

/// The preferred slot, found first by method resolution when `E: Send`.
pub trait KeepSendError<E> {
    /// A slot that keeps the error.
    fn slot(&self) -> Kept<E>;
}

impl<E: Send> KeepSendError<E> for ErrorProbe<E> {
    #[inline]
    fn slot(&self) -> Kept<E> {
        Kept::default()
    }
}

/// The fallback slot, one auto-reference further away.
pub trait ForgetOtherError<E> {
    /// A slot that drops the error when the wait starts.
    fn slot(&self) -> Forgotten<E>;
}

impl<E> ForgetOtherError<E> for &ErrorProbe<E> {
    #[inline]
    fn slot(&self) -> Forgotten<E> {
        Forgotten::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // The borrow is the point: it is what makes the fallback one step further away.
    #[allow(clippy::needless_borrow)]
    fn a_send_error_is_kept_and_another_is_forgotten() {
        fn is_kept<S: 'static>(_: &S) -> bool {
            std::any::TypeId::of::<S>() == std::any::TypeId::of::<Kept<String>>()
        }
        let kept = (&ErrorProbe::<String>::new()).slot();
        assert!(is_kept(&kept));
        let mut forgotten = (&ErrorProbe::<std::rc::Rc<String>>::new()).slot();
        forgotten.keep(std::rc::Rc::new("x".to_owned()));
        assert!(forgotten.take().is_none());
        let mut kept = kept;
        kept.keep("y".to_owned());
        assert_eq!(kept.take().as_deref(), Some("y"));
        assert!(kept.take().is_none());
    }
}
