//! A retry's withdrawal from a budget, and its giving back when the retry
//! does not run after all.

use std::time::Duration;

use super::lease::Taken;
use super::{Form, RatioState, RetryBudget, RetryCause, lock};

/// What [`RetryBudget::withdraw`] took for one retry: what giving it back
/// puts back, where it was taken.
#[derive(Debug, Clone, Copy)]
pub struct Withdrawal {
    local: Local,
    /// The fleet's leased token, while a lease was held, and which lease.
    leased: Option<Taken>,
}

impl Withdrawal {
    /// The tokens a bucket took, if a bucket that refunds a retry that
    /// succeeds took them (see `TokenBucket::refund_on_success`).
    #[inline]
    pub(crate) fn refundable(self) -> Option<u32> {
        match self.local {
            Local::Bucket { cost, refund: true } => Some(cost),
            _ => None,
        }
    }
}

/// What the budget's own form took.
#[derive(Debug, Clone, Copy)]
enum Local {
    /// A ratio budget's retry, counted in the window's slice at `at` (the
    /// budget's time).
    Ratio { at: Duration },
    /// A bucket's tokens: the retry cost when it was taken, and whether
    /// the bucket then refunded a retry that succeeds.
    Bucket { cost: u32, refund: bool },
    /// Retry throttling's leave: nothing taken (the failure before it
    /// took its token).
    Throttled,
}

impl RetryBudget {
    /// Takes what one retry after a transient error costs; `false` (and
    /// nothing taken) when too little is left, here or in the lease.
    pub fn try_withdraw(&self) -> bool {
        self.withdraw(RetryCause::Transient).is_some()
    }

    /// [`try_withdraw`](Self::try_withdraw) for a retry after `cause` (see
    /// [`TokenBucket::cost`](super::TokenBucket::cost)).
    pub fn try_withdraw_for(&self, cause: RetryCause) -> bool {
        self.withdraw(cause).is_some()
    }

    /// [`try_withdraw_for`](Self::try_withdraw_for), saying what it took,
    /// to give back exactly that ([`give_back_retry`](Self::give_back_retry)).
    pub(crate) fn withdraw(&self, cause: RetryCause) -> Option<Withdrawal> {
        let leased = if self.lease.held() {
            let Some(taken) = self.lease.take() else {
                crate::observe::budget_level(&self.name, || self.available());
                return None;
            };
            Some(taken)
        } else {
            None
        };
        let taken = match &self.form {
            Form::Ratio { first_attempts, state } => {
                let RatioState { config, window } = &mut *lock(state);
                let at = self.now();
                window.try_withdraw(config, at, first_attempts.total()).then_some(Local::Ratio { at })
            }
            Form::Bucket(bucket) => {
                bucket.try_withdraw(cause).map(|cost| Local::Bucket { cost, refund: bucket.refunds() })
            }
            Form::Throttling(throttling) => throttling.allows_retry().then_some(Local::Throttled),
        };
        if taken.is_some() {
            self.retries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        } else if let Some(taken) = leased {
            self.lease.give_back(taken);
        }
        crate::observe::budget_level(&self.name, || self.available());
        taken.map(|local| Withdrawal { local, leased })
    }

    /// Gives back what [`withdraw`](Self::withdraw) took (`taken`) for a
    /// retry that did not run after all (the breaker opened, the bulkhead
    /// stayed full, the deadline passed while it queued, the call was
    /// dropped before it ran, ...): the budget pays for retries that
    /// really happen. A bucket gets those tokens back (up to its
    /// capacity), a ratio budget forgets the retry in the slice that
    /// counted it (if the window still counts that slice). A leased
    /// token goes back to its lease if that is still held (see
    /// [`end_lease`](Self::end_lease)): the fleet counts the tokens it
    /// leased, and those a lease leaves unspent are handed back to it. The
    /// retry stays in [`totals`](Self::totals), which only ever grow.
    pub(crate) fn give_back_retry(&self, taken: Withdrawal) {
        match (&self.form, taken.local) {
            (Form::Ratio { state, .. }, Local::Ratio { at }) => lock(state).window.give_back(at),
            (Form::Bucket(bucket), Local::Bucket { cost, .. }) => bucket.give_back(cost),
            // A budget keeps its form (`reconfigure` refuses the other).
            _ => {}
        }
        if let Some(leased) = taken.leased {
            self.lease.give_back(leased);
        }
        crate::observe::budget_level(&self.name, || self.available());
    }
}
