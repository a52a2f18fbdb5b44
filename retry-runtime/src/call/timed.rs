//! A plain call's first attempt under the function's attempt timeout or
//! deadline: the attempt raced with a timer beside it, so that a function
//! compiled with `attempt_timeout_ms` or `deadline_ms` starts plain too
//! (see the module docs of `plain`). A function with an `on_stop` hook
//! runs its first attempt here too, with no timer: its start is read if it
//! waits, for the hook's elapsed time. Only such a function's first
//! attempt carries the timer: the others' futures do not grow by its size.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use super::hedge::{Hedges, NoHedges};
use super::parts::Parts;
use super::per_key::CallTarget;
use super::plain::{Failed, Plain, PlainAttempt, PlainFailure};
use super::{Call, Limit};
use crate::guards::Shape;

/// What may stop a plain call's first attempt, each counted from its
/// start: the attempt timeout (the attempt is then retried as any timed
/// out one is) and the call's deadline (the call then ends).
///
/// With a deadline, the start is read as the attempt is made: the deadline
/// is the whole call's, waits and every poll included. Without one, it is
/// read when the attempt first waits (its first poll answered nothing):
/// an attempt answered at once never reads the clock (a read measured
/// 16.6 ns here, half of a guarded call's success), and the attempt
/// timeout of a first attempt counts from its first wait, not counting
/// the synchronous part of its first poll (which a well-behaved future
/// keeps short: a timer armed before it could not have cut it short
/// anyway, only end the attempt as soon as it waits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FirstLimits {
    pub(crate) timeout: Option<Duration>,
    pub(crate) deadline: Option<Duration>,
}

impl FirstLimits {
    /// The limits `settings` set.
    #[inline]
    pub(crate) fn of(settings: &crate::settings::Settings) -> Self {
        FirstLimits { timeout: settings.attempt_timeout, deadline: settings.deadline }
    }

    /// The start of a first attempt made now: read now with a deadline,
    /// else not yet (when it first waits).
    #[inline]
    pub(crate) fn start(&self) -> Option<Instant> {
        self.deadline.map(|_| Instant::now())
    }

    /// When an attempt started at `started` is stopped, and by which: as
    /// every attempt is (`Limit::earlier`: the deadline wins a tie).
    /// `None` when neither can be armed (past the crate's horizon).
    #[inline]
    pub(crate) fn due(&self, started: Instant) -> Option<(Instant, Limit)> {
        let timeout = self.timeout.and_then(|after| Some((due_after(started, after)?, after)));
        Limit::earlier(timeout, self.deadline_at(started))
    }

    /// The call's deadline, for a call whose first attempt started at
    /// `started`, if it has one that can be armed.
    #[inline]
    pub(crate) fn deadline_at(&self, started: Instant) -> Option<Instant> {
        self.deadline.and_then(|deadline| due_after(started, deadline))
    }

    /// [`deadline_at`](Self::deadline_at) for a first attempt that failed,
    /// started at `started` if it waited, else (answered at its first
    /// poll) now: the clock read only for a call with a deadline.
    #[inline]
    pub(crate) fn deadline_after(&self, started: Option<Instant>) -> Option<Instant> {
        self.deadline.and_then(|deadline| due_after(started.unwrap_or_else(Instant::now), deadline))
    }

    /// How a first attempt started at `started` failed when its timer
    /// fired: its timeout, or the call's deadline.
    #[inline]
    pub(crate) fn failed<E>(&self, started: Instant) -> Failed<E> {
        match self.due(started) {
            Some((_, Limit::Timeout(after))) => Failed::TimedOut(after),
            _ => Failed::Cut,
        }
    }
}

/// A plain call's first attempt, admitted, and its limits. Made by
/// [`Call::plain_timed`].
pub struct TimedPlain<'p, V: Shape> {
    plain: Plain<'p, V>,
    limits: FirstLimits,
}

impl<V: Shape> std::fmt::Debug for TimedPlain<'_, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimedPlain").field("limits", &self.limits).finish_non_exhaustive()
    }
}

impl<'p, V: Shape> TimedPlain<'p, V> {
    /// The attempt, to run as this plain call's first, timed from now
    /// with a deadline, else from when it first waits (see [`FirstLimits`]).
    #[inline(always)]
    pub fn attempt<Fut>(self, attempt: Fut) -> TimedAttempt<'p, Fut, V> {
        let started = self.limits.start();
        TimedAttempt { attempt: self.plain.attempt(attempt), timer: None, started, limits: self.limits }
    }

    /// [`attempt`](Self::attempt), made at its first poll (see
    /// [`TimedAttempt::poll_made`]).
    #[inline(always)]
    pub(super) fn attempt_made_on_poll<Fut>(self) -> TimedAttempt<'p, Fut, V> {
        let started = self.limits.start();
        TimedAttempt { attempt: self.plain.attempt_made_on_poll(), timer: None, started, limits: self.limits }
    }
}

pin_project! {
    /// A plain call's first attempt raced with its limits: its output is
    /// the call's success, or the failure (the attempt's error, its
    /// timeout, or the call's deadline) to hand to [`Call::after_plain`].
    pub struct TimedAttempt<'p, Fut, V: Shape> {
        #[pin]
        attempt: PlainAttempt<'p, Fut, V>,
        // Armed when the attempt first waits, due when the first of the
        // limits is reached (see `FirstLimits::due`), so that one answered
        // at once never makes a timer entry; polled after the attempt, as
        // `tokio::time::timeout` does.
        #[pin]
        timer: Option<Sleep>,
        // When the attempt started: as it was made with a deadline, else
        // when it first waited (see `FirstLimits`).
        started: Option<Instant>,
        limits: FirstLimits,
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
        self.poll_made(&mut NoHedges, cx)
    }
}

impl<'p, T, E, Fut, V> TimedAttempt<'p, Fut, V>
where
    Fut: Future<Output = Result<T, E>>,
    V: Shape,
{
    /// Polls the attempt, made by `maker` at the first poll if it makes
    /// (see `PlainAttempt::poll_made`), then its timer.
    #[inline(always)]
    pub(super) fn poll_made<M: Hedges<Fut>>(
        self: Pin<&mut Self>,
        maker: &mut M,
        cx: &mut Context<'_>,
    ) -> Poll<Result<T, PlainFailure<'p, E, V>>> {
        let mut this = self.project();
        if let Poll::Ready(output) = this.attempt.as_mut().poll_made(maker, cx) {
            // A failure carries the call's deadline, counted from this start.
            return Poll::Ready(output.map_err(|failure| PlainFailure {
                deadline: this.limits.deadline_after(*this.started),
                started: *this.started,
                ..failure
            }));
        }
        let started = *this.started.get_or_insert_with(Instant::now);
        if this.timer.is_none() {
            // Limits past the horizon never end: no timer, as the general path arms none.
            let Some((due, _)) = this.limits.due(started) else { return Poll::Pending };
            this.timer.set(Some(tokio::time::sleep_until(due)));
        }
        if let Some(timer) = this.timer.as_pin_mut() {
            std::task::ready!(timer.poll(cx));
        }
        let holding = this.attempt.give_up();
        let (failed, deadline) = (this.limits.failed(started), this.limits.deadline_at(started));
        Poll::Ready(Err(PlainFailure { holding, failed, deadline, started: Some(started) }))
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
    /// timeout, a deadline or an `on_stop` hook: its first attempt is plain
    /// when nothing else a plain call cannot have is set (no hedging or
    /// guards per key, not sheddable with a throttle; see
    /// `plain_guards_timed`), and runs raced with its timer, if any.
    #[inline(always)]
    pub fn plain_timed<P: Parts<S, H>>(
        slot: &Option<Self>,
        target: impl CallTarget<'p>,
        parts: &P,
    ) -> Option<TimedPlain<'p, V>> {
        Self::plain_timed_as::<P, V>(slot, target, parts)
    }

    /// [`plain_timed`](Self::plain_timed) seeing the guards as shape `W`
    /// (see `Call::plain_as`), for `Policy::run`.
    #[inline(always)]
    pub(crate) fn plain_timed_as<P: Parts<S, H>, W: Shape>(
        slot: &Option<Self>,
        target: impl CallTarget<'p>,
        _parts: &P,
    ) -> Option<TimedPlain<'p, W>> {
        if slot.is_some() || target.keyed().is_some() {
            return None;
        }
        let (guards, limits) = Self::plain_guards_timed::<W>(target.policy())?;
        Some(TimedPlain { plain: Plain::admitted(W::hold(guards))?, limits })
    }
}
