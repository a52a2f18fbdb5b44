//! A bulkhead's settings.

use std::time::Duration;

use tokio::sync::Semaphore;

use super::AdaptiveLimit;
use crate::config::{ConfigError, positive};

/// How long an attempt waits for a bulkhead's place by default: a second.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(1);

/// Settings of a [`Bulkhead`](super::Bulkhead); every field has a default.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::bulkhead::BulkheadConfig;
/// let cfg = BulkheadConfig { max_concurrent: 4, max_wait: Some(Duration::from_millis(50)), ..Default::default() };
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BulkheadConfig {
    /// Attempts allowed in flight at once (with `adaptive`, the most the
    /// limit may reach). Default 10.
    pub max_concurrent: u32,
    /// How long an attempt may wait for a permit before it is rejected with
    /// `BulkheadFull`: by default [`DEFAULT_MAX_WAIT`], a second; `None`
    /// waits as long as it takes (still bounded by the call's deadline, if
    /// any). Bounded by default because a queue at the client is a backlog
    /// a slow dependency receives all at once when it recovers.
    pub max_wait: Option<Duration>,
    /// Moves the limit within `[min, max_concurrent]` by what the answers
    /// say (see [`AdaptiveLimit`]); `None` (the default) keeps it at
    /// `max_concurrent`.
    pub adaptive: Option<AdaptiveLimit>,
    /// A bulkhead per key (`per = tenant`: a limit for each): the most keys
    /// held at once; one more evicts one whose calls have all ended (the
    /// least recently used, else the least recently used of any). Ignored
    /// by a bulkhead of one name. Default 1,024.
    pub max_keys: u32,
    /// A bulkhead per key: how long a key's bulkhead is kept after its last
    /// call. Ignored by a bulkhead of one name. Default 10 minutes.
    pub idle_for: Duration,
}

impl Default for BulkheadConfig {
    fn default() -> Self {
        BulkheadConfig {
            max_concurrent: 10,
            max_wait: Some(DEFAULT_MAX_WAIT),
            adaptive: None,
            max_keys: 1_024,
            idle_for: Duration::from_secs(600),
        }
    }
}

impl BulkheadConfig {
    /// Checks the settings: `max_concurrent = 0` would never admit anyone.
    pub fn validate(&self) -> Result<(), ConfigError> {
        positive("max_concurrent", self.max_concurrent.into())?;
        if self.max_concurrent as usize > Semaphore::MAX_PERMITS {
            return Err(ConfigError::new("max_concurrent", "is larger than tokio's semaphore allows"));
        }
        positive("max_keys", self.max_keys.into())?;
        if self.idle_for.is_zero() {
            return Err(ConfigError::new("idle_for", "must be greater than zero"));
        }
        match &self.adaptive {
            Some(adaptive) => adaptive.validate(self.max_concurrent),
            None => Ok(()),
        }
    }
}
