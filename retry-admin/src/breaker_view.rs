//! A circuit breaker as `GET /snapshot` shows it: its state, settings and
//! counts (see [`Snapshot`](crate::Snapshot) for the stability promise).

use serde::{Deserialize, Serialize};

use super::clock::millis;
use stormproof_runtime::breaker::{BreakerConfig, BreakerState, BreakerTotals, CircuitBreaker};

/// A breaker's state, as in traces and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Calls run.
    Closed,
    /// Calls fail fast.
    Open,
    /// A few probe calls run.
    HalfOpen,
}

impl From<BreakerState> for State {
    fn from(state: BreakerState) -> Self {
        match state {
            BreakerState::Closed => State::Closed,
            BreakerState::Open => State::Open,
            BreakerState::HalfOpen => State::HalfOpen,
        }
    }
}

/// One circuit breaker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct BreakerView {
    /// Its name in the registry.
    pub name: String,
    /// Its state now (an open breaker whose `open_for` has passed reads `half_open`).
    pub state: State,
    /// The state it is held in by hand (`force-open`, `force-closed`), until reset; else `null`.
    pub forced: Option<State>,
    /// While open: milliseconds until probes are admitted; else `null`.
    pub remaining_open_ms: Option<u64>,
    /// The open period in force, in milliseconds: while open, the current
    /// one; while half-open, the one a failed probe would open it for
    /// (each failed probe doubles it, up to `max_open_for_ms`); while
    /// closed, `open_for_ms`.
    pub open_period_ms: u64,
    /// Half-open probes running now.
    pub probes_in_flight: u32,
    /// Its settings.
    pub config: BreakerConfigView,
    /// Monotonic totals since the breaker was made.
    pub totals: Counts,
    /// Counts per sample period (one second), oldest first: up to the last
    /// 60 in `/snapshot` and the first `snapshot` event; in a `tick` event,
    /// only the period just ended (empty if the sampler has not yet seen
    /// this breaker).
    pub per_second: Vec<Counts>,
    /// Whether a set of breakers per key of this name takes its settings
    /// from this breaker (see `keyed_breakers`): its own state and counts
    /// are of the calls naming it alone, and forcing it moves no key's.
    #[serde(default)]
    pub per_key_template: bool,
}

/// Attempts a breaker saw: in total, or in one sample period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Attempts that ran and reported an outcome.
    pub calls: u64,
    /// Of those, failures.
    pub failures: u64,
    /// Attempts refused (open, or no probe slot free).
    pub rejections: u64,
    /// Successes slower than `slow_call_ms` (also in `calls`); 0 for a
    /// breaker that judges no slow calls.
    #[serde(default)]
    pub slow_calls: u64,
}

impl From<BreakerTotals> for Counts {
    fn from(totals: BreakerTotals) -> Self {
        Counts {
            calls: totals.calls,
            failures: totals.failures,
            rejections: totals.rejections,
            slow_calls: totals.slow_calls,
        }
    }
}

impl Counts {
    /// What was counted between `earlier` and `self` (totals only grow).
    pub(crate) fn since(self, earlier: Counts) -> Counts {
        Counts {
            calls: self.calls.saturating_sub(earlier.calls),
            failures: self.failures.saturating_sub(earlier.failures),
            rejections: self.rejections.saturating_sub(earlier.rejections),
            slow_calls: self.slow_calls.saturating_sub(earlier.slow_calls),
        }
    }
}

/// A breaker's [`BreakerConfig`], durations in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct BreakerConfigView {
    /// Failures inside the window that open it (count mode).
    pub failure_threshold: u32,
    /// How long a failure is remembered.
    pub window_ms: u64,
    /// How long it stays open before probing, the first time.
    pub open_for_ms: u64,
    /// The longest open period failed probes double it to.
    pub max_open_for_ms: u64,
    /// Consecutive probe successes that close it.
    pub success_threshold: u32,
    /// Probes allowed at once while half-open.
    pub half_open_max_calls: u32,
    /// Rate mode: the failure percentage that opens it; `null` in count mode.
    pub failure_rate_percent: Option<u8>,
    /// Rate mode: calls in the window before the rate is judged.
    pub minimum_calls: u32,
    /// Rate mode over the last this many calls instead of `window_ms`; else `null`.
    pub window_calls: Option<u32>,
    /// A success that takes at least this long is slow; `null` when it
    /// judges no slow calls.
    #[serde(default)]
    pub slow_call_ms: Option<u64>,
    /// The share of slow calls in the window that opens it; `null` when it
    /// judges no slow calls.
    #[serde(default)]
    pub slow_call_rate_percent: Option<u8>,
}

impl From<BreakerConfig> for BreakerConfigView {
    fn from(c: BreakerConfig) -> Self {
        BreakerConfigView {
            failure_threshold: c.failure_threshold,
            window_ms: millis(c.window),
            open_for_ms: millis(c.open_for),
            max_open_for_ms: millis(c.max_open_for),
            success_threshold: c.success_threshold,
            half_open_max_calls: c.half_open_max_calls,
            failure_rate_percent: c.failure_rate_percent,
            minimum_calls: c.minimum_calls,
            window_calls: c.window_calls,
            slow_call_ms: c.slow_call_duration.map(millis),
            slow_call_rate_percent: c.slow_call_rate_percent,
        }
    }
}

impl BreakerView {
    /// The breaker as it is now, with `per_second` as given.
    pub(crate) fn of(name: String, breaker: &CircuitBreaker, per_second: Vec<Counts>) -> Self {
        BreakerView {
            name,
            state: breaker.state().into(),
            forced: breaker.forced().map(State::from),
            remaining_open_ms: breaker.remaining_open().map(millis),
            open_period_ms: millis(breaker.open_period()),
            probes_in_flight: breaker.probes_in_flight(),
            config: breaker.config().into(),
            totals: breaker.totals().into(),
            per_second,
            per_key_template: false,
        }
    }
}
