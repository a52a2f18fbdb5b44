//! The first attempt of a plain call: the success path with nothing
//! around the attempt but what it needs.
//!
//! Most calls are plain (no deadline, attempt timeout or hedging, the
//! global registry's guards, none of them asking for a wait, DEBUG off, not
//! nested in another call's attempt; a function compiled with an attempt
//! timeout or a deadline and nothing else of these is plain too, its first
//! attempt raced with one timer: `timed`) and most first attempts succeed.
//! An idempotency key does not stop a call being plain: its first attempt
//! runs in the key where the caller keeps it (`parts::InKey`), and the call
//! built after a failure takes the key from there.
//! For those, the attempt is admitted quietly as it is made (see
//! `GuardSet::admit_quietly`: a closed breaker's ticket, a free place, a
//! first attempt's count, nothing that waits or counts a refusal) and runs
//! in a small state of its own: the call itself is not built. Only if the
//! attempt fails is the call built, as the plain call it was, and the
//! failure recorded and decided on as any other's (`Call::after_plain`);
//! the next attempt (through `Call::next`, or `Policy::run`'s one attempt
//! state: `run_loop`) waits out the backoff before it is admitted. A call
//! that is not plain builds its call at its first attempt, and every
//! attempt of it runs as `running` says.
//!
//! The first attempt is a future of its own, not a state of the one
//! [`Attempt`](super::attempt::Attempt): the caller awaits one or the other, so the
//! plain one holds only the guards, their permits and the attempt, and
//! its caller's future writes those and nothing else (one enum of both
//! wrote the slot, the policy and the parts too, and a discriminant: a
//! quarter more instructions per plain call).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::Call;
use super::hedge::{Hedges, NoHedges};
use super::parts::Parts;
use super::per_key::{CallTarget, keyed_set};
use crate::context;
use crate::guard::{Answer, AttemptKind};
use crate::guards::{Shape, ShapedPermits};

/// A plain call's first attempt, admitted: what the guards gave it and
/// where to hand it back. Made by [`Call::plain`].
pub struct Plain<'p, V: Shape> {
    pub(super) held: V::Held<'p>,
    pub(super) permits: ShapedPermits<V>,
}

impl<'p, V: Shape> Plain<'p, V> {
    /// The first attempt admitted quietly by the guards `held` keeps, if
    /// they admit it at once (see `GuardSet::admit_quietly`).
    #[inline(always)]
    pub(super) fn admitted(held: V::Held<'p>) -> Option<Self> {
        let permits = V::held_view(held).admit_quietly(AttemptKind::First)?;
        Some(Plain { held, permits })
    }

    /// The attempt, to run as this plain call's first.
    #[inline(always)]
    pub fn attempt<Fut>(self, attempt: Fut) -> PlainAttempt<'p, Fut, V> {
        PlainAttempt { held: self.held, permits: Some(self.permits), attempt: Some(attempt) }
    }

    /// The attempt, to be made at its first poll (see
    /// [`PlainAttempt::poll_made`]), which must come at once: until the
    /// attempt is made, its drop does not hand the permits back (`Run`
    /// polls it in the poll that made it).
    #[inline(always)]
    pub(super) fn attempt_made_on_poll<Fut>(self) -> PlainAttempt<'p, Fut, V> {
        PlainAttempt { held: self.held, permits: Some(self.permits), attempt: None }
    }
}

pin_project! {
    /// A plain call's first attempt, as it runs (see the module docs): its
    /// output is the call's success, or the failure to hand to
    /// [`Call::after_plain`].
    pub struct PlainAttempt<'p, Fut, V: Shape> {
        // The guards, as the shape sees them: looked up once, at admission.
        held: V::Held<'p>,
        // What the guards gave it, handed back exactly once.
        permits: Option<ShapedPermits<V>>,
        // `None` once finished: dropped as soon as it is done, in its context.
        #[pin]
        attempt: Option<Fut>,
    }

    impl<Fut, V: Shape> PinnedDrop for PlainAttempt<'_, Fut, V> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            // The permits are held exactly while the attempt is: both
            // are taken as it finishes (see `poll_made` for an attempt
            // not made yet).
            if this.attempt.is_some() {
                cancelled::<Fut, V>(*this.held, this.attempt, this.permits);
            }
        }
    }
}

/// Permits a plain attempt holds, handed back as this drops unless taken
/// first: what is not recorded (the attempt was cancelled, or its error's
/// classification panicked) counts nothing.
pub(super) struct Holding<'p, V: Shape> {
    pub(super) held: V::Held<'p>,
    pub(super) permits: Option<ShapedPermits<V>>,
}

/// Hands a plain attempt's permits back if its maker panics (the
/// attempt's drop hands them back only with an attempt): borrowed where
/// they lie, so that the maker's success moves nothing (moving them out
/// and back cost `Policy::run` a quarter of its time).
struct UnlessMade<'a, 'p, V: Shape> {
    held: V::Held<'p>,
    permits: &'a mut Option<ShapedPermits<V>>,
}

impl<V: Shape> Drop for UnlessMade<'_, '_, V> {
    #[cold]
    fn drop(&mut self) {
        if let Some(permits) = self.permits.take() {
            V::held_view(self.held).abandon(permits);
        }
    }
}

impl<V: Shape> Drop for Holding<'_, V> {
    fn drop(&mut self) {
        if let Some(permits) = self.permits.take() {
            V::held_view(self.held).abandon(permits);
        }
    }
}

/// A plain attempt dropped unfinished: dropped in its context (the mark; a
/// keyed attempt's `parts::InKey` drops its own in the key; no
/// span), then what it held handed back, counting nothing.
#[cold]
#[inline(never)]
fn cancelled<Fut, V: Shape>(
    held: V::Held<'_>,
    attempt: Pin<&mut Option<Fut>>,
    permits: &mut Option<ShapedPermits<V>>,
) {
    // Handed back after the attempt's drop, even if that drop panics.
    let _back = Holding::<V> { held, permits: permits.take() };
    context::drop_in(&mut None, None, attempt);
}

/// A plain call's first attempt failed: its error (or its timeout), and
/// what the guards gave it (recorded with the failure by [`Call::after_plain`]).
pub struct PlainFailure<'p, E, V: Shape> {
    pub(super) holding: Holding<'p, V>,
    pub(super) failed: Failed<E>,
    /// The call's deadline, counted from the attempt's start, for a call
    /// that has one (see `call::timed`).
    pub(super) deadline: Option<tokio::time::Instant>,
    /// When the attempt started, if it was timed and waited (see
    /// `call::timed`): the start of the call, for an `on_stop` hook.
    pub(super) started: Option<tokio::time::Instant>,
}

/// How a plain first attempt failed.
#[derive(Debug)]
pub(crate) enum Failed<E> {
    /// With the attempt's own error.
    Error(E),
    /// Its attempt timeout passed first, after this long.
    TimedOut(std::time::Duration),
    /// The call's deadline passed first: the call ends.
    Cut,
}

impl<V: Shape> std::fmt::Debug for Plain<'_, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plain").finish_non_exhaustive()
    }
}

impl<E: std::fmt::Debug, V: Shape> std::fmt::Debug for PlainFailure<'_, E, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainFailure").field("failed", &self.failed).finish_non_exhaustive()
    }
}

impl<'p, Fut, V: Shape> PlainAttempt<'p, Fut, V> {
    /// The attempt, unfinished, given up (its timeout passed): dropped in
    /// its context, and what it held, to record the timeout with.
    pub(super) fn give_up(self: Pin<&mut Self>) -> Holding<'p, V> {
        let this = self.project();
        let holding = Holding { held: *this.held, permits: this.permits.take() };
        context::drop_in(&mut None, None, this.attempt);
        holding
    }
}

impl<'p, T, E, Fut, V> Future for PlainAttempt<'p, Fut, V>
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

impl<'p, T, E, Fut, V> PlainAttempt<'p, Fut, V>
where
    Fut: Future<Output = Result<T, E>>,
    V: Shape,
{
    /// Polls the attempt (its context is the nesting mark alone), made by
    /// `maker` at the first poll if it is one that makes (`Policy::run`'s
    /// closure: see [`Plain::attempt_made_on_poll`]); a success is
    /// recorded, a failure handed on with the permits.
    #[inline(always)]
    pub(super) fn poll_made<M: Hedges<Fut>>(
        self: Pin<&mut Self>,
        maker: &mut M,
        cx: &mut Context<'_>,
    ) -> Poll<Result<T, PlainFailure<'p, E, V>>> {
        let this = self.project();
        let (held, permits) = (*this.held, &mut *this.permits);
        let make = if M::MAKES {
            Some(|| {
                // None: given back (its maker panicked, and the panic was
                // caught): no attempt is made without them.
                if permits.is_none() {
                    panic!("an attempt polled again after its maker panicked");
                }
                let unless_made = UnlessMade::<V> { held, permits };
                let attempt = maker.make();
                std::mem::forget(unless_made);
                attempt
            })
        } else {
            None
        };
        match context::poll_keyless(this.attempt, make, cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(value)) => {
                // Nothing to record for a function that names no guard:
                // the permits (none) are left as they are, unwritten.
                if !V::NONE
                    && let Some(permits) = this.permits.take()
                {
                    V::held_view(*this.held).record(permits, Answer::Success);
                }
                Poll::Ready(Ok(value))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(PlainFailure {
                holding: Holding { held: *this.held, permits: this.permits.take() },
                failed: Failed::Error(error),
                deadline: None,
                started: None,
            })),
        }
    }
}

impl<'p, S, H, V: Shape> Call<'p, S, H, V> {
    /// The first attempt of a call of `policy` into `slot`, admitted
    /// quietly, if the call is plain (see `Call::plain_guards`): `slot` is
    /// empty (the call has not started), and the guards
    /// admit at once (see `GuardSet::admit_quietly`: a closed breaker's
    /// ticket, a free place, a first attempt's count, nothing that waits or
    /// counts a refusal). Else `None`: the attempt goes through
    /// [`next`](Self::next).
    #[inline(always)]
    pub fn plain<P: Parts<S, H>>(
        slot: &Option<Self>,
        target: impl CallTarget<'p>,
        parts: &P,
    ) -> Option<Plain<'p, V>> {
        Self::plain_as::<P, V>(slot, target, parts)
    }

    /// [`plain`](Self::plain) seeing the guards as shape `W` (which must
    /// be the policy's: see `LoopGuards`), for a call that sees them as
    /// another (`Policy::run`'s, which knows the policy only as it runs).
    #[inline(always)]
    pub(crate) fn plain_as<P: Parts<S, H>, W: Shape>(
        slot: &Option<Self>,
        target: impl CallTarget<'p>,
        _parts: &P,
    ) -> Option<Plain<'p, W>> {
        // A call with a key is plain too: its first attempt runs in the
        // key where the caller keeps it (`Keyed::in_key`).
        if slot.is_some() {
            return None;
        }
        Plain::admitted(match keyed_set(target) {
            None => W::hold(Self::plain_guards::<W>(target.policy())?),
            Some(keyed) => W::hold_keyed(Self::plain_with(target.policy(), keyed)?),
        })
    }
}
