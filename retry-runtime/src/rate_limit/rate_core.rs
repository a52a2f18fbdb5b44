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

/// A rate limit's turns on a clock the caller gives, for one caller at a
/// time: `now` is any duration since an origin of the caller's choosing,
/// never earlier than the last one given (an earlier one is taken as the
/// last).
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::rate_limit::{RateCore, RateLimitConfig};
/// let mut core = RateCore::new(RateLimitConfig { per_second: 10, burst: 2, ..Default::default() }).unwrap();
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
    /// next one (which a later caller may take first). Instants past
    /// [`HORIZON`](Self::HORIZON) from the origin are taken as the horizon.
    pub fn take(&mut self, now: Duration) -> Result<(), Duration> {
        let nanos = u64::try_from(now.min(Self::HORIZON).as_nanos()).unwrap_or(u64::MAX);
        self.clock.nanos.fetch_max(nanos, Ordering::Relaxed);
        let at = self.clock.now();
        self.limiter.check().map_err(|not_until| not_until.wait_time_from(at))
    }

    /// The latest instant it tells apart: about 292 years (half of what
    /// u64 nanoseconds hold), so that the GCRA's sums of an instant, the
    /// emission interval and the burst's tolerance (each at most about
    /// 136 years: a rate of one a second, a burst of u32::MAX) never
    /// overflow.
    pub const HORIZON: Duration = Duration::from_nanos(u64::MAX / 2);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_furthest_instants_neither_panic_nor_stop_limiting() {
        let config = RateLimitConfig { per_second: 1, burst: u32::MAX, ..Default::default() };
        let mut widest = RateCore::new(config).unwrap();
        assert_eq!(widest.take(Duration::MAX), Ok(()));
        let mut core =
            RateCore::new(RateLimitConfig { per_second: 1, burst: 1, ..Default::default() }).unwrap();
        assert_eq!(core.take(Duration::MAX), Ok(()));
        assert_eq!(core.take(Duration::MAX), Err(Duration::from_secs(1)), "still one a second");
        assert_eq!(core.take(RateCore::HORIZON), Err(Duration::from_secs(1)), "the same instant");
    }
}
