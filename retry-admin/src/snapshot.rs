//! What `GET /snapshot` answers and the event stream carries: every guard
//! of a registry as plain, typed JSON.
//!
//! The names of these types' fields are the JSON's field names, and they
//! are stable: a field may be added in a minor release, none renamed or
//! removed. Durations are integer milliseconds (`_ms`), instants are Unix
//! time in milliseconds (`at_unix_ms`), states are the lower-case labels
//! traces and metrics use (`closed`, `open`, `half_open`).

use serde::{Deserialize, Serialize};

pub use super::breaker_view::{BreakerConfigView, BreakerView, Counts, State};
use super::clock::millis;
pub use super::fleet_view::FleetView;
use super::keyed_view::{KEYS_LISTED, KeyedSetView};
pub use super::operations_view::OperationView;
use stormproof_runtime::breaker::{BreakerState, KeyedBreakers};
use stormproof_runtime::budget::{BudgetConfig, RetryBudget};
use stormproof_runtime::bulkhead::Bulkhead;
use stormproof_runtime::priority::{Priority, Refusals};
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
///                 "failure_rate_percent": null, "minimum_calls": 10, "window_calls": null,
///                 "slow_call_ms": null, "slow_call_rate_percent": null },
///     "totals": { "calls": 734, "failures": 61, "rejections": 212, "slow_calls": 0 },
///     "per_second": [{ "calls": 120, "failures": 3, "rejections": 0, "slow_calls": 0 }]
///   }],
///   "budgets": [{ "name": "payments", "available": 17,
///                 "config": { "form": "token_bucket", "capacity": 20, "retry_cost": 1, "refill_per_success": 1 } }],
///   "bulkheads": [{ "name": "payments", "in_use": 12, "limit": 24, "max_concurrent": 32,
///                   "adaptive": { "algorithm": "aimd", "min": 4 }, "max_wait_ms": null,
///                   "refused": { "critical": 0, "default": 3, "sheddable": 41 } }],
///   "throttles": [{ "name": "payments", "refusal_probability": 0.12, "k": 2.0, "window_ms": 500, "max_refusal_percent": 80,
///                   "refused": { "critical": 0, "default": 0, "sheddable": 0 } }],
///   "rate_limits": [{ "name": "payments", "per_second": 100, "burst": 20, "max_wait_ms": 50,
///                     "refused": { "critical": 0, "default": 0, "sheddable": 7 } }],
///   "keyed_breakers": [{ "name": "search", "keys": 312, "max_keys": 1024, "idle_for_ms": 600000,
///                        "open": ["tenant-7"], "half_open": [] }],
///   "keyed_bulkheads": [],
///   "keyed_rate_limits": [{ "name": "api", "keys": 40, "max_keys": 1024, "idle_for_ms": 600000,
///                           "refusing": [{ "key": "customer-7", "refused": 12 }] }],
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
    /// Every set of breakers per key, sorted by name.
    #[serde(default)]
    pub keyed_breakers: Vec<KeyedBreakersView>,
    /// Every set of bulkheads per key, sorted by name.
    #[serde(default)]
    pub keyed_bulkheads: Vec<KeyedSetView>,
    /// Every set of rate limits per key, sorted by name.
    #[serde(default)]
    pub keyed_rate_limits: Vec<KeyedSetView>,
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
        /// Tokens a retry after an attempt timeout takes; `null`: `retry_cost`.
        #[serde(default)]
        timeout_cost: Option<u32>,
        /// Tokens a retry after a throttle takes; `null`: `retry_cost`.
        #[serde(default)]
        throttled_cost: Option<u32>,
        /// Whether a retry that succeeds gives back what it took.
        #[serde(default)]
        refund_on_success: bool,
    },
    /// gRPC's retry throttling: failures take a token, successes return
    /// `token_ratio`, retries only above half of `max_tokens`.
    RetryThrottling {
        /// Most tokens held.
        max_tokens: u32,
        /// Tokens one success returns.
        token_ratio: f64,
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
                timeout_cost: c.timeout_cost,
                throttled_cost: c.throttled_cost,
                refund_on_success: c.refund_on_success,
            },
            BudgetConfig::RetryThrottling(c) => {
                BudgetConfigView::RetryThrottling { max_tokens: c.max_tokens, token_ratio: c.token_ratio }
            }
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
    /// The attempts it refused, by priority.
    pub refused: RefusedView,
}

/// How many attempts a guard refused, by the priority of their calls (see
/// `stormproof::priority`): a saturated guard refuses sheddable calls first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RefusedView {
    /// Of critical calls.
    pub critical: u64,
    /// Of default calls.
    pub default: u64,
    /// Of sheddable calls.
    pub sheddable: u64,
}

impl From<&Refusals> for RefusedView {
    fn from(refusals: &Refusals) -> Self {
        RefusedView {
            critical: refusals.of(Priority::Critical),
            default: refusals.of(Priority::Default),
            sheddable: refusals.of(Priority::Sheddable),
        }
    }
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
    /// The most requests it refuses, in percent.
    pub max_refusal_percent: u8,
    /// The requests it refused, by priority.
    pub refused: RefusedView,
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
    /// The attempts it refused, by priority.
    pub refused: RefusedView,
}

/// One set of breakers per key (`per = tenant`): how many keys it holds,
/// its bounds, and the keys whose breakers are not closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct KeyedBreakersView {
    /// Its name in the registry (its settings are the breaker's of that name).
    pub name: String,
    /// Keys it holds now.
    pub keys: u64,
    /// The most keys it holds at once.
    pub max_keys: u32,
    /// How long an unused key is kept.
    pub idle_for_ms: u64,
    /// Keys whose breakers are open, most recently used first (at most
    /// [`KEYS_LISTED`]).
    pub open: Vec<String>,
    /// Keys whose breakers are half-open, as `open` lists them.
    pub half_open: Vec<String>,
}

impl KeyedBreakersView {
    pub(crate) fn of(name: String, set: &KeyedBreakers) -> Self {
        let config = set.config();
        let breakers = set.breakers();
        let in_state = |state: BreakerState| -> Vec<String> {
            breakers
                .iter()
                .filter(|breaker| breaker.state() == state)
                .filter_map(|breaker| breaker.key().map(str::to_owned))
                .take(KEYS_LISTED)
                .collect()
        };
        KeyedBreakersView {
            name,
            keys: breakers.len() as u64,
            max_keys: config.max_keys,
            idle_for_ms: millis(config.idle_for),
            open: in_state(BreakerState::Open),
            half_open: in_state(BreakerState::HalfOpen),
        }
    }
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
    /// Its key, for one of a set of breakers per key; `null` for a breaker
    /// of one name.
    #[serde(default)]
    pub key: Option<String>,
    /// The state it left.
    pub from: State,
    /// The state it entered.
    pub to: State,
    /// The state it was held in by hand right after, if any (a forced
    /// transition shows `forced` equal to `to`).
    pub forced: Option<State>,
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
            refused: bulkhead.refusals().into(),
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
            max_refusal_percent: config.max_refusal_percent,
            refused: throttle.refusals().into(),
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
            refused: limit.refusals().into(),
        }
    }
}
