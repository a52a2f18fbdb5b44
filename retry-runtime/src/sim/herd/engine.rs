//! The event loop of a herd simulation: clients as small state machines,
//! every network leg and every backoff wait an event on virtual time.

use std::collections::VecDeque;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};

use super::config::{HerdConfig, Model, Strategy};
use super::report::HerdReport;
use crate::backoff::{Backoff, Jitter, JitterRng, stream_seed};
use crate::breaker::{Admission, BreakerCore, BreakerState, Outcome, Ticket, Transition};
use crate::budget::{BudgetConfig, RatioBudget, RatioWindow, RetryBudget};
use crate::bulkhead::{BulkheadConfig, LimitCore};
use crate::classify::ErrorClass;
use crate::config::ConfigError;
use crate::decision::{Answers, Decision, StopReason, decide};
use crate::sim::peak_in_bucket;
use crate::sim::queue::EventQueue;
use crate::throttle::{ThrottleConfig, ThrottleWindow};

/// Something that happens to one client at one instant.
#[derive(Debug, Clone, Copy)]
enum Event {
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
}

#[derive(Debug)]
struct Client {
    attempts: u32,
    previous_wait: Option<Duration>,
    ticket: Option<Ticket>,
    /// Whether its latest attempt is out, waiting for a reply.
    in_flight: bool,
    /// While the client holds a bulkhead permit: when its attempt started.
    permit_since: Option<Duration>,
    /// Whether the client is queued for a bulkhead permit.
    waiting: bool,
    /// How many times it has queued: tells a current `WaitOver` from a stale one.
    waits: u64,
    rng: JitterRng,
}

/// The guards shared by all clients: [`Strategy::Recommended`]'s breaker
/// and budget, [`Strategy::Adaptive`]'s budget, throttle and bulkhead.
#[derive(Debug)]
struct Guards {
    breaker: Option<BreakerCore>,
    budget: Budget,
    throttle: Option<Throttling>,
    bulkhead: Option<Permits>,
}

/// The library's client-side throttle on virtual time: its pure window,
/// and seeded draws.
#[derive(Debug)]
struct Throttling {
    config: ThrottleConfig,
    window: ThrottleWindow,
    draws: SmallRng,
}

impl Throttling {
    /// Counts a request and says whether it may go out, as
    /// [`Throttle::admit`](crate::Throttle::admit) does: a draw against the
    /// refusal probability, taken only when that is above zero.
    fn admit(&mut self, now: Duration) -> bool {
        let p = self.window.refusal_probability(&self.config, now);
        self.window.request(&self.config, now);
        p == 0.0 || self.draws.random::<f64>() >= p
    }

    fn accept(&mut self, now: Duration) {
        self.window.accept(&self.config, now);
    }
}

/// A bulkhead on virtual time: the library's limit core moved by the same
/// samples the real bulkhead takes, permits counted, waiters served first
/// come, first served (as tokio's fair semaphore serves them).
#[derive(Debug)]
struct Permits {
    core: Option<LimitCore>,
    max: u32,
    max_wait: Option<Duration>,
    in_use: u32,
    waiting: VecDeque<u32>,
}

impl Permits {
    fn new(config: BulkheadConfig) -> Self {
        Permits {
            core: config.adaptive.map(|adaptive| LimitCore::new(adaptive, config.max_concurrent)),
            max: config.max_concurrent,
            max_wait: config.max_wait,
            in_use: 0,
            waiting: VecDeque::new(),
        }
    }

    fn limit(&self) -> u32 {
        self.core.as_ref().map_or(self.max, LimitCore::limit)
    }

    /// A permit now, if one is free (nobody is queued ahead).
    fn try_take(&mut self) -> bool {
        let free = self.waiting.is_empty() && self.in_use < self.limit();
        self.in_use += u32::from(free);
        free
    }

    /// Gives a permit back; an attempt that got an answer is a sample
    /// `(rtt, overload)` for the limit, taken while the permit is still
    /// counted in flight, as the real bulkhead takes it. Permits in use are
    /// never taken away: after a shrink, no one is admitted until fewer
    /// than the new limit are in use.
    fn give_back(&mut self, sample: Option<(Duration, bool)>) {
        if let (Some(core), Some((rtt, overload))) = (&mut self.core, sample) {
            core.sample(rtt, overload, self.in_use);
        }
        self.in_use = self.in_use.saturating_sub(1);
    }

    /// The next waiter, with its permit taken, if the limit has room.
    fn next_waiter(&mut self) -> Option<u32> {
        if self.in_use >= self.limit() {
            return None;
        }
        let client = self.waiting.pop_front()?;
        self.in_use += 1;
        Some(client)
    }
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
    /// When the last client to finish did.
    end: Duration,
    /// Brownout: requests the dependency is working on.
    busy: u32,
    // Tallies.
    attempts: u64,
    succeeded: u32,
    exhausted: u32,
    budget_stopped: u32,
    breaker_stopped: u32,
    deadline_stopped: u32,
    throttled: u32,
    bulkhead_stopped: u32,
    breaker_trips: u32,
    limits: Vec<(Duration, u32)>,
    completions: Vec<Duration>,
    arrivals: Vec<Duration>,
    retry_arrivals: Vec<Duration>,
    first_retries: Vec<Duration>,
}

impl<'c> Run<'c> {
    pub(super) fn new(config: &'c HerdConfig, strategy: Strategy) -> Result<Self, ConfigError> {
        let seed = config.seed;
        let backoff = match strategy {
            Strategy::Immediate => None,
            Strategy::Backoff(jitter) => Some(Backoff::new(config.base, config.cap, jitter)),
            Strategy::Recommended | Strategy::Adaptive => {
                Some(Backoff::new(config.base, config.cap, Jitter::Full))
            }
        };
        let guards = match strategy {
            Strategy::Recommended => Some(Guards {
                breaker: Some(BreakerCore::new(config.breaker)),
                budget: Budget::new(config.budget)?,
                throttle: None,
                bulkhead: None,
            }),
            Strategy::Adaptive => Some(Guards {
                breaker: None,
                budget: Budget::new(config.budget)?,
                throttle: config.throttle.map(|config| Throttling {
                    config,
                    window: ThrottleWindow::default(),
                    // A stream of its own, past every client's.
                    draws: SmallRng::seed_from_u64(stream_seed(seed, u64::from(u32::MAX) + 1)),
                }),
                bulkhead: Some(Permits::new(config.bulkhead)),
            }),
            Strategy::Immediate | Strategy::Backoff(_) => None,
        };
        let limits = match guards.as_ref().and_then(|g| g.bulkhead.as_ref()) {
            Some(permits) => vec![(Duration::ZERO, permits.limit())],
            None => Vec::new(),
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
            breaker_trips: 0,
            limits,
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
                    self.reply(client, ok);
                }
            }
            Event::TimedOut { client, attempt } => {
                if self.is_current(client, attempt) {
                    self.reply(client, false);
                }
            }
            Event::WaitOver { client, wait, deadline } => self.wait_over(client, wait, deadline),
        }
    }

    /// Admission, in the retry loop's order: the throttle, the breaker,
    /// the bulkhead (which may queue the attempt), then the first leg.
    fn start(&mut self, client: u32) {
        let now = self.now;
        let state = &mut self.clients[client as usize];
        state.attempts += 1;
        if let Some(guards) = &mut self.guards {
            if let Some(throttle) = &mut guards.throttle {
                if !throttle.admit(now) {
                    // Refused locally: no load, and the call ends.
                    self.throttled += 1;
                    return;
                }
            }
            if let Some(breaker) = &mut guards.breaker {
                let (admission, transition) = breaker.admit(now);
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
            if state.attempts == 1 {
                guards.budget.on_first_attempt();
            }
            if let Some(permits) = &mut guards.bulkhead {
                if !permits.try_take() {
                    // Queued: no attempt reaches the dependency while it waits.
                    permits.waiting.push_back(client);
                    state.waiting = true;
                    state.waits += 1;
                    let max_wait = permits.max_wait.map(|wait| now.saturating_add(wait));
                    // When both fall on the same instant, the deadline wins.
                    let over = match (max_wait, self.config.deadline) {
                        (Some(wait), Some(deadline)) if wait < deadline => Some((wait, false)),
                        (_, Some(deadline)) => Some((deadline, true)),
                        (Some(wait), None) => Some((wait, false)),
                        (None, None) => None,
                    };
                    if let Some((at, deadline)) = over {
                        let wait = state.waits;
                        self.queue.push(at.max(now), Event::WaitOver { client, wait, deadline });
                    }
                    return;
                }
                state.permit_since = Some(now);
            }
        }
        self.launch(client);
    }

    /// The attempt's first leg leaves (and in a brownout, its timeout starts).
    fn launch(&mut self, client: u32) {
        let state = &mut self.clients[client as usize];
        state.in_flight = true;
        let attempt = state.attempts;
        match self.config.model {
            Model::Contention => self.send(Event::ReadArrives(client)),
            Model::Overload { .. } => self.send(Event::Arrives { client, version: 0, attempt }),
            Model::Brownout { timeout, .. } => {
                self.queue.push(self.now.saturating_add(timeout), Event::TimedOut { client, attempt });
                self.send(Event::Arrives { client, version: 0, attempt });
            }
        }
    }

    /// Whether `attempt` is the client's attempt still waiting for its answer.
    fn is_current(&self, client: u32, attempt: u32) -> bool {
        let state = &self.clients[client as usize];
        state.in_flight && state.attempts == attempt
    }

    /// A queued client gives up waiting for a permit, if it still waits.
    fn wait_over(&mut self, client: u32, wait: u64, deadline: bool) {
        let state = &mut self.clients[client as usize];
        if !state.waiting || state.waits != wait {
            return;
        }
        state.waiting = false;
        if let Some(permits) = self.guards.as_mut().and_then(|g| g.bulkhead.as_mut()) {
            permits.waiting.retain(|&queued| queued != client);
        }
        if deadline {
            self.deadline_stopped += 1;
        } else {
            self.bulkhead_stopped += 1;
        }
    }

    /// Hands free permits to the clients queued for them, in order.
    fn admit_waiters(&mut self) {
        loop {
            let Some(next) = self.guards.as_mut().and_then(|g| g.bulkhead.as_mut()?.next_waiter()) else {
                return;
            };
            let state = &mut self.clients[next as usize];
            state.waiting = false;
            state.permit_since = Some(self.now);
            self.launch(next);
        }
    }

    /// The attempt reaches the dependency, which decides it.
    fn arrive(&mut self, client: u32, version: u64, attempt: u32) {
        let now = self.now;
        self.attempts += 1;
        self.arrivals.push(now);
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
            Model::Brownout { capacity, service_time, .. } => {
                self.busy += 1;
                // `validate` rejected a zero capacity.
                let load = (f64::from(self.busy) / f64::from(capacity)).max(1.0);
                let work =
                    Duration::try_from_secs_f64(service_time.as_secs_f64() * load).unwrap_or(Duration::MAX);
                self.queue.push(now.saturating_add(work), Event::Done { client, attempt });
                return;
            }
        };
        self.send(Event::Reply { client, ok, attempt });
    }

    /// The reply reaches the client: done, or the library's own retry
    /// decision ([`decide`]) says whether and when to try again.
    fn reply(&mut self, client: u32, ok: bool) {
        let now = self.now;
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
            if let (Some(breaker), Some(ticket)) = (&mut guards.breaker, ticket) {
                // What the retry loop tells its breaker (see `execution::outcome_of`).
                let outcome = if cut || (!ok && class.is_failure()) {
                    Outcome::Failure
                } else if ok {
                    Outcome::Success
                } else {
                    Outcome::Neutral
                };
                self.breaker_trips += trips(breaker.record(ticket, outcome, now));
            }
            if ok && !cut {
                guards.budget.deposit();
            }
            // What the retry loop tells the throttle and the bulkhead: an
            // accept for an answer that is not overload (a conflict is
            // one); a sample for any answer, every retryable error an
            // overload signal; a cut attempt says nothing.
            if let Some(throttle) = &mut guards.throttle {
                if !cut && (ok || !class.is_failure()) {
                    throttle.accept(now);
                }
            }
            if let (Some(permits), Some(since)) = (&mut guards.bulkhead, permit_since) {
                let before = permits.limit();
                permits.give_back((!cut).then(|| (now.saturating_sub(since), !ok && class.is_retryable())));
                let after = permits.limit();
                if after != before {
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
            self.completions.push(now);
            return;
        }
        let mut answers = ClientAnswers {
            config: self.config,
            backoff: self.backoff.as_ref(),
            client: &mut self.clients[client as usize],
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
            throttled: self.throttled,
            bulkhead_stopped: self.bulkhead_stopped,
            breaker_trips: self.breaker_trips,
            limits: self.limits,
            completions: self.completions,
            arrivals: self.arrivals,
            retry_arrivals: self.retry_arrivals,
            first_retries: self.first_retries,
            bucket: self.config.bucket,
            peak_load,
            retry_peak,
            end: self.end,
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
        let until = self.guards.as_ref()?.breaker.as_ref()?.open_until()?;
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
