//! What `GET /snapshot` answers and the event stream carries: every guard
//! of a registry as plain, typed JSON.
//!
//! The names of these types' fields are the JSON's field names, and they
//! are stable: a field may be added in a minor release, none renamed or
//! removed. Durations are integer milliseconds (`_ms`), instants are Unix
//! time in milliseconds (`at_unix_ms`), states are the lower-case labels
//! traces and metrics use (`closed`, `open`, `half_open`).

use serde::{Deserialize, Serialize};

use super::clock::millis;
pub use super::fleet_view::FleetView;
pub use super::operations_view::OperationView;
use stormproof_runtime::breaker::{BreakerConfig, BreakerState, BreakerTotals, CircuitBreaker};
use stormproof_runtime::budget::{BudgetConfig, RetryBudget};
use stormproof_runtime::bulkhead::Bulkhead;
use stormproof_runtime::rate_limit::RateLimit;
use stormproof_runtime::throttle::Throttle;

/// Everything the dashboard shows, at one moment.
///
/// ```json
/// {
///   "at_unix_ms": 1767225600000,
///   "sample_period_ms": 1000,
///   "control": true,
///   "breakers": [{
///     "name": "payments", "state": "open", "forced": null, "remaining_open_ms": 312,
///     "open_period_ms": 400, "probes_in_flight": 0,
///     "config": { "failure_threshold": 8, "window_ms": 1000, "open_for_ms": 400, "max_open_for_ms": 30000,
///                 "success_threshold": 2, "half_open_max_calls": 2,
///                 "failure_rate_percent": null, "minimum_calls": 10 },
///     "totals": { "calls": 734, "failures": 61, "rejections": 212 },
///     "per_second": [{ "calls": 120, "failures": 3, "rejections": 0 }]
///   }],
///   "budgets": [{ "name": "payments", "available": 17,
///                 "config": { "form": "token_bucket", "capacity": 20, "retry_cost": 1, "refill_per_success": 1 } }],
///   "bulkheads": [{ "name": "payments", "in_use": 12, "limit": 24, "max_concurrent": 32,
///                   "adaptive": { "algorithm": "aimd", "min": 4 }, "max_wait_ms": null }],
///   "throttles": [{ "name": "payments", "refusal_probability": 0.12, "k": 2.0, "window_ms": 120000 }],
///   "rate_limits": [{ "name": "payments", "per_second": 100, "burst": 20, "max_wait_ms": 50 }],
///   "transitions": [{ "seq": 1, "at_unix_ms": 1767225599412, "breaker": "payments",
///                     "from": "closed", "to": "open", "forced": null }],
///   "fleet": { "prefix": "shop", "linked": true, "flushes": 5120, "failed_flushes": 2,
///              "replaced_keys": 1, "last_replaced_key": "shop:budget:payments:1767225599" },
///   "operations": [{ "name": "shop::charge", "settings": [
///     { "key": "max_attempts", "value": "3", "source": "stormproof.toml:12" },
///     { "key": "base_ms", "value": "100", "source": "compiled" }] }]
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Snapshot {
    /// When it was taken: Unix time, milliseconds.
    pub at_unix_ms: u64,
    /// How long each entry of a breaker's `per_second` covers (1000).
    pub sample_period_ms: u64,
    /// Whether the router accepts manual control (it was built with a token).
    pub control: bool,
    /// Every breaker of the registry, sorted by name.
    pub breakers: Vec<BreakerView>,
    /// Every retry budget, sorted by name.
    pub budgets: Vec<BudgetView>,
    /// Every bulkhead, sorted by name.
    pub bulkheads: Vec<BulkheadView>,
    /// Every client-side throttle, sorted by name.
    pub throttles: Vec<ThrottleView>,
    /// Every rate limit, sorted by name.
    pub rate_limits: Vec<RateLimitView>,
    /// The latest breaker transitions seen since the router was built
    /// (at most [`TRANSITIONS_KEPT`]), oldest first. In a `tick` event:
    /// empty, since each transition has its own event.
    pub transitions: Vec<TransitionView>,
    /// The fleet the registry is in (feature `fleet`, the facade's `redis`); `null` when none.
    #[serde(default)]
    pub fleet: Option<FleetView>,
    /// Every `#[resilient]` function linked into the program, sorted by
    /// name, with the settings its calls run on in this registry and where
    /// each came from (the compiled code, or a file's line). In a `tick`
    /// event: empty (they change only when a file is loaded).
    #[serde(default)]
    pub operations: Vec<OperationView>,
}

/// How many transitions a snapshot lists at most.
pub const TRANSITIONS_KEPT: usize = 50;

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
}

impl From<BreakerTotals> for Counts {
    fn from(totals: BreakerTotals) -> Self {
        Counts { calls: totals.calls, failures: totals.failures, rejections: totals.rejections }
    }
}

impl Counts {
    /// What was counted between `earlier` and `self` (totals only grow).
    pub(crate) fn since(self, earlier: Counts) -> Counts {
        Counts {
            calls: self.calls.saturating_sub(earlier.calls),
            failures: self.failures.saturating_sub(earlier.failures),
            rejections: self.rejections.saturating_sub(earlier.rejections),
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
        }
    }
}

/// One retry budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct BudgetView {
    /// Its name in the registry.
    pub name: String,
    /// Retries it would allow now: tokens left, or retries left in the window.
    pub available: u32,
    /// Its form and settings.
    pub config: BudgetConfigView,
}

/// A budget's [`BudgetConfig`]; `form` names the variant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "form", rename_all = "snake_case")]
#[non_exhaustive]
pub enum BudgetConfigView {
    /// Retries at most `ratio` of first attempts over `window_ms`, plus `min_per_sec`.
    Ratio {
        /// Retries allowed per first attempt.
        ratio: f64,
        /// How far back attempts count.
        window_ms: u64,
        /// Retries allowed per second whatever the traffic.
        min_per_sec: u32,
    },
    /// Retries take tokens; successes put them back.
    TokenBucket {
        /// Most tokens held.
        capacity: u32,
        /// Tokens one retry takes.
        retry_cost: u32,
        /// Tokens one success returns.
        refill_per_success: u32,
    },
    /// A form of budget this dashboard does not know yet.
    Other,
}

impl From<BudgetConfig> for BudgetConfigView {
    fn from(config: BudgetConfig) -> Self {
        match config {
            BudgetConfig::Ratio(c) => BudgetConfigView::Ratio {
                ratio: c.ratio,
                window_ms: millis(c.window),
                min_per_sec: c.min_per_sec,
            },
            BudgetConfig::TokenBucket(c) => BudgetConfigView::TokenBucket {
                capacity: c.capacity,
                retry_cost: c.retry_cost,
                refill_per_success: c.refill_per_success,
            },
            // A form of budget the runtime added after this dashboard: shown
            // by its state, its settings unnamed.
            _ => BudgetConfigView::Other,
        }
    }
}

/// One bulkhead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct BulkheadView {
    /// Its name in the registry.
    pub name: String,
    /// Permits held now (after a shrink, it may exceed `limit` for a while).
    pub in_use: u64,
    /// Attempts allowed in flight at once now: `max_concurrent`, or where
    /// the adaptive limit is.
    pub limit: u32,
    /// The most allowed at once (an adaptive limit's ceiling).
    pub max_concurrent: u32,
    /// The adaptive limit's settings; `null` for a fixed limit.
    pub adaptive: Option<AdaptiveView>,
    /// How long an attempt may wait for a permit; `null`: as long as it takes.
    pub max_wait_ms: Option<u64>,
}

/// A bulkhead's adaptive limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AdaptiveView {
    /// What moves it: `aimd` or `gradient`.
    pub algorithm: String,
    /// Its floor.
    pub min: u32,
}

/// One client-side throttle (the SRE book's adaptive throttling).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ThrottleView {
    /// Its name in the registry.
    pub name: String,
    /// The probability it refuses a request now, 0 to 1.
    pub refusal_probability: f64,
    /// Requests per accept sent before any is refused.
    pub k: f64,
    /// How far back requests and accepts count.
    pub window_ms: u64,
}

/// One rate limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RateLimitView {
    /// Its name in the registry.
    pub name: String,
    /// Attempts allowed per second.
    pub per_second: u32,
    /// Attempts allowed at once after a quiet spell.
    pub burst: u32,
    /// How long an attempt over the rate may wait; `null`: refused at once.
    pub max_wait_ms: Option<u64>,
}

/// One breaker transition, as the `on_transition` hook saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TransitionView {
    /// Its number, from 1, in the order this router saw transitions.
    pub seq: u64,
    /// When: Unix time, milliseconds.
    pub at_unix_ms: u64,
    /// The breaker's name.
    pub breaker: String,
    /// The state it left.
    pub from: State,
    /// The state it entered.
    pub to: State,
    /// The state it was held in by hand right after, if any (a forced
    /// transition shows `forced` equal to `to`).
    pub forced: Option<State>,
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
        }
    }
}

impl BudgetView {
    pub(crate) fn of(name: String, budget: &RetryBudget) -> Self {
        BudgetView { name, available: budget.available(), config: budget.config().into() }
    }
}

impl BulkheadView {
    pub(crate) fn of(name: String, bulkhead: &Bulkhead) -> Self {
        let config = bulkhead.config();
        BulkheadView {
            name,
            in_use: u64::try_from(bulkhead.in_use()).unwrap_or(u64::MAX),
            limit: bulkhead.limit(),
            max_concurrent: config.max_concurrent,
            adaptive: config
                .adaptive
                .map(|a| AdaptiveView { algorithm: a.algorithm().to_owned(), min: a.min() }),
            max_wait_ms: config.max_wait.map(millis),
        }
    }
}

impl ThrottleView {
    pub(crate) fn of(name: String, throttle: &Throttle) -> Self {
        let config = throttle.config();
        ThrottleView {
            name,
            refusal_probability: throttle.refusal_probability(),
            k: config.k,
            window_ms: millis(config.window),
        }
    }
}

impl RateLimitView {
    pub(crate) fn of(name: String, limit: &RateLimit) -> Self {
        let config = limit.config();
        RateLimitView {
            name,
            per_second: config.per_second,
            burst: config.burst,
            max_wait_ms: config.max_wait.map(millis),
        }
    }
}
