//! Model-based test: the breaker (both the pure core and the concurrent
//! wrapper) against a naive reference state machine written straight from
//! the contract. Random sequences of successes (slow ones among them, for
//! a breaker that judges slow calls), transient and permanent failures,
//! time advances, probe starts and probe abandons must give the same states
//! and the same admission decisions.

use std::time::Duration;

use proptest::prelude::*;
use stormproof_runtime::breaker::{
    Admission, BreakerConfig, BreakerCore, BreakerState, CircuitBreaker, Outcome,
};

/// The contract, as literally as possible: every failure kept with its
/// time, forgotten by filtering; a generation counter instead of epochs.
#[derive(Debug)]
struct Reference {
    cfg: BreakerConfig,
    state: RefState,
    failures: Vec<Duration>,
    /// Slow ones included.
    successes: Vec<Duration>,
    slow: Vec<Duration>,
    /// With `window_calls`: the last outcomes, oldest first (failed, slow).
    last: std::collections::VecDeque<(bool, bool)>,
    generation: u64,
    /// Probes failed in a row since it last opened from closed.
    failed_probes: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum RefState {
    Closed,
    /// Probes from `until`; `allowance`: probes in all in that half-open
    /// period, when a verdict from outside said so.
    Open {
        until: Duration,
        allowance: Option<u32>,
    },
    HalfOpen {
        probes: u32,
        successes: u32,
        allowance: Option<u32>,
    },
}

#[derive(Debug, Clone, Copy)]
struct RefTicket {
    generation: u64,
    probe: bool,
}

impl Reference {
    fn new(cfg: BreakerConfig) -> Self {
        Reference {
            cfg,
            state: RefState::Closed,
            failures: vec![],
            successes: vec![],
            slow: vec![],
            last: Default::default(),
            generation: 0,
            failed_probes: 0,
        }
    }

    fn go(&mut self, state: RefState) {
        self.state = state;
        self.generation += 1;
        self.failures.clear();
        self.successes.clear();
        self.slow.clear();
        self.last.clear();
    }

    /// Whether `failed` (or `slow`) of `calls` reach their configured
    /// share, `calls` reaching `minimum_calls`.
    fn rates_reached(&self, failed: u64, slow: u64, calls: u64) -> bool {
        let reaches =
            |count: u64, percent: Option<u8>| percent.is_some_and(|p| count * 100 >= calls * u64::from(p));
        calls >= u64::from(self.cfg.minimum_calls)
            && (reaches(failed, self.cfg.failure_rate_percent)
                || reaches(slow, self.cfg.slow_call_rate_percent))
    }

    fn state(&self, now: Duration) -> BreakerState {
        match self.state {
            RefState::Closed => BreakerState::Closed,
            RefState::Open { until, .. } if now < until => BreakerState::Open,
            _ => BreakerState::HalfOpen,
        }
    }

    fn admit(&mut self, now: Duration) -> Option<RefTicket> {
        if let RefState::Open { until, allowance } = self.state {
            if now < until {
                return None;
            }
            self.go(RefState::HalfOpen { probes: 0, successes: 0, allowance });
        }
        match &mut self.state {
            RefState::Closed => Some(RefTicket { generation: self.generation, probe: false }),
            RefState::HalfOpen { probes, allowance, .. }
                if *probes < self.cfg.half_open_max_calls && *allowance != Some(0) =>
            {
                *probes += 1;
                *allowance = allowance.map(|n| n - 1);
                Some(RefTicket { generation: self.generation, probe: true })
            }
            _ => None,
        }
    }

    fn abandon(&mut self, t: RefTicket) {
        if t.generation == self.generation
            && t.probe
            && let RefState::HalfOpen { probes, .. } = &mut self.state
        {
            *probes -= 1;
        }
    }

    /// Open for `open_for`, doubled for each probe failed in a row since
    /// the breaker opened from closed, but never longer than `max_open_for`
    /// unless `open_for` itself is.
    fn open(&mut self, now: Duration) {
        let mut period = self.cfg.open_for;
        for _ in 0..self.failed_probes {
            if period * 2 > self.cfg.max_open_for {
                period = self.cfg.max_open_for.max(self.cfg.open_for);
                break;
            }
            period *= 2;
        }
        self.go(RefState::Open { until: now + period, allowance: None });
    }

    /// A verdict from outside: open until `until`, then `allowance` probes in all.
    fn trip(&mut self, until: Duration, allowance: Option<u32>) {
        match &mut self.state {
            RefState::Open { until: end, allowance: probes } => (*end, *probes) = (until, allowance),
            _ => self.go(RefState::Open { until, allowance }),
        }
    }

    fn close(&mut self) {
        if self.state != RefState::Closed {
            self.failed_probes = 0;
            self.go(RefState::Closed);
        }
    }

    fn record(&mut self, t: RefTicket, outcome: Outcome, now: Duration) {
        if t.generation != self.generation {
            return;
        }
        match self.state {
            RefState::Open { .. } => {}
            RefState::HalfOpen { .. } => {
                self.abandon(t);
                match outcome {
                    Outcome::Neutral => {}
                    // A slow probe reopens, as a failed one does.
                    Outcome::Failure | Outcome::Slow => {
                        self.failed_probes += 1;
                        self.open(now)
                    }
                    Outcome::Success => {
                        let RefState::HalfOpen { successes, .. } = &mut self.state else { unreachable!() };
                        *successes += 1;
                        if *successes >= self.cfg.success_threshold {
                            self.failed_probes = 0;
                            self.go(RefState::Closed);
                        }
                    }
                }
            }
            RefState::Closed if self.cfg.window_calls.is_some() => {
                // A window of the last calls, however old: no time in it.
                let Some(size) = self.cfg.window_calls else { unreachable!() };
                if outcome == Outcome::Neutral {
                    return;
                }
                self.last.push_back((outcome == Outcome::Failure, outcome == Outcome::Slow));
                if self.last.len() > size as usize {
                    self.last.pop_front();
                }
                let failed = self.last.iter().filter(|&&(failed, _)| failed).count() as u64;
                let slow = self.last.iter().filter(|&&(_, slow)| slow).count() as u64;
                let calls = self.last.len() as u64;
                if self.rates_reached(failed, slow, calls) {
                    self.failed_probes = 0;
                    self.open(now);
                }
            }
            RefState::Closed => {
                let window = self.cfg.window;
                if self.cfg.failure_rate_percent.is_some() {
                    // Rate mode forgets whole tenths of the window, by when each began.
                    let tenth = (window.as_nanos() / 10).max(1);
                    let began = |t: &Duration| Duration::from_nanos((t.as_nanos() / tenth * tenth) as u64);
                    self.failures.retain(|t| now - began(t) < window);
                    self.successes.retain(|t| now - began(t) < window);
                    self.slow.retain(|t| now - began(t) < window);
                } else {
                    self.failures.retain(|t| now - *t < window);
                }
                match (outcome, self.cfg.failure_rate_percent) {
                    (Outcome::Neutral, _) => return,
                    // Count mode judges no slow calls: a slow one is a success.
                    (Outcome::Success | Outcome::Slow, None) => self.failures.clear(),
                    (Outcome::Success, Some(_)) => self.successes.push(now),
                    (Outcome::Slow, Some(_)) => {
                        self.successes.push(now);
                        self.slow.push(now);
                    }
                    (Outcome::Failure, None) => {
                        self.failures.push(now);
                        if self.failures.len() as u32 >= self.cfg.failure_threshold {
                            self.failed_probes = 0;
                            self.open(now);
                        }
                    }
                    (Outcome::Failure, Some(_)) => self.failures.push(now),
                }
                // Rate mode judges the window after every recorded outcome,
                // a success included (resilience4j opens on the call that
                // reaches `minimum_calls`, whatever its outcome).
                if self.cfg.failure_rate_percent.is_some() {
                    let failed = self.failures.len() as u64;
                    let calls = failed + self.successes.len() as u64;
                    if self.rates_reached(failed, self.slow.len() as u64, calls) {
                        self.failed_probes = 0;
                        self.open(now);
                    }
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Start an attempt (a probe when half-open).
    Start,
    /// Finish the in-flight attempt at this index (mod the count) with an outcome.
    Finish(usize, Outcome),
    /// Drop the in-flight attempt at this index without an outcome.
    Abandon(usize),
    /// Let time pass, in ms.
    Advance(u64),
    /// A verdict from outside: open for this many ms, then these probes in all.
    Trip(u64, Option<u32>),
    /// A verdict from outside: closed.
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    let outcome = prop_oneof![
        Just(Outcome::Success),
        Just(Outcome::Failure),
        Just(Outcome::Neutral),
        Just(Outcome::Slow)
    ];
    prop_oneof![
        4 => Just(Op::Start),
        4 => (any::<usize>(), outcome).prop_map(|(i, o)| Op::Finish(i, o)),
        1 => any::<usize>().prop_map(Op::Abandon),
        2 => prop_oneof![0u64..50, 0u64..2_000, Just(1_000)].prop_map(Op::Advance),
        1 => (prop_oneof![Just(0u64), 0u64..2_000], prop::option::of(0u32..4)).prop_map(|(ms, p)| Op::Trip(ms, p)),
        1 => Just(Op::Close),
    ]
}

fn config() -> impl Strategy<Value = BreakerConfig> {
    let shape = (1u32..5, 1u64..3, 1u64..3, 0u64..9, 1u32..4, 1u32..4, prop::option::of(1u8..=100), 1u32..6);
    (shape, prop::option::of(1u32..9), prop::option::of(1u8..=100)).prop_map(
        |((threshold, window_s, open_s, max_open_s, success, probes, rate, minimum), calls, slow)| {
            BreakerConfig {
                failure_threshold: threshold,
                window: Duration::from_secs(window_s),
                open_for: Duration::from_secs(open_s),
                max_open_for: Duration::from_secs(max_open_s),
                success_threshold: success,
                half_open_max_calls: probes,
                failure_rate_percent: rate,
                minimum_calls: minimum,
                // A window of calls only in rate mode, holding at least `minimum_calls`.
                window_calls: rate.and(calls).map(|calls| calls.max(minimum)),
                // Slow calls judged only in rate mode.
                slow_call_rate_percent: rate.and(slow),
                slow_call_duration: rate.and(slow).map(|_| Duration::from_secs(1)),
                // A breaker of one name: its keys' bounds are not used.
                ..BreakerConfig::default()
            }
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_pure_core_agrees_with_the_reference(cfg in config(), ops in prop::collection::vec(op(), 1..120)) {
        let mut core = BreakerCore::new(cfg);
        let mut reference = Reference::new(cfg);
        let mut now = Duration::ZERO;
        let mut in_flight = Vec::new();
        for op in ops {
            match op {
                Op::Start => {
                    let (admission, _) = core.admit(now);
                    let expected = reference.admit(now);
                    match (admission, expected) {
                        (Admission::Allowed(t), Some(r)) => {
                            prop_assert_eq!(t.probe, r.probe);
                            in_flight.push((t, r));
                        }
                        (Admission::Rejected, None) => {}
                        (got, want) => prop_assert!(false, "admission {:?} vs reference {:?}", got, want),
                    }
                }
                Op::Finish(i, outcome) if !in_flight.is_empty() => {
                    let (t, r) = in_flight.remove(i % in_flight.len());
                    core.record(t, outcome, now);
                    reference.record(r, outcome, now);
                }
                Op::Abandon(i) if !in_flight.is_empty() => {
                    let (t, r) = in_flight.remove(i % in_flight.len());
                    core.abandon(t);
                    reference.abandon(r);
                }
                Op::Advance(ms) => now += Duration::from_millis(ms),
                Op::Trip(ms, probes) => {
                    core.trip(now, now + Duration::from_millis(ms), probes);
                    reference.trip(now + Duration::from_millis(ms), probes);
                }
                Op::Close => {
                    core.close();
                    reference.close();
                }
                _ => {}
            }
            prop_assert_eq!(core.state(now), reference.state(now));
        }
    }

    #[test]
    fn the_concurrent_breaker_agrees_with_the_reference(cfg in config(), ops in prop::collection::vec(op(), 1..80)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        runtime.block_on(async {
            let breaker = CircuitBreaker::new("model", cfg).unwrap();
            let mut reference = Reference::new(cfg);
            let start = tokio::time::Instant::now();
            let mut in_flight = Vec::new();
            for op in ops {
                let now = start.elapsed();
                match op {
                    Op::Start => match (breaker.try_acquire(), reference.admit(now)) {
                        (Some(permit), Some(r)) => {
                            prop_assert_eq!(permit.is_probe(), r.probe);
                            in_flight.push((permit, r));
                        }
                        (None, None) => {}
                        (got, want) => prop_assert!(false, "admitted {} vs reference {:?}", got.is_some(), want),
                    },
                    Op::Finish(i, outcome) if !in_flight.is_empty() => {
                        let (permit, r) = in_flight.remove(i % in_flight.len());
                        permit.record(outcome);
                        reference.record(r, outcome, now);
                    }
                    Op::Abandon(i) if !in_flight.is_empty() => {
                        let (permit, r) = in_flight.remove(i % in_flight.len());
                        drop(permit);
                        reference.abandon(r);
                    }
                    Op::Advance(ms) => tokio::time::advance(Duration::from_millis(ms)).await,
                    Op::Trip(ms, probes) => {
                        breaker.trip_until(tokio::time::Instant::now() + Duration::from_millis(ms), probes);
                        reference.trip(now + Duration::from_millis(ms), probes);
                    }
                    Op::Close => {
                        breaker.close();
                        reference.close();
                    }
                    _ => {}
                }
                prop_assert_eq!(breaker.state(), reference.state(start.elapsed()));
            }
            Ok(())
        })?;
    }
}
