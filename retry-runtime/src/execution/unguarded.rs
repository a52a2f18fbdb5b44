//! The plain first attempt of a function that names no guard: the attempt
//! polled in its context, and nothing else.
//!
//! [`PlainRun`](super::PlainRun) carries what a guarded attempt needs (its
//! guards, the breaker's admission, a bulkhead place), each built, tested
//! and dropped on every call even when the function names no guard.
//! [`UnguardedRun`] carries the attempt alone, and its output is the
//! attempt's own: a failure becomes a [`PlainFailure`] (no guards, no
//! permit) only after it happened, for [`after_plain_failure`](super::after_plain_failure).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::plain::{NoGuards, PlainFailure, PlainGuards, cancelled};
use crate::context;

pin_project! {
    /// A plain first attempt of a function that names no guard (see the module docs).
    #[derive(Debug)]
    pub struct UnguardedRun<Fut> {
        // `None` once finished (dropped as soon as it is done, in its context).
        #[pin]
        attempt: Option<Fut>,
    }

    impl<Fut> PinnedDrop for UnguardedRun<Fut> {
        fn drop(this: Pin<&mut Self>) {
            // A cancelled attempt is dropped in its context.
            let this = this.project();
            if this.attempt.is_some() {
                cancelled(this.attempt);
            }
        }
    }
}

impl<Fut> UnguardedRun<Fut> {
    /// The plain first attempt `attempt` of a call whose function names no
    /// guard: nothing to ask, nothing to count, nothing to give back.
    #[inline(always)]
    pub fn new(_plain: PlainGuards<'_, NoGuards>, attempt: Fut) -> Self {
        UnguardedRun { attempt: Some(attempt) }
    }
}

impl<T, E, Fut> Future for UnguardedRun<Fut>
where
    Fut: Future<Output = Result<T, E>>,
{
    type Output = Result<T, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        context::poll_keyless(self.project().attempt, cx)
    }
}

impl<E> PlainFailure<'static, E> {
    /// The failure of an [`UnguardedRun`]'s attempt: no guards, no permit.
    #[inline]
    pub fn unguarded(error: E) -> Self {
        PlainFailure::failed(crate::guards::Guards::none(), None, error)
    }
}
