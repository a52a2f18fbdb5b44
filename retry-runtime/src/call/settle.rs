//! After an attempt: its outcome recorded in every guard (the guard set's
//! one recording function), then the decision (`decision::decide`, which
//! the simulator calls too): the wait before the next attempt, or the end
//! of the call and why.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

use super::{Call, LastError, Step};
use crate::classify::{Classify, ErrorClass};
use crate::decision::{Decision, decide};
use crate::error::ErrorHandling;
use crate::guard::Answer;
use crate::guards::{Guards, Shape, ShapedPermits, narrow, widen};
use crate::hooks::{RetryEvent, StopEvent};
use crate::observe;
use crate::rejection::Rejection;
use crate::stop::{StopReason, Stopped};

/// What follows a failed attempt.
pub(super) enum Next<T, E> {
    /// The step is over with this.
    Done(Step<T, E>),
    /// Wait this long, then retry.
    BackOff(Duration),
}

impl<S, H, V: Shape> Call<'_, S, H, V> {
    /// The attempt failed with `error`, of `class` when the runtime made it
    /// (a timeout; else the handling classifies it): recorded, then the
    /// retry planned or the call ended. The permits stay with the attempt
    /// while the error is classified (user code, which may panic: the
    /// attempt's drop then hands them back).
    #[inline(never)]
    pub(super) fn failed<T, E>(
        &mut self,
        permits: &mut Option<ShapedPermits<V>>,
        sent: Option<&OnceLock<Instant>>,
        class: Option<ErrorClass>,
        error: E,
    ) -> Next<T, E>
    where
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        let class = class.unwrap_or_else(|| self.handling.class(&error));
        if let Some(permits) = permits.take() {
            let guards = self.guards_ref();
            guards.view::<V>().record(measured::<V>(permits, sent, guards), Answer::Failed(class));
        }
        match self.after_failure(class, error) {
            Err(error) => Next::Done(Step::Done(Err(error))),
            // A zero wait is no wait: `sleep(ZERO)` would still arm a timer,
            // and in real time last until the timer's next tick (~1 ms).
            Ok(wait) if wait.is_zero() => Next::Done(Step::Retry),
            Ok(wait) => Next::BackOff(wait),
        }
    }

    /// The deadline cut the running attempt short (it is dropped): the
    /// guards hear it, and the call ends with `DeadlineExceeded`.
    #[cold]
    #[inline(never)]
    pub(super) fn cut<T, E>(
        &mut self,
        permits: Option<ShapedPermits<V>>,
        sent: Option<&OnceLock<Instant>>,
    ) -> Step<T, E>
    where
        H: ErrorHandling<E>,
    {
        if let Some(permits) = permits {
            let guards = self.guards_ref();
            guards.view::<V>().record(measured::<V>(permits, sent, guards), Answer::Cut);
        }
        Step::Done(Err(self.deadline_cut()))
    }

    /// The attempt timed out after `after`: the error `AttemptTimeout` made
    /// into `E`, and its class as a rejection, transient. Not the class a
    /// `classify` function gives that `E`: such a function is written for
    /// the dependency's errors, and one whose catch-all says permanent
    /// would make timeouts final and neutral to the breaker.
    #[cold]
    pub(super) fn timed_out<E>(&mut self, after: Duration) -> (ErrorClass, E)
    where
        H: ErrorHandling<E>,
        S: Default,
    {
        self.rare().timed_out = true;
        let rejection = Rejection::AttemptTimeout { after };
        (rejection.classify(), self.handling.reject(rejection))
    }

    /// After a failed attempt whose outcome is recorded, the wait before
    /// the next attempt (keeping the error meanwhile), or the error that
    /// ends the call. The wait is the one decided, less the lead the error's
    /// handling asks for the next attempt (see `take_lead`).
    #[inline]
    pub(super) fn after_failure<E>(&mut self, class: ErrorClass, error: E) -> Result<Duration, E>
    where
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        self.forget_spent();
        if self.started == super::Started::Plain && self.policy.may_be_overridden() {
            self.adopt_override();
        }
        let decision = decide(class, self.attempts, self.max_attempts, self);
        // Read by the decision's budget question: this failure's alone.
        if let Some(rare) = &mut *self.rare {
            rare.timed_out = false;
        }
        match decision {
            Decision::Retry(wait) => {
                observe::retry(self.policy.operation(), self.attempts, wait, class.label());
                if let Some(hook) = &self.policy.hooks().on_retry {
                    let error = self.handling.view(&error);
                    let (operation, attempt) = (self.policy.operation(), self.attempts);
                    hook.tell(&RetryEvent { operation, attempt, class, wait, error });
                }
                #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
                let wait = self.take_lead(wait, &error);
                self.rare().last.keep(error);
                Ok(wait)
            }
            Decision::Stop(reason) => Err(self.give_up(reason, error)),
        }
    }

    /// The call ends with `error`, the last attempt's, for `reason`: told
    /// to the trace, the metrics and the `on_stop` hook, and, when a guard
    /// or the deadline stopped the retries rather than the operation's own
    /// answer, marked with why (see [`Stopped`]).
    #[cold]
    #[inline(never)]
    fn give_up<E>(&mut self, reason: StopReason, error: E) -> E
    where
        H: ErrorHandling<E>,
    {
        self.tell_stop(reason);
        if Stopped::stopped_early(reason) {
            self.handling.stopped(error, Stopped::new(reason, self.attempts))
        } else {
            error
        }
    }

    /// Tells the trace, the metrics and the `on_stop` hook that the call
    /// gives up for `reason`.
    #[cold]
    fn tell_stop(&self, reason: StopReason) {
        observe::stop(self.policy.operation(), self.attempts, reason.label(), self.priority().name());
        if let Some(hook) = &self.policy.hooks().on_stop {
            let started_at = self.rare.as_ref().and_then(|rare| rare.started_at);
            let elapsed = started_at.map(|at| at.elapsed()).unwrap_or_default();
            let (operation, attempts) = (self.policy.operation(), self.attempts);
            hook.tell(&StopEvent { operation, attempts, reason, elapsed });
        }
    }

    /// The part of `wait`, the wait decided after `error`, to wait before
    /// the next attempt is admitted: all of it, unless the error's handling
    /// asks for a lead (see `ErrorHandling::lead`; at most the whole wait).
    /// Then the retry is due when `wait` ends, and its attempt waits out the
    /// lead itself, after its own work (`take_retry_due`): the wait is the
    /// same, the work inside it. A wait beyond the horizon takes no lead.
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
        self.rare().due = Some(due);
        wait - lead.min(wait)
    }

    /// When the retry about to be made is due to send its request, if the
    /// failure before it asked for a lead (see `take_lead`): the end of the
    /// wait decided, of which the loop waited only the part before the
    /// lead. Taken: asked once, by that retry.
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    pub(crate) fn take_retry_due(&mut self) -> Option<Instant> {
        self.rare.as_mut().and_then(|rare| rare.due.take())
    }

    /// The deadline cut the running attempt short (its outcome recorded):
    /// the call ends with `DeadlineExceeded`.
    pub(super) fn deadline_cut<E>(&mut self) -> E
    where
        H: ErrorHandling<E>,
    {
        self.forget_spent();
        let rejection = self.deadline_rejection();
        self.tell_stop(rejection.stop_reason());
        self.handling.reject(rejection)
    }

    /// The next attempt could not run: the call ends with the last error
    /// an attempt produced, or, when none ran, with the rejection.
    #[cold]
    pub(super) fn cannot_run<E>(&mut self, rejection: Rejection) -> E
    where
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        // A retry whose budget withdrawal the decision took (see
        // `decision`) did not run: it gives back what it took, and the
        // budget pays only for retries that happen.
        if let Some(rare) = &mut *self.rare {
            rare.give_back_withdrawn();
        }
        match self.rare.as_mut().and_then(|rare| rare.last.take()) {
            Some(error) => self.give_up(rejection.stop_reason(), error),
            None => {
                self.tell_stop(rejection.stop_reason());
                self.handling.reject(rejection)
            }
        }
    }
}

/// `permits` with an adaptive bulkhead's sample, and a breaker's timing of
/// slow calls, started when the request went out, if the attempt says when.
#[inline(always)]
pub(super) fn measured<V: Shape>(
    permits: ShapedPermits<V>,
    sent: Option<&OnceLock<Instant>>,
    guards: &Guards,
) -> ShapedPermits<V> {
    match sent.and_then(OnceLock::get) {
        None => permits,
        Some(sent) => measured_from::<V>(permits, *sent, guards),
    }
}

#[cold]
fn measured_from<V: Shape>(permits: ShapedPermits<V>, sent: Instant, guards: &Guards) -> ShapedPermits<V> {
    let mut wide = widen::<V>(permits);
    if let Some(place) = wide.bulkhead.as_mut() {
        place.measure_from(sent);
    }
    if let (Some(ticket), Some(breaker)) = (wide.breaker.as_mut(), guards.breaker.as_deref()) {
        ticket.measure_from(sent, breaker);
    }
    narrow::<V>(wide)
}
