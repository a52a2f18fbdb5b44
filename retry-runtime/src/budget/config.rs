//! A budget's settings: which form it takes, and that form's parameters.

use super::{RatioBudget, RetryThrottling, TokenBucket};
use crate::config::ConfigError;

/// A budget's settings: its form and the form's parameters.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{budget::{BudgetConfig, RatioBudget, TokenBucket}};
/// assert_eq!(BudgetConfig::default(), BudgetConfig::Ratio(RatioBudget::default()));
/// let bucket: BudgetConfig = TokenBucket { capacity: 50, ..Default::default() }.into();
/// assert!(bucket.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum BudgetConfig {
    /// Retries as a share of first attempts over a window (the default).
    Ratio(RatioBudget),
    /// Retries take tokens; successes put them back.
    TokenBucket(TokenBucket),
    /// gRPC's retry throttling: failures take a token, successes give a
    /// share of one back, retries only above half.
    RetryThrottling(RetryThrottling),
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig::Ratio(RatioBudget::default())
    }
}

impl From<RatioBudget> for BudgetConfig {
    fn from(config: RatioBudget) -> Self {
        BudgetConfig::Ratio(config)
    }
}

impl From<RetryThrottling> for BudgetConfig {
    fn from(config: RetryThrottling) -> Self {
        BudgetConfig::RetryThrottling(config)
    }
}

impl From<TokenBucket> for BudgetConfig {
    fn from(config: TokenBucket) -> Self {
        BudgetConfig::TokenBucket(config)
    }
}

impl BudgetConfig {
    /// Checks the settings; the error names the invalid field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            BudgetConfig::Ratio(config) => config.validate(),
            BudgetConfig::TokenBucket(config) => config.validate(),
            BudgetConfig::RetryThrottling(config) => config.validate(),
        }
    }

    /// The form's name: `ratio`, `token_bucket` or `retry_throttling`.
    pub fn form(&self) -> &'static str {
        match self {
            BudgetConfig::Ratio(_) => "ratio",
            BudgetConfig::TokenBucket(_) => "token_bucket",
            BudgetConfig::RetryThrottling(_) => "retry_throttling",
        }
    }
}
