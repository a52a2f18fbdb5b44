//! The breaker as a [`Guard`]: it admits while closed (one atomic load),
//! and a limited number of probes while half-open; it hears every
//! attempt's end as a success, a failure or neither.

use super::{CircuitBreaker, Outcome, Ticket};
use crate::guard::{Admit, Answer, AttemptKind, Guard};
use crate::rejection::Rejection;

/// What the breaker hears of an attempt that ended with `answer`:
/// transient and throttled errors (an attempt timeout included) and a
/// deadline's cut are failures; conflicts and permanent errors say nothing
/// about the dependency's health.
#[inline]
fn outcome_of(answer: Answer) -> Outcome {
    match answer {
        Answer::Success => Outcome::Success,
        Answer::Failed(class) if class.is_failure() => Outcome::Failure,
        Answer::Failed(_) => Outcome::Neutral,
        Answer::Cut => Outcome::Failure,
    }
}

impl Guard for CircuitBreaker {
    type Permit = Ticket;

    #[inline(always)]
    fn admit(&self, _kind: AttemptKind) -> Admit<Ticket> {
        match self.try_acquire_closed() {
            Some(closed) => Admit::Go(Ticket { epoch: closed.epoch, probe: false }),
            None => match self.admit_locked() {
                Some(ticket) => Admit::Go(ticket),
                None => Admit::Refuse,
            },
        }
    }

    #[inline(always)]
    fn admit_quietly(&self, _kind: AttemptKind) -> Option<Ticket> {
        self.try_acquire_closed().map(|closed| Ticket { epoch: closed.epoch, probe: false })
    }

    #[inline(always)]
    fn record(&self, ticket: Ticket, answer: Answer) {
        self.record_ticket(ticket, outcome_of(answer));
    }

    #[inline(always)]
    fn abandon(&self, ticket: Ticket) {
        // A closed-era ticket holds no probe slot: nothing to free.
        if ticket.probe {
            self.abandon_probe(ticket);
        }
    }

    #[inline]
    fn give_back(&self, ticket: Ticket) {
        if ticket.probe {
            self.give_back_probe(ticket);
        }
    }

    #[cold]
    fn rejection(&self) -> Rejection {
        Rejection::CircuitOpen { breaker: self.name().to_owned() }
    }
}
