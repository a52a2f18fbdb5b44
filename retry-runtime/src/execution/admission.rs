//! Steps 1 and 2 of an attempt: the breaker's permission, then the
//! bulkhead's permit, or why the attempt cannot run.

use tokio::time::timeout_at;

use super::Execution;
use crate::breaker::{BreakerPermit, CircuitBreaker};
use crate::bulkhead::{Bulkhead, BulkheadPermit};
use crate::decision::StopReason;
use crate::guards::Guards;
use crate::rejection::Rejection;

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

/// Why an attempt could not run: the rejection for the caller when no
/// attempt ran before, and the reason for the trace.
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
}

/// The permits of an admitted attempt.
pub(super) struct Admitted<'g> {
    pub(super) breaker: Option<BreakerPermit<'g>>,
    pub(super) bulkhead: Option<BulkheadPermit<'g>>,
}

impl<S, H> Execution<'_, S, H> {
    /// Steps 1 and 2: the breaker's permission, then the bulkhead's permit.
    pub(super) async fn admit<'g>(&self, guards: &'g Guards) -> Result<Admitted<'g>, Refusal> {
        let mut breaker = admit_breaker(guards)?;
        let bulkhead = match &guards.bulkhead {
            None => None,
            // The uncontended bulkhead hands out a permit without a wait (or a future).
            Some(bulkhead) => match bulkhead.try_acquire() {
                Some(permit) => Some(permit),
                None => {
                    // Queue without a probe slot: with a saturated bulkhead a
                    // held slot would stall the breaker's recovery.
                    drop(breaker.take());
                    let permit = self.wait_for_permit(bulkhead).await?;
                    breaker = admit_breaker(guards)?;
                    Some(permit)
                }
            },
        };
        Ok(Admitted { breaker, bulkhead })
    }

    /// Waits for a bulkhead permit after the fast try found none: at most
    /// `max_wait`, and never past the deadline.
    async fn wait_for_permit<'b>(&self, bulkhead: &'b Bulkhead) -> Result<BulkheadPermit<'b>, Refusal> {
        let acquired = match self.deadline {
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

    pub(super) fn deadline_refusal(&self) -> Refusal {
        let after = self.settings.deadline.unwrap_or_default();
        Refusal { rejection: Rejection::DeadlineExceeded { after }, reason: StopReason::Deadline }
    }
}
