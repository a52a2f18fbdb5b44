//! A rate limit's pure core: the same quota and the same GCRA (governor's)
//! as a [`RateLimit`](super::RateLimit), on a clock its caller moves, so
//! that a simulation on virtual time or a model test decides every turn
//! exactly as the limiter of a running service would.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::RateLimiter;
use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};

use super::RateLimitConfig;
use crate::config::ConfigError;

/// governor's clock, set by the core's caller: nanoseconds since the
/// caller's origin.
#[derive(Debug, Clone, Default)]
struct SetClock {
    nanos: Arc<AtomicU64>,
}

impl Clock for SetClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }
}

/// A rate limit's turns on a clock the caller gives: `now` is any
/// duration since an origin of the caller's choosing, never earlier than
/// the last one given (an earlier one is taken as the last).
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::rate_limit::{RateCore, RateLimitConfig};
/// let core = RateCore::new(RateLimitConfig { per_second: 10, burst: 2, ..Default::default() }).unwrap();
/// let ms = Duration::from_millis;
/// assert_eq!((core.take(ms(0)), core.take(ms(0))), (Ok(()), Ok(())), "the burst");
/// assert_eq!(core.take(ms(0)), Err(ms(100)), "the next turn is one tenth of a second on");
/// assert_eq!(core.take(ms(100)), Ok(()));
/// ```
#[derive(Debug)]
pub struct RateCore {
    limiter: RateLimiter<NotKeyed, InMemoryState, SetClock, NoOpMiddleware<Duration>>,
    clock: SetClock,
}

impl RateCore {
    /// A core with its full burst available, or an error naming the
    /// invalid setting (as [`RateLimit::new`](super::RateLimit::new)'s).
    pub fn new(config: RateLimitConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let clock = SetClock::default();
        let limiter = RateLimiter::direct_with_clock(config.quota()?, clock.clone());
        Ok(RateCore { limiter, clock })
    }

    /// Takes a turn at `now` if one is free, else says how long until the
    /// next one (which another caller may take first).
    pub fn take(&self, now: Duration) -> Result<(), Duration> {
        // Past u64 nanoseconds (584 years), the last instant it can hold.
        let nanos = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX);
        self.clock.nanos.fetch_max(nanos, Ordering::Relaxed);
        let at = self.clock.now();
        self.limiter.check().map_err(|not_until| not_until.wait_time_from(at))
    }
}
