//! gRPC's retry throttling (gRFC A6, `retryThrottling`): a token count that
//! every failed attempt lowers by one and every success raises by
//! `token_ratio`; retries and hedges are allowed only while it is above
//! half of `max_tokens`.
//!
//! Kept in thousandths of a token, as gRPC's own implementation keeps it
//! (`token_ratio` has three decimal places in a service config), in one
//! atomic word: a failure and a success are one compare-and-swap each, and
//! a success while the count is full is a single load.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::config::ConfigError;

/// The settings of gRPC's retry throttling, as a service config's
/// `retryThrottling` gives them.
///
/// The count starts at `max_tokens`. Each attempt that fails with a
/// retryable error (transient or throttled: what gRPC counts as a failure
/// with a code in `retryableStatusCodes`) takes one token; each success
/// gives `token_ratio` back, up to `max_tokens`. A retry, or a hedge, is
/// allowed only while the count is above `max_tokens / 2`. With the defaults
/// (gRFC A6's example, 10 and 0.1), five failures in a row stop retries,
/// and it takes ten successes to make up for each failure after that.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::budget::{RetryBudget, RetryThrottling};
/// let budget = RetryBudget::new("grpc", RetryThrottling { max_tokens: 10, token_ratio: 0.1 }).unwrap();
/// for _ in 0..4 {
///     budget.record_failure();
/// }
/// assert!(budget.try_withdraw(), "6 tokens, above 5: a retry is allowed (and takes nothing)");
/// budget.record_failure();
/// assert!(!budget.try_withdraw(), "5 tokens is not above half: no retry");
/// for _ in 0..10 {
///     budget.deposit();
/// }
/// assert!(budget.try_withdraw(), "ten successes gave one token back");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryThrottling {
    /// The most tokens the count holds, 1 to 1,000 (gRPC's bounds); it
    /// starts full. Default 10.
    pub max_tokens: u32,
    /// Tokens one success gives back, at least 0.001 (three decimal places
    /// count, as in gRPC). Default 0.1.
    pub token_ratio: f64,
}

impl Default for RetryThrottling {
    fn default() -> Self {
        RetryThrottling { max_tokens: 10, token_ratio: 0.1 }
    }
}

/// The most tokens a service config may give (gRFC A6).
const MAX_TOKENS: u32 = 1_000;

impl RetryThrottling {
    /// Checks the settings against gRPC's bounds; the error names the field.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::budget::RetryThrottling;
    /// let err = RetryThrottling { token_ratio: 0.0001, ..Default::default() }.validate().unwrap_err();
    /// assert_eq!(err.field, "token_ratio");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_TOKENS).contains(&self.max_tokens) {
            return Err(ConfigError::new(
                "max_tokens",
                format!("must be in 1..={MAX_TOKENS}, got {}", self.max_tokens),
            ));
        }
        if !self.token_ratio.is_finite() || self.milli_ratio() == 0 {
            return Err(ConfigError::new(
                "token_ratio",
                format!(
                    "must be a number of at least 0.001 (three decimal places count), got {}",
                    self.token_ratio
                ),
            ));
        }
        Ok(())
    }

    fn milli_max(&self) -> u32 {
        self.max_tokens.saturating_mul(1_000)
    }

    /// `token_ratio` in thousandths, rounded as gRPC parses it; at most
    /// `max_tokens` (a larger ratio fills the count from empty anyway).
    fn milli_ratio(&self) -> u32 {
        let milli = (self.token_ratio * 1_000.0).round();
        // A cast from a finite, non-negative, bounded f64.
        if milli.is_finite() && milli >= 0.0 { milli.min(f64::from(MAX_TOKENS * 1_000)) as u32 } else { 0 }
    }
}

/// The count of one retry-throttling budget.
#[derive(Debug)]
pub(super) struct Throttling {
    config: std::sync::Mutex<RetryThrottling>,
    max_milli: AtomicU32,
    ratio_milli: AtomicU32,
    /// Thousandths of a token.
    milli: AtomicU32,
}

impl Throttling {
    pub(super) fn new(config: RetryThrottling) -> Self {
        Throttling {
            max_milli: AtomicU32::new(config.milli_max()),
            ratio_milli: AtomicU32::new(config.milli_ratio()),
            milli: AtomicU32::new(config.milli_max()),
            config: std::sync::Mutex::new(config),
        }
    }

    pub(super) fn config(&self) -> RetryThrottling {
        *self.config.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whole tokens held.
    pub(super) fn tokens(&self) -> u32 {
        self.milli.load(Ordering::Relaxed) / 1_000
    }

    /// Whether a retry (or a hedge) is allowed: the count is above half.
    pub(super) fn allows_retry(&self) -> bool {
        self.milli.load(Ordering::Relaxed) > self.max_milli.load(Ordering::Relaxed) / 2
    }

    /// A retryable failure: one token less (none below zero).
    pub(super) fn record_failure(&self) {
        let _ = self
            .milli
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |milli| Some(milli.saturating_sub(1_000)));
    }

    /// Whether a success has anything to give back (the count is not full).
    #[inline]
    pub(super) fn has_room(&self) -> bool {
        self.milli.load(Ordering::Relaxed) < self.max_milli.load(Ordering::Relaxed)
    }

    /// A success: `token_ratio` back, up to `max_tokens`.
    pub(super) fn record_success(&self) {
        let (ratio, max) = (self.ratio_milli.load(Ordering::Relaxed), self.max_milli.load(Ordering::Relaxed));
        let _ = self.milli.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |milli| {
            (milli < max).then(|| milli.saturating_add(ratio).min(max))
        });
    }

    /// Runs on `config` from now on, the count scaled to the new maximum
    /// (as gRPC carries a throttle over a new service config): a client
    /// that was throttling retries goes on throttling them.
    pub(super) fn reconfigure(&self, config: RetryThrottling) {
        let mut held = self.config.lock().unwrap_or_else(|e| e.into_inner());
        let (old_max, new_max) = (u64::from(self.max_milli.load(Ordering::Relaxed)), config.milli_max());
        let _ = self.milli.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |milli| {
            // `milli <= old_max`, so the scaled count is at most `new_max`.
            Some(u32::try_from(u64::from(milli) * u64::from(new_max) / old_max.max(1)).unwrap_or(new_max))
        });
        self.max_milli.store(new_max, Ordering::Relaxed);
        self.ratio_milli.store(config.milli_ratio(), Ordering::Relaxed);
        *held = config;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failure, and whether a retry is allowed after it (gRPC's
    /// `RecordFailure`).
    fn fail(t: &Throttling) -> bool {
        t.record_failure();
        t.allows_retry()
    }

    /// gRPC's own test of its throttle (retry_throttle_test.cc, `Basic`),
    /// step by step: max_tokens 4 (the threshold is 2), token_ratio 1.6.
    #[test]
    fn the_count_follows_grpcs_reference() {
        let t = Throttling::new(RetryThrottling { max_tokens: 4, token_ratio: 1.6 });
        assert!(fail(&t), "3: above the threshold");
        t.record_success(); // 4: not beyond the maximum
        assert!(fail(&t), "3");
        assert!(!fail(&t), "2: at the threshold, no retries");
        assert!(!fail(&t), "1");
        assert!(!fail(&t), "0");
        assert!(!fail(&t), "0: not below the minimum");
        t.record_success(); // 1.6
        t.record_success(); // 3.2
        assert!(fail(&t), "2.2");
        assert!(!fail(&t), "1.2");
        t.record_success(); // 2.8
        assert!(!fail(&t), "1.8");
        t.record_success(); // 3.4
        assert!(fail(&t), "2.4");
    }

    /// gRPC's `Replacement`: a new service config scales the count to its
    /// maximum (3 of 4 becomes 7.5 of 10), then counts on the new settings.
    #[test]
    fn a_new_maximum_scales_the_count() {
        let t = Throttling::new(RetryThrottling { max_tokens: 4, token_ratio: 1.0 });
        assert!(fail(&t), "3 of 4");
        t.reconfigure(RetryThrottling { max_tokens: 10, token_ratio: 3.0 });
        assert!(fail(&t), "6.5");
        assert!(fail(&t), "5.5");
        assert!(!fail(&t), "4.5: below the new threshold, 5");
        assert!(!fail(&t), "3.5");
        t.record_success(); // 6.5
        assert!(fail(&t), "5.5");
        assert!(!fail(&t), "4.5");
        assert_eq!(t.config(), RetryThrottling { max_tokens: 10, token_ratio: 3.0 });
    }

    #[test]
    fn settings_out_of_grpcs_bounds_name_their_field() {
        let bad = |max_tokens, token_ratio| {
            RetryThrottling { max_tokens, token_ratio }.validate().map_err(|e| e.field)
        };
        assert_eq!(bad(0, 0.1), Err("max_tokens"));
        assert_eq!(bad(1_001, 0.1), Err("max_tokens"));
        assert_eq!(bad(10, 0.0), Err("token_ratio"));
        assert_eq!(bad(10, f64::NAN), Err("token_ratio"));
        assert_eq!(bad(10, -1.0), Err("token_ratio"));
        assert_eq!(bad(1_000, 0.001), Ok(()));
    }
}
