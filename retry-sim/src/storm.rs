//! `Storm`: a dependency with a transient outage, on tokio's clock.
//!
//! The source story's harness injects a `sleep` that only advances a logical
//! clock. In Rust the library sleeps with `tokio::time`, so the logical clock
//! is tokio's paused clock: under `#[tokio::test(start_paused = true)]` the
//! real retry loop waits hours in microseconds, and every call lands at an
//! exact instant. The storm reads that clock, fails until its end, and keeps
//! a log of when it was called, which is what a test asserts on.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use stormproof_runtime::Rejection;
use stormproof_runtime::{Classify, ErrorClass};

/// A dependency that fails with a transient [`StormError`] until a point in
/// (tokio) time, then succeeds; it records the instant of every call.
///
/// Instants are offsets from the moment the storm was made. Clones share one
/// storm and one log, so a storm can be handed to spawned tasks.
///
/// ```
/// # mod stormproof { pub use stormproof_runtime::*; pub use stormproof_sim as sim; }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use stormproof::{Jitter, Policy};
/// use stormproof::sim::Storm;
///
/// let ms = Duration::from_millis;
/// let storm = Storm::until(ms(1000));
/// let policy = Policy::builder().max_attempts(11).base(ms(100)).cap(ms(2000)).jitter(Jitter::None).build()?;
///
/// let delivered_at = policy.run(|| storm.call()).await?;
/// assert_eq!(delivered_at, ms(1500));
/// assert_eq!(storm.calls(), [ms(0), ms(100), ms(300), ms(700), ms(1500)]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Storm {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    start: Instant,
    ends: Option<Duration>,
    calls: Mutex<Vec<Duration>>,
}

impl Storm {
    /// A storm that starts now and lets calls through from `ends` after now
    /// on (a call at exactly `ends` succeeds).
    pub fn until(ends: Duration) -> Storm {
        Storm::new(Some(ends))
    }

    /// A storm that never ends: every call fails. For testing what a policy
    /// does when retrying cannot help (the waits, the last attempt).
    pub fn endless() -> Storm {
        Storm::new(None)
    }

    fn new(ends: Option<Duration>) -> Storm {
        Storm { inner: Arc::new(Inner { start: Instant::now(), ends, calls: Mutex::new(Vec::new()) }) }
    }

    /// When calls start to succeed, as an offset from the storm's start;
    /// `None` for an endless storm.
    pub fn ends_at(&self) -> Option<Duration> {
        self.inner.ends
    }

    /// One call to the dependency: `Ok` with the offset at which it got
    /// through once the storm is over, a transient [`StormError::Storm`]
    /// before. The call is logged when the future is first polled, that is
    /// when the attempt really starts.
    pub async fn call(&self) -> Result<Duration, StormError> {
        let at = self.elapsed();
        self.log().push(at);
        match self.inner.ends {
            Some(ends) if at >= ends => Ok(at),
            _ => Err(StormError::Storm { at }),
        }
    }

    /// The time since the storm was made, on tokio's clock.
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(self.inner.start)
    }

    /// The offset of every call so far, in call order.
    pub fn calls(&self) -> Vec<Duration> {
        self.log().clone()
    }

    /// How many calls were made.
    pub fn attempts(&self) -> usize {
        self.log().len()
    }

    /// The gaps between consecutive calls: the waits the caller made
    /// (one fewer than the calls; empty for zero or one call).
    pub fn waits(&self) -> Vec<Duration> {
        self.log().windows(2).map(|pair| pair[1].saturating_sub(pair[0])).collect()
    }

    fn log(&self) -> MutexGuard<'_, Vec<Duration>> {
        // A panic while holding the lock cannot leave the log half-written.
        self.inner.calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The error of a [`Storm`] call: the storm itself (transient) or a
/// rejection from the retry loop's guards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StormError {
    /// The dependency was down: the call came at `at`, before the storm ended.
    Storm {
        /// The offset of the failed call from the storm's start.
        at: Duration,
    },
    /// A guard (breaker, bulkhead, deadline, attempt timeout) ended the attempt.
    Rejected(Rejection),
}

impl std::fmt::Display for StormError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StormError::Storm { at } => write!(f, "storm: the dependency is down (call at {at:?})"),
            StormError::Rejected(rejection) => write!(f, "rejected: {rejection}"),
        }
    }
}

impl std::error::Error for StormError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StormError::Storm { .. } => None,
            StormError::Rejected(rejection) => Some(rejection),
        }
    }
}

impl Classify for StormError {
    /// The storm is transient (it passes); a rejection keeps its own class.
    fn classify(&self) -> ErrorClass {
        match self {
            StormError::Storm { .. } => ErrorClass::Transient,
            StormError::Rejected(rejection) => rejection.classify(),
        }
    }
}

impl From<Rejection> for StormError {
    fn from(rejection: Rejection) -> Self {
        StormError::Rejected(rejection)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[tokio::test(start_paused = true)]
    async fn fails_until_the_end_then_succeeds() {
        let storm = Storm::until(ms(1000));
        assert_eq!(storm.call().await, Err(StormError::Storm { at: ms(0) }));
        tokio::time::sleep(ms(999)).await;
        assert!(storm.call().await.is_err());
        tokio::time::sleep(ms(1)).await;
        assert_eq!(storm.call().await, Ok(ms(1000)), "the end itself is clear");
        assert_eq!(storm.calls(), [ms(0), ms(999), ms(1000)]);
        assert_eq!(storm.waits(), [ms(999), ms(1)]);
        assert_eq!(storm.attempts(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn an_endless_storm_never_lets_through_and_clones_share_the_log() {
        let storm = Storm::endless();
        let clone = storm.clone();
        tokio::time::sleep(Duration::from_secs(86_400)).await;
        assert!(clone.call().await.is_err());
        assert_eq!(storm.calls(), [Duration::from_secs(86_400)]);
        assert_eq!(storm.ends_at(), None);
        assert!(storm.waits().is_empty());
    }

    #[test]
    fn errors_classify_and_display() {
        let storm = StormError::Storm { at: ms(5) };
        assert_eq!(storm.classify(), ErrorClass::Transient);
        assert!(storm.to_string().contains("5ms"));
        let open = StormError::from(Rejection::CircuitOpen { breaker: "b".into() });
        assert_eq!(open.classify(), ErrorClass::Permanent);
        assert!(std::error::Error::source(&open).is_some());
        let timeout = StormError::from(Rejection::AttemptTimeout { after: ms(1) });
        assert_eq!(timeout.classify(), ErrorClass::Transient);
    }
}
