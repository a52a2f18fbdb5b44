//! The token bucket: retries take tokens, successes put them back.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::RetryCause;
use crate::config::{ConfigError, positive};

/// A token bucket's settings; every field has a default.
///
/// A retry's cost may depend on what it follows, as the AWS SDKs' retry
/// quota's does ([`aws_standard`](Self::aws_standard)): a retry after a
/// timeout (the dependency is slow, perhaps overloaded) can cost more than
/// one after a throttle (it answered, and said when to come back).
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::budget::TokenBucket;
/// let cfg = TokenBucket { capacity: 20, ..Default::default() };
/// assert_eq!((cfg.retry_cost, cfg.refill_per_success), (1, 1));
/// assert_eq!((cfg.timeout_cost, cfg.throttled_cost, cfg.refund_on_success), (None, None, false));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    /// Most tokens the bucket holds; it starts full. Default 100.
    pub capacity: u32,
    /// Tokens one retry takes: after a transient error (a 5xx, a reset
    /// connection, an `UNAVAILABLE`) or a conflict, and after any other
    /// failure whose own cost is not set. Default 1.
    pub retry_cost: u32,
    /// Tokens one success returns, up to `capacity`. Default 1.
    pub refill_per_success: u32,
    /// Tokens a retry takes after its attempt timed out (the attempt's own
    /// timeout cut it). `None`: `retry_cost`. Default `None`.
    pub timeout_cost: Option<u32>,
    /// Tokens a retry takes after the dependency throttled
    /// ([`ErrorClass::Throttled`](crate::ErrorClass::Throttled): a 429, a
    /// `RESOURCE_EXHAUSTED`). `None`: `retry_cost`. Default `None`.
    pub throttled_cost: Option<u32>,
    /// Whether a retry that succeeds gives back what it took, in place of
    /// `refill_per_success` (as the AWS SDKs' quota does): retries that
    /// work cost nothing in the end, so only a dependency that keeps
    /// failing drains the bucket. A hedge that wins is given back too.
    /// Default `false`.
    pub refund_on_success: bool,
}

impl Default for TokenBucket {
    fn default() -> Self {
        TokenBucket {
            capacity: 100,
            retry_cost: 1,
            refill_per_success: 1,
            timeout_cost: None,
            throttled_cost: None,
            refund_on_success: false,
        }
    }
}

impl TokenBucket {
    /// The AWS SDKs' standard retry quota: 500 tokens; a retry after a
    /// transient error or a timeout (AWS's "transient": a timeout, a
    /// connection error, a 500, 502, 503 or 504) takes 10, after a throttle
    /// 5; a success with no retry returns 1, and a retry that succeeds
    /// returns what it took. A dependency that fails every call stops
    /// retries after 50 of them; one that throttles, after 100.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::budget::TokenBucket;
    /// let aws = TokenBucket::aws_standard();
    /// assert_eq!((aws.capacity, aws.retry_cost, aws.timeout_cost, aws.throttled_cost), (500, 10, Some(10), Some(5)));
    /// assert!(aws.refund_on_success && aws.validate().is_ok());
    /// ```
    pub const fn aws_standard() -> Self {
        TokenBucket {
            capacity: 500,
            retry_cost: 10,
            refill_per_success: 1,
            timeout_cost: Some(10),
            throttled_cost: Some(5),
            refund_on_success: true,
        }
    }

    /// What a retry after `cause` takes.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::budget::{RetryCause, TokenBucket};
    /// let aws = TokenBucket::aws_standard();
    /// assert_eq!([RetryCause::Transient, RetryCause::Timeout, RetryCause::Throttled].map(|c| aws.cost(c)), [10, 10, 5]);
    /// ```
    pub fn cost(&self, cause: RetryCause) -> u32 {
        match cause {
            RetryCause::Transient => self.retry_cost,
            RetryCause::Timeout => self.timeout_cost.unwrap_or(self.retry_cost),
            RetryCause::Throttled => self.throttled_cost.unwrap_or(self.retry_cost),
        }
    }

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
        let costs = [
            ("retry_cost", Some(self.retry_cost)),
            ("timeout_cost", self.timeout_cost),
            ("throttled_cost", self.throttled_cost),
        ];
        for (field, cost) in costs {
            if let Some(cost) = cost.filter(|cost| *cost > self.capacity) {
                return Err(ConfigError::new(
                    field,
                    format!("must not exceed `capacity` ({}), got {cost}", self.capacity),
                ));
            }
        }
        Ok(())
    }
}

/// An unset cost, in [`Bucket`]'s atomics: the retry cost.
const UNSET: u32 = u32::MAX;

/// A token bucket shared by the calls of one budget.
#[derive(Debug)]
pub(super) struct Bucket {
    capacity: AtomicU32,
    retry_cost: AtomicU32,
    refill_per_success: AtomicU32,
    /// `UNSET` for none.
    timeout_cost: AtomicU32,
    throttled_cost: AtomicU32,
    refund_on_success: AtomicBool,
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
            timeout_cost: AtomicU32::new(config.timeout_cost.unwrap_or(UNSET)),
            throttled_cost: AtomicU32::new(config.throttled_cost.unwrap_or(UNSET)),
            refund_on_success: AtomicBool::new(config.refund_on_success),
            missing: AtomicU32::new(0),
        }
    }

    pub(super) fn config(&self) -> TokenBucket {
        let cost = |cost: &AtomicU32| Some(cost.load(Ordering::Relaxed)).filter(|cost| *cost != UNSET);
        TokenBucket {
            capacity: self.capacity.load(Ordering::Relaxed),
            retry_cost: self.retry_cost.load(Ordering::Relaxed),
            refill_per_success: self.refill_per_success.load(Ordering::Relaxed),
            timeout_cost: cost(&self.timeout_cost),
            throttled_cost: cost(&self.throttled_cost),
            refund_on_success: self.refund_on_success.load(Ordering::Relaxed),
        }
    }

    /// Whether a retry that succeeds gives back what it took.
    #[inline]
    pub(super) fn refunds(&self) -> bool {
        self.refund_on_success.load(Ordering::Relaxed)
    }

    /// A retry that took `cost` succeeded, its success's refill put in
    /// already: the rest of `cost` goes back, so that the retry gave back
    /// what it took in place of the refill.
    pub(super) fn refund(&self, cost: u32) {
        self.give_back(cost.saturating_sub(self.refill_per_success.load(Ordering::Relaxed)));
    }

    pub(super) fn available(&self) -> u32 {
        self.capacity.load(Ordering::Relaxed).saturating_sub(self.missing.load(Ordering::Relaxed))
    }

    /// Whether a retry's cost is there to take.
    pub(super) fn affords_retry(&self) -> bool {
        self.available() >= self.retry_cost.load(Ordering::Relaxed)
    }

    /// Takes what a retry after `cause` costs now: that cost, or `None`
    /// (and nothing taken) when too little is left.
    pub(super) fn try_withdraw(&self, cause: RetryCause) -> Option<u32> {
        // The settings' own rule (`TokenBucket::cost`), off the success path.
        let cost = self.config().cost(cause);
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
        self.timeout_cost.store(config.timeout_cost.unwrap_or(UNSET), Ordering::Relaxed);
        self.throttled_cost.store(config.throttled_cost.unwrap_or(UNSET), Ordering::Relaxed);
        self.refund_on_success.store(config.refund_on_success, Ordering::Relaxed);
    }
}
