//! One replica's side of a fleet budget: it reports its first attempts and
//! leases retry tokens in batches, so the fleet's retries stay within the
//! fleet's share of its traffic and Redis sees one round trip per batch.

use std::sync::Arc;

use tokio::time::Instant;

use super::backlog::Backlog;
use super::script::BudgetReport;
use crate::budget::{BudgetConfig, RetryBudget};

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
        }
    }

    pub(super) fn apply(&mut self, granted: u32) {
        self.acked = self.sent;
        self.backlog.clear();
        if self.asked {
            self.seq += 1;
        }
        self.budget.lease(granted);
    }

    /// The store is gone: the budget is local again.
    pub(super) fn release(&mut self) {
        self.budget.end_lease();
    }
}
