//! The token bucket: retries take tokens, successes put them back.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::config::{ConfigError, positive};

/// A token bucket's settings; every field has a default.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::budget::TokenBucket;
/// let cfg = TokenBucket { capacity: 20, ..Default::default() };
/// assert_eq!((cfg.retry_cost, cfg.refill_per_success), (1, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    /// Most tokens the bucket holds; it starts full. Default 100.
    pub capacity: u32,
    /// Tokens one retry takes. Default 1.
    pub retry_cost: u32,
    /// Tokens one success returns, up to `capacity`. Default 1.
    pub refill_per_success: u32,
}

impl Default for TokenBucket {
    fn default() -> Self {
        TokenBucket { capacity: 100, retry_cost: 1, refill_per_success: 1 }
    }
}

impl TokenBucket {
    /// Checks the settings: a zero capacity or a cost above the capacity is an error.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::budget::TokenBucket;
    /// let err = TokenBucket { capacity: 1, retry_cost: 2, ..Default::default() }.validate().unwrap_err();
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

/// A token bucket shared by the calls of one budget.
#[derive(Debug)]
pub(super) struct Bucket {
    capacity: AtomicU32,
    retry_cost: AtomicU32,
    refill_per_success: AtomicU32,
    /// Tokens missing from a full bucket: zero when full, so the success
    /// path's "is it full?" is one load, whatever the capacity.
    missing: AtomicU32,
}

impl Bucket {
    pub(super) fn new(config: TokenBucket) -> Self {
        Bucket {
            capacity: AtomicU32::new(config.capacity),
            retry_cost: AtomicU32::new(config.retry_cost),
            refill_per_success: AtomicU32::new(config.refill_per_success),
            missing: AtomicU32::new(0),
        }
    }

    pub(super) fn config(&self) -> TokenBucket {
        TokenBucket {
            capacity: self.capacity.load(Ordering::Relaxed),
            retry_cost: self.retry_cost.load(Ordering::Relaxed),
            refill_per_success: self.refill_per_success.load(Ordering::Relaxed),
        }
    }

    pub(super) fn available(&self) -> u32 {
        self.capacity.load(Ordering::Relaxed).saturating_sub(self.missing.load(Ordering::Relaxed))
    }

    /// Whether a retry's cost is there to take.
    pub(super) fn affords_retry(&self) -> bool {
        self.available() >= self.retry_cost.load(Ordering::Relaxed)
    }

    /// Takes what a retry costs now: that cost, or `None` (and nothing
    /// taken) when too little is left.
    pub(super) fn try_withdraw(&self) -> Option<u32> {
        let cost = self.retry_cost.load(Ordering::Relaxed);
        let capacity = self.capacity.load(Ordering::Relaxed);
        self.missing
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |missing| {
                missing.checked_add(cost).filter(|after| *after <= capacity)
            })
            .ok()
            .map(|_| cost)
    }

    /// Whether a deposit has anything to do (the bucket is not full).
    #[inline]
    pub(super) fn has_room(&self) -> bool {
        self.missing.load(Ordering::Relaxed) != 0
    }

    /// Puts `refill_per_success` tokens back; whether any went in.
    pub(super) fn refill(&self) -> bool {
        let refill = self.refill_per_success.load(Ordering::Relaxed);
        self.missing
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |missing| {
                (missing > 0).then(|| missing.saturating_sub(refill))
            })
            .is_ok()
    }

    /// Puts back `cost`, what one retry took (the cost then: a reload may
    /// have changed it since), up to the capacity.
    pub(super) fn give_back(&self, cost: u32) {
        let _ = self
            .missing
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |missing| Some(missing.saturating_sub(cost)));
    }

    pub(super) fn reconfigure(&self, config: TokenBucket) {
        let old_capacity = self.capacity.load(Ordering::Relaxed);
        // Keep the tokens, as "missing" relative to the new capacity.
        let _ = self.missing.fetch_update(Ordering::AcqRel, Ordering::Acquire, |missing| {
            let tokens = old_capacity.saturating_sub(missing).min(config.capacity);
            Some(config.capacity - tokens)
        });
        self.capacity.store(config.capacity, Ordering::Relaxed);
        self.retry_cost.store(config.retry_cost, Ordering::Relaxed);
        self.refill_per_success.store(config.refill_per_success, Ordering::Relaxed);
    }
}
