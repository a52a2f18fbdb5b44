//! One guard's table read into its config: breakers, budgets, bulkheads
//! (with an adaptive limit), throttles and rate limits.

use super::values::{Entry, count, finish, flag, integer, millis, number, span_of, text};
use crate::breaker::BreakerConfig;
use crate::budget::{BudgetConfig, RatioBudget, RetryThrottling, TokenBucket};
use crate::bulkhead::{AdaptiveLimit, BulkheadConfig};
use crate::file::{Problems, Span};
use crate::rate_limit::RateLimitConfig;
use crate::throttle::ThrottleConfig;

/// `fleet`: whether the guard is shared by the fleet (feature `redis`).
pub(crate) const BREAKER_KEYS: &[&str] = &[
    "failure_threshold",
    "window_ms",
    "open_for_ms",
    "max_open_for_ms",
    "success_threshold",
    "half_open_max_calls",
    "failure_rate_percent",
    "minimum_calls",
    "window_calls",
    "slow_call_ms",
    "slow_call_rate_percent",
    "max_keys",
    "idle_for_ms",
    "fleet",
];
pub(crate) const BUDGET_KEYS: &[&str] = &[
    "ratio",
    "window_ms",
    "min_per_sec",
    "capacity",
    "retry_cost",
    "refill_per_success",
    "timeout_cost",
    "throttled_cost",
    "refund_on_success",
    "max_tokens",
    "token_ratio",
    "fleet",
];
/// A budget's keys by form: a table gives the keys of one form.
const RATIO_KEYS: &[&str] = &["ratio", "window_ms", "min_per_sec"];
const BUCKET_KEYS: &[&str] =
    &["capacity", "retry_cost", "refill_per_success", "timeout_cost", "throttled_cost", "refund_on_success"];
const THROTTLING_KEYS: &[&str] = &["max_tokens", "token_ratio"];
/// Each form's keys, and what the form is called in a message.
const FORMS: [(&[&str], &str); 3] = [
    (RATIO_KEYS, "a ratio budget's"),
    (BUCKET_KEYS, "a token bucket's"),
    (THROTTLING_KEYS, "retry throttling's"),
];
pub(crate) const BULKHEAD_KEYS: &[&str] = &[
    "max_concurrent",
    "max_wait_ms",
    "adaptive",
    "min_concurrent",
    "backoff_ratio",
    "tolerance",
    "smoothing",
    "max_keys",
    "idle_for_ms",
];
/// The keys of an adaptive limit, past `adaptive` itself, and which
/// algorithm each belongs to (`None`: both).
const ADAPTIVE_KEYS: &[(&str, Option<&str>)] = &[
    ("min_concurrent", None),
    ("backoff_ratio", Some("aimd")),
    ("tolerance", Some("gradient")),
    ("smoothing", Some("gradient")),
];
pub(crate) const THROTTLE_KEYS: &[&str] = &["k", "window_ms", "max_refusal_percent"];
pub(crate) const RATE_LIMIT_KEYS: &[&str] =
    &["per_second", "burst", "max_wait_ms", "max_keys", "idle_for_ms"];

pub(crate) fn breaker(
    entries: &[Entry<'_>],
    table: &Span,
    problems: &mut Problems<'_>,
) -> Option<BreakerConfig> {
    let mut config = BreakerConfig::default();
    let before = problems.len();
    if let Some((n, _)) = count(entries, "failure_threshold", problems) {
        config.failure_threshold = n;
    }
    if let Some((d, _)) = millis(entries, "window_ms", problems) {
        config.window = d;
    }
    if let Some((d, _)) = millis(entries, "open_for_ms", problems) {
        config.open_for = d;
    }
    if let Some((d, _)) = millis(entries, "max_open_for_ms", problems) {
        config.max_open_for = d;
    }
    if let Some((n, _)) = count(entries, "success_threshold", problems) {
        config.success_threshold = n;
    }
    if let Some((n, _)) = count(entries, "half_open_max_calls", problems) {
        config.half_open_max_calls = n;
    }
    if let Some((n, _)) = integer(entries, "failure_rate_percent", 100, problems) {
        config.failure_rate_percent = Some(n as u8);
    }
    if let Some((n, span)) = count(entries, "minimum_calls", problems) {
        config.minimum_calls = n;
        // Count mode ignores it: a file that gives it meant rate mode.
        if span_of(entries, "failure_rate_percent").is_none() {
            problems.push(
                &span,
                Some("minimum_calls"),
                "`minimum_calls` sets the rate mode's floor: give `failure_rate_percent` too",
            );
        }
    }
    if let Some((n, span)) =
        integer(entries, "window_calls", u64::from(crate::breaker::MAX_WINDOW_CALLS), problems)
    {
        config.window_calls = Some(n as u32);
        // As `minimum_calls`: count mode would ignore it.
        if span_of(entries, "failure_rate_percent").is_none() {
            problems.push(
                &span,
                Some("window_calls"),
                "`window_calls` sets the rate mode's window of calls: give `failure_rate_percent` too",
            );
            config.window_calls = None;
        }
    }
    if let Some((d, _)) = millis(entries, "slow_call_ms", problems) {
        config.slow_call_duration = Some(d);
    }
    if let Some((n, _)) = integer(entries, "slow_call_rate_percent", 100, problems) {
        config.slow_call_rate_percent = Some(n as u8);
    }
    if let Some((n, _)) = count(entries, "max_keys", problems) {
        config.max_keys = n;
    }
    if let Some((d, _)) = millis(entries, "idle_for_ms", problems) {
        config.idle_for = d;
    }
    finish(config.validate().map(|()| config), before, entries, table, problems)
}

/// A budget: a ratio budget (the default form) unless its table gives a
/// token bucket's keys or retry throttling's; one table cannot mix forms.
pub(crate) fn budget(
    entries: &[Entry<'_>],
    table: &Span,
    problems: &mut Problems<'_>,
) -> Option<BudgetConfig> {
    let before = problems.len();
    let given =
        |keys: &[&str]| entries.iter().find(|(k, _)| keys.contains(&k.get_ref().as_ref())).map(|(k, _)| k);
    let mut forms = FORMS.iter().filter_map(|(keys, named)| given(keys).map(|key| (key, *keys, *named)));
    if let (Some((_, keys, first)), Some((key, _, second))) = (forms.next(), forms.next()) {
        let name = key.get_ref().as_ref();
        let keys = keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
        problems.push(
            &key.span(),
            Some(name),
            format!("`{name}` is {second} key, but this budget also has {first} keys ({keys}): give one form's keys"),
        );
        return None;
    }
    let config = if given(BUCKET_KEYS).is_some() {
        let mut bucket = TokenBucket::default();
        if let Some((n, _)) = count(entries, "capacity", problems) {
            bucket.capacity = n;
        }
        if let Some((n, _)) = count(entries, "retry_cost", problems) {
            bucket.retry_cost = n;
        }
        if let Some((n, _)) = count(entries, "refill_per_success", problems) {
            bucket.refill_per_success = n;
        }
        if let Some((n, _)) = count(entries, "timeout_cost", problems) {
            bucket.timeout_cost = Some(n);
        }
        if let Some((n, _)) = count(entries, "throttled_cost", problems) {
            bucket.throttled_cost = Some(n);
        }
        if let Some((refund, _)) = flag(entries, "refund_on_success", problems) {
            bucket.refund_on_success = refund;
        }
        BudgetConfig::TokenBucket(bucket)
    } else if given(THROTTLING_KEYS).is_some() {
        let mut throttling = RetryThrottling::default();
        if let Some((n, _)) = count(entries, "max_tokens", problems) {
            throttling.max_tokens = n;
        }
        if let Some(value) = number(entries, "token_ratio", problems) {
            throttling.token_ratio = value;
        }
        BudgetConfig::RetryThrottling(throttling)
    } else {
        let mut ratio = RatioBudget::default();
        if let Some(value) = number(entries, "ratio", problems) {
            ratio.ratio = value;
        }
        if let Some((d, _)) = millis(entries, "window_ms", problems) {
            ratio.window = d;
        }
        if let Some((n, _)) = count(entries, "min_per_sec", problems) {
            ratio.min_per_sec = n;
        }
        BudgetConfig::Ratio(ratio)
    };
    finish(config.validate().map(|()| config), before, entries, table, problems)
}

pub(crate) fn bulkhead(
    entries: &[Entry<'_>],
    table: &Span,
    problems: &mut Problems<'_>,
) -> Option<BulkheadConfig> {
    let mut config = BulkheadConfig::default();
    let before = problems.len();
    if let Some((n, _)) = count(entries, "max_concurrent", problems) {
        config.max_concurrent = n;
    }
    if let Some((d, _)) = millis(entries, "max_wait_ms", problems) {
        config.max_wait = Some(d);
    }
    if problems.len() == before {
        config.adaptive = adaptive(entries, config.max_concurrent, problems);
    }
    if let Some((n, _)) = count(entries, "max_keys", problems) {
        config.max_keys = n;
    }
    if let Some((d, _)) = millis(entries, "idle_for_ms", problems) {
        config.idle_for = d;
    }
    finish(config.validate().map(|()| config), before, entries, table, problems)
}

/// The adaptive limit `adaptive = "aimd" | "gradient"` and its keys ask
/// for; each bound checked here, at its own key (the limit's own check
/// names only `adaptive`).
fn adaptive(entries: &[Entry<'_>], max: u32, problems: &mut Problems<'_>) -> Option<AdaptiveLimit> {
    let algorithm = match text(entries, "adaptive", problems) {
        Some((name, _)) if name == "aimd" || name == "gradient" => Some(name),
        Some((_, span)) => {
            problems.push(&span, Some("adaptive"), "`adaptive` must be one of: \"aimd\", \"gradient\"");
            return None;
        }
        None => None,
    };
    for (key, belongs) in ADAPTIVE_KEYS {
        let Some(span) = span_of(entries, key) else { continue };
        match (&algorithm, belongs) {
            (None, _) => problems.push(
                &span,
                Some(key),
                format!("`{key}` sets an adaptive limit: give `adaptive = \"aimd\"` or `adaptive = \"gradient\"` too"),
            ),
            (Some(algorithm), Some(belongs)) if algorithm != belongs => problems.push(
                &span,
                Some(key),
                format!("`{key}` is a {belongs} limit's key, but this bulkhead's `adaptive` is \"{algorithm}\""),
            ),
            _ => {}
        }
    }
    let algorithm = algorithm?;
    let mut min = 1;
    if let Some((n, span)) = count(entries, "min_concurrent", problems) {
        if n == 0 || n > max {
            let message = format!("`min_concurrent` must be in 1..=max_concurrent ({max}), got {n}");
            problems.push(&span, Some("min_concurrent"), message);
        }
        min = n;
    }
    let mut bounded = |key: &str, ok: fn(f64) -> bool, bounds: &str| {
        let value = number(entries, key, problems)?;
        if !ok(value) {
            let span = span_of(entries, key).unwrap_or_default();
            problems.push(&span, Some(key), format!("`{key}` must be {bounds}, got {value}"));
        }
        Some(value)
    };
    let limit = if algorithm == "aimd" {
        let mut limit = AdaptiveLimit::aimd(min);
        if let Some(ratio) = bounded("backoff_ratio", |v| v > 0.0 && v < 1.0, "in (0, 1)") {
            limit = limit.backoff_ratio(ratio);
        }
        limit
    } else {
        let mut limit = AdaptiveLimit::gradient(min);
        if let Some(t) = bounded("tolerance", |v| v.is_finite() && v >= 1.0, "a number of at least 1") {
            limit = limit.tolerance(t);
        }
        if let Some(s) = bounded("smoothing", |v| v > 0.0 && v <= 1.0, "in (0, 1]") {
            limit = limit.smoothing(s);
        }
        limit
    };
    Some(limit)
}

pub(crate) fn throttle(
    entries: &[Entry<'_>],
    table: &Span,
    problems: &mut Problems<'_>,
) -> Option<ThrottleConfig> {
    let mut config = ThrottleConfig::default();
    let before = problems.len();
    if let Some(k) = number(entries, "k", problems) {
        config.k = k;
    }
    if let Some((d, _)) = millis(entries, "window_ms", problems) {
        config.window = d;
    }
    if let Some((n, _)) = integer(entries, "max_refusal_percent", 100, problems) {
        config.max_refusal_percent = n as u8;
    }
    finish(config.validate().map(|()| config), before, entries, table, problems)
}

pub(crate) fn rate_limit(
    entries: &[Entry<'_>],
    table: &Span,
    problems: &mut Problems<'_>,
) -> Option<RateLimitConfig> {
    let mut config = RateLimitConfig::default();
    let before = problems.len();
    if let Some((n, _)) = count(entries, "per_second", problems) {
        config.per_second = n;
    }
    if let Some((n, _)) = count(entries, "burst", problems) {
        config.burst = n;
    }
    if let Some((d, _)) = millis(entries, "max_wait_ms", problems) {
        config.max_wait = Some(d);
    }
    if let Some((n, _)) = count(entries, "max_keys", problems) {
        config.max_keys = n;
    }
    if let Some((d, _)) = millis(entries, "idle_for_ms", problems) {
        config.idle_for = d;
    }
    finish(config.validate().map(|()| config), before, entries, table, problems)
}
