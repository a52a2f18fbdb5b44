//! Retry budgets: a token bucket that caps retries as a share of successes.
//!
//! Why budgets and not only `max_attempts`: a per-call limit bounds one
//! call, but when a dependency is down *every* call retries, and the
//! dependency sees `max_attempts` times its normal load exactly when it can
//! least take it. A budget shared by all calls to one dependency bounds the
//! extra load in total: retries spend tokens, successes earn them back, so
//! in a healthy period retries are free and in an outage they dry up.
//!
//! First attempts are free, as in the AWS SDKs and gRPC: a budget never
//! refuses a fresh call, it only stops retries.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::config::{ConfigError, positive};

/// Settings of a [`RetryBudget`]; every field has a default.
///
/// ```
/// # use retry_runtime as resilient;
/// use resilient::BudgetConfig;
/// let cfg = BudgetConfig { capacity: 20, ..Default::default() };
/// assert_eq!((cfg.retry_cost, cfg.refill_per_success), (1, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetConfig {
    /// Most tokens the bucket holds; it starts full. Default 100.
    pub capacity: u32,
    /// Tokens one retry takes. Default 1.
    pub retry_cost: u32,
    /// Tokens one success returns, up to `capacity`. Default 1.
    pub refill_per_success: u32,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig { capacity: 100, retry_cost: 1, refill_per_success: 1 }
    }
}

impl BudgetConfig {
    /// Checks the settings: a zero capacity or a cost above the capacity is an error.
    ///
    /// ```
    /// # use retry_runtime as resilient;
    /// use resilient::BudgetConfig;
    /// let err = BudgetConfig { capacity: 1, retry_cost: 2, ..Default::default() }.validate().unwrap_err();
    /// assert_eq!(err.field, "retry_cost");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        positive("capacity", self.capacity.into())?;
        if self.retry_cost > self.capacity {
            return Err(ConfigError::new(
                "retry_cost",
                format!("must not exceed `capacity` ({}), got {}", self.capacity, self.retry_cost),
            ));
        }
        Ok(())
    }
}

/// A token bucket shared by every call to one dependency; see the module docs.
///
/// ```
/// # use retry_runtime as resilient;
/// use resilient::{BudgetConfig, RetryBudget};
/// let budget = RetryBudget::new("db", BudgetConfig { capacity: 2, ..Default::default() }).unwrap();
/// assert!(budget.try_withdraw());
/// assert!(budget.try_withdraw());
/// assert!(!budget.try_withdraw(), "empty: retries stop");
/// budget.deposit();
/// assert_eq!(budget.available(), 1);
/// ```
#[derive(Debug)]
pub struct RetryBudget {
    name: String,
    capacity: AtomicU32,
    retry_cost: AtomicU32,
    refill_per_success: AtomicU32,
    /// Tokens missing from a full bucket: zero when full, so the success
    /// path's "is it full?" is one load, whatever the capacity.
    missing: AtomicU32,
}

impl RetryBudget {
    /// A full bucket, or an error naming the invalid setting.
    pub fn new(name: impl Into<String>, config: BudgetConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let budget = RetryBudget {
            name: name.into(),
            capacity: AtomicU32::new(config.capacity),
            retry_cost: AtomicU32::new(config.retry_cost),
            refill_per_success: AtomicU32::new(config.refill_per_success),
            missing: AtomicU32::new(0),
        };
        crate::observe::budget_level(&budget.name, config.capacity);
        Ok(budget)
    }

    /// The name this budget was declared under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings it runs on.
    pub fn config(&self) -> BudgetConfig {
        BudgetConfig {
            capacity: self.capacity.load(Ordering::Relaxed),
            retry_cost: self.retry_cost.load(Ordering::Relaxed),
            refill_per_success: self.refill_per_success.load(Ordering::Relaxed),
        }
    }

    /// Tokens left now.
    pub fn available(&self) -> u32 {
        self.capacity.load(Ordering::Relaxed).saturating_sub(self.missing.load(Ordering::Relaxed))
    }

    /// Takes `retry_cost` tokens for one retry; `false` (and nothing taken) when too few are left.
    pub fn try_withdraw(&self) -> bool {
        let cost = self.retry_cost.load(Ordering::Relaxed);
        let capacity = self.capacity.load(Ordering::Relaxed);
        let taken = self
            .missing
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |missing| {
                missing.checked_add(cost).filter(|after| *after <= capacity)
            })
            .is_ok();
        crate::observe::budget_level(&self.name, self.available());
        taken
    }

    /// Returns `refill_per_success` tokens after a success, never above `capacity`.
    ///
    /// A full bucket is only read, never written, so successes from many
    /// threads do not fight over the cache line.
    #[inline]
    pub fn deposit(&self) {
        if self.missing.load(Ordering::Relaxed) == 0 {
            return;
        }
        self.refill();
    }

    #[inline(never)]
    fn refill(&self) {
        let refill = self.refill_per_success.load(Ordering::Relaxed);
        let refilled = self.missing.fetch_update(Ordering::AcqRel, Ordering::Acquire, |missing| {
            (missing > 0).then(|| missing.saturating_sub(refill))
        });
        if refilled.is_ok() {
            // The level this deposit left, as `try_withdraw` reports its own.
            crate::observe::budget_level(&self.name, self.available());
        }
    }

    /// Runs on `config` from now on, keeping the tokens it holds (clamped to
    /// a smaller capacity); an invalid `config` is an error naming the
    /// field, and changes nothing.
    ///
    /// ```
    /// # use retry_runtime as resilient;
    /// use resilient::{BudgetConfig, RetryBudget};
    /// let budget = RetryBudget::new("db", BudgetConfig { capacity: 10, ..Default::default() }).unwrap();
    /// budget.try_withdraw();
    /// budget.reconfigure(BudgetConfig { capacity: 20, ..Default::default() }).unwrap();
    /// assert_eq!(budget.available(), 9, "tokens kept");
    /// budget.reconfigure(BudgetConfig { capacity: 5, ..Default::default() }).unwrap();
    /// assert_eq!(budget.available(), 5, "clamped to the new capacity");
    /// ```
    pub fn reconfigure(&self, config: BudgetConfig) -> Result<(), ConfigError> {
        config.validate()?;
        let old_capacity = self.capacity.load(Ordering::Relaxed);
        // Keep the tokens, as "missing" relative to the new capacity.
        let _ = self.missing.fetch_update(Ordering::AcqRel, Ordering::Acquire, |missing| {
            let tokens = old_capacity.saturating_sub(missing).min(config.capacity);
            Some(config.capacity - tokens)
        });
        self.capacity.store(config.capacity, Ordering::Relaxed);
        self.retry_cost.store(config.retry_cost, Ordering::Relaxed);
        self.refill_per_success.store(config.refill_per_success, Ordering::Relaxed);
        crate::observe::budget_level(&self.name, self.available());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successes_refill_up_to_capacity() {
        let b = RetryBudget::new("x", BudgetConfig { capacity: 10, retry_cost: 4, refill_per_success: 3 })
            .unwrap();
        assert!(b.try_withdraw());
        assert!(b.try_withdraw());
        assert_eq!(b.available(), 2);
        assert!(!b.try_withdraw());
        assert_eq!(b.available(), 2, "a refused withdrawal takes nothing");
        b.deposit();
        b.deposit();
        assert_eq!(b.available(), 8);
        b.deposit();
        assert_eq!(b.available(), 10, "capped at capacity");
    }

    #[test]
    fn invalid_budgets_name_their_field() {
        let zero = BudgetConfig { capacity: 0, ..Default::default() };
        assert_eq!(RetryBudget::new("x", zero).unwrap_err().field, "capacity");
        let dear = BudgetConfig { capacity: 3, retry_cost: 4, refill_per_success: 1 };
        assert_eq!(RetryBudget::new("x", dear).unwrap_err().field, "retry_cost");
    }
}
