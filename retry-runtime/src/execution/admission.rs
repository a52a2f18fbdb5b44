//! Admission, the first step of an attempt: the throttle, the breaker, the
//! bulkhead and the rate limit, in that order, or why the attempt cannot run.
//!
//! Why this order: the throttle counts every request the application makes
//! (the SRE book's `requests`), so it comes first and refuses without
//! touching anything else; the breaker refuses fast when the dependency is
//! down, before a bulkhead place or a rate-limit turn is spent on an attempt
//! that cannot run; the two that may wait come last, and while an attempt
//! waits for either it holds no half-open probe slot (the breaker is asked
//! again once the wait is over).
//!
//! The place comes before the turn: a turn is the request's slot in the
//! dependency's quota, and one taken for an attempt the bulkhead then
//! refuses (full through its `max_wait`) would be spent on a request never
//! sent. It cannot be given back: the limiter (governor's GCRA) has no such
//! thing, and a turn handed back after later ones were scheduled would let
//! two requests go closer together than the rate allows. resilience4j, whose
//! rate limiter sits outside its bulkhead, spends the permit. So an attempt
//! holds its place while it waits for its turn (at most the limit's
//! `max_wait`, never past the deadline), and gives it back if the turn does
//! not come; an adaptive bulkhead's latency sample starts once it has it.

use tokio::time::{Instant, timeout_at};

use super::Execution;
use crate::breaker::{BreakerPermit, CircuitBreaker};
use crate::bulkhead::{Bulkhead, BulkheadPermit};
use crate::decision::StopReason;
use crate::guards::Guards;
use crate::rate_limit::{Late, RateLimit};
use crate::rejection::Rejection;
use crate::throttle::Throttle;

/// Asks the breaker (if any) to admit an attempt.
#[inline]
pub(super) fn admit_breaker(guards: &Guards) -> Result<Option<BreakerPermit<'_>>, Refusal> {
    match &guards.breaker {
        None => Ok(None),
        Some(breaker) => match breaker.try_acquire() {
            Some(permit) => Ok(Some(permit)),
            None => Err(Refusal::circuit_open(breaker)),
        },
    }
}

/// The throttle, then the breaker: what refuses an attempt without waiting.
#[inline(always)]
fn admit_throttle_and_breaker(guards: &Guards) -> Result<Option<BreakerPermit<'_>>, Refusal> {
    if let Some(throttle) = &guards.throttle
        && !throttle.admit()
    {
        return Err(Refusal::throttled(throttle));
    }
    admit_breaker(guards)
}

/// Takes a rate-limit turn if one is free now (or the call has no rate limit).
#[inline(always)]
fn turn_taken_now(guards: &Guards) -> bool {
    guards.rate_limit.as_ref().is_none_or(|limit| limit.try_acquire())
}

/// Admission of an attempt that holds its place already (the direct path
/// takes it as the attempt is made), without waiting: the throttle, the
/// breaker, then a rate-limit turn if one is free. `Err(None)` when none
/// is (no probe slot is held while the attempt waits for it).
#[inline(always)]
pub(super) fn admit_holding_place(guards: &Guards) -> Result<Option<BreakerPermit<'_>>, Option<Refusal>> {
    let breaker = admit_throttle_and_breaker(guards).map_err(Some)?;
    if !turn_taken_now(guards) {
        give_back_probe(breaker);
        return Err(None);
    }
    Ok(breaker)
}

/// Gives back the breaker's permit of an attempt that goes on to wait for
/// a place or a turn instead of running now: no probe slot is held while
/// it waits, and since the probe was certainly never sent, a trip's
/// allowance of probes in all (a fleet's share of the round) gets it back
/// too; dropped, it would stay spent, and the call would be refused
/// `CircuitOpen` when the breaker is asked again after the wait.
#[cold]
fn give_back_probe(breaker: Option<BreakerPermit<'_>>) {
    if let Some(permit) = breaker {
        permit.give_back();
    }
}

/// Why an attempt could not run: the rejection for the caller when no
/// attempt ran before, and the reason for the trace.
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) rejection: Rejection,
    pub(super) reason: StopReason,
}

impl Refusal {
    #[cold]
    fn circuit_open(breaker: &CircuitBreaker) -> Self {
        Refusal {
            rejection: Rejection::CircuitOpen { breaker: breaker.name().to_owned() },
            reason: StopReason::CircuitOpen,
        }
    }

    #[cold]
    pub(super) fn throttled(throttle: &Throttle) -> Self {
        Refusal {
            rejection: Rejection::Throttled { throttle: throttle.name().to_owned() },
            reason: StopReason::Throttled,
        }
    }

    #[cold]
    pub(super) fn rate_limited(limit: &RateLimit) -> Self {
        Refusal {
            rejection: Rejection::RateLimited { limiter: limit.name().to_owned() },
            reason: StopReason::RateLimited,
        }
    }
}

/// The permits of an admitted attempt.
pub(super) struct Admitted<'g> {
    pub(super) breaker: Option<BreakerPermit<'g>>,
    pub(super) bulkhead: Option<BulkheadPermit<'g>>,
}

/// What admission still waits for, when it could not finish at once.
pub(super) enum Wait<'g> {
    /// A place in this bulkhead, then a rate-limit turn (if it has one).
    Place(&'g Bulkhead),
    /// A rate-limit turn, holding the attempt's place (if it needs one).
    Turn { place: Option<BulkheadPermit<'g>> },
}

/// Waits for a rate-limit turn: at most the limit's `max_wait`, and never
/// past the deadline, if any (then the call's refusal is the deadline's).
/// A turn that will come at or after the deadline is not waited for: the
/// call ends at once, as for a `Retry-After` it cannot wait out.
/// Borrows only the limit, so that either path can keep it while it waits.
pub(super) async fn turn_within(
    limit: &RateLimit,
    deadline: Option<(Instant, Refusal)>,
) -> Result<(), Refusal> {
    let Some((deadline, refusal)) = deadline else {
        return limit.acquire().await.map_err(|_| Refusal::rate_limited(limit));
    };
    // The time limit too: a caller that loses the turn it waited for
    // waits again, and the timer may fire a tick late.
    match timeout_at(deadline, limit.acquire_before(Some(deadline))).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(Late::OverRate(_))) => Err(Refusal::rate_limited(limit)),
        Ok(Err(Late::PastDeadline)) | Err(_) => Err(refusal),
    }
}

impl<S, H> Execution<'_, S, H> {
    /// Admission: the throttle, the breaker, the bulkhead, the rate limit.
    pub(super) async fn admit<'g>(&self, guards: &'g Guards) -> Result<Admitted<'g>, Refusal> {
        match self.admit_now(guards)? {
            Ok(admitted) => Ok(admitted),
            Err(wait) => self.admit_after(guards, wait).await,
        }
    }

    /// Admission as far as it goes without waiting: admitted, refused, or
    /// what is left to wait for. Most attempts are admitted here, with no
    /// future built; holding no probe slot when it says to wait.
    #[inline]
    pub(super) fn admit_now<'g>(
        &self,
        guards: &'g Guards,
    ) -> Result<Result<Admitted<'g>, Wait<'g>>, Refusal> {
        let breaker = admit_throttle_and_breaker(guards)?;
        let bulkhead = match &guards.bulkhead {
            None => None,
            // The uncontended bulkhead hands out a permit without a wait (or a future).
            Some(bulkhead) => match bulkhead.try_acquire() {
                Some(permit) => Some(permit),
                // Queue without a probe slot: with a saturated bulkhead a
                // held slot would stall the breaker's recovery.
                None => {
                    give_back_probe(breaker);
                    return Ok(Err(Wait::Place(bulkhead)));
                }
            },
        };
        if !turn_taken_now(guards) {
            give_back_probe(breaker);
            return Ok(Err(Wait::Turn { place: bulkhead }));
        }
        Ok(Ok(Admitted { breaker, bulkhead }))
    }

    /// The rest of admission, once `admit_now` said to wait: the place,
    /// then the turn (holding the place), then the breaker asked again.
    /// After a wait for the place, the breaker is asked before a turn is
    /// taken: one that opened meanwhile ends the call with no turn spent.
    pub(super) async fn admit_after<'g>(
        &self,
        guards: &'g Guards,
        wait: Wait<'g>,
    ) -> Result<Admitted<'g>, Refusal> {
        let mut bulkhead = match wait {
            // Boxed: the waits are rare, and their state would make every
            // attempt's future larger (and costlier to move).
            Wait::Place(bulkhead) => {
                let place = Box::pin(self.wait_for_permit(bulkhead)).await?;
                let breaker = admit_breaker(guards)?;
                if turn_taken_now(guards) {
                    return Ok(Admitted { breaker, bulkhead: Some(place) });
                }
                // No probe slot is held while the attempt waits for its
                // turn; the probe was never sent, so a trip's allowance of
                // probes in all gets it back too (a fleet's share of the
                // round would otherwise go unsent, the call refused after
                // its turn).
                give_back_probe(breaker);
                Some(place)
            }
            Wait::Turn { place } => place,
        };
        if let Some(limit) = &guards.rate_limit {
            // A refusal drops the place with the call's error: given back.
            Box::pin(turn_within(limit, self.turn_deadline())).await?;
            // The wait for the turn is not the dependency's latency.
            if let Some(place) = &mut bulkhead {
                place.measure_from(Instant::now());
            }
        }
        let breaker = admit_breaker(guards)?;
        Ok(Admitted { breaker, bulkhead })
    }

    /// Waits for a bulkhead permit after the fast try found none: at most
    /// `max_wait`, and never past the deadline.
    async fn wait_for_permit<'b>(&self, bulkhead: &'b Bulkhead) -> Result<BulkheadPermit<'b>, Refusal> {
        let acquired = match self.deadline() {
            None => bulkhead.acquire_waiting().await,
            Some(deadline) => match timeout_at(deadline, bulkhead.acquire_waiting()).await {
                Ok(acquired) => acquired,
                Err(_) => return Err(self.deadline_refusal()),
            },
        };
        acquired.map_err(|_| Refusal {
            rejection: Rejection::BulkheadFull { bulkhead: bulkhead.name().to_owned() },
            reason: StopReason::BulkheadFull,
        })
    }

    /// The deadline a wait for a turn must end by, with the refusal it
    /// ends the call with then (see [`turn_within`]).
    pub(super) fn turn_deadline(&self) -> Option<(Instant, Refusal)> {
        self.deadline().map(|deadline| (deadline, self.deadline_refusal()))
    }

    pub(super) fn deadline_refusal(&self) -> Refusal {
        let after = self.settings().deadline.unwrap_or_default();
        Refusal { rejection: Rejection::DeadlineExceeded { after }, reason: StopReason::Deadline }
    }
}
