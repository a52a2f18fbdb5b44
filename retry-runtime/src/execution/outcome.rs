//! Recording an attempt's outcome in every guard that hears of it, and the
//! step that follows: the wait before the next attempt, or the end of the call.

use std::time::Duration;

use super::admission::{Admitted, Refusal};
use super::{Execution, LastError, Step};
use crate::breaker::{BreakerPermit, Outcome};
use crate::bulkhead::BulkheadPermit;
use crate::classify::{Classify, ErrorClass};
use crate::decision::{Decision, decide};
use crate::error::ErrorHandling;
use crate::guards::Guards;
use crate::observe;
use crate::rejection::Rejection;

/// What the breaker hears of an attempt that ended with an error of
/// `class`: transient and throttled errors are failures; conflicts and
/// permanent errors say nothing about the dependency's health.
#[inline]
pub(super) fn outcome_of(class: ErrorClass) -> Outcome {
    if class.is_failure() { Outcome::Failure } else { Outcome::Neutral }
}

/// Tells the breaker (if any) how the attempt ended.
#[inline]
pub(super) fn record(permit: Option<BreakerPermit<'_>>, outcome: Outcome) {
    if let Some(permit) = permit {
        permit.record(outcome);
    }
}

/// An admitted attempt begins: the first of a call tells the budget a call
/// began (a ratio budget's share is of first attempts).
#[inline]
pub(super) fn first_attempt_began(guards: &Guards) {
    if let Some(budget) = &guards.budget {
        budget.on_first_attempt();
    }
}

/// An attempt succeeded: the breaker hears it, and a token bucket gets a
/// token back. Every path records a success through here.
#[inline]
pub(super) fn succeeded(guards: &Guards, permit: Option<BreakerPermit<'_>>) {
    record(permit, Outcome::Success);
    if let Some(budget) = &guards.budget {
        budget.deposit();
    }
}

/// How the guarded part of an attempt ended.
pub(super) enum Guarded<T, E> {
    /// The attempt ran to completion.
    Ran(Result<T, E>),
    /// The attempt's own timeout cancelled it.
    TimedOut(Duration),
    /// The call's deadline cancelled the running attempt.
    Cut,
}

/// How an attempt ended, as the guards other than the breaker hear it.
#[derive(Clone, Copy)]
pub(super) enum Answer {
    Success,
    Failed(ErrorClass),
    /// The deadline cut it short: it says nothing either way.
    Cut,
}

/// Tells the throttle and the bulkhead how an attempt ended.
///
/// The throttle counts the request, and an accept for an answer that is
/// not overload (a success, a conflict, a permanent error: the breaker's
/// non-failures). An
/// adaptive bulkhead takes the attempt's latency as a sample, and treats
/// every retryable error as an overload signal: conflicts too, since
/// fewer attempts at once mean fewer of them.
///
/// Inline, and nothing but two checks when neither guard is there: the
/// work is out of line.
#[inline]
pub(super) fn answered(guards: &Guards, bulkhead: Option<BulkheadPermit<'_>>, answer: Answer) {
    if let Some(permit) = bulkhead {
        finish(permit, answer);
    }
    if guards.throttle.is_some() {
        accept(guards, answer);
    }
}

#[inline(never)]
fn finish(permit: BulkheadPermit<'_>, answer: Answer) {
    match answer {
        Answer::Success => permit.finish(false),
        Answer::Failed(class) => permit.finish(class.is_retryable()),
        // Given back without a sample: a cut attempt says nothing of latency.
        Answer::Cut => drop(permit),
    }
}

#[inline(never)]
fn accept(guards: &Guards, answer: Answer) {
    let accepted = match answer {
        Answer::Success => true,
        Answer::Failed(class) => !class.is_failure(),
        // Sent, and no answer within the deadline: not an accept.
        Answer::Cut => false,
    };
    if let Some(throttle) = &guards.throttle {
        throttle.answered(accepted);
    }
}

impl<S, H> Execution<'_, S, H> {
    /// Recording and deciding, on the general path: the wait before the next attempt,
    /// or the step that ends the call.
    pub(super) fn settle<T, E>(
        &mut self,
        admitted: Admitted<'_>,
        guards: &Guards,
        guarded: Guarded<T, E>,
    ) -> Result<Duration, Step<T, E>>
    where
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        let Admitted { breaker: permit, bulkhead } = admitted;
        let (class, error) = match guarded {
            Guarded::Ran(Ok(value)) => {
                answered(guards, bulkhead, Answer::Success);
                succeeded(guards, permit);
                return Err(Step::Done(Ok(value)));
            }
            Guarded::Cut => {
                answered(guards, bulkhead, Answer::Cut);
                record(permit, Outcome::Failure);
                return Err(Step::Done(Err(self.deadline_cut())));
            }
            Guarded::TimedOut(after) => self.timed_out(after),
            Guarded::Ran(Err(error)) => (self.handling.class(&error), error),
        };
        answered(guards, bulkhead, Answer::Failed(class));
        record(permit, outcome_of(class));
        self.after_failure(class, error).map_err(|error| Step::Done(Err(error)))
    }

    /// The attempt timed out after `after`: the error `AttemptTimeout` made
    /// into `E`, and its class as a rejection, transient. Not the class a
    /// `classify` function gives that `E`: such a function is written for
    /// the dependency's errors, and one whose catch-all says permanent
    /// would make timeouts final and neutral to the breaker.
    #[cold]
    pub(super) fn timed_out<E>(&self, after: Duration) -> (ErrorClass, E)
    where
        H: ErrorHandling<E>,
    {
        let rejection = Rejection::AttemptTimeout { after };
        (rejection.classify(), self.handling.reject(rejection))
    }

    /// Step 5: after a failed attempt whose outcome is recorded, the wait
    /// before the next attempt (keeping the error meanwhile), or the error
    /// that ends the call. The wait is the one decided, less the lead the
    /// error's handling asks for the next attempt (see [`take_lead`](Self::take_lead)).
    #[inline]
    pub(super) fn after_failure<E>(&mut self, class: ErrorClass, error: E) -> Result<Duration, E>
    where
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        match decide(class, self.attempts, self.max_attempts, self) {
            Decision::Retry(wait) => {
                observe::retry(self.policy.operation(), self.attempts, wait, class.label());
                #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
                let wait = self.take_lead(wait, &error);
                self.more().last.keep(error);
                Ok(wait)
            }
            Decision::Stop(reason) => {
                observe::stop(self.policy.operation(), self.attempts, reason.label());
                Err(error)
            }
        }
    }

    /// The part of `wait`, the wait decided after `error`, to wait before
    /// the next attempt is admitted: all of it, unless the error's handling
    /// asks for a lead (see `ErrorHandling::lead`; at most the whole wait).
    /// Then the retry is due when `wait` ends, and its attempt waits out the
    /// lead itself, after its own work ([`take_retry_due`](Self::take_retry_due)):
    /// the wait is the same, the work inside it. A wait beyond the horizon
    /// takes no lead.
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    #[inline(always)]
    fn take_lead<E>(&mut self, wait: Duration, error: &E) -> Duration
    where
        H: ErrorHandling<E>,
        S: Default,
    {
        let lead = self.handling.lead(error, self.settings().attempt_timeout);
        if lead.is_zero() {
            return wait;
        }
        let Some(due) = crate::clock::instant_after(wait) else {
            return wait;
        };
        self.more().due = Some(due);
        wait - lead.min(wait)
    }

    /// When the retry about to be made is due to send its request, if the
    /// failure before it asked for a lead (see [`take_lead`](Self::take_lead)):
    /// the end of the wait decided, of which the loop waited only the part
    /// before the lead. Taken: asked once, by that retry.
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    pub(crate) fn take_retry_due(&mut self) -> Option<tokio::time::Instant> {
        self.more.as_mut().and_then(|more| more.due.take())
    }

    /// The deadline cut the running attempt short (its outcome recorded):
    /// the call ends with `DeadlineExceeded`.
    pub(super) fn deadline_cut<E>(&mut self) -> E
    where
        H: ErrorHandling<E>,
    {
        let refusal = self.deadline_refusal();
        observe::stop(self.policy.operation(), self.attempts, refusal.reason.label());
        self.handling.reject(refusal.rejection)
    }

    /// The next attempt could not run: the call ends with the last error
    /// an attempt produced, or, when none ran, with the refusal's rejection.
    #[cold]
    pub(super) fn cannot_run<E>(&mut self, refusal: Refusal) -> E
    where
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        observe::stop(self.policy.operation(), self.attempts, refusal.reason.label());
        // A retry whose budget withdrawal the decision took (see
        // `decision`) did not run: it gives back what it took, and the
        // budget pays only for retries that happen.
        if let Some(more) = &mut self.more {
            more.give_back_withdrawn();
        }
        match self.more.as_mut().and_then(|more| more.last.take()) {
            Some(error) => error,
            None => self.handling.reject(refusal.rejection),
        }
    }
}
