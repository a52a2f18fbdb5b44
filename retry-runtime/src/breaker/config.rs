//! A breaker's settings, its states and what its hooks are told.

use std::sync::Arc;
use std::time::Duration;

use crate::config::{ConfigError, positive};

#[allow(unused_imports)]
use super::CircuitBreaker;

/// Settings of a [`CircuitBreaker`]; every field has a default.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::breaker::BreakerConfig;
/// let cfg = BreakerConfig { failure_threshold: 3, open_for: Duration::from_secs(10), ..Default::default() };
/// assert_eq!(cfg.window, Duration::from_secs(10));
/// assert_eq!((cfg.max_open_for, cfg.open_period_after(1)), (Duration::from_secs(30), Duration::from_secs(20)));
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Transient failures inside `window` that open the breaker. Default 5.
    ///
    /// Count mode remembers the time of each failure it counts (16 bytes),
    /// up to this many, until a success clears them: a threshold in the
    /// millions costs megabytes while a dependency is down. For large
    /// numbers, `failure_rate_percent` keeps memory constant.
    pub failure_threshold: u32,
    /// How long a failure is remembered (`now - t >= window` forgets it). Default 10 s.
    pub window: Duration,
    /// How long the breaker stays open before probing, the first time it
    /// opens. Default 1 s: a dependency back on its feet is let back in
    /// within a second. Each failed probe doubles the next open period, up
    /// to `max_open_for`; closing starts again from `open_for`.
    pub open_for: Duration,
    /// The longest open period the doubling reaches while probes keep
    /// failing: a dependency that stays down is probed this rarely (at 1,
    /// 2, 4, 8, 16 s, then every 30 s with the defaults). At or below
    /// `open_for`, every open period is `open_for`. Default 30 s.
    pub max_open_for: Duration,
    /// Consecutive probe successes that close a half-open breaker. Default 2.
    pub success_threshold: u32,
    /// Probes allowed in flight at once while half-open. Default 2.
    pub half_open_max_calls: u32,
    /// Failure-rate mode: open when at least this percentage of the calls
    /// that ended inside `window` failed (and at least `minimum_calls` did),
    /// instead of counting `failure_threshold` failures. Default `None`.
    ///
    /// Calls are counted per tenth of the window, as resilience4j's
    /// time-based window counts per bucket: a slice is forgotten once the
    /// window has elapsed since it began, so memory stays constant at any
    /// traffic. (Count mode remembers each failure's exact time.)
    pub failure_rate_percent: Option<u8>,
    /// Calls inside the window before the failure rate is judged. Default 10.
    pub minimum_calls: u32,
    /// Failure-rate mode over the last this many calls instead of over
    /// `window` (resilience4j's `COUNT_BASED` window), 1 to 10,000; needs
    /// `failure_rate_percent`. One bit a call: 10,000 calls take 1.25 KiB,
    /// whatever the traffic. Default `None` (the time window).
    pub window_calls: Option<u32>,
    /// Slow calls (resilience4j's `slowCallDurationThreshold`): an attempt
    /// that succeeds but takes at least this long counts as slow. With
    /// `slow_call_rate_percent`, and in the rate mode (its window judges
    /// them). Default `None`: no attempt is timed.
    ///
    /// A dependency that answers 200 in 9 s instead of 90 ms is down for
    /// its callers, and its queue grows behind them; without this, only an
    /// attempt timeout would tell the breaker.
    pub slow_call_duration: Option<Duration>,
    /// Open when at least this percentage of the calls in the window were
    /// slow (and at least `minimum_calls` ended there), whether or not any
    /// failed (resilience4j's `slowCallRateThreshold`), 1 to 100; needs
    /// `slow_call_duration`. While half-open, a slow probe reopens the
    /// breaker as a failed one does. Default `None`.
    pub slow_call_rate_percent: Option<u8>,
    /// A breaker per key ([`KeyedBreakers`](super::KeyedBreakers): the
    /// attribute's `per = tenant`): the most keys held at once, each its own
    /// breaker; one more evicts the least recently used, which starts
    /// closed when it comes back. Ignored by a breaker of one name.
    /// Default 1,024.
    pub max_keys: u32,
    /// A breaker per key: how long a key's breaker is kept after its last
    /// call; an idle key is forgotten and starts closed when it comes back.
    /// Ignored by a breaker of one name. Default 10 minutes.
    pub idle_for: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        DEFAULT
    }
}

/// The defaults, for constants built from them.
pub(crate) const DEFAULT: BreakerConfig = BreakerConfig {
    failure_threshold: 5,
    window: Duration::from_secs(10),
    open_for: Duration::from_secs(1),
    max_open_for: Duration::from_secs(30),
    success_threshold: 2,
    half_open_max_calls: 2,
    failure_rate_percent: None,
    minimum_calls: 10,
    window_calls: None,
    slow_call_duration: None,
    slow_call_rate_percent: None,
    max_keys: 1_024,
    idle_for: Duration::from_secs(600),
};

impl BreakerConfig {
    /// The settings of an operation's own breaker (see [`NO_BREAKER`]):
    /// resilience4j's defaults, open when half of the last 100 attempts
    /// failed (judged once 100 are held), then the default open periods
    /// (1 s, doubling to 30 s while probes fail).
    ///
    /// A share of recent attempts rather than a count of failures in a row,
    /// so that a dependency that fails now and then is never cut off
    /// (retries and the budget are for that), only one that mostly fails or
    /// times out. Over attempts rather than over 10 s, as resilience4j's
    /// default window is: at a thousand calls a second, a time window
    /// remembers ten thousand successes from before an outage and opens
    /// seconds into it; the last 100 attempts are its last tenth of a
    /// second. A hundred to judge, so that a short burst of failures (a
    /// herd meeting a restart) at low traffic is left to the retries.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::breaker::BreakerConfig;
    /// let own = BreakerConfig::per_operation();
    /// assert_eq!((own.failure_rate_percent, own.window_calls, own.minimum_calls), (Some(50), Some(100), 100));
    /// assert!(own.validate().is_ok());
    /// ```
    pub fn per_operation() -> Self {
        BreakerConfig {
            failure_rate_percent: Some(50),
            window_calls: Some(100),
            minimum_calls: 100,
            ..BreakerConfig::default()
        }
    }

    /// The open period after `failed_probes` probes failed in a row since
    /// the breaker last opened from closed: `open_for` doubled that many
    /// times, up to `max_open_for` (never below `open_for`).
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::time::Duration;
    /// use stormproof::breaker::BreakerConfig;
    /// let cfg = BreakerConfig::default();
    /// let periods: Vec<u64> = (0..7).map(|n| cfg.open_period_after(n).as_secs()).collect();
    /// assert_eq!(periods, [1, 2, 4, 8, 16, 30, 30]);
    /// ```
    pub fn open_period_after(&self, failed_probes: u32) -> Duration {
        let grown = self.open_for.saturating_mul(2u32.saturating_pow(failed_probes.min(31)));
        grown.min(self.max_open_for).max(self.open_for)
    }

    /// Checks the settings; a zero threshold or duration would make the breaker meaningless.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::breaker::BreakerConfig;
    /// let err = BreakerConfig { success_threshold: 0, ..Default::default() }.validate().unwrap_err();
    /// assert_eq!(err.field, "success_threshold");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        positive("failure_threshold", self.failure_threshold.into())?;
        positive("success_threshold", self.success_threshold.into())?;
        positive("half_open_max_calls", self.half_open_max_calls.into())?;
        positive("max_keys", self.max_keys.into())?;
        if self.idle_for.is_zero() {
            return Err(ConfigError::new("idle_for", "must be greater than zero"));
        }
        if self.window.is_zero() {
            return Err(ConfigError::new("window", "must be greater than zero"));
        }
        if self.open_for.is_zero() {
            return Err(ConfigError::new("open_for", "must be greater than zero"));
        }
        if let Some(percent) = self.failure_rate_percent {
            if !(1..=100).contains(&percent) {
                return Err(ConfigError::new(
                    "failure_rate_percent",
                    format!("must be in 1..=100, got {percent}"),
                ));
            }
            positive("minimum_calls", self.minimum_calls.into())?;
        }
        if let Some(calls) = self.window_calls {
            if self.failure_rate_percent.is_none() {
                return Err(ConfigError::new(
                    "window_calls",
                    "sets the rate mode's window of calls: give failure_rate_percent too",
                ));
            }
            if !(1..=MAX_WINDOW_CALLS).contains(&calls) {
                return Err(ConfigError::new(
                    "window_calls",
                    format!("must be in 1..={MAX_WINDOW_CALLS}, got {calls}"),
                ));
            }
            if self.minimum_calls > calls {
                return Err(ConfigError::new(
                    "minimum_calls",
                    format!(
                        "must be at most window_calls ({calls}), got {}: the window would never hold enough calls to judge",
                        self.minimum_calls
                    ),
                ));
            }
        }
        self.validate_slow_calls()
    }

    /// The slow-call settings: both or neither, in the rate mode.
    fn validate_slow_calls(&self) -> Result<(), ConfigError> {
        match (self.slow_call_duration, self.slow_call_rate_percent) {
            (None, None) => Ok(()),
            (Some(_), None) => Err(ConfigError::new(
                "slow_call_duration",
                "says which calls are slow: give slow_call_rate_percent too (the share of slow calls that opens the breaker)",
            )),
            (None, Some(_)) => Err(ConfigError::new(
                "slow_call_rate_percent",
                "needs slow_call_duration (`slow_call_ms` in a configuration file: how long a call takes to count as slow)",
            )),
            (Some(duration), Some(percent)) => {
                if duration.is_zero() {
                    return Err(ConfigError::new("slow_call_duration", "must be greater than zero"));
                }
                if !(1..=100).contains(&percent) {
                    return Err(ConfigError::new(
                        "slow_call_rate_percent",
                        format!("must be in 1..=100, got {percent}"),
                    ));
                }
                if self.failure_rate_percent.is_none() {
                    return Err(ConfigError::new(
                        "slow_call_rate_percent",
                        "is judged over the rate mode's window: give failure_rate_percent too",
                    ));
                }
                Ok(())
            }
        }
    }

    /// Whether a success that took `took` is a slow call for a breaker of
    /// these settings ([`Outcome::Slow`](super::Outcome::Slow)): it judges
    /// slow calls, and `took` is at least `slow_call_duration`. (The
    /// concurrent breaker times its attempts to the millisecond.)
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::time::Duration;
    /// use stormproof::breaker::BreakerConfig;
    /// let slow = BreakerConfig {
    ///     failure_rate_percent: Some(50),
    ///     slow_call_duration: Some(Duration::from_secs(2)),
    ///     slow_call_rate_percent: Some(50),
    ///     ..Default::default()
    /// };
    /// assert!(slow.is_slow(Duration::from_secs(2)) && !slow.is_slow(Duration::from_millis(1_999)));
    /// assert!(!BreakerConfig::default().is_slow(Duration::from_secs(60)), "judges no slow calls");
    /// ```
    pub fn is_slow(&self, took: Duration) -> bool {
        self.judges_slow_calls() && self.slow_call_duration.is_some_and(|slow| took >= slow)
    }

    /// Whether the breaker times its attempts (see `slow_call_duration`).
    pub(crate) fn judges_slow_calls(&self) -> bool {
        self.slow_call_duration.is_some() && self.slow_call_rate_percent.is_some()
    }
}

/// The breaker name that means no breaker at all: `breaker = "none"` in
/// the attribute, `.breaker(NO_BREAKER)` on the builder. Every other
/// operation has a circuit breaker: the one it names, or else its own (the
/// registry's breaker named after the operation, with
/// [`BreakerConfig::per_operation`]'s settings unless one of that name is
/// declared), so that a plain `#[resilient]` stops calling a dependency that
/// mostly fails, and a queue behind a slow one can drain. A breaker cannot
/// be declared under this name.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{Registry, breaker::{BreakerConfig, NO_BREAKER}};
/// let error = Registry::new().declare_breaker(NO_BREAKER, BreakerConfig::default()).unwrap_err();
/// assert!(error.to_string().contains("reserved"), "{error}");
/// ```
pub const NO_BREAKER: &str = "none";

/// The most calls a count-based window (`window_calls`) remembers.
pub const MAX_WINDOW_CALLS: u32 = 10_000;

/// The three states of a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls run; failures are counted.
    Closed,
    /// Calls fail fast with `CircuitOpen`.
    Open,
    /// A limited number of probe calls run to test the dependency.
    HalfOpen,
}

impl BreakerState {
    /// Lower-case name for traces and metrics: `closed`, `open`, `half_open`.
    pub fn label(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

impl std::fmt::Display for BreakerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// A state change of a named breaker, as given to
/// [`Registry::on_transition`](crate::Registry::on_transition) hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerTransition<'a> {
    /// The breaker's name.
    pub breaker: &'a str,
    /// Its key, for one of a breaker per key
    /// ([`KeyedBreakers`](super::KeyedBreakers)).
    pub key: Option<&'a str>,
    /// The state it left.
    pub from: BreakerState,
    /// The state it entered.
    pub to: BreakerState,
}

/// A callback told of every transition of the breakers it is attached to.
pub type TransitionHook = Arc<dyn Fn(&BreakerTransition<'_>) + Send + Sync>;

/// A registry's hooks, shared with its breakers. Replaced whole when a hook
/// is added, so a breaker announcing a transition holds the lock only to
/// take the list, not while the hooks run: a hook may then add a hook, and a
/// slow hook does not hold up another thread adding one.
pub(crate) type Hooks = Arc<std::sync::RwLock<Arc<[TransitionHook]>>>;
