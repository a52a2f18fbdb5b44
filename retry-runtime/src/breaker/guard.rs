//! The breaker as a [`Guard`]: it admits while closed (one atomic load),
//! and a limited number of probes while half-open; it hears every
//! attempt's end as a success, a failure or neither.

use std::num::NonZeroU64;

use tokio::time::Instant;

use super::{CircuitBreaker, Outcome, Ticket};
use crate::guard::{Admit, Answer, AttemptKind, Guard};
use crate::priority::Priority;
use crate::rejection::Rejection;

/// What an attempt a breaker admitted holds: its [`Ticket`], and when the
/// attempt started if the breaker times its attempts (it judges slow
/// calls: see `BreakerConfig::slow_call_duration`), to the millisecond.
///
/// Two words, as the ticket alone was: the epoch, and one word holding
/// whether it is a probe, whether it is timed and, if so, when it started
/// (milliseconds since the breaker was made, wrapping: a difference of two
/// is right for any attempt shorter than 49 days). An untimed attempt's
/// second word is its probe bit alone, written and read as the ticket's
/// `probe` was; the start is read only off the success path.
#[derive(Debug, Clone, Copy)]
pub struct BreakerTicket {
    epoch: u64,
    /// Bit 0: a probe; bit 1: timed; bit 2: always set (so that an
    /// `Option<BreakerTicket>`, a permit of a slot that may hold no
    /// breaker, is as small as the ticket: zero is its `None`); bits
    /// 32-63: the start, if timed.
    meta: NonZeroU64,
}

const PROBE: u64 = 0b001;
const TIMED: u64 = 0b010;
const HELD: NonZeroU64 = NonZeroU64::MIN.saturating_add(0b011);

// The niche that keeps `Option<BreakerTicket>` two words.
const _: () = assert!(size_of::<Option<BreakerTicket>>() == size_of::<BreakerTicket>());

impl BreakerTicket {
    /// The permit of an attempt `breaker` admitted now with `ticket`,
    /// timed or not.
    #[inline(always)]
    pub(super) fn admitted(breaker: &CircuitBreaker, ticket: Ticket, timed: bool) -> Self {
        let probe = if ticket.probe { PROBE } else { 0 };
        let meta =
            if timed { HELD | (u64::from(breaker.now_ms()) << 32 | TIMED | probe) } else { HELD | probe };
        BreakerTicket { epoch: ticket.epoch, meta }
    }

    /// An untimed attempt's permit: `ticket` alone.
    #[inline(always)]
    pub(super) fn untimed(ticket: Ticket) -> Self {
        BreakerTicket { epoch: ticket.epoch, meta: HELD | if ticket.probe { PROBE } else { 0 } }
    }

    /// The breaker's ticket.
    #[inline(always)]
    pub fn ticket(&self) -> Ticket {
        Ticket { epoch: self.epoch, probe: self.is_probe() }
    }

    /// Whether the attempt holds a half-open probe slot.
    #[inline(always)]
    pub(super) fn is_probe(&self) -> bool {
        self.meta.get() & PROBE != 0
    }

    /// When the attempt started, in `CircuitBreaker::now_ms`'s count, if it is timed.
    #[inline(always)]
    pub(super) fn started_ms(&self) -> Option<u32> {
        (self.meta.get() & TIMED != 0).then_some((self.meta.get() >> 32) as u32)
    }

    /// Times the attempt from `sent` (if later than its admission), as a
    /// bulkhead's place does (`Place::measure_from`): what the client did
    /// before its request went out is not the dependency's slowness.
    #[inline]
    pub(crate) fn measure_from(&mut self, sent: Instant, breaker: &CircuitBreaker) {
        if let Some(started) = self.started_ms() {
            let sent_ms = breaker.ms_at(sent);
            // Later, in the wrapping count: the difference is below half its range.
            if sent_ms.wrapping_sub(started) < u32::MAX / 2 {
                self.meta = HELD | (u64::from(sent_ms) << 32 | (self.meta.get() & (TIMED | PROBE)));
            }
        }
    }
}

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
    type Permit = BreakerTicket;

    #[inline(always)]
    fn admit(&self, _kind: AttemptKind, _priority: Priority) -> Admit<BreakerTicket> {
        match self.try_acquire_closed() {
            Some(closed) => {
                Admit::Go(BreakerTicket::admitted(self, Ticket { epoch: closed.epoch, probe: false }, false))
            }
            None => match self.admit_other() {
                Some((ticket, timed)) => Admit::Go(BreakerTicket::admitted(self, ticket, timed)),
                None => Admit::Refuse,
            },
        }
    }

    /// A closed breaker whose attempts are not timed: a breaker that
    /// judges slow calls is asked properly, and its call is not plain.
    #[inline(always)]
    fn admit_quietly(&self, _kind: AttemptKind) -> Option<BreakerTicket> {
        self.try_acquire_closed()
            .map(|closed| BreakerTicket::untimed(Ticket { epoch: closed.epoch, probe: false }))
    }

    #[inline(always)]
    fn record(&self, permit: BreakerTicket, answer: Answer) {
        self.record_permit(permit, outcome_of(answer));
    }

    #[inline(always)]
    fn abandon(&self, permit: BreakerTicket) {
        // A closed-era ticket holds no probe slot: nothing to free.
        if permit.is_probe() {
            self.abandon_probe(permit.ticket());
        }
    }

    #[inline]
    fn give_back(&self, permit: BreakerTicket) {
        if permit.is_probe() {
            self.give_back_probe(permit.ticket());
        }
    }

    #[cold]
    fn rejection(&self) -> Rejection {
        Rejection::CircuitOpen { breaker: self.keyed.named(self.name()) }
    }
}
