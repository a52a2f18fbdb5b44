//! Retry tokens leased from a fleet: while a lease is held, a retry needs
//! one of them as well as the local budget's leave.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// The tokens a fleet leased to this process, and whether the budget draws
/// on them at all (a lease is held only while the fleet's store answers).
#[derive(Debug, Default)]
pub(super) struct Lease {
    held: AtomicBool,
    tokens: AtomicU32,
}

impl Lease {
    /// Whether a retry needs a leased token now.
    #[inline]
    pub(super) fn held(&self) -> bool {
        self.held.load(Ordering::Acquire)
    }

    /// The tokens left, when a lease is held.
    pub(super) fn tokens(&self) -> Option<u32> {
        self.held().then(|| self.tokens.load(Ordering::Acquire))
    }

    /// Takes one token; `false` when none is left.
    pub(super) fn take(&self) -> bool {
        self.tokens.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok()
    }

    /// Puts back a token taken for a retry the local budget then refused.
    pub(super) fn give_back(&self) {
        self.tokens.fetch_add(1, Ordering::AcqRel);
    }

    /// Adds `tokens` and holds the lease from now on.
    pub(super) fn grant(&self, tokens: u32) {
        let _ =
            self.tokens.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| Some(n.saturating_add(tokens)));
        self.held.store(true, Ordering::Release);
    }

    /// Ends the lease: the tokens left are returned and the budget is local again.
    pub(super) fn end(&self) -> u32 {
        self.held.store(false, Ordering::Release);
        self.tokens.swap(0, Ordering::AcqRel)
    }
}
