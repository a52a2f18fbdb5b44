//! The event loop of a herd simulation: clients as small state machines,
//! every network leg and every backoff wait an event on virtual time.

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Normal};

use super::config::{HerdConfig, Model, Strategy};
use super::report::HerdReport;
use crate::backoff::{Backoff, Jitter, JitterRng, stream_seed};
use crate::breaker::{Admission, BreakerCore, BreakerState, Outcome, Ticket, Transition};
use crate::budget::{BudgetConfig, RatioBudget, RatioWindow, RetryBudget};
use crate::classify::ErrorClass;
use crate::config::ConfigError;
use crate::decision::{Answers, Decision, StopReason, decide};
use crate::sim::peak_in_bucket;
use crate::sim::queue::EventQueue;

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
    budget: Budget,
}

/// The library's budget on virtual time: the ratio form's pure window, or
/// a token bucket (which reads no clock).
#[derive(Debug)]
enum Budget {
    Ratio { config: RatioBudget, first_attempts: u64, window: RatioWindow },
    Bucket(Box<RetryBudget>),
}

impl Budget {
    fn new(config: BudgetConfig) -> Result<Self, ConfigError> {
        config.validate().map_err(|e| ConfigError::new("budget", e.to_string()))?;
        Ok(match config {
            BudgetConfig::Ratio(config) => {
                Budget::Ratio { config, first_attempts: 0, window: RatioWindow::new(Duration::ZERO, 0) }
            }
            other => Budget::Bucket(Box::new(
                RetryBudget::new("sim", other).map_err(|e| ConfigError::new("budget", e.to_string()))?,
            )),
        })
    }

    fn on_first_attempt(&mut self) {
        match self {
            Budget::Ratio { first_attempts, .. } => *first_attempts += 1,
            Budget::Bucket(bucket) => bucket.on_first_attempt(),
        }
    }

    fn deposit(&mut self) {
        if let Budget::Bucket(bucket) = self {
            bucket.deposit();
        }
    }

    fn try_withdraw(&mut self, now: Duration) -> bool {
        match self {
            Budget::Ratio { config, first_attempts, window } => {
                window.try_withdraw(config, now, *first_attempts)
            }
            Budget::Bucket(bucket) => bucket.try_withdraw(),
        }
    }
}

#[derive(Debug)]
pub(super) struct Run<'c> {
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
    deadline_stopped: u32,
    breaker_trips: u32,
    completions: Vec<Duration>,
    arrivals: Vec<Duration>,
    retry_arrivals: Vec<Duration>,
    first_retries: Vec<Duration>,
}

impl<'c> Run<'c> {
    pub(super) fn new(config: &'c HerdConfig, strategy: Strategy) -> Result<Self, ConfigError> {
        let backoff = match strategy {
            Strategy::Immediate => None,
            Strategy::Backoff(jitter) => Some(Backoff::new(config.base, config.cap, jitter)),
            Strategy::Recommended => Some(Backoff::new(config.base, config.cap, Jitter::Full)),
        };
        let guards = match strategy {
            Strategy::Recommended => Some(Guards {
                breaker: BreakerCore::new(config.breaker),
                budget: Budget::new(config.budget)?,
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
            deadline_stopped: 0,
            breaker_trips: 0,
            completions: Vec::new(),
            arrivals: Vec::new(),
            retry_arrivals: Vec::new(),
            first_retries: Vec::new(),
        })
    }

    /// Every client starts its call at time zero.
    pub(super) fn start_client(&mut self, client: u32) {
        self.queue.push(Duration::ZERO, Event::Start(client));
    }

    /// Processes events until none is left.
    pub(super) fn run_to_end(&mut self) {
        while let Some((now, event)) = self.queue.pop() {
            self.now = now;
            self.handle(event);
        }
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
                Admission::Allowed(ticket) => {
                    state.ticket = Some(ticket);
                    if state.attempts == 1 {
                        guards.budget.on_first_attempt();
                    }
                }
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

    /// The reply reaches the client: done, or the library's own retry
    /// decision ([`decide`]) says whether and when to try again.
    fn reply(&mut self, client: u32, ok: bool) {
        let now = self.now;
        let state = &mut self.clients[client as usize];
        // The deadline cuts an attempt still running when it passes (its
        // reply comes too late), as the retry loop's timer does.
        let cut = self.config.deadline.is_some_and(|deadline| now > deadline);
        // A stale write is a conflict: retried, but it says nothing about
        // the dependency's health. An overloaded dependency's refusal is transient.
        let class = match self.config.model {
            Model::Contention => ErrorClass::Conflict,
            Model::Overload { .. } => ErrorClass::Transient,
        };
        let ticket = state.ticket.take();
        if let (Some(guards), Some(ticket)) = (&mut self.guards, ticket) {
            // What the retry loop tells its breaker (see `execution::outcome_of`).
            let outcome = if cut || (!ok && class.is_failure()) {
                Outcome::Failure
            } else if ok {
                Outcome::Success
            } else {
                Outcome::Neutral
            };
            self.breaker_trips += trips(guards.breaker.record(ticket, outcome, now));
            if ok && !cut {
                guards.budget.deposit();
            }
        }
        if cut {
            self.deadline_stopped += 1;
            return;
        }
        if ok {
            self.succeeded += 1;
            self.completions.push(now);
            return;
        }
        let mut answers = ClientAnswers {
            config: self.config,
            backoff: self.backoff.as_ref(),
            client: state,
            guards: self.guards.as_mut(),
            now,
        };
        let attempts = answers.client.attempts;
        match decide(class, attempts, self.config.max_attempts, &mut answers) {
            Decision::Retry(wait) => self.queue.push(now.saturating_add(wait), Event::Start(client)),
            Decision::Stop(reason) => match reason {
                StopReason::AttemptsExhausted => self.exhausted += 1,
                StopReason::BudgetExhausted => self.budget_stopped += 1,
                StopReason::CircuitOpen => self.breaker_stopped += 1,
                StopReason::Deadline => self.deadline_stopped += 1,
                StopReason::Permanent
                | StopReason::BulkheadFull
                | StopReason::Throttled
                | StopReason::RateLimited => {
                    unreachable!("a simulated failure is retryable and admission is not decided here")
                }
            },
        }
    }

    pub(super) fn report(mut self) -> HerdReport {
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
            deadline_stopped: self.deadline_stopped,
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

/// One client's answers to the retry decision's questions, at `now`.
struct ClientAnswers<'a> {
    config: &'a HerdConfig,
    /// `None`: [`Strategy::Immediate`], which never waits.
    backoff: Option<&'a Backoff>,
    client: &'a mut Client,
    guards: Option<&'a mut Guards>,
    now: Duration,
}

impl Answers for ClientAnswers<'_> {
    fn backoff(&mut self) -> Duration {
        let wait = match self.backoff {
            None => Duration::ZERO,
            Some(backoff) => {
                let n = self.config.first_wait_index.saturating_add(self.client.attempts - 1);
                backoff.wait(n, self.client.previous_wait, &mut self.client.rng)
            }
        };
        self.client.previous_wait = Some(wait);
        wait
    }

    fn until_deadline(&self) -> Option<Duration> {
        self.config.deadline.map(|deadline| deadline.saturating_sub(self.now))
    }

    fn breaker_open_for(&self) -> Option<Duration> {
        let until = self.guards.as_ref()?.breaker.open_until()?;
        Some(until.saturating_sub(self.now)).filter(|open| !open.is_zero())
    }

    fn take_budget(&mut self) -> bool {
        let now = self.now;
        self.guards.as_mut().is_none_or(|guards| guards.budget.try_withdraw(now))
    }
}

/// A `Duration` from nanoseconds, saturating at `Duration::MAX`.
pub(crate) fn nanos(n: u128) -> Duration {
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
