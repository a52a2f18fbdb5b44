//! Hedged attempts: more attempts beside a slow one, the first success wins.
//!
//! One round of a hedged call starts like any attempt (admission, then the
//! run). If it has not finished `after` it started, a hedge starts beside
//! it, and another every `after` while none has succeeded, up to `max`,
//! none at or past the call's deadline (it would be cut as it starts). An
//! attempt that finishes as a hedge falls due has finished: that hedge is
//! neither started nor paid for (and if the attempt failed and was the last
//! one running, the round has failed: see below). A hedge is one more
//! request to the dependency, so it is paid for like a retry (a budget
//! token) and needs every guard's leave without waiting for any of them:
//! an attempt that would have to queue for a hedge is not worth it. The
//! first success ends the round; the other attempts are dropped, which
//! cancels them (their breaker permits record nothing). A failure of one
//! attempt leaves the others running; when none is left
//! running, the round has failed with the last error, and the loop decides
//! as after any failed attempt, waiting out any server's Retry-After an
//! attempt of the round heard (and no hedge starts while one runs: it
//! would be a request the server asked not to get yet). A permanent error
//! ends the round at once: the others would get the same answer. The round
//! counts as one attempt toward `max_attempts`.
//!
//! Every attempt of a round runs under the call's idempotency key, so a
//! dependency that deduplicates by key performs the operation once.
//!
//! A call made inside another call's attempt on the same task, under
//! `Nested::Once`, does not hedge: like its retries, its hedges would
//! multiply the requests of the layers above it. Its round is the single
//! attempt, guards and timeouts applying.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::time::{Instant, Sleep, sleep, sleep_until};

use super::admission::{Admitted, admit_breaker};
use super::outcome::{Answer, Guarded, answered, outcome_of, record, succeeded};
use super::{Execution, LastError, Step};
use crate::breaker::Outcome;
use crate::classify::ErrorClass;
use crate::clock::HORIZON;
use crate::error::ErrorHandling;
use crate::guards::Guards;
use crate::observe;
use crate::settings::Hedge;

/// How a round of hedged attempts ended.
enum RoundEnd<T, E> {
    Won(T),
    /// Every attempt failed; this is the last error, and its class.
    Failed(ErrorClass, E),
    /// The deadline cut the round short.
    Cut,
}

/// One attempt of a round, with the permits it holds.
struct Racer<'g, F> {
    run: Pin<Box<F>>,
    admitted: Admitted<'g>,
}

/// When the `n`th hedge of a round that started at `started` is due, or
/// `None` if that is beyond the timer's horizon, or at or past the call's
/// `deadline`: a hedge started then would be cut as it starts, its token,
/// turn and request spent for nothing.
fn hedge_due(
    started: Instant,
    after: Duration,
    n: u32,
    deadline: Option<Instant>,
) -> Option<Pin<Box<Sleep>>> {
    let offset = after.checked_mul(n).filter(|offset| *offset <= HORIZON)?;
    let due = started.checked_add(offset)?;
    if deadline.is_some_and(|deadline| due >= deadline) {
        return None;
    }
    Some(Box::pin(sleep_until(due)))
}

/// The class the loop decides on after a round that failed, last, with an
/// error of `class`: a server's Retry-After that an earlier attempt of the
/// round heard, and that still runs (`quiet_until`, from `started`), is
/// waited out as if the last attempt had heard it (the longer of the two:
/// the cap never shortens a Retry-After). Only the wait changes: each
/// attempt's outcome is recorded already, and the caller gets the last error.
fn heeding(class: ErrorClass, quiet_until: Option<Duration>, started: Instant) -> ErrorClass {
    let left = quiet_until.map_or(Duration::ZERO, |until| until.saturating_sub(started.elapsed()));
    match class {
        _ if left.is_zero() || !class.is_retryable() => class,
        ErrorClass::Throttled { retry_after: Some(own) } => {
            ErrorClass::Throttled { retry_after: Some(own.max(left)) }
        }
        _ => ErrorClass::Throttled { retry_after: Some(left) },
    }
}

impl<S, H> Execution<'_, S, H> {
    /// [`attempt_with`](Self::attempt_with) for a policy that may hedge:
    /// `make_attempt` is called once per attempt of the round, each call
    /// making a fresh attempt. Without hedging (none configured, or a call
    /// nested once: see `hedging`) it is `attempt_with`.
    pub async fn attempt_hedged<T, E, Fut>(&mut self, mut make_attempt: impl FnMut() -> Fut) -> Step<T, E>
    where
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        let Some(hedge) = self.hedging() else {
            return self.attempt_with(make_attempt).await;
        };
        let guards = self.guards();
        let first = match self.admit(&guards).await {
            Ok(admitted) => admitted,
            Err(refusal) => return Step::Done(Err(self.cannot_run(refusal))),
        };
        self.begin_attempt(&guards);
        match self.round(hedge, &guards, first, &mut make_attempt).await {
            RoundEnd::Won(value) => Step::Done(Ok(value)),
            RoundEnd::Cut => {
                let refusal = self.deadline_refusal();
                observe::stop(self.policy.operation(), self.attempts, refusal.reason.label());
                Step::Done(Err(self.handling.reject(refusal.rejection)))
            }
            RoundEnd::Failed(class, error) => match self.after_failure(class, error) {
                Err(error) => Step::Done(Err(error)),
                Ok(wait) => {
                    if !wait.is_zero() {
                        sleep(wait).await;
                    }
                    Step::Retry
                }
            },
        }
    }

    /// Runs one round: the admitted first attempt, and hedges as they fall due.
    async fn round<'g, T, E, Fut>(
        &self,
        hedge: Hedge,
        guards: &'g Guards,
        first: Admitted<'g>,
        make_attempt: &mut impl FnMut() -> Fut,
    ) -> RoundEnd<T, E>
    where
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E>,
    {
        let started = Instant::now();
        let mut racers = Vec::with_capacity(1 + hedge.max as usize);
        racers.push(Racer { run: Box::pin(self.run(make_attempt())), admitted: first });
        let mut hedges = 0;
        let mut next_hedge = hedge_due(started, hedge.after, 1, self.deadline());
        let mut last_failure = None;
        // Until when (from `started`) a server asked, with a Retry-After
        // one of the attempts heard, to be left alone: the latest, if several.
        let mut quiet_until: Option<Duration> = None;
        poll_fn(|cx| {
            // The attempts are polled before the hedge's timer (the rule of
            // a timer beside a running attempt: see the parent module), so
            // one that answers as a hedge falls due has answered: a success
            // wins, and a failure of the last one running ends the round,
            // before a hedge is admitted and paid for. A hedge admitted is
            // polled at once, in the next pass, then the next one's timer.
            let mut cut = None;
            let mut index = 0;
            loop {
                // The first attempt the deadline cut, its outcome recorded
                // only once the others have been polled: they are cut at
                // this same instant, unless they answered at it, and a
                // success then still wins, as an attempt answering at the
                // deadline does alone.
                while index < racers.len() {
                    let Poll::Ready(guarded) = racers[index].run.as_mut().poll(cx) else {
                        index += 1;
                        continue;
                    };
                    let Admitted { breaker, bulkhead } = racers.swap_remove(index).admitted;
                    let (class, error) = match guarded {
                        Guarded::Ran(Ok(value)) => {
                            answered(guards, bulkhead, Answer::Success);
                            succeeded(guards, breaker);
                            return Poll::Ready(RoundEnd::Won(value));
                        }
                        Guarded::Cut => {
                            // The round is one attempt, its cut one failure: the
                            // others cut with it are dropped, recording nothing.
                            cut.get_or_insert(Admitted { breaker, bulkhead });
                            continue;
                        }
                        Guarded::TimedOut(after) => self.timed_out(after),
                        Guarded::Ran(Err(error)) => (self.handling.class(&error), error),
                    };
                    answered(guards, bulkhead, Answer::Failed(class));
                    record(breaker, outcome_of(class));
                    if !class.is_retryable() {
                        return Poll::Ready(RoundEnd::Failed(class, error));
                    }
                    if let ErrorClass::Throttled { retry_after: Some(after) } = class {
                        quiet_until = quiet_until.max(Some(started.elapsed().saturating_add(after)));
                    }
                    last_failure = Some((class, error));
                }
                if let Some(Admitted { breaker, bulkhead }) = cut {
                    answered(guards, bulkhead, Answer::Cut);
                    record(breaker, Outcome::Failure);
                    return Poll::Ready(RoundEnd::Cut);
                }
                if racers.is_empty()
                    && let Some((class, error)) = last_failure.take()
                {
                    return Poll::Ready(RoundEnd::Failed(heeding(class, quiet_until, started), error));
                }
                let Some(due) = next_hedge.as_mut() else { return Poll::Pending };
                if due.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                hedges += 1;
                next_hedge = None;
                // No leave for a hedge now: none this round (the guards that
                // refused would most likely refuse the next one too). A hedge
                // inside a Retry-After is one more request the server asked
                // not to get yet: none either.
                if quiet_until.is_some_and(|until| until > started.elapsed()) {
                    return Poll::Pending;
                }
                let Some(admitted) = self.admit_hedge(guards) else { return Poll::Pending };
                observe::hedge(self.policy.operation(), self.attempts, hedges);
                racers.push(Racer { run: Box::pin(self.run(make_attempt())), admitted });
                if hedges < hedge.max {
                    next_hedge = hedge_due(started, hedge.after, hedges + 1, self.deadline());
                }
            }
        })
        .await
    }

    /// Every guard's leave for a hedge, none of them waited for; the budget
    /// token is taken only once the others have said yes (a refused hedge
    /// costs no retry). A rate-limit turn cannot be given back either, so
    /// a budget that cannot pay for a retry (empty, or holding fewer tokens
    /// than a retry costs) is seen before one is taken; only a race for the
    /// last retry can still spend a turn on a hedge that does not run.
    fn admit_hedge<'g>(&self, guards: &'g Guards) -> Option<Admitted<'g>> {
        if let Some(throttle) = &guards.throttle
            && !throttle.admit()
        {
            return None;
        }
        let breaker = admit_breaker(guards).ok()?;
        let bulkhead = match &guards.bulkhead {
            None => None,
            Some(bulkhead) => Some(bulkhead.try_acquire()?),
        };
        if let Some(limit) = &guards.rate_limit
            && (guards.budget.as_ref().is_some_and(|budget| !budget.affords_retry()) || !limit.try_acquire())
        {
            return None;
        }
        if let Some(budget) = &guards.budget
            && !budget.try_withdraw()
        {
            return None;
        }
        Some(Admitted { breaker, bulkhead })
    }
}
