//! The one attempt future, for every entry point and every attempt but a
//! plain call's first (`plain`): admission, the run, the record, the
//! decision and the backoff (`running`). Its output says whether the call
//! is over.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::time::Instant;

use std::convert::Infallible;

use super::hedge::{Hedges, Round, RoundSlot};
use super::parts::Parts;
use super::per_key::{CallTarget, preset};
use super::phase::Phase;
use super::running::Running;
use super::{Call, LastError, Step};
use crate::error::ErrorHandling;
use crate::guards::{AnyShape, Shape};

pub use super::hedge::NoHedges;

pin_project! {
    /// One attempt of a [`Call`], and the backoff after it fails: the future
    /// [`Call::next`] and [`Call::attempt`] return (a plain call's first
    /// attempt is a [`PlainAttempt`](super::PlainAttempt)).
    pub struct Attempt<'c, 'p, S, H, Fut: Future, M = NoHedges, V: Shape = AnyShape, R = Infallible> {
        #[pin]
        running: Running<'c, 'p, &'c mut Call<'p, S, H, V>, S, H, Fut, M, V, R>,
    }
}

impl<'c, 'p, S, H, Fut: Future, M, V: Shape, R> Attempt<'c, 'p, S, H, Fut, M, V, R> {
    /// An attempt of `call` (see `Running::new`).
    #[inline(always)]
    fn of(
        call: &'c mut Call<'p, S, H, V>,
        phase: Phase,
        attempt: Option<Fut>,
        hedges: M,
        sent: Option<&'c OnceLock<Instant>>,
    ) -> Self {
        Attempt { running: Running::new(call, phase, attempt, hedges, sent) }
    }
}

impl<'p, S, H, V: Shape> Call<'p, S, H, V> {
    /// The next attempt of the call in `slot`, which is built if it was
    /// not (`parts` then makes its key, error slot and handling): every
    /// attempt but a plain call's first (see [`plain`](Self::plain)). `attempt` is polled once the guards admit it, in the
    /// call's context, and dropped unpolled if they refuse it. It should do
    /// nothing until polled (an `async` block does nothing).
    #[inline(always)]
    pub fn next<'c, Fut: Future, P: Parts<S, H>>(
        slot: &'c mut Option<Self>,
        target: impl CallTarget<'p>,
        parts: P,
        attempt: Fut,
    ) -> Attempt<'c, 'p, S, H, Fut, NoHedges, V> {
        Attempt::of(built(slot, target, parts), Phase::Admitting, Some(attempt), NoHedges, None)
    }

    /// [`next`](Self::next) for a hedged function, each of whose attempts
    /// `make` makes: a round of attempts side by side when the call
    /// hedges, else one attempt.
    #[inline]
    pub fn next_hedged<'c, Fut, M, P>(
        slot: &'c mut Option<Self>,
        target: impl CallTarget<'p>,
        parts: P,
        make: M,
    ) -> Attempt<'c, 'p, S, H, Fut, M, V, Round<'p, Fut>>
    where
        Fut: Future,
        M: FnMut() -> Fut,
        P: Parts<S, H>,
    {
        Attempt::of(built(slot, target, parts), Phase::Hedged, None, make, None)
    }

    /// The next attempt of this call, built already: as
    /// [`next`](Self::next) makes it for a call that is not plain.
    #[inline(always)]
    pub fn attempt<Fut: Future>(&mut self, attempt: Fut) -> Attempt<'_, 'p, S, H, Fut, NoHedges, V> {
        Attempt::of(self, Phase::Admitting, Some(attempt), NoHedges, None)
    }

    /// [`attempt`](Self::attempt) for an attempt `make` makes when it is
    /// first polled, once the guards have admitted it: `make` is never
    /// called for an attempt they refuse.
    #[inline(always)]
    pub fn attempt_with<Fut: Future, Make: FnOnce() -> Fut>(
        &mut self,
        make: Make,
    ) -> Attempt<'_, 'p, S, H, super::MadeOnPoll<Make, Fut>, NoHedges, V> {
        self.attempt(super::MadeOnPoll::new(make))
    }

    /// [`next_hedged`](Self::next_hedged) for a call built already.
    #[inline]
    pub fn attempt_hedged<Fut, M>(&mut self, make: M) -> Attempt<'_, 'p, S, H, Fut, M, V, Round<'p, Fut>>
    where
        Fut: Future,
        M: FnMut() -> Fut,
    {
        Attempt::of(self, Phase::Hedged, None, make, None)
    }

    /// [`attempt`](Self::attempt) for an attempt that does work of the
    /// client's own before its request goes out, and sets `sent` when it
    /// does (the HTTP layers): an adaptive bulkhead's latency sample starts
    /// then rather than at the admission.
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    #[inline]
    pub(crate) fn attempt_sent_at<'c, Fut: Future>(
        &'c mut self,
        sent: &'c OnceLock<Instant>,
        attempt: Fut,
    ) -> Attempt<'c, 'p, S, H, Fut, NoHedges, V> {
        Attempt::of(self, Phase::Admitting, Some(attempt), NoHedges, Some(sent))
    }
}

/// The call in `slot`, built now (by `parts`) if it was not: with the
/// guards its key found, if any, which its start then takes as they are.
#[inline]
fn built<'c, 'p, S, H, V: Shape, P: Parts<S, H>>(
    slot: &'c mut Option<Call<'p, S, H, V>>,
    target: impl CallTarget<'p>,
    parts: P,
) -> &'c mut Call<'p, S, H, V> {
    match slot {
        Some(call) => call,
        None => {
            let (key, last, handling) = parts.make();
            let call = slot.insert(Call::shaped(target.policy(), key, last, handling));
            call.cached = preset(target);
            call
        }
    }
}

impl<'p, T, E, S, H, Fut, M, V, R> Future for Attempt<'_, 'p, S, H, Fut, M, V, R>
where
    Fut: Future<Output = Result<T, E>>,
    M: Hedges<Fut>,
    R: RoundSlot<'p, Fut>,
    V: Shape,
    H: ErrorHandling<E>,
    S: LastError<E>,
{
    type Output = Step<T, E>;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Step<T, E>> {
        self.project().running.poll(cx)
    }
}
