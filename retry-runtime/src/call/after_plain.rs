//! A plain call's first attempt failed (see `plain`): the call is built as
//! the plain call it was, having made that attempt, and the failure is
//! recorded and decided on as any other's.

use super::parts::Parts;
use super::per_key::{CallTarget, preset};
use super::plain::{Failed, Holding, PlainFailure};
use super::{Call, LastError, Started, Step};
use crate::error::ErrorHandling;
use crate::guard::Answer;
use crate::guards::Shape;

impl<'p, S, H, V: Shape> Call<'p, S, H, V> {
    /// A plain call's first attempt failed: the call is built into `slot`
    /// (by `parts`) as the plain call it was, having made that attempt, and
    /// the failure recorded and decided on as any other's. The step: the
    /// call's end, or a retry, whose backoff the next attempt waits out
    /// before it is admitted.
    #[cold]
    #[inline(never)]
    pub fn after_plain<T, E, P, W>(
        slot: &mut Option<Self>,
        target: impl CallTarget<'p>,
        parts: P,
        failure: PlainFailure<'p, E, W>,
    ) -> Step<T, E>
    where
        W: Shape,
        P: Parts<S, H>,
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        let PlainFailure { holding, failed, deadline, started } = failure;
        let call = Self::built_after_plain(slot, target, parts);
        if deadline.is_some() {
            call.rare().deadline = deadline;
        }
        // The hook's elapsed time counts from the first attempt's start:
        // when it first waited, or (answered at its first poll) now.
        if call.policy.hooks().on_stop.is_some() {
            call.rare().started_at = Some(started.unwrap_or_else(tokio::time::Instant::now));
        }
        let (class, error) = match failed {
            // The permits stay held while the error is classified (user
            // code, which may panic: then they are handed back, counting
            // nothing).
            Failed::Error(error) => (call.handling.class(&error), error),
            // Recorded and decided on as any attempt timeout is (see `timed_out`).
            Failed::TimedOut(after) => call.timed_out(after),
            Failed::Cut => return call.first_cut(holding),
        };
        call.after_first_failure(holding, class, error)
    }

    /// The call of a plain first attempt that failed, built into `slot`.
    #[inline(always)]
    fn built_after_plain<P: Parts<S, H>>(
        slot: &mut Option<Self>,
        target: impl CallTarget<'p>,
        parts: P,
    ) -> &mut Self
    where
        S: Default,
    {
        let (policy, preset) = (target.policy(), preset(target));
        let (key, last, handling) = parts.make();
        let call = slot.insert(Call::shaped(policy, None, last, handling));
        // A call that started plain with a key keeps it where every attempt
        // after the first finds it (a call that does not start plain moves
        // it there as it starts: `start_general`).
        if key.is_some() {
            call.rare().key = key;
        }
        // The guards the attempt was admitted by: its key's, or the global
        // registry's, as a plain call's always are (see `plain_guards`),
        // found again without asking for a scope: one entered since (a
        // future first polled outside it, or made by a tower service
        // outside it) must not give the rest of the call other guards.
        call.cached = Some(preset.unwrap_or_else(|| policy.global_guards_again()));
        call.max_attempts = policy.compiled_settings().max_attempts;
        call.attempts = 1;
        call.started = Started::Plain;
        call
    }

    /// The call's deadline cut a plain first attempt short: recorded with
    /// what it held as any cut attempt is, and the call ends with
    /// `DeadlineExceeded` (as `Call::cut` ends one that is not plain).
    #[cold]
    fn first_cut<T, E, W: Shape>(&mut self, mut holding: Holding<'p, W>) -> Step<T, E>
    where
        H: ErrorHandling<E>,
    {
        if let Some(permits) = holding.permits.take() {
            W::held_view(holding.held).record(permits, Answer::Cut);
        }
        let error = self.deadline_cut();
        self.end();
        Step::Done(Err(error))
    }

    /// A plain first attempt's failure of `class`, recorded with what it
    /// held and decided on: the wait before the next attempt, or the end.
    #[inline(always)]
    fn after_first_failure<T, E, W: Shape>(
        &mut self,
        mut holding: Holding<'p, W>,
        class: crate::classify::ErrorClass,
        error: E,
    ) -> Step<T, E>
    where
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        let call = self;
        if let Some(permits) = holding.permits.take() {
            W::held_view(holding.held).record(permits, Answer::Failed(class));
        }
        let step = match call.after_failure(class, error) {
            Err(error) => Step::Done(Err(error)),
            // A zero wait is no wait (see `Call::failed`).
            Ok(wait) if wait.is_zero() => Step::Retry,
            Ok(wait) => {
                call.rare().backoff = Some(wait);
                Step::Retry
            }
        };
        if matches!(step, Step::Done(_)) {
            call.end();
        }
        step
    }
}
