//! A plain call's first attempt through the tower layer: admitted as the
//! request is called, answered in the layer's response future, and, if it
//! fails (or reaches its attempt timeout or the call's deadline), the rest
//! of the call built and driven as [`run`](super::run) drives one.

use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use super::{ByTransport, Failure, Transport, drive, ended, finish};
use crate::call::{Failed, FirstAttempt, FirstPermits, Kept, Step, Unkeyed};
use crate::http::attempts::Attempts;
use crate::policy::Policy;

/// A plain call's first attempt of `request` (see `call::owned`): a copy of
/// the request to send, and the permits the guards gave it; `None` when
/// the call is not plain (the request has a key or may not be sent twice,
/// the policy allows one attempt, the body cannot be copied, or the call
/// is not plain for the loop: see `Call::plain`). Then [`run`](super::run) serves it.
#[inline(always)]
pub(crate) fn first_of_plain<T: Transport>(
    policy: &Arc<Policy>,
    request: &T::Request,
) -> Option<(T::Request, FirstPermits, bool)> {
    let plan = T::plan(request);
    // A request with a priority of its own is admitted by the general path,
    // which asks the guards with it.
    if !plan.retry
        || plan.key.is_some()
        || plan.priority.is_some()
        || policy.compiled_settings().max_attempts < 2
    {
        return None;
    }
    let copy = T::try_copy(request)?;
    let settings = policy.compiled_settings();
    if settings.attempt_timeout.is_none() && settings.deadline.is_none() {
        return Some((copy, FirstPermits::admit(policy)?, false));
    }
    // Raced with a timer of the response future's own (see `FirstFailed::limit_reached`).
    Some((copy, FirstPermits::admit_timed(policy)?, true))
}

/// The answer to a plain call's first attempt (see [`first_of_plain`]):
/// `Ok` with the caller's response when it succeeded (recorded), else what
/// [`after_first`] needs to go on.
pub(crate) fn first_answered<T: Transport, Fut>(
    answer: Result<T::Response, T::Error>,
    attempt: Pin<&mut FirstAttempt<Fut>>,
) -> Result<T::Response, FirstFailed<T>> {
    let failure = match answer {
        Ok(response) => match T::response_class(&response) {
            None => {
                attempt.succeeded();
                return Ok(finish::<T>(response, Attempts::new(1)));
            }
            Some(class) => FirstFailed {
                permits: attempt.failed(),
                failure: Failed::Error(Failure::Response(class)),
                failed: Some(response),
                deadline: None,
                started: None,
            },
        },
        Err(error) => FirstFailed {
            permits: attempt.failed(),
            failure: Failed::Error(Failure::Error(error)),
            failed: None,
            deadline: None,
            started: None,
        },
    };
    Err(failure)
}

/// A plain call's first attempt failed: its permits, its failure and the
/// failed response, if that was the failure.
pub(crate) struct FirstFailed<T: Transport> {
    permits: FirstPermits,
    failure: Failed<Failure<T::Error>>,
    failed: Option<T::Response>,
    /// The call's deadline, for a call that has one (see `started_at`).
    deadline: Option<tokio::time::Instant>,
    /// When the attempt started, for a timed one (see `started_at`).
    started: Option<tokio::time::Instant>,
}

impl<T: Transport> FirstFailed<T> {
    /// The first attempt `permits` admitted, started at `started`, reached
    /// one of the policy's limits (which `first_of_plain` raced it with):
    /// its attempt timeout, or the call's deadline.
    pub(crate) fn limit_reached(permits: FirstPermits, started: tokio::time::Instant) -> Self {
        let limits = crate::call::FirstLimits::of(permits.policy().compiled_settings());
        let (failure, deadline) = (limits.failed(started), limits.deadline_at(started));
        FirstFailed { permits, failure, failed: None, deadline, started: Some(started) }
    }

    /// This failure of a first attempt started at `started` (`None`: the
    /// policy sets no limit), carrying the call's deadline on, if it has one.
    pub(crate) fn started_at(mut self, started: Option<tokio::time::Instant>) -> Self {
        self.started = started;
        self.deadline = started.and_then(|started| {
            crate::call::FirstLimits::of(self.permits.policy().compiled_settings()).deadline_at(started)
        });
        self
    }
}

/// The rest of a plain call whose first attempt failed (with an error, a
/// failed response, or its timeout): the failure is recorded and decided
/// on as any plain call's (`Call::after_plain`), then
/// the call goes on as [`run`]'s does, with `original` for the attempts
/// after.
pub(crate) async fn after_first<T: Transport>(
    first: FirstFailed<T>,
    mut transport: T,
    original: T::Request,
) -> Result<T::Response, T::Error> {
    let FirstFailed { permits, failure, failed, deadline, started } = first;
    let policy = Arc::clone(permits.policy());
    let mut slot = None;
    let parts = Unkeyed(|| (Kept::default(), ByTransport::<T>(PhantomData)));
    match permits.failed(&mut slot, &policy, parts, failure, deadline, started) {
        Step::Done(result) => ended::<T>(result, failed, Attempts::new(1)),
        Step::Retry => match slot.as_mut() {
            Some(call) => drive(call, &mut transport, original, failed).await,
            None => unreachable!("a plain call's failure built no call"),
        },
    }
}
