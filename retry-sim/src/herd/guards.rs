//! The library's guards on virtual time: the same pure cores the retry loop
//! runs (breaker, budget windows, throttle window, adaptive limit, rate
//! limit), fed the simulation's clock.

use std::collections::VecDeque;
use std::time::Duration;

use stormproof_runtime::ConfigError;
use stormproof_runtime::breaker::{BreakerCore, BreakerState, Transition};
use stormproof_runtime::budget::{BudgetConfig, RatioBudget, RatioWindow, RetryBudget, RetryCause};
use stormproof_runtime::bulkhead::{BulkheadConfig, LimitCore};
use stormproof_runtime::rate_limit::RateCore;
use stormproof_runtime::throttle::ThrottleCore;

/// The guards shared by all clients: [`Strategy::Defaults`](super::Strategy::Defaults)'s breaker and
/// budget, [`Strategy::Recommended`](super::Strategy::Recommended)'s breaker and budget,
/// [`Strategy::Adaptive`](super::Strategy::Adaptive)'s budget, throttle and bulkhead.
#[derive(Debug)]
pub(super) struct Guards {
    /// None, one shared by every client, or one per key.
    pub(super) breakers: Vec<BreakerCore>,
    pub(super) budget: Budget,
    /// The library's client-side throttle, on virtual time.
    pub(super) throttle: Option<ThrottleCore>,
    /// None, one shared by every client, or one per key.
    pub(super) bulkheads: Vec<Permits>,
    /// None, one shared by every client, or one per key.
    pub(super) rate_limits: Vec<RateCore>,
}

/// Which of `len` guards a client calling `key` asks: the one shared by
/// all, or the key's (out of range, none, when `len` is 0).
fn slot(len: usize, key: u32) -> usize {
    if len == 1 { 0 } else { key as usize }
}

impl Guards {
    /// The breaker of a client calling `key`: the one per key, or the one
    /// shared by all, if any.
    pub(super) fn breaker(&mut self, key: u32) -> Option<&mut BreakerCore> {
        let slot = slot(self.breakers.len(), key);
        self.breakers.get_mut(slot)
    }

    /// [`breaker`](Self::breaker), to read.
    pub(super) fn breaker_ref(&self, key: u32) -> Option<&BreakerCore> {
        self.breakers.get(slot(self.breakers.len(), key))
    }

    /// The bulkhead of a client calling `key`: the one per key, or the one
    /// shared by all, if any.
    pub(super) fn bulkhead(&mut self, key: u32) -> Option<&mut Permits> {
        let slot = slot(self.bulkheads.len(), key);
        self.bulkheads.get_mut(slot)
    }

    /// The rate limit of a client calling `key`: the one per key, or the
    /// one shared by all, if any.
    pub(super) fn rate_limit(&mut self, key: u32) -> Option<&mut RateCore> {
        let slot = slot(self.rate_limits.len(), key);
        self.rate_limits.get_mut(slot)
    }
}

/// A bulkhead on virtual time: the library's limit core moved by the same
/// samples the real bulkhead takes, permits counted, waiters served first
/// come, first served (as tokio's fair semaphore serves them), critical
/// ones first, and sheddable ones never waiting (see `crate::priority`'s
/// counterpart in the library).
#[derive(Debug)]
pub(super) struct Permits {
    pub(super) core: Option<LimitCore>,
    pub(super) max: u32,
    pub(super) max_wait: Option<Duration>,
    pub(super) in_use: u32,
    pub(super) waiting: VecDeque<u32>,
    /// Critical clients waiting: served before `waiting`, as the
    /// library's bulkhead serves its critical line first.
    pub(super) critical: VecDeque<u32>,
}

impl Permits {
    pub(super) fn new(config: BulkheadConfig) -> Self {
        Permits {
            core: config.adaptive.map(|adaptive| LimitCore::new(adaptive, config.max_concurrent)),
            max: config.max_concurrent,
            max_wait: config.max_wait,
            in_use: 0,
            waiting: VecDeque::new(),
            critical: VecDeque::new(),
        }
    }

    pub(super) fn limit(&self) -> u32 {
        self.core.as_ref().map_or(self.max, LimitCore::limit)
    }

    /// A permit now, if one is free (nobody is queued ahead).
    pub(super) fn try_take(&mut self) -> bool {
        let free = self.waiting.is_empty() && self.critical.is_empty() && self.in_use < self.limit();
        self.in_use += u32::from(free);
        free
    }

    /// Gives a permit back; an attempt that got an answer is a sample
    /// `(rtt, overload)` for the limit, taken while the permit is still
    /// counted in flight, as the real bulkhead takes it. Permits in use are
    /// never taken away: after a shrink, no one is admitted until fewer
    /// than the new limit are in use.
    pub(super) fn give_back(&mut self, sample: Option<(Duration, bool)>) {
        if let (Some(core), Some((rtt, overload))) = (&mut self.core, sample) {
            core.sample(rtt, overload, self.in_use);
        }
        self.in_use = self.in_use.saturating_sub(1);
    }

    /// The next waiter, with its permit taken, if the limit has room.
    pub(super) fn next_waiter(&mut self) -> Option<u32> {
        if self.in_use >= self.limit() {
            return None;
        }
        let client = self.critical.pop_front().or_else(|| self.waiting.pop_front())?;
        self.in_use += 1;
        Some(client)
    }
}

/// The library's budget on virtual time: the ratio form's pure window, or
/// a form that reads no clock (a token bucket, retry throttling).
#[derive(Debug)]
pub(super) enum Budget {
    Ratio { config: RatioBudget, first_attempts: u64, window: RatioWindow },
    Bucket(Box<RetryBudget>),
}

impl Budget {
    pub(super) fn new(config: BudgetConfig) -> Result<Self, ConfigError> {
        config.validate().map_err(|e| ConfigError::new("budget", e.to_string()))?;
        Ok(match config {
            BudgetConfig::Ratio(config) => {
                Budget::Ratio { config, first_attempts: 0, window: RatioWindow::new(Duration::ZERO, 0) }
            }
            other => Budget::Bucket(Box::new(
                RetryBudget::new("sim", other).map_err(|e| ConfigError::new("budget", e.to_string()))?,
            )),
        })
    }

    pub(super) fn on_first_attempt(&mut self) {
        match self {
            Budget::Ratio { first_attempts, .. } => *first_attempts += 1,
            Budget::Bucket(bucket) => bucket.on_first_attempt(),
        }
    }

    pub(super) fn deposit(&mut self) {
        if let Budget::Bucket(bucket) = self {
            bucket.deposit();
        }
    }

    pub(super) fn record_failure(&mut self) {
        if let Budget::Bucket(budget) = self {
            budget.record_failure();
        }
    }

    /// Takes what a retry after `cause` costs (a token bucket may charge
    /// by it: see `TokenBucket::cost`).
    pub(super) fn try_withdraw(&mut self, now: Duration, cause: RetryCause) -> bool {
        match self {
            Budget::Ratio { config, first_attempts, window } => {
                window.try_withdraw(config, now, *first_attempts)
            }
            Budget::Bucket(bucket) => bucket.try_withdraw_for(cause),
        }
    }
}

/// 1 if the transition opened the breaker.
pub(super) fn trips(transition: Option<Transition>) -> u32 {
    u32::from(matches!(transition, Some((_, BreakerState::Open))))
}
