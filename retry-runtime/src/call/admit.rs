//! What an attempt does when it is not simply admitted and run: it waits
//! for a bulkhead place or a rate-limit turn, it is refused, it starts or
//! runs a hedging round, or it backs off after a failure. All of it out of
//! line, the waits behind a box.
//!
//! A wait is bounded by the guard's own `max_wait` and by the call's
//! deadline: a turn that would come at or after the deadline is not waited
//! for (the call ends at once, as for a `Retry-After` it cannot wait out).
//! Nothing is held that the attempt may never use: no half-open probe slot
//! while it waits (the breaker is asked again after), and what it does
//! hold (its place while it waits for its turn) is given back if the wait
//! does not end in an admission, or the call is dropped meanwhile.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::time::{Instant, Sleep, sleep, timeout_at};

use super::hedge::{Hedges, Round, RoundEnd, RoundSlot};
use super::phase::{Fields, Phase, Rare, RareProj, Waiting};
use super::{Call, LastError, Step};
use crate::error::ErrorHandling;
use crate::guard::{Admission, AttemptKind, Pending};
use crate::guards::{GuardPending, GuardPermits, Guards, GuardsRef, Shape, narrow, widen, widen_pending};
use crate::priority::Priority;
use crate::rate_limit::Late;
use crate::rejection::Rejection;

/// What a wait holds (the throttle's permit, a place), handed back if the
/// wait is dropped before it ends in an admission.
struct Held<'g> {
    guards: &'g Guards,
    pending: Option<GuardPending>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Some(pending) = self.pending.take() {
            self.guards.give_up(pending);
        }
    }
}

impl<'p, S, H, V: Shape> Call<'p, S, H, V> {
    /// The wait for what `pending` says, then the rest of admission.
    #[cold]
    pub(super) fn wait_for(&self, pending: GuardPending) -> Waiting<'p> {
        let guards = self.guards();
        let kind = self.next_kind_now();
        let deadline = self.deadline().map(|deadline| (deadline, self.deadline_rejection()));
        Box::pin(wait_then_admit(guards, kind, self.priority(), deadline, pending))
    }

    fn next_kind_now(&self) -> AttemptKind {
        if self.attempts == 0 { AttemptKind::First } else { AttemptKind::Retry }
    }

    /// How much this call matters when a guard is saturated: its own (an
    /// HTTP request's `x-priority`), else its settings' (see `crate::priority`).
    #[inline(always)]
    pub(super) fn priority(&self) -> Priority {
        match self.rare.as_ref().and_then(|rare| rare.priority) {
            Some(priority) => priority,
            None => self.settings().priority,
        }
    }

    /// The rejection a call gets when its deadline passes.
    pub(super) fn deadline_rejection(&self) -> Rejection {
        Rejection::DeadlineExceeded { after: self.settings().deadline.unwrap_or_default() }
    }

    /// The attempt was refused: it is dropped without running, and the
    /// call ends (see `cannot_run`).
    #[cold]
    #[inline(never)]
    pub(super) fn refused<T, E, Fut>(
        &mut self,
        mut attempt: Pin<&mut Option<Fut>>,
        rejection: Rejection,
    ) -> Step<T, E>
    where
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        // Dropped now, unpolled (an attempt made on its first poll never made).
        attempt.set(None);
        Step::Done(Err(self.cannot_run(rejection)))
    }
}

/// Waits for a place, then a turn, as `pending` says, asking the breaker
/// again after each wait, and the budget last.
async fn wait_then_admit(
    guards: GuardsRef<'_>,
    kind: AttemptKind,
    priority: Priority,
    deadline: Option<(Instant, Rejection)>,
    pending: GuardPending,
) -> Result<GuardPermits, Rejection> {
    let mut held = Held { guards: &guards, pending: Some(pending) };
    if let Some(Pending::Place { .. }) = held.pending {
        let Some(Pending::Place { throttle }) = held.pending.take() else { unreachable!("just seen") };
        let Some(bulkhead) = &guards.bulkhead else {
            unreachable!("only a bulkhead asks to wait for a place")
        };
        let waited = match &deadline {
            None => bulkhead.place_waiting(priority).await.map_err(|_| bulkhead_full(&guards, priority)),
            Some((deadline, rejection)) => {
                match timeout_at(*deadline, bulkhead.place_waiting(priority)).await {
                    Ok(place) => place.map_err(|_| bulkhead_full(&guards, priority)),
                    Err(_) => Err(rejection.clone()),
                }
            }
        };
        let place = match waited {
            Ok(place) => place,
            Err(rejection) => {
                guards.throttle_give_back(throttle);
                return Err(rejection);
            }
        };
        match guards.after_place(kind, priority, throttle, Some(place)) {
            Admission::Go(permits) => return Ok(permits),
            Admission::Refuse(rejection) => return Err(rejection),
            Admission::Wait(pending) => held.pending = Some(pending),
        }
    }
    let Some(limit) = &guards.rate_limit else { unreachable!("only a rate limit asks to wait for a turn") };
    let turn = match &deadline {
        None => limit.acquire().await.map_err(|_| ()),
        // The time limit too: a caller that loses the turn it waited for
        // waits again, and the timer may fire a tick late.
        Some((at, rejection)) => match timeout_at(*at, limit.acquire_before(Some(*at))).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(Late::OverRate(_))) => Err(()),
            Ok(Err(Late::PastDeadline)) | Err(_) => return Err(rejection.clone()),
        },
    };
    if turn.is_err() {
        crate::guard::Guard::refused(&**limit, priority);
        return Err(crate::guard::Guard::rejection(&**limit));
    }
    let Some(Pending::Turn { throttle, mut place }) = held.pending.take() else {
        unreachable!("a turn is waited for holding the place")
    };
    // The wait for the turn is not the dependency's latency.
    if let Some(place) = &mut place {
        place.measure_from(Instant::now());
    }
    match guards.after_turn(kind, priority, throttle, place, Some(())) {
        Admission::Go(permits) => Ok(permits),
        Admission::Refuse(rejection) => Err(rejection),
        Admission::Wait(_) => unreachable!("nothing is waited for after the turn"),
    }
}

/// The bulkhead's refusal of an attempt that waited for a place as long as
/// it may: the bulkhead hears of it, as of one it refused at once.
#[cold]
fn bulkhead_full(guards: &Guards, priority: Priority) -> Rejection {
    use crate::guard::Guard;
    guards.bulkhead.refused(priority);
    guards.bulkhead.rejection()
}

impl Guards {
    /// Gives back a throttle permit held through a wait that did not end
    /// in an admission.
    fn throttle_give_back(&self, permit: Option<()>) {
        use crate::guard::Guard;
        self.throttle.give_back(permit);
    }
}

/// Polls what is not the running attempt: admission through a wait or for
/// a round, the round, the backoff. `Ready(None)`: the attempt is admitted
/// (its permits in place) and runs next.
#[inline(never)]
pub(super) fn poll_rare<'p, T, E, S, H, Fut, M, V, R>(
    parts: Fields<'_, 'p, S, H, Fut, M, V, R>,
    cx: &mut Context<'_>,
) -> Poll<Option<Step<T, E>>>
where
    Fut: Future<Output = Result<T, E>>,
    M: Hedges<Fut>,
    R: RoundSlot<'p, Fut>,
    H: ErrorHandling<E>,
    S: LastError<E>,
    V: Shape,
{
    let Fields { call, phase, permits, mut attempt, mut timer, rare, hedges } = parts;
    loop {
        match *phase {
            Phase::Delayed | Phase::DelayedHedged => {
                if let Some(wait) = call.rare.as_mut().and_then(|rare| rare.backoff.take()) {
                    timer.set(Some(sleep(wait)));
                }
                let Some(sleep) = timer.as_mut().as_pin_mut() else { panic!("a backoff without its timer") };
                ready!(sleep.poll(cx));
                timer.set(None);
                *phase = if *phase == Phase::Delayed { Phase::Admitting } else { Phase::Hedged };
            }
            Phase::Hedged => {
                call.start_if_new();
                // A call that does not hedge (nested: see `hedge`) makes its
                // one attempt once admitted, as `Policy::run` does (see
                // `Hedges::MAKES`).
                *phase = if call.hedging().is_some() { Phase::AdmittingRound } else { Phase::Admitting };
            }
            Phase::Admitting | Phase::AdmittingRound => {
                let round = *phase == Phase::AdmittingRound;
                let admission = call.guards_ref().view::<V>().admit(call.next_kind_now(), call.priority());
                match admission {
                    Admission::Go(admitted) => {
                        if !round {
                            *permits = Some(admitted);
                            return Poll::Ready(None);
                        }
                        start_round(call, phase, widen::<V>(admitted), rare, hedges);
                    }
                    other => match not_admitted_now(call, rare, widen_admission::<V>(other), round) {
                        Ok(next) => *phase = next,
                        Err(rejection) => {
                            *phase = Phase::Finished;
                            return Poll::Ready(Some(call.refused(attempt.as_mut(), rejection)));
                        }
                    },
                }
            }
            Phase::Waiting | Phase::WaitingRound => {
                let Some(RareProj::Waiting { waiting }) = rare.as_mut().map(|rare| rare.as_mut().project())
                else {
                    unreachable!("a wait in its box")
                };
                let admitted = ready!(waiting.as_mut().poll(cx));
                *rare = None;
                match admitted {
                    Ok(admitted) => {
                        if *phase == Phase::Waiting {
                            *permits = Some(narrow::<V>(admitted));
                            return Poll::Ready(None);
                        }
                        start_round(call, phase, admitted, rare, hedges);
                    }
                    Err(rejection) => {
                        *phase = Phase::Finished;
                        return Poll::Ready(Some(call.refused(attempt.as_mut(), rejection)));
                    }
                }
            }
            Phase::Hedging => {
                let Some(RareProj::Round { round }) = rare.as_mut().map(|rare| rare.as_mut().project())
                else {
                    unreachable!("a round in its box")
                };
                let end = ready!(round.poll_round(call, hedges, cx));
                *rare = None;
                let step = match end {
                    RoundEnd::Won(value) => Step::Done(Ok(value)),
                    RoundEnd::Cut => Step::Done(Err(call.deadline_cut())),
                    RoundEnd::Failed(class, error) => match call.after_failure(class, error) {
                        Err(error) => Step::Done(Err(error)),
                        Ok(wait) if wait.is_zero() => Step::Retry,
                        Ok(wait) => {
                            timer.set(Some(sleep(wait)));
                            *phase = Phase::BackingOff;
                            continue;
                        }
                    },
                };
                *phase = Phase::Finished;
                return Poll::Ready(Some(step));
            }
            Phase::BackingOff => return poll_backoff(timer, phase, cx).map(Some),
            Phase::Running | Phase::Finished => panic!("an attempt polled after it finished"),
        }
    }
}

/// The first attempt of a round is admitted: the round starts with it,
/// counted as one attempt.
fn start_round<'p, T, E, S, H, Fut, M, V, R>(
    call: &mut Call<'p, S, H, V>,
    phase: &mut Phase,
    admitted: GuardPermits,
    rare: &mut Option<Pin<Box<Rare<'p, R>>>>,
    hedges: &mut M,
) where
    Fut: Future<Output = Result<T, E>>,
    M: Hedges<Fut>,
    R: RoundSlot<'p, Fut>,
    S: LastError<E>,
    V: Shape,
{
    let Some(hedge) = call.settings().hedge else {
        unreachable!("a round is started only by a call that hedges")
    };
    call.begin_attempt::<E>();
    // Allocated first, so that the round is built in place rather than
    // beside it and copied in.
    let slot = Box::new_uninit();
    *rare = Some(Box::into_pin(Box::write(
        slot,
        Rare::Round { round: R::hold(Round::new(call, hedge, admitted, hedges.make())) },
    )));
    *phase = Phase::Hedging;
}

/// Waits out the backoff in `timer`; then the step is over, and the loop
/// retries.
#[inline(never)]
pub(super) fn poll_backoff<T, E>(
    timer: Pin<&mut Option<Sleep>>,
    phase: &mut Phase,
    cx: &mut Context<'_>,
) -> Poll<Step<T, E>> {
    let Some(sleep) = timer.as_pin_mut() else { panic!("a backoff without its timer") };
    ready!(sleep.poll(cx));
    *phase = Phase::Finished;
    Poll::Ready(Step::Retry)
}

/// The guards did not admit the attempt at once: it waits (for the first
/// attempt of a round when `round`), going to the phase returned, or it was
/// refused.
#[cold]
#[inline(never)]
pub(super) fn not_admitted_now<'p, S, H, R, V: Shape>(
    call: &mut Call<'p, S, H, V>,
    rare: &mut Option<Pin<Box<Rare<'p, R>>>>,
    admission: crate::guards::GuardAdmission,
    round: bool,
) -> Result<Phase, crate::rejection::Rejection> {
    match admission {
        Admission::Go(_) => unreachable!("an attempt admitted at once does not wait"),
        Admission::Wait(pending) => {
            *rare = Some(Box::pin(Rare::Waiting { waiting: call.wait_for(pending) }));
            Ok(if round { Phase::WaitingRound } else { Phase::Waiting })
        }
        Admission::Refuse(rejection) => Err(rejection),
    }
}

/// What admission said, as the whole set holds it.
#[inline(always)]
pub(super) fn widen_admission<V: Shape>(
    admission: crate::guards::ShapedAdmission<V>,
) -> crate::guards::GuardAdmission {
    match admission {
        Admission::Go(permits) => Admission::Go(widen::<V>(permits)),
        Admission::Wait(pending) => Admission::Wait(widen_pending::<V>(pending)),
        Admission::Refuse(rejection) => Admission::Refuse(rejection),
    }
}
