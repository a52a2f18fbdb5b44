//! An attempt as it runs once the call is under way: admission, the run,
//! the record, the decision and the backoff after a failure.
//!
//! It polls the attempt in place (where the caller made it, or where its
//! maker made it once admitted: `Policy::run`'s), so the attempt is never
//! moved and the loop adds no `async` state machine of its own around it.
//! What only some attempts need (a wait for a place or a turn, a hedging
//! round) is behind a box (`Rare`), so the common future stays small.
//!
//! An attempt timeout and the backoff share one timer, since an attempt
//! that runs is not backing off: the timeout is armed as the attempt is
//! admitted, polled only after the attempt (as `timeout_at` does), and
//! replaced by the backoff's wait when the attempt fails. A call with a
//! deadline runs each attempt under the earlier of its timeout and the
//! deadline, in the same timer: when the timer fires at the deadline
//! (which wins a tie), the deadline has cut the attempt short. The backoff
//! needs no deadline of its own: a wait that would end at or past it is
//! never started (see `decision`).

use std::future::Future;
use std::mem::ManuallyDrop;
use std::ops::DerefMut;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep, sleep};

use super::admit::{not_admitted_now, widen_admission};
use super::phase::{Fields, Phase, Rare};
use std::convert::Infallible;

use super::hedge::{Hedges, NoHedges, RoundSlot};
use super::polled::arm;
use super::settle::Next;
use super::settle::measured;
use super::{Call, LastError, Step};
use crate::error::ErrorHandling;
use crate::guard::{Admission, Answer, AttemptKind};
use crate::guards::{AnyShape, GuardPermits, Shape, ShapedPermits, widen};

pin_project! {
    /// An attempt that is not a plain call's first (see the module docs):
    /// the [`Attempt`](super::attempt::Attempt)'s state then. It holds its
    /// call as `C`: borrowed from the loop that drives it (the attribute's,
    /// the HTTP layers'), or owned by a future that keeps one attempt
    /// state for the whole call and starts it `again` for each attempt
    /// (`Policy::run`'s `Run`).
    #[project = RunningProj]
    pub struct Running<'c, 'p, C, S, H, Fut: Future, M = NoHedges, V: Shape = AnyShape, R = Infallible>
    where
        C: DerefMut<Target = Call<'p, S, H, V>>,
    {
        pub(super) call: C,
        pub(super) phase: Phase,
        // What the guards gave the running attempt; handed back exactly
        // once, as it ends (or is dropped: see the drop below).
        pub(super) permits: Option<ShapedPermits<V>>,
        // `None` once finished: it is dropped as soon as it is done, in its context.
        #[pin]
        pub(super) attempt: Option<Fut>,
        // The attempt's timeout while it runs, then the backoff: the two
        // never overlap, so they share one timer.
        #[pin]
        pub(super) timer: Option<Sleep>,
        // Dropped by the attempt's own drop, behind one inline test (see
        // `Call::more`).
        pub(super) rare: ManuallyDrop<Option<Pin<Box<Rare<'p, R>>>>>,
        // A hedged function's maker of attempts.
        pub(super) hedges: M,
        // When the attempt's request went out, if it did work of its own
        // before (the HTTP layers): an adaptive bulkhead's sample starts then.
        pub(super) sent: Option<&'c OnceLock<Instant>>,
    }

    impl<'p, C, S, H, Fut: Future, M, V: Shape, R> PinnedDrop for Running<'_, 'p, C, S, H, Fut, M, V, R>
    where
        C: DerefMut<Target = Call<'p, S, H, V>>,
    {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            // A finished attempt holds nothing: one test on the success path.
            // One dropped unfinished ends its call (see `Call::end`).
            if *this.phase != Phase::Finished {
                if this.attempt.is_some() || this.permits.is_some() {
                    dropped(&mut **this.call, this.attempt, this.permits);
                }
                if this.rare.is_some() {
                    drop_rare(this.rare);
                }
                this.call.end();
            }
        }
    }
}

/// An attempt dropped unfinished (the caller cancelled the call, or it
/// panicked): dropped in its context, then what it held handed back,
/// counting nothing.
#[cold]
#[inline(never)]
fn dropped<S, H, Fut, V: Shape>(
    call: &mut Call<'_, S, H, V>,
    attempt: Pin<&mut Option<Fut>>,
    permits: &mut Option<ShapedPermits<V>>,
) {
    // Handed back after the attempt's drop, even if that drop panics.
    let _back = Abandon { guards: call.guards(), permits: permits.take().map(widen::<V>) };
    // A retry cancelled as it ran spent what it took, with no refund.
    call.forget_spent();
    call.drop_in_context(attempt);
}

impl<'c, 'p, C, S, H, Fut: Future, M, V: Shape, R> Running<'c, 'p, C, S, H, Fut, M, V, R>
where
    C: DerefMut<Target = Call<'p, S, H, V>>,
{
    /// An attempt of `call` starting in `phase`: `attempt` (`None` for one
    /// `hedges` makes once admitted, or a hedged function's), `sent` for
    /// the HTTP layers' attempts. It waits out first the backoff a plain
    /// first attempt's failure left the call (see `Call::after_plain`), if
    /// any.
    #[inline(always)]
    pub(super) fn new(
        call: C,
        phase: Phase,
        attempt: Option<Fut>,
        hedges: M,
        sent: Option<&'c OnceLock<Instant>>,
    ) -> Self {
        // The timer is armed as the wait starts, on the first poll: armed
        // here, it would be built apart and copied into place on every call.
        let phase = if call.backs_off_first() { phase.delayed() } else { phase };
        Running {
            call,
            phase,
            permits: None,
            attempt,
            timer: None,
            rare: ManuallyDrop::new(None),
            hedges,
            sent,
        }
    }

    /// This attempt state, its step over with a retry, made ready for the
    /// call's next attempt, starting in `phase` (see `Run`): what the last
    /// attempt left is cleared (its backoff's timer, which has fired).
    #[inline]
    pub(super) fn again(self: Pin<&mut Self>, phase: Phase) {
        let mut this = self.project();
        debug_assert!(*this.phase == Phase::Finished && this.attempt.is_none() && this.permits.is_none());
        this.timer.set(None);
        *this.phase = phase;
    }
}

/// Drops what an attempt held behind its box (see `Running::rare`).
#[inline(never)]
fn drop_rare<T>(rare: &mut ManuallyDrop<Option<T>>) {
    drop(ManuallyDrop::into_inner(std::mem::replace(rare, ManuallyDrop::new(None))));
}

/// Hands `permits` back to `guards` as it drops (see `dropped`).
struct Abandon<'p> {
    guards: crate::guards::GuardsRef<'p>,
    permits: Option<GuardPermits>,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if let Some(permits) = self.permits.take() {
            self.guards.abandon(permits);
        }
    }
}

impl<'p, S, H, V: Shape> Call<'p, S, H, V> {
    /// Which attempt the next one is, for the guards.
    #[inline(always)]
    fn next_kind(&self) -> AttemptKind {
        if self.attempts == 0 { AttemptKind::First } else { AttemptKind::Retry }
    }
}

impl<'p, T, E, C, S, H, Fut, M, V, R> Future for Running<'_, 'p, C, S, H, Fut, M, V, R>
where
    C: DerefMut<Target = Call<'p, S, H, V>>,
    V: Shape,
    Fut: Future<Output = Result<T, E>>,
    M: Hedges<Fut>,
    R: RoundSlot<'p, Fut>,
    H: ErrorHandling<E>,
    S: LastError<E>,
{
    type Output = Step<T, E>;

    // Only the success path is inline: everything else is out of line.
    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Step<T, E>> {
        let mut this = self.project();
        let step = poll_step(&mut this, cx);
        // An attempt that ends its call ends it here, whichever way it ended.
        if let Poll::Ready(Step::Done(_)) = &step {
            this.call.end();
        }
        step
    }
}

/// [`Running::poll`], before the call's end.
#[inline(always)]
fn poll_step<'p, T, E, C, S, H, Fut, M, V, R>(
    this: &mut RunningProj<'_, '_, 'p, C, S, H, Fut, M, V, R>,
    cx: &mut Context<'_>,
) -> Poll<Step<T, E>>
where
    C: DerefMut<Target = Call<'p, S, H, V>>,
    V: Shape,
    Fut: Future<Output = Result<T, E>>,
    M: Hedges<Fut>,
    R: RoundSlot<'p, Fut>,
    H: ErrorHandling<E>,
    S: LastError<E>,
{
    {
        if *this.phase != Phase::Running {
            if *this.phase == Phase::Admitting {
                this.call.start_if_new();
                let kind = this.call.next_kind();
                let admission = this.call.guards_ref().view::<V>().admit(kind, this.call.priority());
                match admission {
                    Admission::Go(permits) => *this.permits = Some(permits),
                    other => match not_admitted_now(
                        &mut **this.call,
                        &mut **this.rare,
                        widen_admission::<V>(other),
                        false,
                    ) {
                        Ok(phase) => *this.phase = phase,
                        Err(rejection) => {
                            *this.phase = Phase::Finished;
                            return Poll::Ready(this.call.refused(this.attempt.as_mut(), rejection));
                        }
                    },
                }
            }
            if *this.phase != Phase::Admitting {
                match super::admit::poll_rare(this.as_mut_parts(), cx) {
                    Poll::Ready(Some(step)) => return Poll::Ready(step),
                    Poll::Ready(None) => {}
                    Poll::Pending => return Poll::Pending,
                }
            }
            if this.call.attempts_are_timed() {
                arm(&**this.call, this.timer.as_mut());
            }
            this.call.begin_attempt::<E>();
            *this.phase = Phase::Running;
        }
        let call = &mut **this.call;
        // An attempt made once admitted (`Policy::run`'s: see
        // `Hedges::MAKES`) is made as it is first polled, in its context.
        let hedges = &mut *this.hedges;
        let make = if M::MAKES { Some(|| hedges.make()) } else { None };
        let (class, error) = match call.poll_in_context(this.attempt.as_mut(), make, cx) {
            Poll::Pending if this.timer.is_none() => return Poll::Pending,
            Poll::Pending => match call.poll_timer(this.timer.as_mut(), this.attempt.as_mut(), cx) {
                None => return Poll::Pending,
                Some(Err(())) => {
                    *this.phase = Phase::Finished;
                    return Poll::Ready(call.cut(this.permits.take(), *this.sent));
                }
                Some(Ok((class, error))) => (Some(class), error),
            },
            Poll::Ready(Ok(value)) => {
                if let Some(permits) = this.permits.take() {
                    let guards = call.guards_ref();
                    guards.view::<V>().record(measured::<V>(permits, *this.sent, guards), Answer::Success);
                }
                *this.phase = Phase::Finished;
                return Poll::Ready(Step::Done(Ok(value)));
            }
            Poll::Ready(Err(error)) => (None, error),
        };
        match call.failed(this.permits, *this.sent, class, error) {
            Next::Done(step) => {
                *this.phase = Phase::Finished;
                Poll::Ready(step)
            }
            Next::BackOff(wait) => {
                this.timer.as_mut().set(Some(sleep(wait)));
                *this.phase = Phase::BackingOff;
                super::admit::poll_backoff(this.timer.as_mut(), this.phase, cx)
            }
        }
    }
}

impl<'p, C, S, H, Fut: Future, M, V: Shape, R> RunningProj<'_, '_, 'p, C, S, H, Fut, M, V, R>
where
    C: DerefMut<Target = Call<'p, S, H, V>>,
{
    /// The projection's fields, for the out-of-line steps.
    #[inline(always)]
    fn as_mut_parts(&mut self) -> Fields<'_, 'p, S, H, Fut, M, V, R> {
        Fields {
            call: &mut **self.call,
            phase: self.phase,
            permits: self.permits,
            attempt: self.attempt.as_mut(),
            timer: self.timer.as_mut(),
            rare: &mut **self.rare,
            hedges: self.hedges,
        }
    }
}
