//! The one bit layout of the breaker's packed words.
//!
//! Both words the breaker packs keep the epoch in the high bits and three
//! flag bits below it:
//!
//! ```text
//!  63                                  3   2   1   0
//! +--------------------------------------+---+---+---+
//! |                epoch                 |   flags   |
//! +--------------------------------------+---+---+---+
//! published word  (CircuitBreaker):  bit 2 SLOW_SUCCESS, bits 0-1 the stored state
//!                                    (3: closed, its attempts timed)
//! ticket word     (BreakerPermit):   bit 1 PROBE, bit 0 HELD
//! ```
//!
//! The published word is written only under the breaker's mutex, after every
//! change, and read without it by the fast paths. Epochs grow by one per
//! transition, so 61 bits never run out.

use super::{BreakerState, Ticket};

const FLAG_BITS: u32 = 3;
const FLAGS: u64 = (1 << FLAG_BITS) - 1;

const STATE: u64 = 0b011;
/// Published: closed, and its attempts are timed (it judges slow calls):
/// a state value of its own, so that the untimed closed breaker's fast
/// paths, which test for state 0, stay one compare.
const CLOSED_TIMED: u64 = 0b011;
/// Published: a success must take the lock (failures to clear, or every call counts).
const SLOW_SUCCESS: u64 = 0b100;
/// Ticket: not yet handed back.
const HELD: u64 = 0b001;
/// Ticket: holds a half-open probe slot.
const PROBE: u64 = 0b010;

#[inline]
fn pack(epoch: u64, flags: u64) -> u64 {
    epoch << FLAG_BITS | (flags & FLAGS)
}

#[inline]
pub(super) fn epoch(word: u64) -> u64 {
    word >> FLAG_BITS
}

/// The published word of a breaker in `state` at `epoch`; `timed`: while
/// closed, its attempts are timed.
#[inline]
pub(super) fn published(epoch: u64, state: BreakerState, slow_success: bool, timed: bool) -> u64 {
    let state = match state {
        BreakerState::Closed if timed => CLOSED_TIMED,
        BreakerState::Closed => 0,
        BreakerState::Open => 1,
        BreakerState::HalfOpen => 2,
    };
    pack(epoch, state | if slow_success { SLOW_SUCCESS } else { 0 })
}

/// The stored state a published word carries.
#[inline]
pub(super) fn state(word: u64) -> BreakerState {
    match word & STATE {
        0 | CLOSED_TIMED => BreakerState::Closed,
        1 => BreakerState::Open,
        _ => BreakerState::HalfOpen,
    }
}

/// Whether a published word says closed, its attempts untimed: an attempt
/// is admitted from the word alone, with nothing to note.
#[inline]
pub(super) fn closed_untimed(word: u64) -> bool {
    word & STATE == 0
}

/// Whether a published word says closed, its attempts timed.
#[inline]
pub(super) fn closed_timed(word: u64) -> bool {
    word & STATE == CLOSED_TIMED
}

/// Whether a published word says: closed in `epoch`, and a success
/// changes nothing (the word with no flag set).
#[inline]
pub(super) fn closed_and_quiet_in(word: u64, epoch: u64) -> bool {
    word == pack(epoch, 0)
}

/// [`closed_and_quiet_in`] for a breaker whose attempts are timed: a
/// success that was not slow changes nothing.
#[inline]
pub(super) fn closed_timed_and_quiet_in(word: u64, epoch: u64) -> bool {
    word == pack(epoch, CLOSED_TIMED)
}

/// A [`Ticket`] in one word, so that a permit is two words (cheap to move
/// and to keep across an await). `HELD` is cleared once it is handed back.
#[derive(Clone, Copy)]
pub(super) struct PackedTicket(u64);

impl PackedTicket {
    #[inline]
    pub(super) fn new(ticket: Ticket) -> Self {
        PackedTicket(pack(ticket.epoch, HELD | if ticket.probe { PROBE } else { 0 }))
    }

    /// The ticket, if still held; it is not held afterwards.
    #[inline]
    pub(super) fn take(&mut self) -> Option<Ticket> {
        let word = std::mem::replace(&mut self.0, 0);
        (word & HELD != 0).then_some(Ticket { epoch: epoch(word), probe: word & PROBE != 0 })
    }

    #[inline]
    pub(super) fn peek(self) -> Option<Ticket> {
        let mut copy = self;
        copy.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_words_round_trip_through_the_layout() {
        for epoch in [0, 1, 7, (1 << 61) - 1] {
            for state in [BreakerState::Closed, BreakerState::Open, BreakerState::HalfOpen] {
                for (slow, timed) in [(false, false), (true, false), (false, true), (true, true)] {
                    let word = published(epoch, state, slow, timed);
                    assert_eq!((super::epoch(word), super::state(word)), (epoch, state));
                    let closed = state == BreakerState::Closed;
                    assert_eq!(closed_and_quiet_in(word, epoch), closed && !slow && !timed);
                    assert_eq!(closed_timed_and_quiet_in(word, epoch), closed && !slow && timed);
                    assert_eq!(
                        (closed_untimed(word), closed_timed(word)),
                        (closed && !timed, closed && timed)
                    );
                    assert!(!closed_and_quiet_in(word, epoch + 1), "another epoch's word");
                    assert!(!closed_timed_and_quiet_in(word, epoch + 1), "another epoch's word");
                }
            }
            for probe in [false, true] {
                let mut packed = PackedTicket::new(Ticket { epoch, probe });
                assert_eq!(packed.peek(), Some(Ticket { epoch, probe }));
                assert_eq!(packed.take(), Some(Ticket { epoch, probe }));
                assert_eq!(packed.take(), None, "handed back once");
            }
        }
    }
}
