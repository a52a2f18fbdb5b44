//! What a herd simulation runs: the dependency's model, the strategy, and the settings.

use std::time::Duration;

use stormproof_runtime::breaker::BreakerConfig;
use stormproof_runtime::budget::BudgetConfig;
use stormproof_runtime::bulkhead::{AdaptiveLimit, BulkheadConfig};
use stormproof_runtime::rate_limit::RateLimitConfig;
use stormproof_runtime::throttle::ThrottleConfig;

// For doc links only. The report is linked by its path instead: report.rs
// uses these settings, so an import of it here would make the two modules
// use each other.
#[allow(unused_imports)]
use super::simulate;

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
    /// A dependency that slows down under load, as a service does in a
    /// brownout: it refuses nothing, everything gets slower, and the
    /// clients' attempt timeouts turn slowness into failures.
    ///
    /// It runs `capacity` requests at full speed, each taking
    /// `service_time`; beyond that its workers share the work, so a request
    /// that arrives to find `n` requests in service (itself included) takes
    /// `service_time * max(1, n / capacity)`: latency grows with concurrent
    /// load. An attempt whose reply has not come `timeout` after it left
    /// the client fails with a transient error (the library's
    /// [`AttemptTimeout`](stormproof_runtime::Rejection::AttemptTimeout)), but the
    /// dependency, which cannot know, finishes the work: it is wasted and
    /// still slows everyone else, which is how a brownout feeds on its own
    /// retries.
    ///
    /// Throughput is `capacity / service_time` however much load there is;
    /// what load beyond it buys is latency, then timeouts. So the
    /// concurrency worth sending is bounded, and unknown to the clients:
    /// the model gives an adaptive concurrency limit something to find.
    Brownout {
        /// Requests served at full speed at once. Must be positive.
        capacity: u32,
        /// How long a request takes with `capacity` or fewer in service. Must be positive.
        service_time: Duration,
        /// The clients' attempt timeout, network legs included. Must be positive.
        timeout: Duration,
    },
}

impl Model {
    /// The model's name: `contention`, `overload` or `brownout`.
    pub fn name(&self) -> &'static str {
        match self {
            Model::Contention => "contention",
            Model::Overload { .. } => "overload",
            Model::Brownout { .. } => "brownout",
        }
    }
}

impl std::fmt::Display for Model {
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
/// Three presets match the three [`Model`]s: [`contention`](Self::contention)
/// (the AWS study's setup, also the `Default`), [`overload`](Self::overload)
/// (the source story's) and [`brownout`](Self::brownout). Fields are
/// public, so variants read well:
///
/// ```
/// # mod stormproof { pub use stormproof_runtime::*; pub use stormproof_sim as sim; }
/// use stormproof::sim::HerdConfig;
/// let cfg = HerdConfig { clients: 190, seed: 7, ..HerdConfig::overload() };
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HerdConfig {
    /// Clients, starting at time zero or over `arrivals`. Must be positive and at most
    /// [`MAX_CLIENTS`](Self::MAX_CLIENTS).
    pub clients: u32,
    /// Fixes every random draw: the same seed gives the same report.
    pub seed: u64,
    /// How the dependency decides success.
    pub model: Model,
    /// Attempts per client, the first included. Must be positive, and
    /// `clients` times it at most [`MAX_ATTEMPTS_IN_ALL`](Self::MAX_ATTEMPTS_IN_ALL).
    pub max_attempts: u32,
    /// Backoff base (`exp(0)`). Must not exceed `cap`.
    pub base: Duration,
    /// Backoff ceiling.
    pub cap: Duration,
    /// The wait-index of the first retry's wait. The library uses 0
    /// (`exp(0) = base`); the AWS study's simulator increments its attempt
    /// counter before the first backoff, so its first wait uses 1.
    pub first_wait_index: u32,
    /// How much each wait grows, in thousandths: the library's
    /// [`Backoff::factor_milli`](stormproof_runtime::backoff::Backoff::factor_milli)
    /// (the attribute's `factor = 1.5` is 1,500), from 1,000 (waits that
    /// never grow) to 10,000. Default 2,000: doubling.
    pub factor_milli: u32,
    /// The delay of each network leg.
    pub latency: Latency,
    /// The bucket width for [`HerdReport::peak_load`](super::HerdReport::peak_load). Must be
    /// positive. Default 10 ms.
    pub bucket: Duration,
    /// The shared retry budget of [`Strategy::Recommended`](super::Strategy::Recommended).
    pub budget: BudgetConfig,
    /// The shared breaker of [`Strategy::Recommended`](super::Strategy::Recommended).
    pub breaker: BreakerConfig,
    /// The shared client-side throttle of [`Strategy::Adaptive`](super::Strategy::Adaptive), if any.
    /// Default `None`; see [`Strategy::Adaptive`](super::Strategy::Adaptive) for why.
    pub throttle: Option<ThrottleConfig>,
    /// The shared bulkhead of [`Strategy::Adaptive`](super::Strategy::Adaptive). As in the library, an
    /// adaptive limit starts at `max_concurrent` and moves within
    /// `[min, max_concurrent]`; with `max_wait`, a client that waits that
    /// long for a permit gives up. Default: 20, adaptive
    /// `AdaptiveLimit::aimd(1).backoff_ratio(0.7)`, no `max_wait`.
    pub bulkhead: BulkheadConfig,
    /// Each client's call deadline, from time zero: no wait that would end
    /// at or past it is taken, and a reply arriving after it is too late
    /// (the attempt was cut), as in the retry loop. Default `None`.
    pub deadline: Option<Duration>,
    /// How long the clients take to arrive: client `i` starts at
    /// `arrivals * i / clients`. Default zero: all at time zero.
    pub arrivals: Duration,
    /// The keys the clients call the dependency with (tenants, shards,
    /// hosts): client `i` calls key `i % keys`. Must be positive and at most
    /// `clients`. Default 1.
    pub keys: u32,
    /// Of the keys, the first this many are down: every attempt on them
    /// fails (transient) whatever the model says, as one tenant's shard
    /// does in an outage of its own. At most `keys`. Default 0.
    pub keys_down: u32,
    /// Whether [`Strategy::Recommended`](super::Strategy::Recommended)'s breaker is one per key (the
    /// library's breaker per key, `per = tenant`) instead of one shared by
    /// every client. Default `false`.
    pub breaker_per_key: bool,
    /// Whether [`Strategy::Adaptive`](super::Strategy::Adaptive)'s bulkhead is one per key (the
    /// library's bulkhead per key, `bulkhead = "..", per = tenant`), each
    /// with the whole [`bulkhead`](Self::bulkhead) configuration, instead
    /// of one shared by every client. Default `false`.
    pub bulkhead_per_key: bool,
    /// A rate limit on the attempts of [`Strategy::Recommended`](super::Strategy::Recommended) and
    /// [`Strategy::Adaptive`](super::Strategy::Adaptive) (the library's, on virtual time), asked after
    /// the bulkhead as the library asks it: an attempt over the rate waits
    /// for its turn, holding its bulkhead place, when the whole wait is
    /// within the limit's `max_wait` and ends before the deadline (a
    /// sheddable one never waits); otherwise the call ends, refused
    /// ([`HerdReport::rate_limited`](super::HerdReport::rate_limited)), or
    /// stopped by its deadline (`deadline_stopped`) when only the deadline
    /// stands in the way. Default `None`.
    pub rate_limit: Option<RateLimitConfig>,
    /// Whether the rate limit is one per key (the library's rate limit per
    /// key, `rate_limit = "..", per = tenant`), each with the whole
    /// [`rate_limit`](Self::rate_limit) configuration, instead of one
    /// shared by every client; every key's is kept for the whole run (the
    /// library's bound, `max_keys`, is not modelled). Default `false`.
    pub rate_limit_per_key: bool,
    /// How the clients are split by priority. Default: all default.
    pub priorities: super::PriorityMix,
}

impl Default for HerdConfig {
    /// [`HerdConfig::contention`].
    fn default() -> Self {
        HerdConfig::contention()
    }
}

impl HerdConfig {
    /// The most clients a simulation takes, as the fleet simulation's
    /// (each client's state and attempts are kept in memory for the report).
    pub const MAX_CLIENTS: u32 = 100_000;

    /// The most attempts a simulation may make in all, `clients` times
    /// `max_attempts` (every attempt's arrival is kept for the report):
    /// [`MAX_CLIENTS`](Self::MAX_CLIENTS) times the 1,000 of
    /// [`contention`](Self::contention), so that every preset takes the
    /// largest herd, and fewer clients may each make more attempts.
    pub const MAX_ATTEMPTS_IN_ALL: u64 = 100_000_000;

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
            factor_milli: stormproof_runtime::backoff::DOUBLING,
            latency: Latency::default(),
            bucket: Duration::from_millis(10),
            budget: BudgetConfig::default(),
            breaker: BreakerConfig::default(),
            throttle: None,
            bulkhead: adaptive_bulkhead(),
            deadline: None,
            arrivals: Duration::ZERO,
            keys: 1,
            keys_down: 0,
            breaker_per_key: false,
            bulkhead_per_key: false,
            rate_limit: None,
            rate_limit_per_key: false,
            priorities: super::PriorityMix { critical: 0, sheddable: 0 },
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

    /// A dependency in a brownout ([`Model::Brownout`]): 10 requests at
    /// full speed, 20 ms each, slower beyond; attempts time out after
    /// 100 ms (two and a half times the unloaded round trip of 40 ms, a
    /// usual margin for a timeout). Its throughput, 500 requests a second,
    /// is of the order of [`overload`](Self::overload)'s 1,000; the rest
    /// is as there: 100 clients, 6 attempts, base 100 ms, cap 2 s. Seed 1.
    pub fn brownout() -> Self {
        HerdConfig {
            model: Model::Brownout {
                capacity: 10,
                service_time: Duration::from_millis(20),
                timeout: Duration::from_millis(100),
            },
            ..HerdConfig::overload()
        }
    }
}

/// The bulkhead [`Strategy::Adaptive`](super::Strategy::Adaptive) runs with by default.
///
/// 20 is where Netflix's concurrency-limits starts its limits; the
/// library's bulkhead starts at its maximum, so here it is both. Deeper
/// cuts than the default 0.9 reach the few writers a contended row serves
/// in fewer conflicts, which a share-of-traffic budget cannot pay many of.
fn adaptive_bulkhead() -> BulkheadConfig {
    BulkheadConfig {
        max_concurrent: 20,
        max_wait: None,
        adaptive: Some(AdaptiveLimit::aimd(1).backoff_ratio(0.7)),
        ..Default::default()
    }
}
