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

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, sleep, timeout, timeout_at};
use tracing::Instrument;

use crate::backoff::{Jitter, JitterRng};
use crate::breaker::Outcome;
use crate::classify::{Classify, ErrorClass};
use crate::context::{self, CallContext};
use crate::observe::{self, StopReason};
use crate::policy::{Guards, Nested, Policy};
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
    guards: Cow<'p, Guards>,
    context: CallContext,
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

/// How the guarded part of an attempt ended.
enum Guarded<T, E> {
    /// The attempt ran to completion.
    Ran(Result<T, E>),
    /// The attempt's own timeout cancelled it.
    TimedOut(Duration),
    /// The call's deadline cancelled the running attempt.
    Cut,
    /// The attempt never started.
    NotRun(Rejection, StopReason),
}

impl<'p> Execution<'p> {
    pub(crate) fn new(policy: &'p Policy, key: Option<Arc<str>>) -> Self {
        let outer = context::current();
        let mut max_attempts = policy.max_attempts;
        if outer.is_some() && policy.nested == Nested::Once && max_attempts > 1 {
            observe::retries_suppressed(&policy.operation, max_attempts);
            max_attempts = 1;
        }
        // A call without a key of its own inherits the key of the call it is nested in.
        let key = key.or_else(|| outer.and_then(|ctx| ctx.key));
        Execution {
            policy,
            guards: policy.guards(),
            context: CallContext { key },
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
    pub async fn attempt<T, E, Fut>(&mut self, attempt: Fut) -> Step<T, E>
    where
        Fut: Future<Output = Result<T, E>>,
        E: Classify + From<Rejection>,
    {
        self.attempt_with(move || attempt).await
    }

    /// [`attempt`](Self::attempt), creating the attempt's future only once
    /// the breaker and the bulkhead have admitted it.
    pub async fn attempt_with<T, E, Fut>(&mut self, make_attempt: impl FnOnce() -> Fut) -> Step<T, E>
    where
        Fut: Future<Output = Result<T, E>>,
        E: Classify + From<Rejection>,
    {
        self.attempts += 1;
        let policy = self.policy;
        let guards = &*self.guards;
        let permit = match &guards.breaker {
            None => None,
            Some(breaker) => match breaker.try_acquire() {
                Some(permit) => Some(permit),
                None => {
                    observe::stop(&policy.operation, self.attempts, StopReason::CircuitOpen);
                    let breaker = breaker.name().to_owned();
                    return Step::Done(Err(E::from(Rejection::CircuitOpen { breaker })));
                }
            },
        };
        let guarded = self.run_guarded(guards, make_attempt).await;
        let record = |outcome| {
            if let Some(permit) = permit {
                permit.record(outcome);
            }
        };
        let error = match guarded {
            Guarded::Ran(Ok(value)) => {
                record(Outcome::Success);
                if let Some(budget) = &guards.budget {
                    budget.deposit();
                }
                return Step::Done(Ok(value));
            }
            Guarded::NotRun(rejection, reason) => {
                // The permit is dropped unrecorded: the attempt never ran.
                observe::stop(&policy.operation, self.attempts, reason);
                return Step::Done(Err(E::from(rejection)));
            }
            Guarded::Cut => {
                record(Outcome::Failure);
                observe::stop(&policy.operation, self.attempts, StopReason::Deadline);
                let after = policy.deadline.unwrap_or_default();
                return Step::Done(Err(E::from(Rejection::DeadlineExceeded { after })));
            }
            Guarded::TimedOut(after) => E::from(Rejection::AttemptTimeout { after }),
            Guarded::Ran(Err(error)) => error,
        };
        let class = error.classify();
        if !class.is_retryable() {
            record(Outcome::Neutral);
            observe::stop(&policy.operation, self.attempts, StopReason::Permanent);
            return Step::Done(Err(error));
        }
        record(Outcome::Failure);
        match self.plan_retry(class) {
            Ok(wait) => {
                drop(error);
                sleep(wait).await;
                Step::Retry
            }
            Err(reason) => {
                observe::stop(&policy.operation, self.attempts, reason);
                Step::Done(Err(error))
            }
        }
    }

    /// Takes the bulkhead permit and runs the attempt under its timeout and
    /// the deadline, inside the call's context and span.
    async fn run_guarded<T, E, Fut>(
        &self,
        guards: &Guards,
        make_attempt: impl FnOnce() -> Fut,
    ) -> Guarded<T, E>
    where
        Fut: Future<Output = Result<T, E>>,
    {
        let _permit = match &guards.bulkhead {
            None => None,
            Some(bulkhead) => {
                let full = || {
                    let bulkhead = bulkhead.name().to_owned();
                    Guarded::NotRun(Rejection::BulkheadFull { bulkhead }, StopReason::BulkheadFull)
                };
                let acquired = match self.deadline {
                    None => bulkhead.acquire().await,
                    Some(deadline) => match timeout_at(deadline, bulkhead.acquire()).await {
                        Ok(acquired) => acquired,
                        Err(_) => {
                            let after = self.policy.deadline.unwrap_or_default();
                            return Guarded::NotRun(
                                Rejection::DeadlineExceeded { after },
                                StopReason::Deadline,
                            );
                        }
                    },
                };
                match acquired {
                    Ok(permit) => Some(permit),
                    Err(_) => return full(),
                }
            }
        };
        let attempt = context::scope(self.context.clone(), make_attempt()).instrument(self.span.clone());
        match (self.policy.attempt_timeout, self.deadline) {
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
