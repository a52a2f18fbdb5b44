//! The event loop of a herd simulation: clients as small state machines,
//! every network leg and every backoff wait an event on virtual time.

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Normal};

use super::answers::{Client, ClientAnswers};
use super::config::{HerdConfig, Model};
use super::guards::{Budget, Guards, Permits, trips};
use super::priorities::index;
use super::strategy::Strategy;
use crate::queue::EventQueue;
use stormproof_runtime::ConfigError;
use stormproof_runtime::ErrorClass;
use stormproof_runtime::breaker::{BreakerConfig, BreakerCore, Outcome};
use stormproof_runtime::budget::BudgetConfig;
use stormproof_runtime::decision::{Decision, StopReason, decide};
use stormproof_runtime::rate_limit::RateCore;
use stormproof_runtime::throttle::ThrottleCore;
use stormproof_runtime::{
    Jitter,
    backoff::{Backoff, JitterRng, stream_seed},
};

/// Something that happens to one client at one instant.
#[derive(Debug, Clone, Copy)]
pub(super) enum Event {
    /// The client starts an attempt: asks the breaker, sends the first leg.
    Start(u32),
    /// Contention: the read reaches the dependency.
    ReadArrives(u32),
    /// Contention: the read's reply, carrying the version, reaches the client.
    ReadReply { client: u32, version: u64 },
    /// The client's attempt number `attempt` (the write, in contention)
    /// reaches the dependency.
    Arrives { client: u32, version: u64, attempt: u32 },
    /// Brownout: the dependency is done with the request and answers,
    /// whether or not the client still waits for it.
    Done { client: u32, attempt: u32 },
    /// The reply to attempt number `attempt` reaches the client.
    Reply { client: u32, ok: bool, attempt: u32 },
    /// Brownout: attempt number `attempt` has run for the attempt timeout.
    TimedOut { client: u32, attempt: u32 },
    /// A client queued for a bulkhead permit has waited as long as it may:
    /// `max_wait`, or until its deadline (`deadline`). Stale unless the
    /// client is still in the wait numbered `wait`.
    WaitOver { client: u32, wait: u64, deadline: bool },
    /// The rate-limit turn the client waits for comes.
    Turn(u32),
}

#[derive(Debug)]
pub(super) struct Run<'c> {
    pub(super) config: &'c HerdConfig,
    pub(super) strategy: Strategy,
    /// `None` never waits.
    pub(super) backoff: Option<Backoff>,
    pub(super) guards: Option<Guards>,
    pub(super) clients: Vec<Client>,
    pub(super) queue: EventQueue<Event>,
    pub(super) now: Duration,
    pub(super) network: SmallRng,
    pub(super) leg: Normal<f64>,
    /// Contention: the row's version.
    pub(super) version: u64,
    /// Overload: the current tick and how many requests it has served.
    pub(super) tick: u128,
    pub(super) served: u32,
    /// When the last client to finish did.
    pub(super) end: Duration,
    /// Brownout: requests the dependency is working on.
    pub(super) busy: u32,
    // Tallies.
    pub(super) attempts: u64,
    pub(super) succeeded: u32,
    pub(super) exhausted: u32,
    pub(super) budget_stopped: u32,
    pub(super) breaker_stopped: u32,
    pub(super) deadline_stopped: u32,
    pub(super) throttled: u32,
    pub(super) bulkhead_stopped: u32,
    pub(super) rate_limited: u32,
    pub(super) breaker_trips: u32,
    pub(super) limits: Vec<(Duration, u32)>,
    pub(super) completions: Vec<Duration>,
    pub(super) arrivals: Vec<Duration>,
    pub(super) retry_arrivals: Vec<Duration>,
    pub(super) first_retries: Vec<Duration>,
    /// Successes by priority (see `HerdReport::by_priority`).
    pub(super) succeeded_by_priority: [u32; 3],
}

impl<'c> Run<'c> {
    pub(super) fn new(config: &'c HerdConfig, strategy: Strategy) -> Result<Self, ConfigError> {
        let seed = config.seed;
        let backoff = match strategy {
            Strategy::Immediate => None,
            Strategy::Backoff(jitter) => {
                Some(Backoff::new(config.base, config.cap, jitter).with_factor(config.factor_milli))
            }
            Strategy::Defaults | Strategy::Recommended | Strategy::Adaptive => {
                Some(Backoff::new(config.base, config.cap, Jitter::Full).with_factor(config.factor_milli))
            }
        };
        let guards = match strategy {
            Strategy::Defaults => Some(Guards {
                breakers: vec![BreakerCore::new(BreakerConfig::per_operation())],
                budget: Budget::new(BudgetConfig::default())?,
                throttle: None,
                bulkheads: Vec::new(),
                rate_limits: Vec::new(),
            }),
            Strategy::Recommended => Some(Guards {
                breakers: vec![
                    BreakerCore::new(config.breaker);
                    if config.breaker_per_key { config.keys as usize } else { 1 }
                ],
                budget: Budget::new(config.budget)?,
                throttle: None,
                bulkheads: Vec::new(),
                rate_limits: rate_limits(config)?,
            }),
            Strategy::Adaptive => Some(Guards {
                breakers: Vec::new(),
                budget: Budget::new(config.budget)?,
                throttle: config.throttle.map(|config| {
                    // A stream of its own, past every client's.
                    ThrottleCore::new(config, stream_seed(seed, u64::from(u32::MAX) + 1))
                }),
                bulkheads: (0..if config.bulkhead_per_key { config.keys } else { 1 })
                    .map(|_| Permits::new(config.bulkhead))
                    .collect(),
                rate_limits: rate_limits(config)?,
            }),
            Strategy::Immediate | Strategy::Backoff(_) => None,
        };
        // The limit over time of a shared bulkhead (none with one per key).
        let limits = match guards.as_ref().map(|g| g.bulkheads.as_slice()) {
            Some([permits]) => vec![(Duration::ZERO, permits.limit())],
            _ => Vec::new(),
        };
        let leg = Normal::new(millis(config.latency.mean), millis(config.latency.sd))
            .map_err(|e| ConfigError::new("latency", e.to_string()))?;
        let clients = (0..config.clients)
            .map(|i| Client {
                attempts: 0,
                previous_wait: None,
                ticket: None,
                in_flight: false,
                permit_since: None,
                waiting: false,
                waits: 0,
                turn_since: None,
                rng: JitterRng::seeded(stream_seed(config.seed, u64::from(i) + 1)),
                priority: config.priorities.of(i),
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
            end: Duration::ZERO,
            busy: 0,
            attempts: 0,
            succeeded: 0,
            exhausted: 0,
            budget_stopped: 0,
            breaker_stopped: 0,
            deadline_stopped: 0,
            throttled: 0,
            bulkhead_stopped: 0,
            rate_limited: 0,
            breaker_trips: 0,
            limits,
            completions: Vec::new(),
            arrivals: Vec::new(),
            retry_arrivals: Vec::new(),
            first_retries: Vec::new(),
            succeeded_by_priority: [0; 3],
        })
    }

    /// A client starts its call: at time zero, or its place in `arrivals`.
    pub(super) fn start_client(&mut self, client: u32) {
        // Spread over `arrivals`; one too long to multiply starts at its end.
        let arrivals = self.config.arrivals;
        let at = arrivals.checked_mul(client).map_or(arrivals, |d| d / self.config.clients.max(1));
        self.queue.push(at, Event::Start(client));
    }

    /// Processes events until none is left.
    pub(super) fn run_to_end(&mut self) {
        while let Some((now, event)) = self.queue.pop() {
            self.now = now;
            let ended = self.ended();
            self.handle(event);
            // Late replies to attempts that timed out come after their
            // client is done: the run ends with the last client, not them.
            if self.ended() != ended {
                self.end = now;
            }
        }
    }

    /// Clients done so far, one way or the other.
    fn ended(&self) -> u32 {
        self.succeeded
            + self.exhausted
            + self.budget_stopped
            + self.breaker_stopped
            + self.deadline_stopped
            + self.throttled
            + self.bulkhead_stopped
            + self.rate_limited
    }

    /// Schedules `event` one network leg from now.
    pub(super) fn send(&mut self, event: Event) {
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
            Event::ReadReply { client, version } => {
                let attempt = self.clients[client as usize].attempts;
                self.send(Event::Arrives { client, version, attempt });
            }
            Event::Arrives { client, version, attempt } => self.arrive(client, version, attempt),
            Event::Done { client, attempt } => {
                self.busy = self.busy.saturating_sub(1);
                self.send(Event::Reply { client, ok: true, attempt });
            }
            Event::Reply { client, ok, attempt } => {
                // A reply to an attempt that timed out comes too late to matter.
                if self.is_current(client, attempt) {
                    self.reply(client, ok, false);
                }
            }
            Event::TimedOut { client, attempt } => {
                if self.is_current(client, attempt) {
                    self.reply(client, false, true);
                }
            }
            Event::WaitOver { client, wait, deadline } => self.wait_over(client, wait, deadline),
            Event::Turn(client) => {
                if self.take_turn(client) {
                    self.admit_waiters();
                }
            }
        }
    }

    /// The reply reaches the client (`timed_out`: the attempt's own
    /// timeout cut it instead): done, or the library's own retry decision
    /// ([`decide`]) says whether and when to try again.
    pub(super) fn reply(&mut self, client: u32, ok: bool, timed_out: bool) {
        let now = self.now;
        let key = self.key_of(client);
        // A key that is down fails every attempt, whatever the model says.
        let ok = ok && key >= self.config.keys_down;
        let state = &mut self.clients[client as usize];
        state.in_flight = false;
        // The deadline cuts an attempt still running when it passes (its
        // reply comes too late), as the retry loop's timer does.
        let cut = self.config.deadline.is_some_and(|deadline| now > deadline);
        // A stale write is a conflict: retried, but it says nothing about
        // the dependency's health. An overloaded dependency's refusal and a
        // timeout are transient.
        let class = match self.config.model {
            Model::Contention => ErrorClass::Conflict,
            Model::Overload { .. } | Model::Brownout { .. } => ErrorClass::Transient,
        };
        let ticket = state.ticket.take();
        let permit_since = state.permit_since.take();
        if let Some(guards) = &mut self.guards {
            if let (Some(breaker), Some((ticket, since))) = (guards.breaker(key), ticket) {
                // What the retry loop tells its breaker (see the breaker's
                // `outcome_of`), a success slower than its
                // `slow_call_duration` a slow call.
                let outcome = if cut || (!ok && class.is_failure()) {
                    Outcome::Failure
                } else if ok && breaker.config().is_slow(now.saturating_sub(since)) {
                    Outcome::Slow
                } else if ok {
                    Outcome::Success
                } else {
                    Outcome::Neutral
                };
                self.breaker_trips += trips(breaker.record(ticket, outcome, now));
            }
            if ok && !cut {
                guards.budget.deposit();
            } else if !cut && class.is_failure() {
                // What the budget hears of a failure of the dependency (retry
                // throttling takes a token for it).
                guards.budget.record_failure();
            }
            // What the retry loop tells the throttle and the bulkhead: the
            // request, an accept if the answer is not overload (a conflict
            // is one; a cut attempt is not); a sample for any answer, every
            // retryable error an overload signal, a cut attempt none.
            if let Some(throttle) = &mut guards.throttle {
                throttle.answered(now, !cut && (ok || !class.is_failure()));
            }
            let shared = guards.bulkheads.len() == 1;
            if let (Some(permits), Some(since)) = (guards.bulkhead(key), permit_since) {
                let before = permits.limit();
                permits.give_back((!cut).then(|| (now.saturating_sub(since), !ok && class.is_retryable())));
                let after = permits.limit();
                if after != before && shared {
                    self.limits.push((now, after));
                }
            }
        }
        self.admit_waiters();
        if cut {
            self.deadline_stopped += 1;
            return;
        }
        if ok {
            self.succeeded += 1;
            self.succeeded_by_priority[index(self.clients[client as usize].priority)] += 1;
            self.completions.push(now);
            return;
        }
        let mut answers = ClientAnswers {
            config: self.config,
            backoff: self.backoff.as_ref(),
            client: &mut self.clients[client as usize],
            key,
            guards: self.guards.as_mut(),
            now,
            timed_out,
        };
        let attempts = answers.client.attempts;
        match decide(class, attempts, self.config.max_attempts, &mut answers) {
            Decision::Retry(wait) => self.queue.push(now.saturating_add(wait), Event::Start(client)),
            Decision::Stop(reason) => match reason {
                StopReason::AttemptsExhausted => self.exhausted += 1,
                StopReason::BudgetExhausted => self.budget_stopped += 1,
                StopReason::CircuitOpen => self.breaker_stopped += 1,
                StopReason::Deadline => self.deadline_stopped += 1,
                // Permanent, BulkheadFull, Throttled, RateLimited and any
                // reason added later: `decide` gives none of them here.
                _ => unreachable!("a simulated failure is retryable and admission is not decided here"),
            },
        }
    }
}

/// The configured rate limit's cores: none, one shared, or one per key.
fn rate_limits(config: &HerdConfig) -> Result<Vec<RateCore>, ConfigError> {
    let Some(limit) = config.rate_limit else { return Ok(Vec::new()) };
    let cores = if config.rate_limit_per_key { config.keys } else { 1 };
    (0..cores)
        .map(|_| RateCore::new(limit).map_err(|e| ConfigError::new("rate_limit", e.to_string())))
        .collect()
}

pub(super) fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
