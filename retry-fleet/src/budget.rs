//! One replica's side of a fleet budget: it reports its first attempts and
//! leases retry tokens in batches, so the fleet's retries stay within the
//! fleet's share of its traffic and Redis sees one round trip per batch.
//!
//! The tokens left when a lease ends (the store went away, or the replica
//! leaves) are handed back at the next flush that gets through: the fleet
//! counts them as spent until its window moves past them, so dropped they
//! would be lost to every replica, and a replica whose store froze for a
//! moment would find the fleet's share gone to itself, unused. Only tokens
//! no retry can take any more are handed back (see `RetryBudget::end_lease`).

use std::sync::Arc;

use tokio::time::Instant;

use super::backlog::Backlog;
use super::script::BudgetReport;
use stormproof_runtime::budget::{BudgetConfig, RetryBudget};

pub(super) struct BudgetSync {
    name: String,
    budget: Arc<RetryBudget>,
    acked: u64,
    sent: u64,
    /// First attempts sent in the flushes not acknowledged since.
    backlog: Backlog<1>,
    /// The sequence number of the next lease request.
    seq: u64,
    /// Whether the flush in flight asks for tokens.
    asked: bool,
    lease_size: u32,
    /// Tokens left when a lease ended, in all: cumulative, as the other
    /// totals, so that a flush that timed out but ran does not hand them
    /// back twice.
    returned: u64,
    returned_sent: u64,
    returned_acked: u64,
    /// Whether the replica is leaving: its lease has ended for good.
    leaving: bool,
}

impl BudgetSync {
    pub(super) fn new(name: String, budget: Arc<RetryBudget>, lease_size: u32) -> Self {
        let start = budget.totals().first_attempts;
        BudgetSync {
            name,
            budget,
            acked: start,
            sent: start,
            backlog: Backlog::new(),
            seq: 0,
            asked: false,
            lease_size,
            returned: 0,
            returned_sent: 0,
            returned_acked: 0,
            leaving: false,
        }
    }

    /// What this replica reports; it asks for a lease when its tokens run
    /// low, if it `asks` at all.
    pub(super) fn report(&mut self, asks: bool) -> BudgetReport {
        // The fleet's form is the ratio form (checked when joining; a
        // reload cannot change a budget's form).
        let BudgetConfig::Ratio(config) = self.budget.config() else {
            unreachable!("a fleet budget is a ratio budget")
        };
        self.sent = self.budget.totals().first_attempts;
        let at = Instant::now();
        self.backlog.note(at, [self.sent], config.window);
        let held = self.budget.leased().unwrap_or(0);
        let want = if asks && held < self.lease_size.div_ceil(2) { self.lease_size - held } else { 0 };
        self.asked = want > 0;
        self.returned_sent = self.returned;
        // The fleet's floor per window, as a local budget's.
        let floor = (f64::from(config.min_per_sec) * config.window.as_secs_f64()) as u64;
        BudgetReport {
            name: self.name.clone(),
            window: config.window,
            ratio: config.ratio,
            floor,
            first_attempts: self.sent,
            acked_first_attempts: self.acked,
            backlog: self.backlog.earlier(at),
            seq: self.seq,
            want,
            returned: self.returned_sent,
            acked_returned: self.returned_acked,
        }
    }

    pub(super) fn apply(&mut self, granted: u32) {
        self.acked = self.sent;
        self.backlog.clear();
        self.returned_acked = self.returned_sent;
        if self.asked {
            self.seq += 1;
        }
        if !self.leaving {
            self.budget.lease(granted);
        }
    }

    /// The store is gone: the budget is local again, and the tokens left
    /// go back to the fleet at the next flush that gets through.
    pub(super) fn release(&mut self) {
        self.returned = self.returned.saturating_add(u64::from(self.budget.end_lease()));
    }

    /// The replica is leaving: its lease ends now, before its last flush,
    /// so that the flush hands back the tokens left (from now on a retry
    /// needs only the local budget's leave, as once the replica has left).
    pub(super) fn leave(&mut self) {
        self.leaving = true;
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stormproof_runtime::budget::RatioBudget;

    /// The tokens left when the store went away are sent as a cumulative
    /// total until a flush is acknowledged; a replica leaving ends its
    /// lease before its last flush, and that flush does not lease again.
    #[tokio::test(start_paused = true)]
    async fn tokens_left_when_a_lease_ends_are_handed_back() {
        let budget = Arc::new(RetryBudget::new("dep", RatioBudget::default()).unwrap());
        let mut sync = BudgetSync::new("dep".into(), budget.clone(), 20);
        sync.report(true);
        sync.apply(20);
        assert!((0..5).all(|_| budget.try_withdraw()));
        sync.release();
        let returned = |sync: &mut BudgetSync, asks| {
            let report = sync.report(asks);
            (report.returned, report.acked_returned)
        };
        assert_eq!(returned(&mut sync, true), (15, 0), "the 15 left");
        assert_eq!(returned(&mut sync, true), (15, 0), "sent again: that flush failed too");
        sync.apply(20);
        assert_eq!(returned(&mut sync, true), (15, 15), "acknowledged");
        sync.apply(0);
        assert_eq!(budget.leased(), Some(20));
        sync.leave();
        assert_eq!(budget.leased(), None, "the lease ends before the last flush");
        assert_eq!(returned(&mut sync, false), (35, 15));
        sync.apply(0);
        assert_eq!(budget.leased(), None, "and the last flush does not lease again");
    }
}
