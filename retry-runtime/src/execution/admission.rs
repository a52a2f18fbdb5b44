//! Admission, the first step of an attempt: the throttle, the breaker, the
//! rate limit and the bulkhead, in that order, or why the attempt cannot run.
//!
//! Why this order: the throttle counts every request the application makes
//! (the SRE book's `requests`), so it comes first and refuses without
//! touching anything else; the breaker refuses fast when the dependency is
//! down, before a rate-limit turn or a bulkhead place is spent on an attempt
//! that cannot run; the two that may wait come last, and while an attempt
//! waits for either it holds no half-open probe slot (the breaker is asked
//! again once the wait is over).

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

/// Admission up to the bulkhead, without waiting: the throttle, the
/// breaker, then a rate-limit turn if one is free. `Err(None)` when none
/// is (no probe slot is held while the attempt waits for it). Both paths
/// admit through here; the direct path holds its place already.
#[inline(always)]
pub(super) fn admit_before_place(guards: &Guards) -> Result<Option<BreakerPermit<'_>>, Option<Refusal>> {
    if let Some(throttle) = &guards.throttle
        && !throttle.admit()
    {
        return Err(Some(Refusal::throttled(throttle)));
    }
    let breaker = admit_breaker(guards).map_err(Some)?;
    if let Some(limit) = &guards.rate_limit
        && !limit.try_acquire()
    {
        return Err(None);
    }
    Ok(breaker)
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
pub(super) enum Wait {
    /// A rate-limit turn, then a bulkhead place.
    Turn,
    /// A bulkhead place (the rate limit, if any, gave its turn).
    Place,
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
    /// Admission: the throttle, the breaker, the rate limit, the bulkhead.
    pub(super) async fn admit<'g>(&self, guards: &'g Guards) -> Result<Admitted<'g>, Refusal> {
        match self.admit_now(guards)? {
            Ok(admitted) => Ok(admitted),
            Err(wait) => self.admit_after(guards, wait).await,
        }
    }

    /// Admission as far as it goes without waiting: admitted, refused, or
    /// what is left to wait for. Most attempts are admitted here, with no
    /// future built; holding nothing when it says to wait.
    #[inline]
    pub(super) fn admit_now<'g>(&self, guards: &'g Guards) -> Result<Result<Admitted<'g>, Wait>, Refusal> {
        let breaker = match admit_before_place(guards) {
            Ok(breaker) => breaker,
            Err(Some(refusal)) => return Err(refusal),
            Err(None) => return Ok(Err(Wait::Turn)),
        };
        let bulkhead = match &guards.bulkhead {
            None => None,
            // The uncontended bulkhead hands out a permit without a wait (or a future).
            Some(bulkhead) => match bulkhead.try_acquire() {
                Some(permit) => Some(permit),
                // Queue without a probe slot: with a saturated bulkhead a
                // held slot would stall the breaker's recovery.
                None => return Ok(Err(Wait::Place)),
            },
        };
        Ok(Ok(Admitted { breaker, bulkhead }))
    }

    /// The rest of admission, once `admit_now` said to wait: the turn or
    /// the place, then the breaker asked again.
    pub(super) async fn admit_after<'g>(
        &self,
        guards: &'g Guards,
        wait: Wait,
    ) -> Result<Admitted<'g>, Refusal> {
        let mut breaker = None;
        if let Wait::Turn = wait {
            if let Some(limit) = &guards.rate_limit {
                // Boxed: the waits are rare, and their state would make every
                // attempt's future larger (and costlier to move).
                Box::pin(turn_within(limit, self.turn_deadline())).await?;
            }
            breaker = admit_breaker(guards)?;
        }
        let bulkhead = match &guards.bulkhead {
            None => None,
            Some(bulkhead) => match bulkhead.try_acquire() {
                Some(permit) => Some(permit),
                None => {
                    drop(breaker.take());
                    Some(Box::pin(self.wait_for_permit(bulkhead)).await?)
                }
            },
        };
        if breaker.is_none() {
            breaker = admit_breaker(guards)?;
        }
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
