//! The retry loop, one attempt at a time.
//!
//! For each attempt, in this order:
//!
//! 1. **Breaker**: ask for permission. `CircuitOpen` ends the call at once:
//!    retrying against an open breaker only burns attempts.
//! 2. **Bulkhead**: take a permit (waiting at most `max_wait`, and never past
//!    the deadline). The permit is held for this attempt only.
//! 3. **Run** the attempt under the earlier of its timeout and the deadline;
//!    a timeout drops (cancels) the attempt's future.
//! 4. **Record** the outcome in the breaker: success, failure (transient,
//!    throttled, attempt timeout, deadline cut) or neutral (permanent).
//! 5. On a retryable failure, decide whether to retry: attempts left? would
//!    the wait end before the deadline? will the breaker be closed by then?
//! 6. **Budget**: only then take a token for the retry, so tokens pay for
//!    retries that really happen. An empty budget ends the loop.
//! 7. **Back off**, holding nothing.
//!
//! Why this order: the breaker sits *inside* the loop, so it sees every
//! attempt, and its counts are easy to reason about (N failing attempts are
//! N failures, whether they came from one call or N). The budget sits
//! *after* the breaker and only pays for retries: first attempts are free,
//! so the budget limits amplification without ever refusing fresh traffic.
//!
//! The caller gets the first success, or the last error an attempt
//! produced (an attempt that timed out produced `AttemptTimeout`), or a
//! [`Rejection`] when no attempt could run (`CircuitOpen`, `BulkheadFull`)
//! or the deadline cut one short (`DeadlineExceeded`). Why it stopped is in
//! the trace (see [`observe`](crate::observe)).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep, sleep, timeout, timeout_at};

use crate::backoff::{Jitter, JitterRng};
use crate::breaker::{BreakerPermit, CircuitBreaker, Outcome};
use crate::bulkhead::{Bulkhead, BulkheadPermit};
use crate::classify::{ErrorClass, ResilientError};
use crate::context;
use crate::observe::{self, StopReason};
use crate::policy::{Guards, GuardsRef, Nested, Policy};
use crate::rejection::Rejection;

/// What to do after one attempt.
#[derive(Debug)]
#[must_use = "a `Done` step carries the call's result"]
pub enum Step<T, E> {
    /// The call is over: return this.
    Done(Result<T, E>),
    /// The backoff wait is over: make the next attempt.
    Retry,
}

/// The state of one call's retry loop.
///
/// Made by [`Policy::execution`]; drive it with [`attempt`](Self::attempt)
/// until it says [`Step::Done`]. [`Policy::run`] and the attribute do exactly
/// that; the step form lets the attribute inline the loop into your `async
/// fn`, so its body can borrow `&mut self` and other parameters.
///
/// ```
/// # use retry_runtime as resilient;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use resilient::{Policy, Step};
/// let policy = Policy::builder().build().unwrap();
/// let mut execution = policy.execution(None);
/// let mut attempts = 0;
/// let result = loop {
///     attempts += 1;
///     let outcome: std::io::Result<&str> =
///         if attempts < 2 { Err(std::io::ErrorKind::TimedOut.into()) } else { Ok("done") };
///     match execution.attempt(async { outcome }).await {
///         Step::Done(result) => break result,
///         Step::Retry => continue,
///     }
/// };
/// assert_eq!(result.unwrap(), "done");
/// # }
/// ```
pub struct Execution<'p> {
    policy: &'p Policy,
    guards: GuardsRef<'p>,
    /// The call's idempotency key; while an attempt is polled in place, the
    /// key it displaced (see `context::poll_in`).
    key: Option<Arc<str>>,
    max_attempts: u32,
    attempts: u32,
    previous_wait: Option<Duration>,
    deadline: Option<Instant>,
    rng: Option<JitterRng>,
    span: tracing::Span,
}

impl std::fmt::Debug for Execution<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Execution")
            .field("operation", &self.policy.operation())
            .field("attempts", &self.attempts)
            .field("max_attempts", &self.max_attempts)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// Tells the breaker (if any) how the attempt ended.
#[inline]
fn record(permit: Option<BreakerPermit<'_>>, outcome: Outcome) {
    if let Some(permit) = permit {
        permit.record(outcome);
    }
}

/// How the guarded part of an attempt ended.
enum Guarded<T, E> {
    /// The attempt ran to completion.
    Ran(Result<T, E>),
    /// The attempt's own timeout cancelled it.
    TimedOut(Duration),
    /// The call's deadline cancelled the running attempt.
    Cut,
}

pin_project! {
    /// The future of [`Execution::attempt`].
    #[project = AttemptProj]
    enum Attempt<'e, 'p, Fut, General> {
        Direct { #[pin] direct: Direct<'e, 'p, Fut> },
        General { #[pin] general: General },
    }
}

impl<T, E, Fut, General> Future for Attempt<'_, '_, Fut, General>
where
    Fut: Future<Output = Result<T, E>>,
    E: ResilientError,
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

pin_project! {
    /// One attempt on the direct path (see [`Execution::attempt`]): the same
    /// steps as [`Execution::attempt_with`] without a bulkhead or a timer,
    /// polling the attempt in place.
    struct Direct<'e, 'p, Fut> {
        execution: &'e mut Execution<'p>,
        guards: &'p Guards,
        permit: Option<BreakerPermit<'p>>,
        started: bool,
        // `None` once finished: it is dropped as soon as it is done, in its context.
        #[pin]
        attempt: Option<Fut>,
        #[pin]
        backoff: Option<Sleep>,
    }

    impl<Fut> PinnedDrop for Direct<'_, '_, Fut> {
        fn drop(this: Pin<&mut Self>) {
            // A cancelled attempt is dropped in its context; the breaker
            // permit (a field, dropped next) then records nothing.
            let this = this.project();
            let execution = &mut **this.execution;
            context::drop_in(&mut execution.key, &execution.span, this.attempt);
        }
    }
}

impl<T, E, Fut> Future for Direct<'_, '_, Fut>
where
    Fut: Future<Output = Result<T, E>>,
    E: ResilientError,
{
    type Output = Step<T, E>;

    // Only the success path is inline: everything else is out of line, so
    // that the caller's future stays small enough to be inlined in turn.
    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Step<T, E>> {
        let this = self.project();
        let execution = &mut **this.execution;
        if this.backoff.is_some() {
            return poll_backoff(this.backoff, cx);
        }
        // The permit stays in a local unless the attempt has to wait: an
        // attempt that completes in its first poll never stores it.
        let permit = if *this.started {
            this.permit.take()
        } else {
            *this.started = true;
            execution.attempts += 1;
            match &this.guards.breaker {
                None => None,
                Some(breaker) => match breaker.try_acquire() {
                    Some(permit) => Some(permit),
                    None => return Poll::Ready(circuit_open(execution, breaker, this.attempt)),
                },
            }
        };
        match context::poll_in(&mut execution.key, &execution.span, this.attempt, cx) {
            Poll::Ready(Ok(value)) => {
                record(permit, Outcome::Success);
                if let Some(budget) = &this.guards.budget {
                    budget.deposit();
                }
                Poll::Ready(Step::Done(Ok(value)))
            }
            Poll::Ready(Err(error)) => failed(execution, permit, error, this.backoff, cx),
            Poll::Pending => {
                *this.permit = permit;
                Poll::Pending
            }
        }
    }
}

/// The direct path's backoff, until it is over.
#[inline(never)]
fn poll_backoff<T, E>(backoff: Pin<&mut Option<Sleep>>, cx: &mut Context<'_>) -> Poll<Step<T, E>> {
    match backoff.as_pin_mut() {
        Some(backoff) => backoff.poll(cx).map(|()| Step::Retry),
        None => unreachable!("polled only while backing off"),
    }
}

/// The breaker refused the direct path's attempt: it never runs.
#[cold]
#[inline(never)]
fn circuit_open<T, E: ResilientError, Fut>(
    execution: &Execution<'_>,
    breaker: &CircuitBreaker,
    attempt: Pin<&mut Option<Fut>>,
) -> Step<T, E> {
    // Dropped now, as `attempt_with` drops an attempt it never makes.
    let mut attempt = attempt;
    attempt.set(None);
    Step::Done(Err(E::from_rejection(execution.circuit_open(breaker))))
}

/// The direct path's attempt failed: record it, then retry (after the
/// backoff) or end the call, as `attempt_with` does.
#[inline(never)]
fn failed<T, E: ResilientError>(
    execution: &mut Execution<'_>,
    permit: Option<BreakerPermit<'_>>,
    error: E,
    mut backoff: Pin<&mut Option<Sleep>>,
    cx: &mut Context<'_>,
) -> Poll<Step<T, E>> {
    let class = error.error_class();
    record(permit, if class.is_retryable() { Outcome::Failure } else { Outcome::Neutral });
    match execution.after_failure(class, error) {
        Err(error) => Poll::Ready(Step::Done(Err(error))),
        // A zero wait is no wait (see `attempt_with`).
        Ok(wait) if wait.is_zero() => Poll::Ready(Step::Retry),
        Ok(wait) => {
            backoff.set(Some(sleep(wait)));
            poll_backoff(backoff, cx)
        }
    }
}

impl<'p> Execution<'p> {
    #[inline(always)]
    pub(crate) fn new(policy: &'p Policy, key: Option<Arc<str>>) -> Self {
        // A call without a key of its own inherits the key of the call it is nested in.
        let (nested, key) = context::inherit(key);
        let mut max_attempts = policy.max_attempts;
        if nested && policy.nested == Nested::Once && max_attempts > 1 {
            observe::retries_suppressed(&policy.operation, max_attempts);
            max_attempts = 1;
        }
        Execution {
            policy,
            guards: policy.guards(),
            key,
            max_attempts,
            attempts: 0,
            previous_wait: None,
            deadline: policy.deadline.map(|d| Instant::now() + d),
            rng: None,
            span: tracing::debug_span!("resilient.call", operation = %policy.operation),
        }
    }

    /// Attempts made so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Runs one attempt with every guard; on a retryable failure it also
    /// waits out the backoff before returning [`Step::Retry`].
    ///
    /// The future should do nothing until polled (an `async` block doesn't),
    /// because it is created before the guards admit the attempt; use
    /// [`attempt_with`](Self::attempt_with) for futures that start work eagerly.
    ///
    /// Calls through the global registry without a bulkhead or timeouts (the
    /// common case) poll the attempt where the caller built it: it is never
    /// moved, and the retry loop adds no state machine of its own around it.
    #[inline]
    pub fn attempt<T, E, Fut>(&mut self, attempt: Fut) -> impl Future<Output = Step<T, E>>
    where
        Fut: Future<Output = Result<T, E>>,
        E: ResilientError,
    {
        match self.direct_guards() {
            Some(guards) => Attempt::Direct {
                direct: Direct {
                    execution: self,
                    guards,
                    permit: None,
                    started: false,
                    attempt: Some(attempt),
                    backoff: None,
                },
            },
            None => Attempt::General { general: self.attempt_with(move || attempt) },
        }
    }

    /// The guards when an attempt can take the direct path: they come from
    /// the policy's cache (the global registry), no bulkhead (whose wait is a
    /// future of its own) and no timer.
    #[inline]
    fn direct_guards(&self) -> Option<&'p Guards> {
        match self.guards {
            GuardsRef::Cached(guards)
                if guards.bulkhead.is_none()
                    && self.policy.attempt_timeout.is_none()
                    && self.deadline.is_none() =>
            {
                Some(guards)
            }
            _ => None,
        }
    }

    /// What follows a failed attempt, after `class` was recorded: the wait
    /// before the next attempt, or the error that ends the call.
    fn after_failure<E>(&mut self, class: ErrorClass, error: E) -> Result<Duration, E> {
        if !class.is_retryable() {
            observe::stop(&self.policy.operation, self.attempts, StopReason::Permanent);
            return Err(error);
        }
        match self.plan_retry(class) {
            Ok(wait) => Ok(wait),
            Err(reason) => {
                observe::stop(&self.policy.operation, self.attempts, reason);
                Err(error)
            }
        }
    }

    /// [`attempt`](Self::attempt), creating the attempt's future only once
    /// the breaker and the bulkhead have admitted it.
    pub async fn attempt_with<T, E, Fut>(&mut self, make_attempt: impl FnOnce() -> Fut) -> Step<T, E>
    where
        Fut: Future<Output = Result<T, E>>,
        E: ResilientError,
    {
        self.attempts += 1;
        let policy = self.policy;
        let guards = &*self.guards;
        let permit = match &guards.breaker {
            None => None,
            Some(breaker) => match breaker.try_acquire() {
                Some(permit) => Some(permit),
                None => return Step::Done(Err(E::from_rejection(self.circuit_open(breaker)))),
            },
        };
        // The uncontended bulkhead hands out a permit without a wait (or a future).
        let bulkhead_permit = match &guards.bulkhead {
            None => None,
            Some(bulkhead) => match bulkhead.try_acquire() {
                Some(bulkhead_permit) => Some(bulkhead_permit),
                None => match self.wait_for_permit(bulkhead).await {
                    Ok(bulkhead_permit) => Some(bulkhead_permit),
                    Err((rejection, reason)) => {
                        // The breaker permit is dropped unrecorded: the attempt never ran.
                        observe::stop(&policy.operation, self.attempts, reason);
                        return Step::Done(Err(E::from_rejection(rejection)));
                    }
                },
            },
        };
        // No timer unless the policy asked for a timeout or a deadline.
        let guarded = match (policy.attempt_timeout, self.deadline) {
            (None, None) => Guarded::Ran(context::scope(self.key.clone(), &self.span, make_attempt()).await),
            (attempt_timeout, deadline) => self.run_timed(attempt_timeout, deadline, make_attempt()).await,
        };
        // The bulkhead place is held for the attempt only.
        drop(bulkhead_permit);
        let settle = |outcome| record(permit, outcome);
        let error = match guarded {
            Guarded::Ran(Ok(value)) => {
                settle(Outcome::Success);
                if let Some(budget) = &guards.budget {
                    budget.deposit();
                }
                return Step::Done(Ok(value));
            }
            Guarded::Cut => {
                settle(Outcome::Failure);
                observe::stop(&policy.operation, self.attempts, StopReason::Deadline);
                let after = policy.deadline.unwrap_or_default();
                return Step::Done(Err(E::from_rejection(Rejection::DeadlineExceeded { after })));
            }
            Guarded::TimedOut(after) => E::from_rejection(Rejection::AttemptTimeout { after }),
            Guarded::Ran(Err(error)) => error,
        };
        let class = error.error_class();
        settle(if class.is_retryable() { Outcome::Failure } else { Outcome::Neutral });
        match self.after_failure(class, error) {
            Ok(wait) => {
                // A zero wait is no wait: `sleep(ZERO)` would still arm a
                // timer, and in real time last until the timer's next tick (~1 ms).
                if !wait.is_zero() {
                    sleep(wait).await;
                }
                Step::Retry
            }
            Err(error) => Step::Done(Err(error)),
        }
    }

    /// The breaker refused the attempt: the call ends with `CircuitOpen`.
    #[cold]
    fn circuit_open(&self, breaker: &CircuitBreaker) -> Rejection {
        observe::stop(&self.policy.operation, self.attempts, StopReason::CircuitOpen);
        Rejection::CircuitOpen { breaker: breaker.name().to_owned() }
    }

    /// Waits for a bulkhead permit after the fast try found none: at most
    /// `max_wait`, and never past the deadline.
    async fn wait_for_permit<'b>(
        &self,
        bulkhead: &'b Bulkhead,
    ) -> Result<BulkheadPermit<'b>, (Rejection, StopReason)> {
        let acquired = match self.deadline {
            None => bulkhead.acquire_waiting().await,
            Some(deadline) => match timeout_at(deadline, bulkhead.acquire_waiting()).await {
                Ok(acquired) => acquired,
                Err(_) => {
                    let after = self.policy.deadline.unwrap_or_default();
                    return Err((Rejection::DeadlineExceeded { after }, StopReason::Deadline));
                }
            },
        };
        acquired.map_err(|_| {
            let bulkhead = bulkhead.name().to_owned();
            (Rejection::BulkheadFull { bulkhead }, StopReason::BulkheadFull)
        })
    }

    /// Runs the attempt under the earlier of its timeout and the deadline.
    async fn run_timed<T, E, Fut>(
        &self,
        attempt_timeout: Option<Duration>,
        deadline: Option<Instant>,
        attempt: Fut,
    ) -> Guarded<T, E>
    where
        Fut: Future<Output = Result<T, E>>,
    {
        let attempt = context::scope(self.key.clone(), &self.span, attempt);
        match (attempt_timeout, deadline) {
            (None, None) => Guarded::Ran(attempt.await),
            (Some(limit), None) => match timeout(limit, attempt).await {
                Ok(result) => Guarded::Ran(result),
                Err(_) => Guarded::TimedOut(limit),
            },
            (None, Some(deadline)) => match timeout_at(deadline, attempt).await {
                Ok(result) => Guarded::Ran(result),
                Err(_) => Guarded::Cut,
            },
            (Some(limit), Some(deadline)) => {
                let attempt_end = Instant::now() + limit;
                // On the same instant the deadline wins.
                let timeout_first = attempt_end < deadline;
                match timeout_at(attempt_end.min(deadline), attempt).await {
                    Ok(result) => Guarded::Ran(result),
                    Err(_) if timeout_first => Guarded::TimedOut(limit),
                    Err(_) => Guarded::Cut,
                }
            }
        }
    }

    /// The wait before the next attempt, or why there is none. Tokens are
    /// taken from the budget last, only for a retry that will happen.
    fn plan_retry(&mut self, class: ErrorClass) -> Result<Duration, StopReason> {
        if self.attempts >= self.max_attempts {
            return Err(StopReason::AttemptsExhausted);
        }
        let wait = self.next_wait(class);
        if let Some(deadline) = self.deadline {
            if Instant::now() + wait >= deadline {
                return Err(StopReason::Deadline);
            }
        }
        if let Some(breaker) = &self.guards.breaker {
            if breaker.remaining_open().is_some_and(|open| open > wait) {
                return Err(StopReason::CircuitOpen);
            }
        }
        if let Some(budget) = &self.guards.budget {
            if !budget.try_withdraw() {
                return Err(StopReason::BudgetExhausted);
            }
        }
        observe::retry(&self.policy.operation, self.attempts, wait, class);
        Ok(wait)
    }

    fn next_wait(&mut self, class: ErrorClass) -> Duration {
        let backoff = self.policy.backoff;
        let n = self.attempts - 1;
        let jittered = if backoff.jitter == Jitter::None {
            backoff.exp(n)
        } else {
            let policy = self.policy;
            let rng = self.rng.get_or_insert_with(|| policy.jitter_rng());
            backoff.wait(n, self.previous_wait, rng)
        };
        self.previous_wait = Some(jittered);
        match class {
            // The cap does not shorten a server's Retry-After.
            ErrorClass::Throttled { retry_after: Some(after) } => after.max(jittered),
            _ => jittered,
        }
    }
}
