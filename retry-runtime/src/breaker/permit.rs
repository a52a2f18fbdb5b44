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

    /// Records the attempt's outcome.
    #[inline]
    pub fn record(mut self, outcome: Outcome) {
        if let Some(ticket) = self.ticket.take() {
            self.breaker.record_ticket(ticket, outcome);
        }
    }
}

impl Drop for BreakerPermit<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take()
            && ticket.probe
        {
            self.breaker.abandon_probe(ticket);
        }
    }
}
