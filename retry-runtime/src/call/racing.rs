//! One attempt of a hedged round, racing the others: boxed with what it
//! needs of the call (its key and span, owned, since the round outlives any
//! borrow of the call), under the earlier of its timeout and the deadline.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Sleep, sleep_until};

use super::{Call, Limit};
use crate::context;
use crate::guards::Shape;

pin_project! {
    /// One attempt of a round, in its context (the call's key and span,
    /// owned: the round outlives any borrow of the call), under its timeout
    /// or the deadline.
    pub(super) struct Racing<Fut> {
        key: Option<Arc<str>>,
        span: Option<tracing::Span>,
        #[pin]
        attempt: Option<Fut>,
        #[pin]
        timer: Option<Sleep>,
        limit: Option<Limit>,
    }

    impl<Fut> PinnedDrop for Racing<Fut> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            context::drop_in(this.key, this.span.as_ref(), this.attempt);
        }
    }
}

/// How one attempt of a round ended.
pub(super) enum Raced<O> {
    /// It answered.
    Ran(O),
    /// Its own timeout cut it, after this long.
    TimedOut(Duration),
    /// The call's deadline cut it.
    Cut,
}

impl<Fut: Future> Future for Racing<Fut> {
    type Output = Raced<Fut::Output>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(output) =
            context::poll_in(this.key, this.span.as_ref(), this.attempt.as_mut(), None::<fn() -> _>, cx)
        {
            return Poll::Ready(Raced::Ran(output));
        }
        let Some(timer) = this.timer.as_pin_mut() else { return Poll::Pending };
        if timer.poll(cx).is_pending() {
            return Poll::Pending;
        }
        context::drop_in(this.key, this.span.as_ref(), this.attempt);
        Poll::Ready(match this.limit {
            Some(Limit::Timeout(after)) => Raced::TimedOut(*after),
            _ => Raced::Cut,
        })
    }
}

impl<S, H, V: Shape> Call<'_, S, H, V> {
    /// One attempt of a round, in the call's context, under the earlier of
    /// its timeout and the deadline.
    #[inline]
    pub(super) fn racing<Fut: Future>(&self, attempt: Fut) -> Pin<Box<Racing<Fut>>> {
        // Allocated first, so that the attempt is built in place rather
        // than beside it and copied in.
        let slot = Box::new_uninit();
        let (key, span) = match &*self.rare {
            Some(rare) => (rare.key.clone(), rare.span.clone()),
            // A plain call's own key (see `start`).
            None => ((*self.key).clone(), None),
        };
        let (timer, limit) = match self.attempt_limit() {
            Some((end, limit)) => (Some(sleep_until(end)), Some(limit)),
            None => (None, None),
        };
        Box::into_pin(Box::write(slot, Racing { key, span, attempt: Some(attempt), timer, limit }))
    }
}
