//! Rate limits: at most so many attempts per second against one dependency,
//! on governor's GCRA (generic cell rate algorithm), timed by tokio's clock.
//!
//! A dependency with a published quota (a SaaS API's 100 requests per
//! second) refuses what goes over it, and a client that keeps sending earns
//! nothing but refusals (and sometimes a ban). A limiter shared by every
//! call to the dependency keeps the client under the quota: an attempt over
//! the rate waits up to `max_wait` for its turn, then is refused locally
//! with `RateLimited`, without reaching the dependency.

mod config;
mod guard;
mod keyed;
mod rate_core;

use crate::keyed::PerKeyBounds;
pub use config::RateLimitConfig;
pub use keyed::KeyedRateLimits;
pub use rate_core::RateCore;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::RateLimiter;
use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use tokio::time::Instant;

use crate::config::ConfigError;

fn wait_nanos(max_wait: Option<Duration>) -> u64 {
    max_wait.map_or(u64::MAX, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX - 1))
}

/// governor's clock, read from tokio's: paused time in tests moves it too.
#[derive(Debug, Clone)]
struct TokioClock {
    origin: Instant,
}

impl Clock for TokioClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.origin)
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Duration>>;

/// A named rate limiter shared by the calls to one dependency; see the module docs.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use stormproof::{rate_limit::{RateLimit, RateLimitConfig}};
/// let limit = RateLimit::new("api", RateLimitConfig { per_second: 2, burst: 2, max_wait: None, ..Default::default() }).unwrap();
/// assert!(limit.acquire().await.is_ok());
/// assert!(limit.acquire().await.is_ok());
/// assert!(limit.acquire().await.is_err(), "over the rate, and no wait allowed");
/// # }
/// ```
#[derive(Debug)]
pub struct RateLimit {
    name: String,
    /// Its key, for a limiter of a [`KeyedRateLimits`] set, and how many
    /// times it was reconfigured (see `keyed`).
    keyed: crate::keyed::KeyedPart,
    /// `max_keys` and `idle_for`, reconfigurable (see `RateLimitConfig`).
    per_key: PerKeyBounds,
    /// The quota the limiter was built for: `max_wait` is in `max_wait_nanos`.
    config: RateLimitConfig,
    /// `max_wait` in nanoseconds; `u64::MAX` for none. Reconfigurable.
    max_wait_nanos: AtomicU64,
    limiter: Limiter,
    /// The limiter's clock: durations since this instant.
    clock: TokioClock,
    /// The attempts it refused, by priority.
    refusals: crate::priority::Refusals,
}

/// Returned by [`RateLimit::acquire`] when the attempt's turn would come
/// later than `max_wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverRate {
    /// How long the attempt would have had to wait.
    pub wait: Duration,
}

impl RateLimit {
    /// A limiter with its full burst available, or an error naming the invalid setting.
    pub fn new(name: impl Into<String>, config: RateLimitConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let clock = TokioClock { origin: Instant::now() };
        let limiter = RateLimiter::direct_with_clock(config.quota()?, clock.clone());
        let max_wait_nanos = AtomicU64::new(wait_nanos(config.max_wait));
        let (keyed, per_key) =
            (crate::keyed::KeyedPart::default(), PerKeyBounds::new(config.max_keys, config.idle_for));
        let refusals = Default::default();
        Ok(RateLimit { name: name.into(), keyed, per_key, config, max_wait_nanos, limiter, clock, refusals })
    }

    /// The name this limiter was declared under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings it runs on (a `max_wait` longer than u64::MAX
    /// nanoseconds, about 584 years, as that longest wait).
    pub fn config(&self) -> RateLimitConfig {
        let (max_keys, idle_for) = self.per_key.load();
        RateLimitConfig { max_wait: self.max_wait(), max_keys, idle_for, ..self.config }
    }

    fn max_wait(&self) -> Option<Duration> {
        let nanos = self.max_wait_nanos.load(Ordering::Relaxed);
        (nanos != u64::MAX).then(|| Duration::from_nanos(nanos))
    }

    /// Runs with `config`'s `max_wait` from the next attempt on. The quota
    /// (`per_second`, `burst`) is the limiter's for life: governor builds a
    /// limiter for one quota, and a new limiter would forget the turns
    /// already taken, so changing it is an error naming the field (declare
    /// a limiter under a new name, or restart), and changes nothing.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// use stormproof::{rate_limit::{RateLimit, RateLimitConfig}};
    /// let limit = RateLimit::new("api", RateLimitConfig::default()).unwrap();
    /// let longer = RateLimitConfig { max_wait: Some(Duration::from_millis(50)), ..Default::default() };
    /// limit.reconfigure(longer).unwrap();
    /// assert_eq!(limit.config(), longer);
    /// let faster = RateLimitConfig { per_second: 20, ..Default::default() };
    /// assert_eq!(limit.reconfigure(faster).unwrap_err().field, "per_second");
    /// # }
    /// ```
    pub fn reconfigure(&self, config: RateLimitConfig) -> Result<(), ConfigError> {
        self.check_reconfigure(&config)?;
        self.max_wait_nanos.store(wait_nanos(config.max_wait), Ordering::Relaxed);
        self.per_key.store(config.max_keys, config.idle_for);
        self.keyed.reconfigured();
        Ok(())
    }

    /// Whether [`reconfigure`](Self::reconfigure) would take `config`.
    pub(crate) fn check_reconfigure(&self, config: &RateLimitConfig) -> Result<(), ConfigError> {
        config.validate()?;
        for (field, was, is) in [
            ("per_second", self.config.per_second, config.per_second),
            ("burst", self.config.burst, config.burst),
        ] {
            if was != is {
                return Err(ConfigError::new(
                    field,
                    format!(
                        "cannot change on a running rate limit ({was} -> {is}): its limiter is built for one quota and a new one would forget the turns already taken (declare a new name, or restart)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Takes a turn if one is free right now, without waiting.
    #[inline]
    pub fn try_acquire(&self) -> bool {
        self.limiter.check().is_ok()
    }

    /// Takes a turn: at once when one is free, after waiting for it when it
    /// comes within `max_wait`, else `Err` with the wait it would have taken.
    ///
    /// Cancel-safe: a turn is taken only when this returns `Ok`.
    pub async fn acquire(&self) -> Result<(), OverRate> {
        self.acquire_before(None).await.map_err(|late| match late {
            Late::OverRate(over) => over,
            Late::PastDeadline => unreachable!("no deadline"),
        })
    }

    /// [`acquire`](Self::acquire), refusing at once a turn that would come
    /// at or after `deadline` (no wait is started that can only end in the
    /// deadline's rejection). Over `max_wait` comes first.
    pub(crate) async fn acquire_before(&self, deadline: Option<Instant>) -> Result<(), Late> {
        // When the first refusal came (the uncontended case reads no clock).
        let mut started = None;
        loop {
            match self.limiter.check() {
                Ok(()) => return Ok(()),
                Err(not_until) => {
                    // Another caller may take the turn this one waited for:
                    // `max_wait` bounds the whole wait, not each round of it,
                    // and the time really waited, not the waits planned (a
                    // sleep ends on the timer's tick after the turn, or later
                    // on a busy runtime).
                    let now = self.clock.now();
                    let waited = now.saturating_sub(*started.get_or_insert(now));
                    let total = waited.saturating_add(not_until.wait_time_from(now));
                    if self.max_wait().is_none_or(|max| total > max) {
                        crate::observe::rate_limited(&self.name, self.keyed.label(), total);
                        return Err(Late::OverRate(OverRate { wait: total }));
                    }
                    let left = total - waited;
                    if deadline
                        .is_some_and(|deadline| deadline.saturating_duration_since(Instant::now()) <= left)
                    {
                        return Err(Late::PastDeadline);
                    }
                    tokio::time::sleep(left).await;
                }
            }
        }
    }
}

/// Why [`RateLimit::acquire_before`] took no turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Late {
    /// The turn is further away than `max_wait`.
    OverRate(OverRate),
    /// The turn comes at or after the deadline.
    PastDeadline,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn over_the_rate_an_attempt_waits_its_turn_then_is_refused() {
        // 10 per second: one turn every 100 ms, a burst of 2.
        let config =
            RateLimitConfig { per_second: 10, burst: 2, max_wait: Some(ms(150)), ..Default::default() };
        let limit = RateLimit::new("api", config).unwrap();
        let start = Instant::now();
        limit.acquire().await.unwrap();
        limit.acquire().await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst goes at once");
        limit.acquire().await.unwrap();
        assert_eq!(start.elapsed(), ms(100), "the third waits for the next turn");
        limit.acquire().await.unwrap();
        assert_eq!(start.elapsed(), ms(200));
        // Two callers want the turn 100 ms away: one gets it, the other's
        // would come 200 ms after it asked, past its 150 ms.
        let (a, b) = tokio::join!(limit.acquire(), limit.acquire());
        let mut outcomes = [a, b];
        outcomes.sort_by_key(Result::is_err);
        assert_eq!(outcomes, [Ok(()), Err(OverRate { wait: ms(200) })], "which of the two is not promised");
        assert_eq!(start.elapsed(), ms(300), "refused as soon as its wait was known to be too long");
        let refused = RateLimit::new(
            "strict",
            RateLimitConfig { per_second: 1, burst: 1, max_wait: Some(ms(500)), ..Default::default() },
        )
        .unwrap();
        refused.acquire().await.unwrap();
        assert_eq!(
            refused.acquire().await,
            Err(OverRate { wait: ms(1000) }),
            "the next turn is a second away"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn over_a_long_run_the_rate_is_the_configured_one() {
        let limit = RateLimit::new(
            "api",
            RateLimitConfig { per_second: 50, burst: 5, max_wait: None, ..Default::default() },
        )
        .unwrap();
        let start = Instant::now();
        let mut admitted = 0u32;
        while start.elapsed() < Duration::from_secs(10) {
            if limit.acquire().await.is_ok() {
                admitted += 1;
            }
            tokio::time::sleep(ms(1)).await;
        }
        // The burst, then 50 per second for 10 s (the GCRA is exact).
        assert_eq!(admitted, 5 + 500 - 1, "{admitted}");
    }

    /// Callers that keep losing the turn they waited for wait several
    /// rounds; each round's sleep ends on the timer's next millisecond, after
    /// the turn it waited for. `max_wait` bounds the time they really waited,
    /// not the sum of the waits they planned.
    #[tokio::test(start_paused = true)]
    async fn max_wait_bounds_the_time_really_waited_over_many_rounds() {
        use std::sync::Arc;
        // One turn every 666.67 us: most turns fall between two ticks of
        // tokio's millisecond timer.
        let max_wait = ms(10);
        let config =
            RateLimitConfig { per_second: 1500, burst: 1, max_wait: Some(max_wait), ..Default::default() };
        let limit = Arc::new(RateLimit::new("api", config).unwrap());
        assert!(limit.try_acquire());
        let start = Instant::now();
        let callers: Vec<_> = (0..20)
            .map(|_| {
                let limit = limit.clone();
                tokio::spawn(async move { (limit.acquire().await, start.elapsed()) })
            })
            .collect();
        let mut admitted = 0;
        for caller in callers {
            let (outcome, waited) = caller.await.unwrap();
            if outcome.is_ok() {
                admitted += 1;
                // The last sleep may end on the timer's next tick (1 ms), no later.
                assert!(waited <= max_wait + ms(1), "admitted after {waited:?}, max_wait {max_wait:?}");
            }
        }
        assert!(admitted >= 10, "the turns within max_wait were taken: {admitted}");
    }

    /// A turn within `max_wait` but at or past the caller's deadline is
    /// refused at once, and taken by no one; one before it is waited for.
    #[tokio::test(start_paused = true)]
    async fn a_turn_past_the_deadline_is_refused_at_once() {
        let config =
            RateLimitConfig { per_second: 10, burst: 1, max_wait: Some(ms(500)), ..Default::default() };
        let limit = RateLimit::new("api", config).unwrap();
        assert!(limit.try_acquire());
        let start = Instant::now();
        for deadline in [start + ms(50), start + ms(100)] {
            assert_eq!(limit.acquire_before(Some(deadline)).await, Err(Late::PastDeadline));
            assert_eq!(start.elapsed(), ms(0), "no wait started");
        }
        assert_eq!(limit.acquire_before(Some(start + ms(101))).await, Ok(()));
        assert_eq!(start.elapsed(), ms(100), "the turn at 100 ms, untaken by the refusals");
        limit.reconfigure(RateLimitConfig { max_wait: Some(ms(50)), ..config }).unwrap();
        let over = limit.acquire_before(Some(start + ms(110))).await;
        assert_eq!(over, Err(Late::OverRate(OverRate { wait: ms(100) })), "over max_wait comes first");
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_over_one_per_nanosecond_is_refused_by_name_and_the_fastest_one_still_limits() {
        let over =
            RateLimitConfig { per_second: 1_000_000_001, burst: 1, max_wait: None, ..Default::default() };
        let error = RateLimit::new("fast", over).unwrap_err();
        assert_eq!(error.field, "per_second");
        assert!(error.to_string().contains("1000000000"), "{error}");
        let fastest = RateLimit::new("fast", RateLimitConfig { per_second: 1_000_000_000, ..over }).unwrap();
        assert!(fastest.try_acquire());
        assert!(!fastest.try_acquire(), "a burst of 1 at one turn per nanosecond, with no time passed");
    }

    /// A `max_wait` too long to count in nanoseconds is still a wait, not
    /// the "refuse at once" of `None` (both are kept in one word).
    #[tokio::test(start_paused = true)]
    async fn a_max_wait_past_u64_nanoseconds_still_waits() {
        let config =
            RateLimitConfig { per_second: 10, burst: 1, max_wait: Some(Duration::MAX), ..Default::default() };
        let limit = RateLimit::new("patient", config).unwrap();
        assert!(limit.config().max_wait.is_some_and(|wait| wait > Duration::from_secs(500 * 365 * 86_400)));
        let start = Instant::now();
        assert!(limit.try_acquire());
        assert_eq!(limit.acquire().await, Ok(()), "waited for the next turn");
        assert_eq!(start.elapsed(), ms(100));
    }

    #[test]
    fn zero_rate_or_burst_name_their_field() {
        assert_eq!(
            RateLimitConfig { per_second: 0, ..Default::default() }.validate().unwrap_err().field,
            "per_second"
        );
        assert_eq!(RateLimitConfig { burst: 0, ..Default::default() }.validate().unwrap_err().field, "burst");
    }
}
