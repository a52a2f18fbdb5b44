//! A rate-limit turn on the direct path, when the fast try found none.
//!
//! As on the general path (`admit_after`), the attempt waits holding no
//! breaker permission, for at most the limit's `max_wait` and never past
//! the deadline; then the breaker is asked again. The wait is the general
//! path's own future (`turn_within`), boxed: it is rare, and would make
//! every direct attempt larger. A call whose rate limit may wait takes this
//! path only without a bulkhead (see `Guards::direct`): the general path
//! serves a call with both.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::time::Sleep;

use super::timer::arm_timeout;
use super::{Phase, refused};
use crate::breaker::BreakerPermit;
use crate::error::ErrorHandling;
use crate::execution::admission::{Refusal, admit_breaker, turn_within};
use crate::execution::{Execution, LastError, Step};
use crate::guards::Guards;

/// A rate-limit turn being waited for (`Sync`, as the rest of the call's
/// future may be).
pub(super) type TurnWait<'p> = Pin<Box<dyn Future<Output = Result<(), Refusal>> + Send + Sync + 'p>>;

/// Waits for the turn (started at the first call), then asks the breaker
/// again: once it admits the attempt, its permission is in `permit`, the
/// attempt's timeout (and the deadline) armed from now and the phase
/// `Running` (`Ready(None)`); when the wait or the breaker refused it, the
/// phase is `Finished` with the step that ends the call.
#[cold]
#[inline(never)]
pub(super) fn poll_turn<'p, T, E, S, H, Fut>(
    execution: &mut Execution<'p, S, H>,
    guards: &'p Guards,
    (phase, permit, turn): (&mut Phase, &mut Option<BreakerPermit<'p>>, &mut Option<TurnWait<'p>>),
    timer: Pin<&mut Option<Sleep>>,
    attempt: Pin<&mut Option<Fut>>,
    cx: &mut Context<'_>,
) -> Poll<Option<Step<T, E>>>
where
    H: ErrorHandling<E>,
    S: LastError<E>,
{
    let wait = match turn {
        Some(wait) => wait,
        None => match guards.rate_limit.as_deref() {
            Some(limit) => turn.insert(Box::pin(turn_within(limit, execution.turn_deadline()))),
            // Not reached (only a rate limit has turns): nothing to wait for.
            None => turn.insert(Box::pin(std::future::ready(Ok(())))),
        },
    };
    let waited = ready!(wait.as_mut().poll(cx));
    *turn = None;
    match waited.and_then(|()| admit_breaker(guards)) {
        Ok(admitted) => {
            // Armed again, if it was as the attempt was admitted: the wait
            // is not the attempt's time.
            if execution.attempts_are_timed() {
                arm_timeout(execution, timer);
            }
            *permit = admitted;
            *phase = Phase::Running;
            Poll::Ready(None)
        }
        Err(refusal) => {
            *phase = Phase::Finished;
            Poll::Ready(Some(refused(execution, guards, attempt, refusal)))
        }
    }
}
