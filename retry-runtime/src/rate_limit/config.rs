//! A rate limit's settings.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::Quota;

use crate::config::{ConfigError, positive};

/// Settings of a [`RateLimit`](super::RateLimit); every field has a default.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::rate_limit::RateLimitConfig;
/// let cfg = RateLimitConfig { per_second: 100, ..Default::default() };
/// assert_eq!((cfg.burst, cfg.max_wait), (10, None));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitConfig {
    /// Attempts allowed per second, evenly spaced. Default 10.
    pub per_second: u32,
    /// Attempts allowed at once after a quiet spell. Default 10.
    pub burst: u32,
    /// How long an attempt over the rate may wait for its turn before it is
    /// refused; `None` (the default) refuses at once.
    pub max_wait: Option<Duration>,
    /// A rate limit per key (`per = tenant`: a quota for each): the most
    /// keys held at once; one more evicts the least recently used, whose
    /// quota starts full when it comes back. Ignored by a limit of one
    /// name. Default 1,024.
    pub max_keys: u32,
    /// A rate limit per key: how long a key's limit is kept after its last
    /// call. Ignored by a limit of one name. Default 10 minutes.
    pub idle_for: Duration,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig {
            per_second: 10,
            burst: 10,
            max_wait: None,
            max_keys: 1_024,
            idle_for: Duration::from_secs(600),
        }
    }
}

impl RateLimitConfig {
    /// Checks the settings: a zero rate or burst would admit nothing, and a
    /// rate over [`MAX_PER_SECOND`](Self::MAX_PER_SECOND) cannot be kept.
    pub fn validate(&self) -> Result<(), ConfigError> {
        positive("per_second", self.per_second.into())?;
        if self.per_second > Self::MAX_PER_SECOND {
            return Err(ConfigError::new(
                "per_second",
                format!("must be at most {} (one turn per nanosecond)", Self::MAX_PER_SECOND),
            ));
        }
        positive("burst", self.burst.into())?;
        positive("max_keys", self.max_keys.into())?;
        if self.idle_for.is_zero() {
            return Err(ConfigError::new("idle_for", "must be greater than zero"));
        }
        Ok(())
    }

    /// The fastest rate a limiter keeps: one turn per nanosecond. The
    /// limiter (governor) spaces turns by whole nanoseconds, at least one,
    /// so a faster rate would quietly be served at this one.
    pub const MAX_PER_SECOND: u32 = 1_000_000_000;

    pub(super) fn quota(&self) -> Result<Quota, ConfigError> {
        let rate = NonZeroU32::new(self.per_second)
            .ok_or_else(|| ConfigError::new("per_second", "must be greater than zero"))?;
        let burst = NonZeroU32::new(self.burst)
            .ok_or_else(|| ConfigError::new("burst", "must be greater than zero"))?;
        Ok(Quota::per_second(rate).allow_burst(burst))
    }
}
