//! Bulkheads: a limit on concurrent attempts against one dependency.
//!
//! Why: a slow dependency holds every caller's task, connection and memory
//! for as long as it is slow. Capping how many attempts may be in flight at
//! once keeps one sick dependency from taking the whole service down with it
//! (the compartments of a ship's hull). A permit is held for one attempt
//! only, never across a backoff wait, so a retrying call does not block
//! healthy ones while it sleeps.

use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};

use crate::config::{ConfigError, positive};

/// Settings of a [`Bulkhead`]; every field has a default.
///
/// ```
/// # use retry_runtime as resilient;
/// use std::time::Duration;
/// use resilient::BulkheadConfig;
/// let cfg = BulkheadConfig { max_concurrent: 4, max_wait: Some(Duration::from_millis(50)) };
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkheadConfig {
    /// Attempts allowed in flight at once. Default 10.
    pub max_concurrent: u32,
    /// How long an attempt may wait for a permit before it is rejected with
    /// `BulkheadFull`; `None` (the default) waits as long as it takes (still
    /// bounded by the call's deadline, if any).
    pub max_wait: Option<Duration>,
}

impl Default for BulkheadConfig {
    fn default() -> Self {
        BulkheadConfig { max_concurrent: 10, max_wait: None }
    }
}

impl BulkheadConfig {
    /// Checks the settings: `max_concurrent = 0` would never admit anyone.
    pub fn validate(&self) -> Result<(), ConfigError> {
        positive("max_concurrent", self.max_concurrent.into())?;
        if self.max_concurrent as usize > Semaphore::MAX_PERMITS {
            return Err(ConfigError::new("max_concurrent", "is larger than tokio's semaphore allows"));
        }
        Ok(())
    }
}

/// A named concurrency limit built on [`tokio::sync::Semaphore`].
///
/// ```
/// # use retry_runtime as resilient;
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use resilient::{Bulkhead, BulkheadConfig};
/// let bulkhead = Bulkhead::new("db", BulkheadConfig { max_concurrent: 1, ..Default::default() }).unwrap();
/// let permit = bulkhead.acquire().await.unwrap();
/// assert_eq!(bulkhead.in_use(), 1);
/// drop(permit);
/// assert_eq!(bulkhead.in_use(), 0);
/// # }
/// ```
#[derive(Debug)]
pub struct Bulkhead {
    name: String,
    config: BulkheadConfig,
    permits: Semaphore,
}

/// One attempt's place in a [`Bulkhead`]; dropping it frees the place.
#[derive(Debug)]
#[must_use = "the place is given back as soon as the permit is dropped"]
pub struct BulkheadPermit<'a> {
    _permit: SemaphorePermit<'a>,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    bulkhead: &'a Bulkhead,
}

// Reports the level only when there is a gauge to report it to.
#[cfg(feature = "metrics")]
impl Drop for BulkheadPermit<'_> {
    fn drop(&mut self) {
        // `_permit` is released after this body; report the level it leaves.
        crate::observe::bulkhead_level(&self.bulkhead.name, self.bulkhead.in_use().saturating_sub(1));
    }
}

/// Returned by [`Bulkhead::acquire`] when no permit came free within `max_wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkheadFull;

impl std::fmt::Display for BulkheadFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no bulkhead permit came free within `max_wait`")
    }
}

impl std::error::Error for BulkheadFull {}

impl Bulkhead {
    /// A bulkhead with `config.max_concurrent` free permits, or an error naming the invalid setting.
    pub fn new(name: impl Into<String>, config: BulkheadConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Bulkhead { name: name.into(), config, permits: Semaphore::new(config.max_concurrent as usize) })
    }

    /// The name this bulkhead was declared under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings it was built with.
    pub fn config(&self) -> &BulkheadConfig {
        &self.config
    }

    /// Permits held right now.
    pub fn in_use(&self) -> usize {
        (self.config.max_concurrent as usize).saturating_sub(self.permits.available_permits())
    }

    /// Waits for a permit, at most `max_wait` when it is set.
    ///
    /// Cancel-safe: dropping the future while it waits takes nothing.
    pub async fn acquire(&self) -> Result<BulkheadPermit<'_>, BulkheadFull> {
        // The uncontended case takes no timer and reads no clock.
        match self.try_acquire() {
            Some(permit) => Ok(permit),
            None => self.acquire_waiting().await,
        }
    }

    /// A permit if one is free right now, without waiting.
    #[inline]
    pub(crate) fn try_acquire(&self) -> Option<BulkheadPermit<'_>> {
        let permit = self.permits.try_acquire().ok()?;
        Some(self.admitted(permit))
    }

    /// [`acquire`](Self::acquire) once no permit was free: waits, at most `max_wait`.
    pub(crate) async fn acquire_waiting(&self) -> Result<BulkheadPermit<'_>, BulkheadFull> {
        let permit = match self.config.max_wait {
            None => self.permits.acquire().await.map_err(|_| BulkheadFull)?,
            Some(max_wait) => tokio::time::timeout(max_wait, self.permits.acquire())
                .await
                .map_err(|_| BulkheadFull)?
                .map_err(|_| BulkheadFull)?,
        };
        Ok(self.admitted(permit))
    }

    #[inline]
    fn admitted<'a>(&'a self, permit: SemaphorePermit<'a>) -> BulkheadPermit<'a> {
        #[cfg(feature = "metrics")]
        crate::observe::bulkhead_level(&self.name, self.in_use());
        BulkheadPermit { _permit: permit, bulkhead: self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_waiter_is_rejected_once_max_wait_passes() {
        let b = Bulkhead::new(
            "x",
            BulkheadConfig { max_concurrent: 1, max_wait: Some(Duration::from_millis(50)) },
        )
        .unwrap();
        let held = b.acquire().await.unwrap();
        let start = tokio::time::Instant::now();
        assert_eq!(b.acquire().await.unwrap_err(), BulkheadFull);
        assert_eq!(start.elapsed(), Duration::from_millis(50));
        drop(held);
        assert!(b.acquire().await.is_ok());
        assert_eq!(b.in_use(), 0);
    }

    #[test]
    fn zero_concurrency_is_a_config_error() {
        let err = Bulkhead::new("x", BulkheadConfig { max_concurrent: 0, max_wait: None }).unwrap_err();
        assert_eq!(err.field, "max_concurrent");
    }
}
