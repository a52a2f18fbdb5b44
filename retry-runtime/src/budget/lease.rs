//! Retry tokens leased from a fleet: while a lease is held, a retry needs
//! one of them as well as the local budget's leave.

use std::sync::atomic::{AtomicU64, Ordering};

/// The tokens a fleet leased to this process, and whether the budget draws
/// on them at all (a lease is held only while the fleet's store answers).
///
/// One word, so that ending a lease and giving a token back cannot cross:
/// the tokens in the low half, whether a lease is held in bit 32, and above
/// it how many leases ended. A token taken under a lease goes back only to
/// that lease while it is held: one ended has been dropped, and the next
/// holds only what the fleet granted it.
#[derive(Debug, Default)]
pub(super) struct Lease {
    state: AtomicU64,
}

const TOKENS: u64 = u32::MAX as u64;
const HELD: u64 = 1 << 32;
/// One more ended lease.
const ENDED: u64 = 1 << 33;

/// A token taken: which lease it came from, to give it back to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Taken {
    /// The count of ended leases (`state / ENDED`, below 2^31): half a
    /// word, so that a retry's pending withdrawal has room for its budget
    /// in a call's state (see `call::rare_state::Withdrawn`).
    ended_before: u32,
}

/// How many leases ended, of a lease's `state`: below 2^31 (a `u64` over 2^33).
fn ended(state: u64) -> u32 {
    u32::try_from(state / ENDED).unwrap_or(u32::MAX)
}

impl Lease {
    /// Whether a retry needs a leased token now.
    #[inline]
    pub(super) fn held(&self) -> bool {
        self.state.load(Ordering::Acquire) & HELD != 0
    }

    /// The tokens left, when a lease is held.
    pub(super) fn tokens(&self) -> Option<u32> {
        let state = self.state.load(Ordering::Acquire);
        (state & HELD != 0).then_some((state & TOKENS) as u32)
    }

    /// Takes one token; `None` when none is left.
    pub(super) fn take(&self) -> Option<Taken> {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                (state & TOKENS != 0).then(|| state - 1)
            })
            .ok()
            .map(|state| Taken { ended_before: ended(state) })
    }

    /// Puts back a token taken for a retry the local budget then refused,
    /// or that did not run after all, if the lease it came from is still
    /// held (else it was dropped with it).
    pub(super) fn give_back(&self, taken: Taken) {
        let _ = self.state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
            // The same lease, and so still held: only `end` stops holding
            // one, and it counts one more ended.
            let same = ended(state) == taken.ended_before;
            (same && state & TOKENS != TOKENS).then(|| state + 1)
        });
    }

    /// Adds `tokens` (saturating) and holds the lease from now on.
    pub(super) fn grant(&self, tokens: u32) {
        let _ = self.state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
            let sum = (state & TOKENS).saturating_add(tokens.into()).min(TOKENS);
            Some(state & !TOKENS | HELD | sum)
        });
    }

    /// Ends the lease: the tokens left are returned and the budget is local again.
    pub(super) fn end(&self) -> u32 {
        let before = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                Some((state / ENDED).wrapping_add(1).wrapping_mul(ENDED))
            })
            .unwrap_or_else(|state| state);
        (before & TOKENS) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_given_back_after_its_lease_ended_stays_dropped() {
        // A retry takes a token, the store goes away (the lease ends), the
        // local budget refuses the retry: the token went with the lease.
        let lease = Lease::default();
        lease.grant(3);
        let taken = lease.take().unwrap();
        assert_eq!(lease.end(), 2);
        lease.give_back(taken);
        assert_eq!(lease.tokens(), None);
        lease.grant(2);
        assert_eq!(lease.tokens(), Some(2), "the new lease holds what was granted");
        // The same with the new lease granted before the token comes back.
        let taken = lease.take().unwrap();
        lease.end();
        lease.grant(2);
        lease.give_back(taken);
        assert_eq!(lease.tokens(), Some(2));
        // Under the same lease it goes back.
        let taken = lease.take().unwrap();
        lease.give_back(taken);
        assert_eq!(lease.tokens(), Some(2));
    }

    /// Each end counts one ended lease more, whatever the lease held when
    /// it ended: a token taken under the second lease does not go back
    /// into the third.
    #[test]
    fn every_end_starts_a_new_lease_for_what_comes_back() {
        let lease = Lease::default();
        lease.grant(1);
        assert_eq!(lease.end(), 1);
        lease.grant(2);
        let taken = lease.take().unwrap();
        assert_eq!(lease.end(), 1);
        lease.grant(2);
        lease.give_back(taken);
        assert_eq!(lease.tokens(), Some(2), "the token went with the second lease");
    }

    /// An empty lease refuses a token and stays as it was: held, empty.
    #[test]
    fn a_spent_lease_gives_no_token() {
        let lease = Lease::default();
        assert!(lease.take().is_none(), "no lease, no token");
        lease.grant(1);
        assert!(lease.take().is_some());
        assert!(lease.take().is_none(), "spent");
        assert_eq!(lease.tokens(), Some(0));
        assert!(lease.held(), "still held: a retry needs a leased token");
    }

    #[test]
    fn a_full_lease_saturates_instead_of_wrapping() {
        let lease = Lease::default();
        lease.grant(u32::MAX);
        let taken = lease.take().unwrap();
        lease.grant(1);
        lease.give_back(taken);
        assert_eq!(lease.tokens(), Some(u32::MAX));
    }
}
