//! The direct path: one attempt as a hand-written future.
//!
//! Calls through the global registry take this path, when their bulkhead,
//! if they have one, has a place free as the attempt is made: a throttle, a
//! breaker, a budget and a place already held ask nothing that waits. So do
//! calls with a rate limit and no bulkhead: a turn free as the attempt is
//! admitted asks nothing that waits either, and one that must be waited
//! for is waited for out of line (`turn`). It polls the
//! attempt where the caller built it, so the attempt is never moved and the
//! loop adds no `async` state machine of its own around it; only the success
//! path is inlined, so the caller's future stays small enough to be inlined
//! in turn. Every decision (admission, what an outcome means, whether to
//! retry) is shared with the general path in the parent module.
//!
//! The bulkhead place is taken as the attempt is made, and the throttle and
//! then the breaker asked when it is first polled, at once, by the `.await`
//! that follows: the general path's order reversed, with the same results,
//! since none of them waits here (a throttle or a breaker that refuses
//! gives the place straight back). The throttle hears how every attempt
//! that went out ended, as on the general path (`answered`). A
//! full bulkhead, or an adaptive one (whose places carry a start time),
//! sends the attempt down the general path, which queues for a place
//! holding no half-open probe slot. The place is a plain fact, no field:
//! it is held exactly while the attempt is (`attempt` is `Some`) and the
//! policy names a bulkhead, and given back where the attempt ends.
//!
//! An attempt timeout and the backoff share one timer, since an attempt
//! that runs is not backing off: the timeout is armed as the attempt is
//! admitted, polled only when the attempt is pending (after it, as
//! `timeout_at` does), and replaced by the backoff's wait when it fires. A
//! call with a deadline runs each attempt under the earlier of its timeout
//! and the deadline, in the same timer, as the general path does: when the
//! timer fires at the deadline (which wins a tie), the deadline has cut the
//! attempt short. The backoff needs no deadline of its own: a wait that
//! would end at or past it is never started (see `decision`).

mod timer;
mod turn;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Sleep, sleep};

use super::admission::{Refusal, admit_holding_place};
use super::outcome::{Answer, answered, outcome_of, record, succeeded};
use super::{Execution, LastError, Step};
use crate::breaker::BreakerPermit;
use crate::classify::ErrorClass;
use crate::context;
use crate::error::ErrorHandling;
use crate::guards::Guards;
use timer::{Fired, arm_timeout, cut, poll_timer, poll_wait};
use turn::{TurnWait, poll_turn};

pin_project! {
    /// The future of [`Execution::attempt`]: the direct path, or the general one.
    #[project = AttemptProj]
    pub(super) enum Attempt<'e, 'p, S, H, Fut, General> {
        Direct { #[pin] direct: Direct<'e, 'p, S, H, Fut> },
        General { #[pin] general: General },
    }
}

impl<T, E, S, H, Fut, General> Future for Attempt<'_, '_, S, H, Fut, General>
where
    Fut: Future<Output = Result<T, E>>,
    H: ErrorHandling<E>,
    S: LastError<E>,
    General: Future<Output = Step<T, E>>,
{
    type Output = Step<T, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Step<T, E>> {
        match self.project() {
            AttemptProj::Direct { direct } => direct.poll(cx),
            AttemptProj::General { general } => poll_general(general, cx),
        }
    }
}

/// Kept out of line: the general path's state machine is large, and
/// inlining it would make the caller's future too big to inline in turn.
#[inline(never)]
fn poll_general<T, E, General>(general: Pin<&mut General>, cx: &mut Context<'_>) -> Poll<Step<T, E>>
where
    General: Future<Output = Step<T, E>>,
{
    general.poll(cx)
}

/// Where one attempt on the direct path is. `Copy`: moving between phases
/// is a plain write, with no drop glue to run (the timer lives in its own
/// field, touched only when there is a timeout or a wait).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Not polled yet: the throttle and the breaker have not been asked.
    Admitting,
    /// As `Admitting`, for a call with an attempt timeout or a deadline:
    /// once admitted, the earlier of the two is armed in `timer`.
    AdmittingTimed,
    /// The attempt runs, holding the breaker's permission (in `permit`) and
    /// its bulkhead place (from the start; see the module docs); under its
    /// timeout or the deadline when `timer` is armed.
    Running,
    /// The attempt failed and a retry is planned: waiting out `timer`.
    BackingOff,
    /// Before admitting this attempt, waiting out the backoff a plain
    /// first attempt's failure planned (`More::pending_wait`), in `timer`.
    Waiting,
    /// The rate limit had no turn free as the attempt was admitted: waiting
    /// for one (in `turn`), holding no breaker permission; then the breaker
    /// is asked again (see `turn`).
    Turn,
    /// The step is over.
    Finished,
}

pin_project! {
    /// One attempt on the direct path (see the module docs).
    pub(super) struct Direct<'e, 'p, S, H, Fut> {
        execution: &'e mut Execution<'p, S, H>,
        guards: &'p Guards,
        phase: Phase,
        permit: Option<BreakerPermit<'p>>,
        // `None` once finished: it is dropped as soon as it is done, in its context.
        #[pin]
        attempt: Option<Fut>,
        // The attempt's timeout while it runs, then the backoff: the two
        // never overlap, so they share one timer.
        #[pin]
        timer: Option<Sleep>,
        // A rate-limit turn waited for before the attempt runs.
        turn: Option<TurnWait<'p>>,
    }

    impl<S, H, Fut> PinnedDrop for Direct<'_, '_, S, H, Fut> {
        fn drop(this: Pin<&mut Self>) {
            // A cancelled attempt is dropped in its context; the breaker
            // permit (a field, dropped next) then records nothing.
            let this = this.project();
            if this.attempt.is_some() {
                cancelled(this.execution, this.guards, this.attempt);
            }
        }
    }
}

impl<'e, 'p, S, H, Fut> Direct<'e, 'p, S, H, Fut> {
    #[inline]
    pub(super) fn new(
        execution: &'e mut Execution<'p, S, H>,
        guards: &'p Guards,
        attempt: Fut,
        phase: Phase,
    ) -> Self {
        Direct { execution, guards, phase, permit: None, attempt: Some(attempt), timer: None, turn: None }
    }
}

impl<T, E, S, H, Fut> Future for Direct<'_, '_, S, H, Fut>
where
    Fut: Future<Output = Result<T, E>>,
    H: ErrorHandling<E>,
    S: LastError<E>,
{
    type Output = Step<T, E>;

    // Only the success path is inline: everything else is out of line.
    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Step<T, E>> {
        let mut this = self.project();
        if *this.phase != Phase::Running {
            // Admission, which loops once when the rate limit has no turn
            // free: the turn is waited for (out of line), and only the
            // breaker is asked again.
            loop {
                if *this.phase != Phase::Admitting {
                    if *this.phase != Phase::AdmittingTimed {
                        if *this.phase == Phase::Turn {
                            match poll_turn(
                                this.execution,
                                this.guards,
                                (this.phase, this.permit, this.turn),
                                this.timer.as_mut(),
                                this.attempt.as_mut(),
                                cx,
                            ) {
                                Poll::Ready(None) => break,
                                Poll::Ready(Some(step)) => return Poll::Ready(step),
                                Poll::Pending => return Poll::Pending,
                            }
                        }
                        // Backing off after this attempt, or waiting before it.
                        match poll_wait(this.execution, this.timer.as_mut(), this.phase, cx) {
                            Poll::Ready(Some(step)) => return Poll::Ready(step),
                            Poll::Ready(None) => {}
                            Poll::Pending => return Poll::Pending,
                        }
                    }
                    if *this.phase == Phase::AdmittingTimed {
                        arm_timeout(this.execution, this.timer.as_mut());
                    }
                }
                // The place, if any, is held already (see the module docs).
                match admit_holding_place(this.guards) {
                    Ok(permit) => {
                        *this.permit = permit;
                        *this.phase = Phase::Running;
                        break;
                    }
                    Err(Some(refusal)) => {
                        *this.phase = Phase::Finished;
                        return Poll::Ready(refused(this.execution, this.guards, this.attempt, refusal));
                    }
                    Err(None) => *this.phase = Phase::Turn,
                }
            }
            this.execution.begin_attempt(this.guards);
        }
        let execution = &mut **this.execution;
        // One call of `poll_in` (so that it inlines), with the call's key
        // and span, or none.
        let mut no_key = None;
        let (key, span) = match &mut execution.more {
            Some(more) => (&mut more.key, more.span.as_ref()),
            None => (&mut no_key, None),
        };
        let (class, error) = match context::poll_in(key, span, this.attempt.as_mut(), cx) {
            Poll::Pending if this.timer.is_none() => return Poll::Pending,
            Poll::Pending => match poll_timer(execution, this.timer.as_mut(), this.attempt.as_mut(), cx) {
                None => return Poll::Pending,
                Some(Fired::TimedOut(class, error)) => (Some(class), error),
                Some(Fired::Cut) => {
                    *this.phase = Phase::Finished;
                    return Poll::Ready(cut(execution, this.guards, this.permit.take()));
                }
            },
            Poll::Ready(Ok(value)) => {
                give_back_place(this.guards);
                answered(this.guards, None, Answer::Success);
                succeeded(this.guards, this.permit.take());
                *this.phase = Phase::Finished;
                return Poll::Ready(Step::Done(Ok(value)));
            }
            Poll::Ready(Err(error)) => (None, error),
        };
        match failed(execution, this.guards, this.permit.take(), class, error) {
            Next::Done(step) => {
                *this.phase = Phase::Finished;
                Poll::Ready(step)
            }
            Next::BackOff(wait) => {
                this.timer.set(Some(sleep(wait)));
                *this.phase = Phase::BackingOff;
                match poll_wait(execution, this.timer, this.phase, cx) {
                    Poll::Ready(step) => Poll::Ready(step.unwrap_or(Step::Retry)),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

/// The attempt is over (it ended, was refused or was dropped): the
/// bulkhead place it held from its making, if the call has a bulkhead, goes
/// back. The one place the direct path's place rule is carried out.
#[inline]
pub(super) fn give_back_place(guards: &Guards) {
    if let Some(bulkhead) = &guards.bulkhead {
        bulkhead.give_back_place();
    }
}

/// Gives the attempt's place back (see [`give_back_place`]) as it drops:
/// held across user code that ends an attempt (its future's drop, the
/// error's classification), so that the place goes back even if that code
/// panics, as a `BulkheadPermit` would on the general path.
pub(super) struct PlaceBack<'g>(pub(super) &'g Guards);

impl Drop for PlaceBack<'_> {
    #[inline]
    fn drop(&mut self) {
        give_back_place(self.0);
    }
}

/// The attempt was cancelled before it finished: it is dropped in its
/// context, and its bulkhead place given back.
#[inline(never)]
fn cancelled<S, H, Fut>(
    execution: &mut Execution<'_, S, H>,
    guards: &Guards,
    attempt: Pin<&mut Option<Fut>>,
) {
    let _place_back = PlaceBack(guards);
    drop_in_context(execution, attempt);
}

/// Drops an attempt that has not finished, in its context (its key and span).
#[inline]
fn drop_in_context<S, H, Fut>(execution: &mut Execution<'_, S, H>, attempt: Pin<&mut Option<Fut>>) {
    match &mut execution.more {
        None => context::drop_in(&mut None, None, attempt),
        Some(more) => context::drop_in(&mut more.key, more.span.as_ref(), attempt),
    }
}

/// The throttle or the breaker refused the attempt: it is dropped without
/// running, and the call ends (see `cannot_run`).
#[cold]
#[inline(never)]
fn refused<T, E, S, H, Fut>(
    execution: &mut Execution<'_, S, H>,
    guards: &Guards,
    mut attempt: Pin<&mut Option<Fut>>,
    refusal: Refusal,
) -> Step<T, E>
where
    H: ErrorHandling<E>,
    S: LastError<E>,
{
    // Dropped now, as `attempt_with` drops an attempt it never makes, and
    // its place given back.
    attempt.set(None);
    give_back_place(guards);
    Step::Done(Err(execution.cannot_run(refusal)))
}

/// What follows a failed attempt on the direct path.
pub(super) enum Next<T, E> {
    Done(Step<T, E>),
    /// Wait this long, then retry.
    BackOff(Duration),
}

/// The attempt failed with `error`, of `class` when the runtime made it
/// (else its handling classifies it): record it, then plan the retry or
/// end the call.
#[inline(never)]
pub(super) fn failed<T, E, S, H>(
    execution: &mut Execution<'_, S, H>,
    guards: &Guards,
    permit: Option<BreakerPermit<'_>>,
    class: Option<ErrorClass>,
    error: E,
) -> Next<T, E>
where
    H: ErrorHandling<E>,
    S: LastError<E>,
{
    let place_back = PlaceBack(guards);
    let class = class.unwrap_or_else(|| execution.handling.class(&error));
    drop(place_back);
    answered(guards, None, Answer::Failed(class));
    record(permit, outcome_of(class));
    match execution.after_failure(class, error) {
        Err(error) => Next::Done(Step::Done(Err(error))),
        // A zero wait is no wait (see `attempt_with`).
        Ok(wait) if wait.is_zero() => Next::Done(Step::Retry),
        Ok(wait) => Next::BackOff(wait),
    }
}
