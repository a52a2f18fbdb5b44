//! A fleet on virtual time: R replicas of M clients each against one
//! dependency that is down for a while and then recovers, with breakers
//! that are local to each replica, or shared by the fleet (feature `redis`,
//! see the `fleet` module).
//!
//! What it answers: how many failed calls reach the dependency before the
//! fleet stops sending, how many probes the fleet sends to find out it is
//! back, and how long until every replica sends again. With local breakers
//! the first two grow with R (each replica learns alone and probes alone);
//! with a fleet breaker they do not.
//!
//! Each replica runs the library's pure breaker ([`BreakerCore`], the
//! `trip` and `close` verdicts included). The store is a model of the
//! fleet's flush script (`fleet/flush.lua`) on the same rules: failures
//! counted per tenth of the window in the fleet's epoch, the open-until
//! instant, probe slots per round, probe outcomes that close or reopen;
//! every replica flushes every `sync_every` at its own phase, and the store
//! answers at once (the real one in a millisecond or so). The tests of the
//! real script against a real Redis are in `retry-fleet/tests/fleet`.

use std::collections::HashMap;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::queue::EventQueue;
use stormproof_runtime::ConfigError;
use stormproof_runtime::breaker::{
    Admission, BreakerConfig, BreakerCore, BreakerState, Outcome, Ticket, Transition,
};

/// A fleet simulation's settings; every field has a default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FleetSimConfig {
    /// Replicas (R). Default 10.
    pub replicas: u32,
    /// Clients per replica (M), each calling every `call_every`. Default 4.
    pub clients: u32,
    /// The time between one client's calls. Default 1 s: a replica alone
    /// sees few calls to this dependency, the fleet many.
    pub call_every: Duration,
    /// How long a call takes to answer. Default 20 ms.
    pub latency: Duration,
    /// How long the dependency is down, from the start. Default 12 s.
    pub down_for: Duration,
    /// How long the simulation runs. Default 60 s.
    pub horizon: Duration,
    /// Every replica's breaker. Default: 5 failures, 10 s window, open 5 s,
    /// 2 probes and 2 successes.
    pub breaker: BreakerConfig,
    /// How often a replica flushes to the fleet's store. Default 100 ms.
    pub sync_every: Duration,
    /// Seeds the clients' and the flushes' phases. Default 1.
    pub seed: u64,
}

impl Default for FleetSimConfig {
    fn default() -> Self {
        FleetSimConfig {
            replicas: 10,
            clients: 4,
            call_every: Duration::from_secs(1),
            latency: Duration::from_millis(20),
            down_for: Duration::from_secs(12),
            horizon: Duration::from_secs(60),
            breaker: BreakerConfig { open_for: Duration::from_secs(5), ..Default::default() },
            sync_every: Duration::from_millis(100),
            seed: 1,
        }
    }
}

/// Whose verdicts the replicas' breakers follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guards {
    /// Each replica's breaker alone.
    Local,
    /// A breaker shared by the fleet.
    Fleet,
}

/// What a fleet simulation measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetReport {
    /// Whose verdicts the breakers followed.
    pub guards: Guards,
    /// Replicas (R).
    pub replicas: u32,
    /// Failed calls that reached the dependency before every replica had
    /// stopped sending (its breaker open) for the first time.
    pub failed_before_stop: u64,
    /// Failed calls that reached the dependency in all (probes included).
    pub failed_calls: u64,
    /// Probes the fleet sent in all.
    pub probes: u64,
    /// Probes the fleet sent in the half-open periods that ended in a close
    /// after the dependency recovered.
    pub probes_per_recovery: u64,
    /// From the dependency's recovery until every replica's breaker was
    /// closed; `None` if one was still not closed at the horizon.
    pub recovery: Option<Duration>,
}

#[derive(Debug, Clone, Copy)]
enum Event {
    Call(u32),
    Answer { replica: u32, ticket: Ticket, ok: bool },
    Sync(u32),
}

/// One replica: its breaker, and its side of the fleet (as `fleet/breaker.rs`).
#[derive(Debug)]
struct Replica {
    core: BreakerCore,
    /// Calls, failures, probe successes, probe failures; and as last flushed.
    totals: [u64; 4],
    flushed: [u64; 4],
    rejections: u64,
    flushed_rejections: u64,
    seen: u64,
    held: bool,
    probing: Option<u64>,
    period_probes: u64,
    closed_at: Option<Duration>,
}

/// The fleet's flush script, as a model (`fleet/flush.lua`).
#[derive(Debug, Default)]
struct Store {
    epoch: u64,
    open_until: Option<Duration>,
    slots: u32,
    slots_at: Duration,
    ok: u64,
    /// (epoch, bucket) -> (calls, failures).
    buckets: HashMap<(u64, u64), (u64, u64)>,
}

/// The store's answer: the epoch, the state, the probes granted.
type Verdict = (u64, BreakerState, Duration, u32);

impl Store {
    fn flush(&mut self, now: Duration, c: &BreakerConfig, seen: u64, want: u32, delta: [u64; 4]) -> Verdict {
        // In whole milliseconds, at least one, as `fleet/script.rs` gives them.
        let window = u64::try_from(c.window.as_millis()).unwrap_or(u64::MAX).max(1);
        let width = (window / 10).max(1);
        let bucket = u64::try_from(now.as_millis()).unwrap_or(u64::MAX) / width;
        let mut granted = 0;
        match self.open_until {
            None => {
                let entry = self.buckets.entry((self.epoch, bucket)).or_default();
                (entry.0, entry.1) = (entry.0 + delta[0], entry.1 + delta[1]);
                let span = window.div_ceil(width);
                let (calls, failures) = (bucket.saturating_sub(span - 1)..=bucket)
                    .filter_map(|b| self.buckets.get(&(self.epoch, b)))
                    .fold((0, 0), |(a, b), (c, f)| (a + c, b + f));
                let trips = match c.failure_rate_percent {
                    Some(rate) => {
                        calls >= u64::from(c.minimum_calls) && failures * 100 >= u64::from(rate) * calls
                    }
                    None => failures >= u64::from(c.failure_threshold),
                };
                if trips {
                    self.transition(Some(now.saturating_add(c.open_for)));
                }
            }
            Some(until) if now < until => {}
            Some(_) => {
                if seen == self.epoch {
                    self.ok += delta[2];
                }
                if seen == self.epoch && delta[3] > 0 {
                    self.transition(Some(now.saturating_add(c.open_for)));
                } else if self.ok >= u64::from(c.success_threshold) {
                    self.transition(None);
                } else if want > 0 {
                    if self.slots > 0 && now.saturating_sub(self.slots_at) >= c.open_for {
                        self.slots = 0;
                    }
                    if self.slots == 0 {
                        self.slots_at = now;
                    }
                    granted = want.min(c.half_open_max_calls.saturating_sub(self.slots));
                    self.slots += granted;
                }
            }
        }
        match self.open_until {
            None => (self.epoch, BreakerState::Closed, Duration::ZERO, granted),
            Some(until) if now < until => (self.epoch, BreakerState::Open, until - now, granted),
            Some(_) => (self.epoch, BreakerState::HalfOpen, Duration::ZERO, granted),
        }
    }

    fn transition(&mut self, open_until: Option<Duration>) {
        (self.epoch, self.open_until, self.slots, self.ok) = (self.epoch + 1, open_until, 0, 0);
        self.buckets.clear();
    }
}

struct Run<'c> {
    config: &'c FleetSimConfig,
    replicas: Vec<Replica>,
    store: Store,
    queue: EventQueue<Event>,
    stopped: bool,
    report: FleetReport,
}

/// Runs one simulation with `guards`. Deterministic: the same config gives
/// the same report. An invalid config is an error naming the field.
///
/// ```
/// # mod stormproof { pub use stormproof_runtime::*; pub use stormproof_sim as sim; }
/// use stormproof::sim::{FleetSimConfig, Guards, simulate_fleet};
/// let config = FleetSimConfig { replicas: 5, ..Default::default() };
/// let local = simulate_fleet(&config, Guards::Local).unwrap();
/// let fleet = simulate_fleet(&config, Guards::Fleet).unwrap();
/// assert!(fleet.failed_before_stop < local.failed_before_stop);
/// assert!(fleet.probes_per_recovery <= 2, "half_open_max_calls for the whole fleet");
/// ```
pub fn simulate_fleet(config: &FleetSimConfig, guards: Guards) -> Result<FleetReport, ConfigError> {
    validate(config)?;
    let mut rng = SmallRng::seed_from_u64(config.seed);
    let mut queue = EventQueue::new();
    let clients = config.replicas * config.clients;
    for client in 0..clients {
        queue.push(config.call_every.mul_f64(rng.random::<f64>()), Event::Call(client));
    }
    if guards == Guards::Fleet {
        for replica in 0..config.replicas {
            queue.push(config.sync_every.mul_f64(rng.random::<f64>()), Event::Sync(replica));
        }
    }
    let replica = || Replica {
        core: BreakerCore::new(config.breaker),
        totals: [0; 4],
        flushed: [0; 4],
        rejections: 0,
        flushed_rejections: 0,
        seen: 0,
        held: false,
        probing: None,
        period_probes: 0,
        closed_at: None,
    };
    let report = FleetReport {
        guards,
        replicas: config.replicas,
        failed_before_stop: 0,
        failed_calls: 0,
        probes: 0,
        probes_per_recovery: 0,
        recovery: None,
    };
    let replicas = (0..config.replicas).map(|_| replica()).collect();
    let mut run = Run { config, replicas, store: Store::default(), queue, stopped: false, report };
    while let Some((now, event)) = run.queue.pop() {
        if now > config.horizon {
            break;
        }
        match event {
            Event::Call(client) => run.call(now, client),
            Event::Answer { replica, ticket, ok } => run.answer(now, replica, ticket, ok),
            Event::Sync(replica) => run.sync(now, replica),
        }
    }
    let all_closed = run.replicas.iter().all(|r| r.core.state(config.horizon) == BreakerState::Closed);
    let last_close = run.replicas.iter().filter_map(|r| r.closed_at).max().unwrap_or(config.down_for);
    run.report.recovery = all_closed.then(|| last_close.saturating_sub(config.down_for));
    Ok(run.report)
}

fn validate(config: &FleetSimConfig) -> Result<(), ConfigError> {
    config.breaker.validate()?;
    for (field, value) in [("replicas", config.replicas), ("clients", config.clients)] {
        if value == 0 {
            return Err(ConfigError::new(field, "must be greater than zero"));
        }
    }
    if config.replicas.saturating_mul(config.clients) > 100_000 {
        return Err(ConfigError::new("clients", "replicas x clients must be at most 100,000"));
    }
    for (field, value) in [("call_every", config.call_every), ("sync_every", config.sync_every)] {
        if value < Duration::from_millis(1) {
            return Err(ConfigError::new(field, "must be at least 1 ms"));
        }
    }
    if config.horizon > Duration::from_secs(86_400) {
        return Err(ConfigError::new("horizon", "must be at most a day"));
    }
    Ok(())
}

impl Run<'_> {
    fn call(&mut self, now: Duration, client: u32) {
        self.queue.push(now.saturating_add(self.config.call_every), Event::Call(client));
        let index = client / self.config.clients;
        let replica = &mut self.replicas[index as usize];
        let (admission, transition) = replica.core.admit(now);
        self.transitioned(now, index, transition);
        let replica = &mut self.replicas[index as usize];
        let Admission::Allowed(ticket) = admission else {
            replica.rejections += 1;
            return;
        };
        if ticket.probe {
            replica.period_probes += 1;
            self.report.probes += 1;
        }
        let ok = now >= self.config.down_for;
        if !ok {
            self.report.failed_calls += 1;
            if !self.stopped {
                self.report.failed_before_stop += 1;
            }
        }
        self.queue
            .push(now.saturating_add(self.config.latency), Event::Answer { replica: index, ticket, ok });
    }

    fn answer(&mut self, now: Duration, index: u32, ticket: Ticket, ok: bool) {
        let replica = &mut self.replicas[index as usize];
        replica.totals[0] += 1;
        replica.totals[1] += u64::from(!ok);
        // As `CircuitBreaker::record_locked` counts them: a probe whose
        // half-open period has ended is only a call.
        if ticket.probe && ticket.epoch == replica.core.epoch() {
            replica.totals[if ok { 2 } else { 3 }] += 1;
        }
        let outcome = if ok { Outcome::Success } else { Outcome::Failure };
        let transition = replica.core.record(ticket, outcome, now);
        self.transitioned(now, index, transition);
    }

    /// One flush, as `fleet/task.rs` and `fleet/breaker.rs` make it.
    fn sync(&mut self, now: Duration, index: u32) {
        self.queue.push(now.saturating_add(self.config.sync_every), Event::Sync(index));
        let hold = self.config.sync_every.saturating_mul(2);
        let replica = &mut self.replicas[index as usize];
        let delta: [u64; 4] = std::array::from_fn(|i| replica.totals[i] - replica.flushed[i]);
        replica.flushed = replica.totals;
        let demand = replica.rejections > replica.flushed_rejections;
        replica.flushed_rejections = replica.rejections;
        let want = if replica.held && demand { self.config.breaker.half_open_max_calls } else { 0 };
        let (epoch, state, remaining, granted) =
            self.store.flush(now, &self.config.breaker, replica.seen, want, delta);
        replica.seen = epoch;
        let transition = match state {
            BreakerState::Closed => {
                let transition = if replica.held { replica.core.close() } else { None };
                (replica.held, replica.probing) = (false, None);
                transition
            }
            BreakerState::Open => {
                (replica.held, replica.probing) = (true, None);
                replica.core.trip(now, now.saturating_add(remaining).saturating_add(hold), None)
            }
            BreakerState::HalfOpen if granted > 0 => {
                (replica.held, replica.probing) = (true, Some(epoch));
                replica.core.trip(now, now, Some(granted))
            }
            BreakerState::HalfOpen if replica.probing != Some(epoch) => {
                replica.held = true;
                replica.core.trip(now, now.saturating_add(hold), None)
            }
            BreakerState::HalfOpen => None,
        };
        self.transitioned(now, index, transition);
    }

    fn transitioned(&mut self, now: Duration, index: u32, transition: Option<Transition>) {
        let Some((from, to)) = transition else { return };
        let replica = &mut self.replicas[index as usize];
        match to {
            BreakerState::HalfOpen => replica.period_probes = 0,
            BreakerState::Closed if from != BreakerState::Closed && now >= self.config.down_for => {
                self.report.probes_per_recovery += replica.period_probes;
                replica.period_probes = 0;
                replica.closed_at = Some(now);
            }
            // A fleet's trip of a half-open breaker starts a new period.
            BreakerState::Open => replica.period_probes = 0,
            BreakerState::Closed => {}
        }
        if !self.stopped && to == BreakerState::Open {
            self.stopped = self.replicas.iter().all(|r| r.core.state(now) == BreakerState::Open);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fleet_breaker_stops_the_fleet_sooner_and_probes_once_per_round() {
        let config = FleetSimConfig { replicas: 20, ..Default::default() };
        let local = simulate_fleet(&config, Guards::Local).unwrap();
        let fleet = simulate_fleet(&config, Guards::Fleet).unwrap();
        // Locally each replica needs its own 5 failures: at least 100 in all.
        assert!(local.failed_before_stop >= 100, "{local:?}");
        assert!(fleet.failed_before_stop < local.failed_before_stop / 2, "{fleet:?} vs {local:?}");
        assert!(local.probes_per_recovery >= 40, "two probes at least from every replica: {local:?}");
        assert!((1..=2).contains(&fleet.probes_per_recovery), "{fleet:?}");
        assert!(fleet.probes < local.probes / 5, "{fleet:?} vs {local:?}");
        assert!(local.recovery.is_some() && fleet.recovery.is_some(), "both recover");
    }

    #[test]
    fn one_replica_is_the_same_alone_or_in_a_fleet_of_one() {
        let config = FleetSimConfig { replicas: 1, ..Default::default() };
        let local = simulate_fleet(&config, Guards::Local).unwrap();
        let fleet = simulate_fleet(&config, Guards::Fleet).unwrap();
        assert!(local.failed_before_stop >= 5, "its threshold: {local:?}");
        assert_eq!(fleet.failed_before_stop, local.failed_before_stop, "its own breaker opens first");
    }

    #[test]
    fn durations_at_their_extremes_run_without_a_panic() {
        // Valid settings all: a latency, a period or an open time the
        // clock cannot add, a window under the store's millisecond.
        let breaker = |b: BreakerConfig| FleetSimConfig { breaker: b, ..Default::default() };
        let configs = [
            FleetSimConfig { latency: Duration::MAX, ..Default::default() },
            FleetSimConfig { call_every: Duration::MAX, ..Default::default() },
            FleetSimConfig { sync_every: Duration::MAX / 2 + Duration::from_secs(1), ..Default::default() },
            breaker(BreakerConfig { open_for: Duration::MAX, ..FleetSimConfig::default().breaker }),
            breaker(BreakerConfig { window: Duration::from_micros(500), ..Default::default() }),
            breaker(BreakerConfig { window: Duration::MAX, ..Default::default() }),
        ];
        for config in configs {
            for guards in [Guards::Local, Guards::Fleet] {
                let run = std::panic::catch_unwind(|| simulate_fleet(&config, guards));
                assert!(run.is_ok(), "{guards:?} panicked on {config:?}");
            }
        }
    }

    #[test]
    fn runs_are_reproducible_and_bad_settings_name_their_field() {
        let config = FleetSimConfig::default();
        assert_eq!(simulate_fleet(&config, Guards::Fleet), simulate_fleet(&config, Guards::Fleet));
        let bad = FleetSimConfig { clients: 0, ..Default::default() };
        assert_eq!(simulate_fleet(&bad, Guards::Local).unwrap_err().field, "clients");
        let bad = FleetSimConfig { sync_every: Duration::ZERO, ..Default::default() };
        assert_eq!(simulate_fleet(&bad, Guards::Fleet).unwrap_err().field, "sync_every");
    }
}
