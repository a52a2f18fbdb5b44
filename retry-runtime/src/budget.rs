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
    config: BudgetConfig,
    tokens: AtomicU32,
}

impl RetryBudget {
    /// A full bucket, or an error naming the invalid setting.
    pub fn new(name: impl Into<String>, config: BudgetConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let budget = RetryBudget { name: name.into(), config, tokens: AtomicU32::new(config.capacity) };
        crate::observe::budget_level(&budget.name, config.capacity);
        Ok(budget)
    }

    /// The name this budget was declared under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings it was built with.
    pub fn config(&self) -> &BudgetConfig {
        &self.config
    }

    /// Tokens left now.
    pub fn available(&self) -> u32 {
        self.tokens.load(Ordering::Relaxed)
    }

    /// Takes `retry_cost` tokens for one retry; `false` (and nothing taken) when too few are left.
    pub fn try_withdraw(&self) -> bool {
        let cost = self.config.retry_cost;
        let taken =
            self.tokens.fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| t.checked_sub(cost)).is_ok();
        crate::observe::budget_level(&self.name, self.available());
        taken
    }

    /// Returns `refill_per_success` tokens after a success, never above `capacity`.
    ///
    /// A full bucket is only read, never written, so successes from many
    /// threads do not fight over the cache line.
    #[inline]
    pub fn deposit(&self) {
        if self.tokens.load(Ordering::Relaxed) >= self.config.capacity {
            return;
        }
        self.refill();
    }

    #[inline(never)]
    fn refill(&self) {
        let capacity = self.config.capacity;
        let refill = self.config.refill_per_success;
        let refilled = self.tokens.fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
            (t < capacity).then(|| t.saturating_add(refill).min(capacity))
        });
        if let Ok(before) = refilled {
            // The level this deposit left, as `try_withdraw` reports its own.
            crate::observe::budget_level(&self.name, before.saturating_add(refill).min(capacity));
        }
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
