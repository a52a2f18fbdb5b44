//! [`BreakerPermit`]: one admitted attempt's claim on a breaker.

use super::word::PackedTicket;
use super::{CircuitBreaker, Outcome, Ticket};

/// Permission to run one attempt through a [`CircuitBreaker`].
///
/// Report how the attempt ended with [`record`](Self::record). Dropping the
/// permit without recording (the attempt was cancelled, or never ran)
/// records nothing and frees any half-open probe slot it held.
#[must_use = "an unrecorded permit tells the breaker nothing"]
pub struct BreakerPermit<'a> {
    breaker: &'a CircuitBreaker,
    ticket: PackedTicket,
}

impl std::fmt::Debug for BreakerPermit<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreakerPermit")
            .field("breaker", &self.breaker.name())
            .field("ticket", &self.ticket.peek())
            .finish()
    }
}

impl<'a> BreakerPermit<'a> {
    #[inline]
    pub(super) fn new(breaker: &'a CircuitBreaker, ticket: Ticket) -> Self {
        BreakerPermit { breaker, ticket: PackedTicket::new(ticket) }
    }

    /// Whether this attempt is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.peek().is_some_and(|t| t.probe)
    }

    /// Gives the permit back for an attempt that was certainly never made
    /// (its admission waits for something else first): a half-open probe's
    /// slot is freed and, unlike a dropped permit's, it counts no more
    /// against the probes a trip allowed in all (see
    /// [`trip_until`](CircuitBreaker::trip_until)).
    pub(crate) fn give_back(mut self) {
        if let Some(ticket) = self.ticket.take()
            && ticket.probe
        {
            self.breaker.lock().give_back(ticket);
        }
    }

    /// Records the attempt's outcome.
    #[inline]
    pub fn record(mut self, outcome: Outcome) {
        if let Some(ticket) = self.ticket.take() {
            self.breaker.count(outcome);
            // The common case, inlined: a success or a permanent error of a
            // closed-era attempt that leaves nothing to do (one atomic load).
            if !ticket.probe && self.breaker.nothing_to_record(outcome) {
                return;
            }
            self.breaker.record_slow(ticket, outcome);
        }
    }
}

impl Drop for BreakerPermit<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take()
            && ticket.probe
        {
            self.breaker.abandon(ticket);
        }
    }
}
