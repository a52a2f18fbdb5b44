//! What makes a call when it is built ([`Parts`]): its key, the slot
//! that keeps its last error and its error handling, made only if the
//! call is built (a plain call's first attempt builds nothing: it runs in
//! the key where the caller keeps it, [`InKey`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::Call;
use crate::context;
use crate::guards::Shape;

/// What makes a call when it is built: its key, the slot that keeps its
/// last error (which only selects a type) and its error handling.
pub trait Parts<S, H> {
    /// The key, the slot and the handling.
    fn make(self) -> (Option<Arc<str>>, S, H);
}

/// The parts of a call without a key: a function making the slot and the
/// handling.
#[derive(Debug, Clone, Copy)]
pub struct Unkeyed<F>(pub F);

/// The parts of a call with a key: the caller's slot holding the key
/// (taken as the call is built), and a function making the slot and the
/// handling.
#[derive(Debug)]
pub struct Keyed<'k, F> {
    key: &'k mut Option<Arc<str>>,
    make: F,
}

impl<F> Unkeyed<F> {
    /// `attempt`, to run as a plain first attempt: as it is (see
    /// [`Keyed::in_key`]). Inherent, as the attribute's expansion calls it:
    /// a trait's method would need the trait named in its scope.
    #[inline(always)]
    pub fn in_key<Fut>(&mut self, attempt: Fut) -> Fut {
        attempt
    }
}

impl<F> Keyed<'_, F> {
    /// `attempt`, to run as a plain first attempt, in the call's key
    /// (`idempotency_key()` answers it inside), before the call is built
    /// (which takes the key).
    #[inline(always)]
    pub fn in_key<Fut>(&mut self, attempt: Fut) -> InKey<'_, Fut> {
        InKey { key: &mut *self.key, attempt: Some(attempt) }
    }
}

impl<S, H, F: FnOnce() -> (S, H)> Parts<S, H> for Unkeyed<F> {
    #[inline(always)]
    fn make(self) -> (Option<Arc<str>>, S, H) {
        let (last, handling) = (self.0)();
        (None, last, handling)
    }
}

impl<S, H, F: FnOnce() -> (S, H)> Parts<S, H> for Keyed<'_, F> {
    #[inline(always)]
    fn make(self) -> (Option<Arc<str>>, S, H) {
        let (last, handling) = (self.make)();
        (self.key.take(), last, handling)
    }
}

pin_project! {
    /// A plain first attempt of a call with a key: polled, and dropped, in
    /// the key (see [`Keyed::in_key`]).
    pub struct InKey<'k, Fut> {
        key: &'k mut Option<Arc<str>>,
        // `None` once finished: dropped as soon as it is done, in the key.
        #[pin]
        attempt: Option<Fut>,
    }

    impl<Fut> PinnedDrop for InKey<'_, Fut> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            context::drop_in(this.key, None, this.attempt);
        }
    }
}

impl<Fut: Future> Future for InKey<'_, Fut> {
    type Output = Fut::Output;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Fut::Output> {
        let this = self.project();
        context::poll_in(this.key, None, this.attempt, None::<fn() -> Fut>, cx)
    }
}

impl<'p, S, H, V: Shape> Call<'p, S, H, V> {
    /// The parts of a call without a key: `make` makes the slot that keeps
    /// its last error and its error handling, when the call is built.
    #[inline(always)]
    pub fn unkeyed<F: FnOnce() -> (S, H)>(make: F) -> Unkeyed<F> {
        Unkeyed(make)
    }

    /// The parts of a call with a key: `key` is the caller's slot holding
    /// it (taken when the call is built), `make` makes the slot and the
    /// handling.
    #[inline(always)]
    pub fn keyed<F: FnOnce() -> (S, H)>(key: &mut Option<Arc<str>>, make: F) -> Keyed<'_, F> {
        Keyed { key, make }
    }
}
