//! A plain call's first attempt under the function's attempt timeout: the
//! attempt raced with a timer beside it, so that a function compiled with
//! `attempt_timeout_ms` starts plain too (see the module docs of `plain`).
//! Only such a function's first attempt carries the timer: the others'
//! futures do not grow by its size.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use super::Call;
use super::per_key::{CallTarget, preset};
use super::plain::{Failed, Parts, Plain, PlainAttempt, PlainFailure};
use crate::guard::AttemptKind;
use crate::guards::Shape;

/// A plain call's first attempt, admitted, and its attempt timeout. Made
/// by [`Call::plain_timed`].
pub struct TimedPlain<'p, V: Shape> {
    plain: Plain<'p, V>,
    timeout: Duration,
}

impl<V: Shape> std::fmt::Debug for TimedPlain<'_, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimedPlain").field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

impl<'p, V: Shape> TimedPlain<'p, V> {
    /// The attempt, to run as this plain call's first, timed from now.
    #[inline(always)]
    pub fn attempt<Fut>(self, attempt: Fut) -> TimedAttempt<'p, Fut, V> {
        TimedAttempt {
            attempt: self.plain.attempt(attempt),
            timer: None,
            started: Instant::now(),
            timeout: self.timeout,
        }
    }
}

pin_project! {
    /// A plain call's first attempt raced with its attempt timeout: its
    /// output is the call's success, or the failure (the attempt's error, or
    /// its timeout) to hand to [`Call::after_plain`].
    pub struct TimedAttempt<'p, Fut, V: Shape> {
        #[pin]
        attempt: PlainAttempt<'p, Fut, V>,
        // Armed when the attempt first waits, due `timeout` after `started`
        // (see `due_after`, which checks the sum), so that one answered at
        // once never makes a timer entry; polled after the attempt, as
        // `tokio::time::timeout` does.
        #[pin]
        timer: Option<Sleep>,
        started: Instant,
        timeout: Duration,
    }
}

impl<'p, T, E, Fut, V> Future for TimedAttempt<'p, Fut, V>
where
    Fut: Future<Output = Result<T, E>>,
    V: Shape,
{
    type Output = Result<T, PlainFailure<'p, E, V>>;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(output) = this.attempt.as_mut().poll(cx) {
            return Poll::Ready(output);
        }
        if this.timer.is_none() {
            // A timeout past the horizon never ends: no timer, as the general path arms none.
            let Some(due) = due_after(*this.started, *this.timeout) else { return Poll::Pending };
            this.timer.set(Some(tokio::time::sleep_until(due)));
        }
        if let Some(timer) = this.timer.as_pin_mut() {
            std::task::ready!(timer.poll(cx));
        }
        let holding = this.attempt.give_up();
        Poll::Ready(Err(PlainFailure { holding, failed: Failed::TimedOut(*this.timeout) }))
    }
}

/// When an attempt started at `started` times out: `timeout` later; `None`
/// (never: no timer) past the crate's horizon, as every other timer of the
/// crate (see `clock::HORIZON`).
#[inline]
pub(crate) fn due_after(started: Instant, timeout: Duration) -> Option<Instant> {
    if timeout > crate::clock::HORIZON { None } else { started.checked_add(timeout) }
}

impl<'p, S, H, V: Shape> Call<'p, S, H, V> {
    /// [`plain`](Self::plain) for a function compiled with an attempt
    /// timeout: its first attempt is plain when nothing else a plain call
    /// cannot have is set (no deadline, hedging, guards per key or `on_stop`
    /// hook; see `plain_guards_timed`), and runs raced with its timer.
    #[inline(always)]
    pub fn plain_timed<P: Parts<S, H>>(
        slot: &Option<Self>,
        target: impl CallTarget<'p>,
        _parts: &P,
    ) -> Option<TimedPlain<'p, V>> {
        if P::KEYED || slot.is_some() || preset(target).is_some() {
            return None;
        }
        let (guards, timeout) = Self::plain_guards_timed::<V>(target.policy())?;
        let held = V::hold(guards);
        let permits = V::held_view(held).admit_quietly(AttemptKind::First)?;
        Some(TimedPlain { plain: Plain { held, permits }, timeout })
    }
}
