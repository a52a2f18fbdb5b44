//! The herd simulation: N clients, one dependency, virtual time.
//!
//! Every client is a small state machine; every network leg and every
//! backoff wait is an event in a queue on virtual time (see the module docs
//! of [`sim`](super) for why not tokio). A run is a pure function of its
//! [`HerdConfig`] and [`Strategy`]:
//!
//! - network delays come from one generator seeded by `seed`, drawn in event
//!   order, which is itself deterministic;
//! - each client draws its jitter from its own stream of the same seed, so
//!   one client's draws do not shift when another client's events move;
//! - simultaneous events are processed in the order they were scheduled.
//!
//! The strategies run on the library's own parts: [`Backoff::wait`] for
//! every wait, and for [`Strategy::Recommended`] a real [`RetryBudget`] and
//! the pure breaker [`BreakerCore`] fed virtual instants, applied in the
//! order of the retry loop (breaker admission before an attempt; after a
//! failure: attempts left, breaker still open when the wait would end,
//! budget token).

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Normal};

use super::peak_in_bucket;
use super::queue::EventQueue;
use crate::backoff::{Backoff, Jitter, JitterRng, stream_seed};
use crate::breaker::{Admission, BreakerConfig, BreakerCore, BreakerState, Outcome, Ticket, Transition};
use crate::budget::{BudgetConfig, RetryBudget};
use crate::config::{ConfigError, positive};

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
    /// What this library recommends: full jitter, plus one [`RetryBudget`]
    /// and one circuit breaker shared by all clients (configured by
    /// [`HerdConfig::budget`] and [`HerdConfig::breaker`]). An attempt the
    /// breaker refuses fails fast: it puts no load on the dependency and,
    /// as in the retry loop, ends that client's call; so does a failure
    /// after which the breaker would still be open when the wait ends.
    ///
    /// Expect a trade, not a free win: with the library's default breaker
    /// (5 failures) the first wave of a large herd opens it, and the clients
    /// behind it fail fast instead of succeeding late. That protects a
    /// dependency that is down; for mere contention (the
    /// [`Contention`](Model::Contention) model, where conflicts are not a
    /// sign of ill health) it turns slow successes into fast failures.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// What one run of a strategy did.
///
/// Completion times are measured from time zero, when every client starts,
/// to the moment the client receives its successful reply. Percentiles are
/// nearest-rank over the clients that succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HerdReport {
    /// The strategy that ran.
    pub strategy: Strategy,
    /// The model it ran against.
    pub model: Model,
    /// Clients in the herd.
    pub clients: u32,
    /// Work: attempts that reached the dependency (in
    /// [`Model::Contention`], writes). Attempts a breaker refused are not counted.
    pub attempts: u64,
    /// Clients that got their success.
    pub succeeded: u32,
    /// Clients that used up `max_attempts`.
    pub exhausted: u32,
    /// Clients whose retry the budget refused ([`Strategy::Recommended`] only).
    pub budget_stopped: u32,
    /// Clients stopped by the breaker ([`Strategy::Recommended`] only):
    /// either an attempt was refused (a fast failure, no load), or the
    /// breaker would still have been open when the wait ended, so the loop
    /// ended at once instead of waiting for a rejection.
    pub breaker_stopped: u32,
    /// How many times the breaker opened.
    pub breaker_trips: u32,
    /// Completion time of every client that succeeded, sorted.
    pub completions: Vec<Duration>,
    /// When each attempt arrived at the dependency, in order (the chart's data).
    pub arrivals: Vec<Duration>,
    /// When each retry (an attempt after a client's first) arrived at the
    /// dependency, in order: the part of `arrivals` the strategy shapes.
    pub retry_arrivals: Vec<Duration>,
    /// When each client's first retry (second attempt) arrived at the dependency, in order.
    pub first_retries: Vec<Duration>,
    /// The bucket width used for [`peak_load`](Self::peak_load).
    pub bucket: Duration,
    /// The most attempts arriving in one `bucket`: [`peak_in_bucket`] of `arrivals`.
    ///
    /// Every client's first attempt leaves at time zero whatever the
    /// strategy, so with a large herd this is often the first wave; see
    /// `retry_peak` for the strategy's own footprint.
    pub peak_load: usize,
    /// The most *retries* arriving in one `bucket`: [`peak_in_bucket`] of
    /// `retry_arrivals`. This is the thundering herd a strategy makes (or
    /// breaks up): without jitter every client that failed together comes
    /// back together.
    pub retry_peak: usize,
    /// When the last client finished, one way or the other.
    pub end: Duration,
}

impl HerdReport {
    /// Clients that did not succeed, for whatever reason.
    pub fn gave_up(&self) -> u32 {
        self.clients - self.succeeded
    }

    /// The nearest-rank `q`-quantile (`q` in `[0, 1]`, clamped; NaN reads as 0)
    /// of the completion times; `None` when no client succeeded.
    ///
    /// ```
    /// # use retry_runtime as resilient;
    /// use resilient::sim::{simulate, HerdConfig, Strategy};
    /// let report = simulate(&HerdConfig { clients: 10, ..HerdConfig::contention() }, Strategy::Recommended)?;
    /// assert!(report.percentile(0.5) <= report.percentile(0.99));
    /// assert_eq!(report.percentile(1.0), report.completions.last().copied());
    /// # Ok::<(), resilient::ConfigError>(())
    /// ```
    pub fn percentile(&self, q: f64) -> Option<Duration> {
        let n = self.completions.len();
        if n == 0 {
            return None;
        }
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        // Nearest rank: the smallest value with at least q * n values at or below it.
        let rank = (q * n as f64).ceil() as usize;
        self.completions.get(rank.clamp(1, n) - 1).copied()
    }

    /// The median completion time.
    pub fn p50(&self) -> Option<Duration> {
        self.percentile(0.50)
    }

    /// The 99th-percentile completion time.
    pub fn p99(&self) -> Option<Duration> {
        self.percentile(0.99)
    }

    /// The slowest completion: when the last successful client finished.
    pub fn max_completion(&self) -> Option<Duration> {
        self.completions.last().copied()
    }

    /// Attempts arriving per `bucket`, for the buckets that saw any: `(start
    /// of the bucket, arrivals in it)`, in time order. Sparse, so its length
    /// is bounded by the number of arrivals however long the run.
    ///
    /// ```
    /// # use retry_runtime as resilient;
    /// use resilient::sim::{simulate, HerdConfig, Strategy};
    /// let report = simulate(&HerdConfig::overload(), Strategy::Immediate)?;
    /// let total: usize = report.load_by_bucket().iter().map(|&(_, n)| n).sum();
    /// assert_eq!(total as u64, report.attempts);
    /// let busiest = report.load_by_bucket().iter().map(|&(_, n)| n).max();
    /// assert_eq!(busiest, Some(report.peak_load));
    /// # Ok::<(), resilient::ConfigError>(())
    /// ```
    pub fn load_by_bucket(&self) -> Vec<(Duration, usize)> {
        let width = self.bucket.as_nanos().max(1);
        let mut buckets: Vec<(u128, usize)> = Vec::new();
        for at in &self.arrivals {
            let index = at.as_nanos() / width;
            match buckets.last_mut() {
                Some((last, count)) if *last == index => *count += 1,
                _ => buckets.push((index, 1)),
            }
        }
        buckets.into_iter().map(|(index, count)| (nanos(index.saturating_mul(width)), count)).collect()
    }
}

/// Runs `strategy` against the herd described by `config`.
///
/// Deterministic: the same config and strategy give an identical report,
/// bit for bit. Runs in microseconds to milliseconds for hundreds of
/// clients (it does no waiting; time is virtual).
///
/// # Errors
///
/// An invalid config (zero clients, attempts, bucket, capacity or tick;
/// `base > cap`; an invalid budget or breaker) is an `Err` naming the field,
/// never a panic. See [`HerdConfig::validate`].
///
/// # Example
///
/// The AWS study's result: with 100 clients contending, full jitter does
/// far less work than backoff without jitter, and immediate retries the most.
///
/// ```
/// # use retry_runtime as resilient;
/// use resilient::Jitter;
/// use resilient::sim::{HerdConfig, Strategy, simulate};
///
/// let cfg = HerdConfig { clients: 100, seed: 42, ..HerdConfig::contention() };
/// let immediate = simulate(&cfg, Strategy::Immediate)?;
/// let no_jitter = simulate(&cfg, Strategy::Backoff(Jitter::None))?;
/// let full = simulate(&cfg, Strategy::Backoff(Jitter::Full))?;
///
/// assert_eq!(full.succeeded, 100);
/// assert!(full.attempts < no_jitter.attempts);
/// assert!(no_jitter.attempts < immediate.attempts);
/// // Reproducible: same seed, same report.
/// assert_eq!(full, simulate(&cfg, Strategy::Backoff(Jitter::Full))?);
/// # Ok::<(), resilient::ConfigError>(())
/// ```
pub fn simulate(config: &HerdConfig, strategy: Strategy) -> Result<HerdReport, ConfigError> {
    config.validate()?;
    let mut run = Run::new(config, strategy)?;
    for client in 0..config.clients {
        run.queue.push(Duration::ZERO, Event::Start(client));
    }
    while let Some((now, event)) = run.queue.pop() {
        run.now = now;
        run.handle(event);
    }
    Ok(run.report())
}

/// Something that happens to one client at one instant.
#[derive(Debug, Clone, Copy)]
enum Event {
    /// The client starts an attempt: asks the breaker, sends the first leg.
    Start(u32),
    /// Contention: the read reaches the dependency.
    ReadArrives(u32),
    /// Contention: the read's reply, carrying the version, reaches the client.
    ReadReply { client: u32, version: u64 },
    /// The attempt (the write, in contention) reaches the dependency.
    Arrives { client: u32, version: u64 },
    /// The attempt's reply reaches the client.
    Reply { client: u32, ok: bool },
}

#[derive(Debug)]
struct Client {
    attempts: u32,
    previous_wait: Option<Duration>,
    ticket: Option<Ticket>,
    rng: JitterRng,
}

/// The shared guards of [`Strategy::Recommended`].
#[derive(Debug)]
struct Guards {
    breaker: BreakerCore,
    budget: RetryBudget,
}

#[derive(Debug)]
struct Run<'c> {
    config: &'c HerdConfig,
    strategy: Strategy,
    /// `None` never waits.
    backoff: Option<Backoff>,
    guards: Option<Guards>,
    clients: Vec<Client>,
    queue: EventQueue<Event>,
    now: Duration,
    network: SmallRng,
    leg: Normal<f64>,
    /// Contention: the row's version.
    version: u64,
    /// Overload: the current tick and how many requests it has served.
    tick: u128,
    served: u32,
    // Tallies.
    attempts: u64,
    succeeded: u32,
    exhausted: u32,
    budget_stopped: u32,
    breaker_stopped: u32,
    breaker_trips: u32,
    completions: Vec<Duration>,
    arrivals: Vec<Duration>,
    retry_arrivals: Vec<Duration>,
    first_retries: Vec<Duration>,
}

impl<'c> Run<'c> {
    fn new(config: &'c HerdConfig, strategy: Strategy) -> Result<Self, ConfigError> {
        let backoff = match strategy {
            Strategy::Immediate => None,
            Strategy::Backoff(jitter) => Some(Backoff::new(config.base, config.cap, jitter)),
            Strategy::Recommended => Some(Backoff::new(config.base, config.cap, Jitter::Full)),
        };
        let guards = match strategy {
            Strategy::Recommended => Some(Guards {
                breaker: BreakerCore::new(config.breaker),
                budget: RetryBudget::new("sim", config.budget)
                    .map_err(|e| ConfigError::new("budget", e.to_string()))?,
            }),
            _ => None,
        };
        let leg = Normal::new(millis(config.latency.mean), millis(config.latency.sd))
            .map_err(|e| ConfigError::new("latency", e.to_string()))?;
        let clients = (0..config.clients)
            .map(|i| Client {
                attempts: 0,
                previous_wait: None,
                ticket: None,
                rng: JitterRng::seeded(stream_seed(config.seed, u64::from(i) + 1)),
            })
            .collect();
        Ok(Run {
            config,
            strategy,
            backoff,
            guards,
            clients,
            queue: EventQueue::new(),
            now: Duration::ZERO,
            network: SmallRng::seed_from_u64(stream_seed(config.seed, 0)),
            leg,
            version: 0,
            tick: 0,
            served: 0,
            attempts: 0,
            succeeded: 0,
            exhausted: 0,
            budget_stopped: 0,
            breaker_stopped: 0,
            breaker_trips: 0,
            completions: Vec::new(),
            arrivals: Vec::new(),
            retry_arrivals: Vec::new(),
            first_retries: Vec::new(),
        })
    }

    /// Schedules `event` one network leg from now.
    fn send(&mut self, event: Event) {
        let ms = self.leg.sample(&mut self.network).abs();
        let leg = Duration::try_from_secs_f64(ms / 1000.0).unwrap_or(Duration::MAX);
        self.queue.push(self.now.saturating_add(leg), event);
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Start(client) => self.start(client),
            Event::ReadArrives(client) => {
                let version = self.version;
                self.send(Event::ReadReply { client, version });
            }
            Event::ReadReply { client, version } => self.send(Event::Arrives { client, version }),
            Event::Arrives { client, version } => self.arrive(client, version),
            Event::Reply { client, ok } => self.reply(client, ok),
        }
    }

    fn start(&mut self, client: u32) {
        let now = self.now;
        let state = &mut self.clients[client as usize];
        state.attempts += 1;
        if let Some(guards) = &mut self.guards {
            let (admission, transition) = guards.breaker.admit(now);
            self.breaker_trips += trips(transition);
            match admission {
                Admission::Allowed(ticket) => state.ticket = Some(ticket),
                Admission::Rejected => {
                    // Fail fast: no load on the dependency, and the call ends.
                    self.breaker_stopped += 1;
                    return;
                }
            }
        }
        match self.config.model {
            Model::Contention => self.send(Event::ReadArrives(client)),
            Model::Overload { .. } => self.send(Event::Arrives { client, version: 0 }),
        }
    }

    /// The attempt reaches the dependency, which decides it.
    fn arrive(&mut self, client: u32, version: u64) {
        let now = self.now;
        self.attempts += 1;
        self.arrivals.push(now);
        let attempt = self.clients[client as usize].attempts;
        if attempt >= 2 {
            self.retry_arrivals.push(now);
        }
        if attempt == 2 {
            self.first_retries.push(now);
        }
        let ok = match self.config.model {
            Model::Contention => {
                let fresh = version == self.version;
                if fresh {
                    self.version += 1;
                }
                fresh
            }
            Model::Overload { capacity, tick } => {
                // `validate` rejected a zero tick.
                let index = now.as_nanos() / tick.as_nanos();
                if index != self.tick {
                    self.tick = index;
                    self.served = 0;
                }
                let room = self.served < capacity;
                if room {
                    self.served += 1;
                }
                room
            }
        };
        self.send(Event::Reply { client, ok });
    }

    /// The reply reaches the client: done, or plan the retry the way the
    /// retry loop does.
    fn reply(&mut self, client: u32, ok: bool) {
        let now = self.now;
        let state = &mut self.clients[client as usize];
        let ticket = state.ticket.take();
        if let (Some(guards), Some(ticket)) = (&mut self.guards, ticket) {
            let outcome = if ok { Outcome::Success } else { Outcome::Failure };
            self.breaker_trips += trips(guards.breaker.record(ticket, outcome, now));
            if ok {
                guards.budget.deposit();
            }
        }
        if ok {
            self.succeeded += 1;
            self.completions.push(now);
            return;
        }
        if state.attempts >= self.config.max_attempts {
            self.exhausted += 1;
            return;
        }
        let wait = match &self.backoff {
            None => Duration::ZERO,
            Some(backoff) => {
                let n = self.config.first_wait_index.saturating_add(state.attempts - 1);
                backoff.wait(n, state.previous_wait, &mut state.rng)
            }
        };
        state.previous_wait = Some(wait);
        if let Some(guards) = &self.guards {
            let still_open =
                guards.breaker.open_until().is_some_and(|until| until.saturating_sub(now) > wait);
            if still_open {
                self.breaker_stopped += 1;
                return;
            }
            if !guards.budget.try_withdraw() {
                self.budget_stopped += 1;
                return;
            }
        }
        self.queue.push(now.saturating_add(wait), Event::Start(client));
    }

    fn report(mut self) -> HerdReport {
        self.completions.sort_unstable();
        let peak_load = peak_in_bucket(&self.arrivals, self.config.bucket);
        let retry_peak = peak_in_bucket(&self.retry_arrivals, self.config.bucket);
        HerdReport {
            strategy: self.strategy,
            model: self.config.model,
            clients: self.config.clients,
            attempts: self.attempts,
            succeeded: self.succeeded,
            exhausted: self.exhausted,
            budget_stopped: self.budget_stopped,
            breaker_stopped: self.breaker_stopped,
            breaker_trips: self.breaker_trips,
            completions: self.completions,
            arrivals: self.arrivals,
            retry_arrivals: self.retry_arrivals,
            first_retries: self.first_retries,
            bucket: self.config.bucket,
            peak_load,
            retry_peak,
            end: self.now,
        }
    }
}

/// A `Duration` from nanoseconds, saturating at `Duration::MAX`.
fn nanos(n: u128) -> Duration {
    let secs = u64::try_from(n / 1_000_000_000).unwrap_or(u64::MAX);
    Duration::new(secs, (n % 1_000_000_000) as u32)
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// 1 if the transition opened the breaker.
fn trips(transition: Option<Transition>) -> u32 {
    u32::from(matches!(transition, Some((_, BreakerState::Open))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn exact_network() -> Latency {
        Latency { mean: ms(10), sd: Duration::ZERO }
    }

    #[test]
    fn one_client_writes_once_after_four_legs() {
        let cfg = HerdConfig { clients: 1, latency: exact_network(), ..HerdConfig::contention() };
        for strategy in Strategy::ALL {
            let r = simulate(&cfg, strategy).unwrap();
            assert_eq!((r.attempts, r.succeeded, r.gave_up()), (1, 1, 0), "{strategy}");
            assert_eq!(r.arrivals, [ms(30)], "read out, read back, write out");
            assert_eq!(r.completions, [ms(40)]);
            assert_eq!(r.end, ms(40));
        }
    }

    #[test]
    fn contention_without_backoff_takes_about_n_rounds() {
        // With an exact network every client reads version 0 together: one
        // write wins per round, so N clients make N + (N-1) + ... + 1 writes.
        let cfg = HerdConfig { clients: 10, latency: exact_network(), ..HerdConfig::contention() };
        let r = simulate(&cfg, Strategy::Immediate).unwrap();
        assert_eq!(r.attempts, 55);
        assert_eq!(r.succeeded, 10);
        assert_eq!(r.max_completion(), Some(ms(400)), "ten rounds of four legs");
        assert_eq!(r.peak_load, 10);
    }

    #[test]
    fn the_study_starts_waiting_at_index_one() {
        let cfg =
            HerdConfig { clients: 2, latency: exact_network(), base: ms(5), ..HerdConfig::contention() };
        let r = simulate(&cfg, Strategy::Backoff(Jitter::None)).unwrap();
        // Both write at 30 ms; the loser hears at 40, waits exp(1) = 10 ms,
        // reads (60), writes at 80.
        assert_eq!(r.arrivals, [ms(30), ms(30), ms(80)]);
        assert_eq!(r.first_retries, [ms(80)]);
        let library = HerdConfig { first_wait_index: 0, ..cfg };
        let r = simulate(&library, Strategy::Backoff(Jitter::None)).unwrap();
        assert_eq!(r.first_retries, [ms(75)]);
    }

    #[test]
    fn overload_serves_capacity_per_tick_and_bounds_attempts() {
        let cfg =
            HerdConfig { clients: 25, latency: exact_network(), max_attempts: 2, ..HerdConfig::overload() };
        let r = simulate(&cfg, Strategy::Backoff(Jitter::None)).unwrap();
        // 25 arrive at 10 ms: 10 served. 15 retry after 100 ms: 10 served, 5 give up.
        assert_eq!((r.succeeded, r.exhausted), (20, 5));
        assert_eq!(r.attempts, 40);
        assert_eq!(r.first_retries, [ms(130); 15]);
        assert_eq!(r.peak_load, 25);
        assert_eq!(r.retry_peak, 15);
        assert_eq!(r.retry_arrivals, r.first_retries);
        assert_eq!(r.p50(), Some(ms(20)));
        assert_eq!(r.max_completion(), Some(ms(140)));
    }

    #[test]
    fn the_breaker_fails_fast_and_stops_retries() {
        let cfg = HerdConfig {
            clients: 40,
            latency: exact_network(),
            breaker: BreakerConfig { failure_threshold: 5, ..Default::default() },
            ..HerdConfig::overload()
        };
        let r = simulate(&cfg, Strategy::Recommended).unwrap();
        assert_eq!(r.breaker_trips, 1);
        assert_eq!(r.succeeded, 10);
        // All 40 were admitted while closed; the 30 failures see an open breaker.
        assert_eq!(r.breaker_stopped, 30);
        assert_eq!(r.attempts, 40, "no retry reached the dependency");
        assert_eq!(r.succeeded + r.exhausted + r.budget_stopped + r.breaker_stopped, r.clients);
    }

    #[test]
    fn an_empty_budget_stops_retries() {
        let cfg = HerdConfig {
            clients: 30,
            latency: exact_network(),
            budget: BudgetConfig { capacity: 4, ..Default::default() },
            breaker: BreakerConfig { failure_threshold: 1_000, ..Default::default() },
            ..HerdConfig::overload()
        };
        let r = simulate(&cfg, Strategy::Recommended).unwrap();
        // 10 succeed at once (refilling nothing: the bucket is full); 20 fail,
        // 4 of them get a token.
        assert_eq!(r.budget_stopped, 16);
        assert_eq!(r.first_retries.len(), 4);
    }

    #[test]
    fn bad_configs_are_errors_not_panics() {
        let cases = [
            (HerdConfig { clients: 0, ..Default::default() }, "clients"),
            (HerdConfig { max_attempts: 0, ..Default::default() }, "max_attempts"),
            (HerdConfig { base: ms(10), cap: ms(5), ..Default::default() }, "base"),
            (HerdConfig { bucket: Duration::ZERO, ..Default::default() }, "bucket"),
            (
                HerdConfig { model: Model::Overload { capacity: 0, tick: ms(10) }, ..Default::default() },
                "capacity",
            ),
            (
                HerdConfig {
                    model: Model::Overload { capacity: 1, tick: Duration::ZERO },
                    ..Default::default()
                },
                "tick",
            ),
            (
                HerdConfig {
                    budget: BudgetConfig { capacity: 0, ..Default::default() },
                    ..Default::default()
                },
                "budget",
            ),
            (
                HerdConfig {
                    breaker: BreakerConfig { failure_threshold: 0, ..Default::default() },
                    ..Default::default()
                },
                "breaker",
            ),
        ];
        for (cfg, field) in cases {
            for strategy in Strategy::ALL {
                assert_eq!(simulate(&cfg, strategy).unwrap_err().field, field);
            }
        }
    }

    #[test]
    fn extreme_settings_do_not_panic() {
        let cfg = HerdConfig {
            clients: 3,
            max_attempts: 200,
            base: Duration::MAX,
            cap: Duration::MAX,
            latency: Latency { mean: Duration::MAX, sd: Duration::MAX },
            model: Model::Overload { capacity: 1, tick: Duration::from_nanos(1) },
            bucket: Duration::from_nanos(1),
            ..Default::default()
        };
        for strategy in Strategy::ALL {
            let r = simulate(&cfg, strategy).unwrap();
            assert_eq!(r.succeeded + r.exhausted + r.budget_stopped + r.breaker_stopped, 3);
            assert!(r.load_by_bucket().len() <= r.arrivals.len());
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut r = simulate(&HerdConfig { clients: 1, ..Default::default() }, Strategy::Immediate).unwrap();
        r.completions = (1..=100).map(ms).collect();
        assert_eq!(r.p50(), Some(ms(50)));
        assert_eq!(r.p99(), Some(ms(99)));
        assert_eq!(r.percentile(0.0), Some(ms(1)));
        assert_eq!(r.percentile(2.0), Some(ms(100)));
        assert_eq!(r.percentile(f64::NAN), Some(ms(1)));
        r.completions.clear();
        assert_eq!(r.p50(), None);
    }

    #[test]
    fn load_is_counted_per_busy_bucket() {
        let mut r = simulate(&HerdConfig { clients: 1, ..Default::default() }, Strategy::Immediate).unwrap();
        r.arrivals = vec![ms(1), ms(5), ms(25), Duration::MAX];
        let max_bucket = Duration::MAX.as_nanos() / ms(10).as_nanos() * ms(10).as_nanos();
        assert_eq!(r.load_by_bucket(), [(ms(0), 2), (ms(20), 1), (nanos(max_bucket), 1)]);
    }
}
