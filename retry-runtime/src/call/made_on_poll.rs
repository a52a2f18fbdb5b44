//! An attempt made on its first poll: [`Call::attempt_with`](super::Call::attempt_with)'s.
//!
//! [`Call::attempt`](super::Call::attempt) polls a future the caller
//! already made, asking the guards first; `attempt_with` is given a
//! closure, whose call may do work of its own (count, log, start a
//! request). Wrapping the call in a future that makes the attempt when it
//! is first polled keeps `attempt_with`'s promise, that the attempt is made
//! only once the guards admitted it: the attempt is polled only after
//! admission, and a refused attempt is dropped unpolled, the closure never
//! called. (`Policy::run` keeps the same promise without it: its one
//! attempt state makes each attempt with the closure once admitted, see
//! `run_loop`.)

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

pin_project! {
    /// `make`'s future, made when first polled (see the module docs).
    #[project = MadeOnPollProj]
    #[project_replace = MadeOnPollReplace]
    pub enum MadeOnPoll<M, Fut> {
        /// Not polled yet: the attempt is not made.
        Waiting { make: M },
        /// Made, and running.
        Running { #[pin] attempt: Fut },
        /// Only while the closure runs (it is moved out to be called).
        Making,
    }
}

impl<M, Fut> MadeOnPoll<M, Fut> {
    #[inline]
    pub(crate) fn new(make: M) -> Self {
        MadeOnPoll::Waiting { make }
    }
}

impl<M, Fut> Future for MadeOnPoll<M, Fut>
where
    M: FnOnce() -> Fut,
    Fut: Future,
{
    type Output = Fut::Output;

    // Always inline: it is polled once per attempt of `Policy::run`, inside
    // the plain first attempt's poll, where it folds away almost entirely.
    #[inline(always)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Fut::Output> {
        if let MadeOnPollProj::Running { attempt } = self.as_mut().project() {
            return attempt.poll(cx);
        }
        match self.as_mut().project_replace(MadeOnPoll::Making) {
            MadeOnPollReplace::Waiting { make } => {
                self.as_mut().project_replace(MadeOnPoll::Running { attempt: make() });
            }
            // `Making` is left only by the arm above, which never returns
            // early; a future is not polled again after it returned
            // `Ready` (the attempt's own rule), so this is not reached.
            MadeOnPollReplace::Running { .. } | MadeOnPollReplace::Making => return Poll::Pending,
        }
        match self.project() {
            MadeOnPollProj::Running { attempt } => attempt.poll(cx),
            _ => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[tokio::test]
    async fn the_attempt_is_made_on_the_first_poll_and_not_before() {
        let made = Cell::new(0);
        let future = MadeOnPoll::new(|| {
            made.set(made.get() + 1);
            async { 7 }
        });
        assert_eq!(made.get(), 0, "making the wrapper makes no attempt");
        assert_eq!(future.await, 7);
        assert_eq!(made.get(), 1);
    }

    #[test]
    fn a_wrapper_dropped_unpolled_never_calls_the_closure() {
        let made = Cell::new(false);
        let future = MadeOnPoll::new(|| {
            made.set(true);
            async {}
        });
        // Only dropped, never polled: pin it as the loop would.
        drop(Box::pin(future) as Pin<Box<dyn Future<Output = ()>>>);
        assert!(!made.get());
    }

    #[tokio::test(start_paused = true)]
    async fn a_pending_attempt_is_polled_again_in_place_and_made_once() {
        let made = Cell::new(0);
        let future = MadeOnPoll::new(|| {
            made.set(made.get() + 1);
            async {
                tokio::task::yield_now().await;
                tokio::task::yield_now().await;
                "done"
            }
        });
        assert_eq!(future.await, "done");
        assert_eq!(made.get(), 1);
    }
}
