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

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep, sleep_until};

use super::Call;
use super::racing::{Raced, Racing};
use crate::classify::ErrorClass;
use crate::clock::HORIZON;
use crate::context;
use crate::error::ErrorHandling;
use crate::guard::{Admission, Answer, AttemptKind};
use crate::guards::{GuardPermits, GuardsRef, Shape};
use crate::observe;
use crate::policy::Nested;
use crate::settings::Hedge;

/// Where attempts come from when they are not given: a maker, called once
/// per attempt (of a hedging round, of a hedged function's call that does
/// not hedge, of `Policy::run`'s call). [`NoHedges`] for a call whose
/// attempts are given (the attribute's, the HTTP layers').
pub trait Hedges<Fut>: Sized {
    /// Whether an attempt given none is made by [`make`](Self::make) as it
    /// is first polled, once the guards admitted it (a maker's is: a hedged
    /// function's that does not hedge, and every attempt of `Policy::run`'s,
    /// the plain first one included), so that the maker is never called for
    /// an attempt they refuse.
    const MAKES: bool = true;

    /// Makes one more attempt.
    fn make(&mut self) -> Fut;
}

/// The maker of a function that does not hedge: its one attempt is given.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHedges;

impl<Fut> Hedges<Fut> for NoHedges {
    const MAKES: bool = false;

    fn make(&mut self) -> Fut {
        unreachable!("an attempt that does not hedge is given, not made")
    }
}

impl<Fut, M: FnMut() -> Fut> Hedges<Fut> for M {
    #[inline]
    fn make(&mut self) -> Fut {
        self()
    }
}

/// How an attempt holds a round of hedged attempts, behind its box: as a
/// [`Round`] when its function hedges, as nothing (`Infallible`) when it
/// does not, so that such an attempt holds no error across a wait it never
/// makes, and is `Send` whatever its error is.
pub trait RoundSlot<'p, Fut: Future>: Sized {
    /// `round`, as the attempt holds it.
    fn hold(round: Round<'p, Fut>) -> Self;

    /// Polls the round held (see `Round::poll`).
    fn poll_round<T, E, S, H, V: Shape, M: Hedges<Fut>>(
        self: Pin<&mut Self>,
        call: &mut Call<'p, S, H, V>,
        make: &mut M,
        cx: &mut Context<'_>,
    ) -> Poll<RoundEnd<T, E>>
    where
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E>,
        S: Default;
}

impl<'p, Fut: Future> RoundSlot<'p, Fut> for std::convert::Infallible {
    fn hold(_round: Round<'p, Fut>) -> Self {
        unreachable!("a function that does not hedge runs no round")
    }

    fn poll_round<T, E, S, H, V: Shape, M: Hedges<Fut>>(
        self: Pin<&mut Self>,
        _call: &mut Call<'p, S, H, V>,
        _make: &mut M,
        _cx: &mut Context<'_>,
    ) -> Poll<RoundEnd<T, E>> {
        match *self.get_mut() {}
    }
}

impl<'p, Fut: Future> RoundSlot<'p, Fut> for Round<'p, Fut> {
    #[inline(always)]
    fn hold(round: Round<'p, Fut>) -> Self {
        round
    }

    #[inline]
    fn poll_round<T, E, S, H, V: Shape, M: Hedges<Fut>>(
        self: Pin<&mut Self>,
        call: &mut Call<'p, S, H, V>,
        make: &mut M,
        cx: &mut Context<'_>,
    ) -> Poll<RoundEnd<T, E>>
    where
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E>,
        S: Default,
    {
        self.poll(call, make, cx)
    }
}

/// How a round of hedged attempts ended.
pub enum RoundEnd<T, E> {
    /// An attempt succeeded with this.
    Won(T),
    /// Every attempt failed; this is the last error, and its class.
    Failed(ErrorClass, E),
    /// The deadline cut the round short.
    Cut,
}

/// One attempt of a round, with the permits it holds.
struct Racer<Fut> {
    run: Pin<Box<Racing<Fut>>>,
    permits: Option<GuardPermits>,
}

pin_project! {
    /// A round of hedged attempts: the first, and hedges as they fall due
    /// (see the module docs). Its racers' permits are handed back when it
    /// is dropped, recording nothing.
    pub struct Round<'p, Fut: Future> {
        hedge: Hedge,
        guards: GuardsRef<'p>,
        started: Instant,
        racers: Vec<Racer<Fut>>,
        #[pin]
        next_hedge: Option<Sleep>,
        hedges: u32,
        last_failure: Option<(ErrorClass, Fut::Output)>,
        // Until when (from `started`) a server asked, with a Retry-After one
        // of the attempts heard, to be left alone: the latest, if several.
        quiet_until: Option<Duration>,
    }

    impl<Fut: Future> PinnedDrop for Round<'_, Fut> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            for Racer { run, permits } in std::mem::take(this.racers) {
                // Dropped first (in its context), then what it held handed back.
                drop(run);
                if let Some(permits) = permits {
                    this.guards.abandon(permits);
                }
            }
        }
    }
}

impl<S, H, V: Shape> Call<'_, S, H, V> {
    /// The hedging this call does: its settings', unless it is made inside
    /// another call's attempt on this task and the policy says
    /// [`Nested::Once`]. A hedge is one more request to the dependency, and
    /// layers must not multiply those any more than retries: such a call
    /// makes its single attempt alone (its guards and timeouts still apply).
    #[inline]
    pub(super) fn hedging(&self) -> Option<Hedge> {
        let hedge = self.settings().hedge?;
        if self.policy.nested() == Nested::Once && context::nested() {
            observe::hedging_suppressed(self.policy.operation());
            return None;
        }
        Some(hedge)
    }
}

impl<'p, T, E, Fut: Future<Output = Result<T, E>>> Round<'p, Fut> {
    /// A round whose first attempt, `first`, was admitted with `permits`.
    pub(super) fn new<S, H, V: Shape>(
        call: &Call<'p, S, H, V>,
        hedge: Hedge,
        permits: GuardPermits,
        first: Fut,
    ) -> Self {
        let started = Instant::now();
        let mut racers = Vec::with_capacity(1 + hedge.max as usize);
        racers.push(Racer { run: call.racing(first), permits: Some(permits) });
        Round {
            hedge,
            guards: call.guards(),
            started,
            racers,
            next_hedge: hedge_due(started, hedge.after, 1, call.deadline()).map(sleep_until),
            hedges: 0,
            last_failure: None,
            quiet_until: None,
        }
    }

    /// Runs the round: its attempts, and hedges as they fall due.
    ///
    /// The attempts are polled before the hedge's timer (the rule of a
    /// timer beside a running attempt: see the parent module), so one that
    /// answers as a hedge falls due has answered: a success wins, and a
    /// failure of the last one running ends the round, before a hedge is
    /// admitted and paid for. A hedge admitted is polled at once, in the
    /// next pass, then the next one's timer.
    pub(super) fn poll<S, H, V: Shape, M>(
        self: Pin<&mut Self>,
        call: &mut Call<'p, S, H, V>,
        make: &mut M,
        cx: &mut Context<'_>,
    ) -> Poll<RoundEnd<T, E>>
    where
        M: super::hedge::Hedges<Fut>,
        H: ErrorHandling<E>,
        S: Default,
    {
        let mut this = self.project();
        let mut cut = None;
        let mut index = 0;
        loop {
            // The first attempt the deadline cut, its outcome recorded
            // only once the others have been polled: they are cut at this
            // same instant, unless they answered at it, and a success then
            // still wins, as an attempt answering at the deadline does alone.
            while index < this.racers.len() {
                let Poll::Ready(raced) = this.racers[index].run.as_mut().poll(cx) else {
                    index += 1;
                    continue;
                };
                let mut racer = this.racers.swap_remove(index);
                let permits = racer.permits.take();
                let (class, error) = match raced {
                    Raced::Ran(Ok(value)) => {
                        record(this.guards, permits, Answer::Success);
                        return Poll::Ready(RoundEnd::Won(value));
                    }
                    Raced::Cut => {
                        // The round is one attempt, its cut one failure: the
                        // others cut with it are dropped, recording nothing.
                        match cut {
                            None => cut = permits,
                            Some(_) => abandon(this.guards, permits),
                        }
                        continue;
                    }
                    Raced::TimedOut(after) => call.timed_out(after),
                    Raced::Ran(Err(error)) => (call.handling.class(&error), error),
                };
                record(this.guards, permits, Answer::Failed(class));
                if !class.is_retryable() {
                    return Poll::Ready(RoundEnd::Failed(class, error));
                }
                if let ErrorClass::Throttled { retry_after: Some(after) } = class {
                    *this.quiet_until =
                        (*this.quiet_until).max(Some(this.started.elapsed().saturating_add(after)));
                }
                *this.last_failure = Some((class, Err(error)));
            }
            if cut.is_some() {
                record(this.guards, cut.take(), Answer::Cut);
                return Poll::Ready(RoundEnd::Cut);
            }
            if this.racers.is_empty()
                && let Some((class, Err(error))) = this.last_failure.take()
            {
                return Poll::Ready(RoundEnd::Failed(
                    heeding(class, *this.quiet_until, *this.started),
                    error,
                ));
            }
            let Some(due) = this.next_hedge.as_mut().as_pin_mut() else { return Poll::Pending };
            if due.poll(cx).is_pending() {
                return Poll::Pending;
            }
            *this.hedges += 1;
            this.next_hedge.set(None);
            // No leave for a hedge now: none this round (the guards that
            // refused would most likely refuse the next one too). A hedge
            // inside a Retry-After is one more request the server asked not
            // to get yet: none either.
            if this.quiet_until.is_some_and(|until| until > this.started.elapsed()) {
                return Poll::Pending;
            }
            let Admission::Go(permits) = this.guards.admit(AttemptKind::Hedge, call.priority()) else {
                return Poll::Pending;
            };
            observe::hedge(call.policy.operation(), call.attempts, *this.hedges);
            this.racers.push(Racer { run: call.racing(make.make()), permits: Some(permits) });
            if *this.hedges < this.hedge.max {
                let due = hedge_due(*this.started, this.hedge.after, *this.hedges + 1, call.deadline());
                this.next_hedge.set(due.map(sleep_until));
            }
        }
    }
}

fn record(guards: &GuardsRef<'_>, permits: Option<GuardPermits>, answer: Answer) {
    if let Some(permits) = permits {
        guards.record(permits, answer);
    }
}

fn abandon(guards: &GuardsRef<'_>, permits: Option<GuardPermits>) {
    if let Some(permits) = permits {
        guards.abandon(permits);
    }
}

/// When the `n`th hedge of a round that started at `started` is due, or
/// `None` if that is beyond the timer's horizon, or at or past the call's
/// `deadline`: a hedge started then would be cut as it starts, its token,
/// turn and request spent for nothing.
fn hedge_due(started: Instant, after: Duration, n: u32, deadline: Option<Instant>) -> Option<Instant> {
    let offset = after.checked_mul(n).filter(|offset| *offset <= HORIZON)?;
    let due = started.checked_add(offset)?;
    if deadline.is_some_and(|deadline| due >= deadline) {
        return None;
    }
    Some(due)
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
