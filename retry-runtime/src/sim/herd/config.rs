//! What a herd simulation runs: the dependency's model, the strategy, and the settings.

use std::time::Duration;

use crate::backoff::Jitter;
use crate::breaker::BreakerConfig;
use crate::budget::BudgetConfig;
use crate::config::{ConfigError, positive};

#[allow(unused_imports)]
use super::{HerdReport, simulate};

/// How the simulated dependency decides whether an attempt succeeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// Optimistic concurrency, as in the AWS study "Exponential Backoff and
    /// Jitter": one row with a version number. A client reads the version,
    /// then writes it back; the write succeeds only if nobody wrote since
    /// the read, otherwise the client backs off and starts over with a new
    /// read. Each client needs one successful write.
    ///
    /// One attempt is a read and a write (four network legs); the write is
    /// what counts as an attempt arriving at the dependency (the study's
    /// "calls"). The dependency is never down: every failure is contention,
    /// so this model measures the *work* a strategy wastes and how long the
    /// herd takes to drain.
    Contention,
    /// A dependency that serves at most `capacity` requests per `tick` and
    /// fails the rest with a transient error (think HTTP 503), as the
    /// source story's relay tower in a storm. Ticks are aligned to zero;
    /// capacity is given out first come, first served.
    ///
    /// Here the timing of retries decides who gets through: retries that
    /// come back too early, or all together, land in ticks that are already
    /// full, burn their attempts and keep the dependency saturated, so
    /// clients that waited well find no room. Each client needs one
    /// success and gives up after `max_attempts`.
    Overload {
        /// Requests served per tick; the rest fail. Must be positive.
        capacity: u32,
        /// The length of a tick. Must be positive.
        tick: Duration,
    },
}

impl Model {
    /// The model's name: `contention` or `overload`.
    pub fn name(&self) -> &'static str {
        match self {
            Model::Contention => "contention",
            Model::Overload { .. } => "overload",
        }
    }
}

impl std::fmt::Display for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How clients wait between attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Retry at once, with no wait at all (a base of zero): the anti-pattern.
    Immediate,
    /// Capped exponential backoff with the given jitter, and nothing else.
    Backoff(Jitter),
    /// What this library recommends: full jitter, plus one [`RetryBudget`](crate::RetryBudget)
    /// and one circuit breaker shared by all clients (configured by
    /// [`HerdConfig::budget`] and [`HerdConfig::breaker`]). An attempt the
    /// breaker refuses fails fast: it puts no load on the dependency and,
    /// as in the retry loop, ends that client's call; so does a failure
    /// after which the breaker would still be open when the wait ends.
    ///
    /// Expect a trade, not a free win: against an
    /// [`Overload`](Model::Overload)ed dependency the library's default
    /// breaker (5 failures) is opened by the first wave of a large herd, and
    /// the clients behind it fail fast instead of succeeding late. In the
    /// [`Contention`](Model::Contention) model failures are conflicts
    /// ([`ErrorClass::Conflict`](crate::ErrorClass::Conflict)), neutral to
    /// the breaker but paid for from the budget, which a large herd drains.
    Recommended,
}

impl Strategy {
    /// Every strategy, in the order the example's table prints them.
    pub const ALL: [Strategy; 6] = [
        Strategy::Immediate,
        Strategy::Backoff(Jitter::None),
        Strategy::Backoff(Jitter::Full),
        Strategy::Backoff(Jitter::Equal),
        Strategy::Backoff(Jitter::Decorrelated),
        Strategy::Recommended,
    ];

    /// A short name: `immediate`, the jitter's name (`none`, `full`,
    /// `equal`, `decorrelated`) for plain backoff, or `recommended`.
    pub fn name(&self) -> &'static str {
        match self {
            Strategy::Immediate => "immediate",
            Strategy::Backoff(jitter) => jitter.name(),
            Strategy::Recommended => "recommended",
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The delay of one network leg: `|normal(mean, sd)|`, as in the AWS study.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Latency {
    /// The mean delay of one leg. Default 10 ms.
    pub mean: Duration,
    /// Its standard deviation. Default 2 ms; zero makes every leg take exactly `mean`.
    pub sd: Duration,
}

impl Default for Latency {
    fn default() -> Self {
        Latency { mean: Duration::from_millis(10), sd: Duration::from_millis(2) }
    }
}

/// The settings of a herd simulation; see [`simulate`].
///
/// Two presets match the two [`Model`]s: [`contention`](Self::contention)
/// (the AWS study's setup, also the `Default`) and
/// [`overload`](Self::overload) (the source story's). Fields are public, so
/// variants read well:
///
/// ```
/// # use retry_runtime as resilient;
/// use resilient::sim::HerdConfig;
/// let cfg = HerdConfig { clients: 190, seed: 7, ..HerdConfig::overload() };
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HerdConfig {
    /// Clients, all starting at time zero. Must be positive.
    pub clients: u32,
    /// Fixes every random draw: the same seed gives the same report.
    pub seed: u64,
    /// How the dependency decides success.
    pub model: Model,
    /// Attempts per client, the first included. Must be positive.
    pub max_attempts: u32,
    /// Backoff base (`exp(0)`). Must not exceed `cap`.
    pub base: Duration,
    /// Backoff ceiling.
    pub cap: Duration,
    /// The wait-index of the first retry's wait. The library uses 0
    /// (`exp(0) = base`); the AWS study's simulator increments its attempt
    /// counter before the first backoff, so its first wait uses 1.
    pub first_wait_index: u32,
    /// The delay of each network leg.
    pub latency: Latency,
    /// The bucket width for [`HerdReport::peak_load`]. Must be positive. Default 10 ms.
    pub bucket: Duration,
    /// The shared retry budget of [`Strategy::Recommended`].
    pub budget: BudgetConfig,
    /// The shared breaker of [`Strategy::Recommended`].
    pub breaker: BreakerConfig,
    /// Each client's call deadline, from time zero: no wait that would end
    /// at or past it is taken, and a reply arriving after it is too late
    /// (the attempt was cut), as in the retry loop. Default `None`.
    pub deadline: Option<Duration>,
}

impl Default for HerdConfig {
    /// [`HerdConfig::contention`].
    fn default() -> Self {
        HerdConfig::contention()
    }
}

impl HerdConfig {
    /// The AWS study's setup: 100 clients contending on one row
    /// ([`Model::Contention`]), base 5 ms, cap 2 s, first wait-index 1,
    /// network legs of |normal(10 ms, 2 ms)|, and 1,000 attempts per client
    /// (the study never gives up; this bound is never reached with backoff).
    /// Budget and breaker are the library's defaults. Seed 1.
    pub fn contention() -> Self {
        HerdConfig {
            clients: 100,
            seed: 1,
            model: Model::Contention,
            max_attempts: 1_000,
            base: Duration::from_millis(5),
            cap: Duration::from_secs(2),
            first_wait_index: 1,
            latency: Latency::default(),
            bucket: Duration::from_millis(10),
            budget: BudgetConfig::default(),
            breaker: BreakerConfig::default(),
            deadline: None,
        }
    }

    /// The source story's setup: 100 clients against a dependency that
    /// serves 10 requests per 10 ms tick ([`Model::Overload`]), 6 attempts
    /// (the story's `maxRetries: 5`), base 100 ms, cap 2 s, first
    /// wait-index 0 (the library's), the same network legs as
    /// [`contention`](Self::contention), library-default budget and breaker. Seed 1.
    pub fn overload() -> Self {
        HerdConfig {
            model: Model::Overload { capacity: 10, tick: Duration::from_millis(10) },
            max_attempts: 6,
            base: Duration::from_millis(100),
            first_wait_index: 0,
            ..HerdConfig::contention()
        }
    }

    /// Checks the settings; the error names the first invalid field.
    ///
    /// ```
    /// # use retry_runtime as resilient;
    /// use resilient::sim::HerdConfig;
    /// let err = HerdConfig { clients: 0, ..Default::default() }.validate().unwrap_err();
    /// assert_eq!(err.field, "clients");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        positive("clients", self.clients.into())?;
        positive("max_attempts", self.max_attempts.into())?;
        if self.base > self.cap {
            return Err(ConfigError::new(
                "base",
                format!("must not exceed `cap` ({:?}), got {:?}", self.cap, self.base),
            ));
        }
        if self.deadline.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new("deadline", "must be greater than zero"));
        }
        if self.bucket.is_zero() {
            return Err(ConfigError::new("bucket", "must be greater than zero"));
        }
        if let Model::Overload { capacity, tick } = self.model {
            positive("capacity", capacity.into())?;
            if tick.is_zero() {
                return Err(ConfigError::new("tick", "must be greater than zero"));
            }
        }
        self.budget.validate().map_err(|e| ConfigError::new("budget", e.to_string()))?;
        self.breaker.validate().map_err(|e| ConfigError::new("breaker", e.to_string()))?;
        Ok(())
    }
}
