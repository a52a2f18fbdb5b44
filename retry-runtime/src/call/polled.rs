//! How a running attempt is polled: in the call's context (its idempotency
//! key and span), and under its timer (the attempt timeout or the
//! deadline, whichever ends first).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::{Instant, Sleep, sleep_until};

use super::{Call, Limit};
use crate::context;
use crate::error::ErrorHandling;
use crate::guards::Shape;

/// Arms the attempt's timer at the earlier of its timeout and the deadline.
#[inline(never)]
pub(super) fn arm<S, H, V: Shape>(call: &Call<'_, S, H, V>, mut timer: Pin<&mut Option<Sleep>>) {
    if let Some((end, _)) = call.attempt_limit() {
        timer.set(Some(sleep_until(end)));
    }
}

impl<S, H, V: Shape> Call<'_, S, H, V> {
    /// Polls `attempt` in its context (the call's key and span, or none),
    /// made first by `make` if it is not yet, dropping it there as soon as
    /// it is done.
    #[inline(always)]
    pub(super) fn poll_in_context<F: Future>(
        &mut self,
        attempt: Pin<&mut Option<F>>,
        make: Option<impl FnOnce() -> F>,
        cx: &mut Context<'_>,
    ) -> Poll<F::Output> {
        match &mut *self.rare {
            None if self.key.is_none() => context::poll_keyless(attempt, make, cx),
            // A plain call with a key of its own (see `start`).
            None => context::poll_in(&mut self.key, None, attempt, make, cx),
            Some(rare) => context::poll_in(&mut rare.key, rare.span.as_ref(), attempt, make, cx),
        }
    }

    /// Drops an attempt that has not finished, in its context.
    #[inline]
    pub(super) fn drop_in_context<F>(&mut self, attempt: Pin<&mut Option<F>>) {
        match &mut *self.rare {
            None => context::drop_in(&mut self.key, None, attempt),
            Some(rare) => context::drop_in(&mut rare.key, rare.span.as_ref(), attempt),
        }
    }

    /// The attempt is pending under its timeout or the deadline: if the
    /// timer has fired, the attempt is dropped (cancelled) in its context.
    /// A timeout gives the error `AttemptTimeout` and its class, which the
    /// failure step then records and decides on as any other error; the
    /// deadline (`Err`) ends the call. The attempt is polled before the
    /// timer, so one that finishes as the timer fires counts.
    #[inline(never)]
    pub(super) fn poll_timer<E, F>(
        &mut self,
        timer: Pin<&mut Option<Sleep>>,
        attempt: Pin<&mut Option<F>>,
        cx: &mut Context<'_>,
    ) -> Option<Result<(crate::classify::ErrorClass, E), ()>>
    where
        H: ErrorHandling<E>,
        S: Default,
    {
        let mut timer = timer.as_pin_mut()?;
        if timer.as_mut().poll(cx).is_pending() {
            return None;
        }
        self.drop_in_context(attempt);
        // Armed at `attempt_limit`'s instant, which is the deadline exactly
        // when the deadline is what cuts the attempt short.
        match self.limit_at(timer.deadline()) {
            Limit::Deadline => Some(Err(())),
            Limit::Timeout(after) => Some(Ok(self.timed_out(after))),
        }
    }

    /// What a timer armed for `end` by `attempt_limit` stands for.
    fn limit_at(&self, end: Instant) -> Limit {
        if self.deadline().is_some_and(|deadline| end >= deadline) {
            Limit::Deadline
        } else {
            Limit::Timeout(self.settings().attempt_timeout.unwrap_or_default())
        }
    }
}
