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
    pub fn in_key<Fut>(&mut self, attempt: Fut) -> InKey<&mut Option<Arc<str>>, Fut> {
        InKey::new(&mut *self.key, attempt)
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

/// Where an [`InKey`] keeps its key: the caller's slot (the attribute's,
/// `&mut Option<Arc<str>>`), or its own copy (`Policy::run_with_key`'s,
/// whose key is its future's own: see `run_loop::RunKey`).
pub trait KeySlot {
    /// The key, swapped into the context around each poll.
    fn slot(&mut self) -> &mut Option<Arc<str>>;
}

impl KeySlot for &mut Option<Arc<str>> {
    #[inline(always)]
    fn slot(&mut self) -> &mut Option<Arc<str>> {
        self
    }
}

impl KeySlot for Option<Arc<str>> {
    #[inline(always)]
    fn slot(&mut self) -> &mut Option<Arc<str>> {
        self
    }
}

pin_project! {
    /// A plain first attempt of a call with a key: polled, and dropped, in
    /// the key (see [`Keyed::in_key`]).
    pub struct InKey<K: KeySlot, Fut> {
        key: K,
        // `None` once finished: dropped as soon as it is done, in the key.
        #[pin]
        attempt: Option<Fut>,
    }

    impl<K: KeySlot, Fut> PinnedDrop for InKey<K, Fut> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            context::drop_in(this.key.slot(), None, this.attempt);
        }
    }
}

impl<K: KeySlot, Fut> InKey<K, Fut> {
    /// `attempt`, to run in `key`.
    #[inline(always)]
    pub(super) fn new(key: K, attempt: Fut) -> Self {
        InKey { key, attempt: Some(attempt) }
    }
}

impl<K: KeySlot, Fut: Future> Future for InKey<K, Fut> {
    type Output = Fut::Output;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Fut::Output> {
        let this = self.project();
        context::poll_in(this.key.slot(), None, this.attempt, None::<fn() -> Fut>, cx)
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
