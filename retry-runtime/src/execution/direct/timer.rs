//! The direct path's one timer: a running attempt's timeout or the call's
//! deadline (the earlier of the two), then the backoff after it fails, or
//! the wait a plain first attempt's failure planned before it (see the
//! parent module).

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::time::{Sleep, sleep, sleep_until};

use super::{Phase, drop_in_context, give_back_place};
use crate::breaker::{BreakerPermit, Outcome};
use crate::classify::ErrorClass;
use crate::error::ErrorHandling;
use crate::execution::outcome::{Answer, answered, record};
use crate::execution::{Execution, Step};
use crate::guards::Guards;

/// An attempt with a timeout or a deadline is about to be admitted: the
/// earlier of the two is armed now, as the breaker is asked (which never
/// waits), and a refused attempt drops it unfired. A timeout too long to
/// arm is no timeout (as on the general path).
#[inline(never)]
pub(super) fn arm_timeout<S, H>(execution: &Execution<'_, S, H>, mut timer: Pin<&mut Option<Sleep>>) {
    if let Some((end, _)) = execution.attempt_limit() {
        timer.set(Some(sleep_until(end)));
    }
}

/// What the timer of a running attempt said when it fired.
pub(super) enum Fired<E> {
    /// The attempt's own timeout passed first: its error and class.
    TimedOut(ErrorClass, E),
    /// The call's deadline passed (first, or with the timeout).
    Cut,
}

/// The attempt is pending under its timeout or the deadline: if the timer
/// has fired, the attempt is dropped (cancelled) in its context. A timeout
/// gives the error `AttemptTimeout`, which `failed` then records and
/// decides on as any other error; the deadline ends the call (see [`cut`]).
/// The attempt is polled before the timer, so one that finishes as the
/// timer fires counts (the rule of a timer beside a running attempt: see
/// the `execution` module).
#[inline(never)]
pub(super) fn poll_timer<E, S, H, Fut>(
    execution: &mut Execution<'_, S, H>,
    timer: Pin<&mut Option<Sleep>>,
    attempt: Pin<&mut Option<Fut>>,
    cx: &mut Context<'_>,
) -> Option<Fired<E>>
where
    H: ErrorHandling<E>,
{
    let mut timer = timer.as_pin_mut()?;
    if timer.as_mut().poll(cx).is_pending() {
        return None;
    }
    drop_in_context(execution, attempt);
    // Armed at `attempt_limit`'s instant, which is the deadline exactly
    // when the deadline is what cuts the attempt short.
    if execution.deadline().is_some_and(|deadline| timer.deadline() >= deadline) {
        return Some(Fired::Cut);
    }
    let after = execution.settings().attempt_timeout.unwrap_or_default();
    let (class, error) = execution.timed_out(after);
    Some(Fired::TimedOut(class, error))
}

/// The deadline cut the running attempt short (it is dropped): its place
/// goes back, the breaker hears a failure, and the call ends with
/// `DeadlineExceeded`, as on the general path.
#[cold]
#[inline(never)]
pub(super) fn cut<T, E, S, H>(
    execution: &mut Execution<'_, S, H>,
    guards: &Guards,
    permit: Option<BreakerPermit<'_>>,
) -> Step<T, E>
where
    H: ErrorHandling<E>,
{
    give_back_place(guards);
    answered(guards, None, Answer::Cut);
    record(permit, Outcome::Failure);
    Step::Done(Err(execution.deadline_cut()))
}

/// Waits out `timer`: the backoff after this attempt (then the step is
/// over and the loop retries: `Some(Step::Retry)`), or the wait a plain
/// first attempt's failure planned before this one (armed here at the first
/// poll; then the attempt is to be admitted: `None`, and the phase is the
/// admitting one).
#[inline(never)]
pub(super) fn poll_wait<T, E, S, H>(
    execution: &mut Execution<'_, S, H>,
    mut timer: Pin<&mut Option<Sleep>>,
    phase: &mut Phase,
    cx: &mut Context<'_>,
) -> Poll<Option<Step<T, E>>> {
    match *phase {
        Phase::BackingOff => {}
        Phase::Waiting => {
            if timer.is_none() {
                let wait =
                    execution.more.as_mut().and_then(|more| more.pending_wait.take()).unwrap_or_default();
                timer.set(Some(sleep(wait)));
            }
        }
        _ => panic!("an attempt polled after it finished"),
    }
    let Some(sleep) = timer.as_mut().as_pin_mut() else {
        panic!("a wait without its timer");
    };
    ready!(sleep.poll(cx));
    if *phase == Phase::BackingOff {
        *phase = Phase::Finished;
        return Poll::Ready(Some(Step::Retry));
    }
    timer.set(None);
    *phase = if execution.attempts_are_timed() { Phase::AdmittingTimed } else { Phase::Admitting };
    Poll::Ready(None)
}
