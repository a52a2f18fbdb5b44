//! What a reload changed.

use std::fmt;
use std::time::Duration;

use crate::breaker::BreakerConfig;
use crate::budget::BudgetConfig;
use crate::bulkhead::BulkheadConfig;
use crate::rate_limit::RateLimitConfig;
use crate::settings::Settings;
use crate::throttle::ThrottleConfig;

/// What a reload changed, one entry per guard or operation, and what a
/// guard refused.
///
/// Its `Display` is one line per change, then one per refusal, for the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReloadReport {
    /// Each change, in the order of the file's sections.
    pub changes: Vec<Change>,
    /// Each guard that refused the file's settings as they were applied,
    /// and kept its own; the rest of the file was applied. The file's
    /// checks ask the guards first, before anything is applied, for every
    /// rule they are known to enforce (a fleet's rule too: a join waits
    /// for a file being applied), so this is empty unless a guard refuses
    /// something no check foresaw: then it is said, not taken for no change.
    pub refused: Vec<Refusal>,
}

/// A guard's refusal of the file's settings (see [`ReloadReport::refused`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal {
    /// `breaker`, `budget`, `bulkhead`, `throttle` or `rate limit`.
    pub kind: &'static str,
    /// Its name.
    pub name: String,
    /// The file's key that was refused (`success_threshold`).
    pub field: String,
    /// Why, in one sentence.
    pub problem: String,
}

/// One guard's or operation's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `breaker`, `budget`, `bulkhead`, `throttle`, `rate limit` or `operation`.
    pub kind: &'static str,
    /// Its name.
    pub name: String,
    /// What changed: `declared`, `override removed`, or `key old -> new` per key.
    pub details: Vec<String>,
}

impl ReloadReport {
    /// Whether the reload changed nothing, and no guard refused anything.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.refused.is_empty()
    }
}

impl fmt::Display for ReloadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("nothing changed");
        }
        let changes =
            self.changes.iter().map(|c| format!("{} `{}`: {}", c.kind, c.name, c.details.join(", ")));
        let refused = self.refused.iter().map(|r| {
            format!("{} `{}`: refused, settings unchanged: `{}` {}", r.kind, r.name, r.field, r.problem)
        });
        f.write_str(&changes.chain(refused).collect::<Vec<_>>().join("\n"))
    }
}

impl ReloadReport {
    pub(super) fn push(&mut self, kind: &'static str, name: &str, details: Option<Vec<String>>) {
        if let Some(details) = details.filter(|d| !d.is_empty()) {
            self.changes.push(Change { kind, name: name.to_owned(), details });
        }
    }
}

/// `key old -> new` for each key that differs.
fn changes(pairs: &[(&str, String, String)]) -> Vec<String> {
    pairs
        .iter()
        .filter(|(_, old, new)| old != new)
        .map(|(key, old, new)| format!("{key} {old} -> {new}"))
        .collect()
}

fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

fn maybe<T>(value: Option<T>, show: impl Fn(T) -> String) -> String {
    value.map_or_else(|| "none".to_owned(), show)
}

pub(super) fn breaker_diff(old: &BreakerConfig, new: &BreakerConfig) -> Vec<String> {
    changes(&[
        ("failure_threshold", old.failure_threshold.to_string(), new.failure_threshold.to_string()),
        ("window_ms", ms(old.window), ms(new.window)),
        ("open_for_ms", ms(old.open_for), ms(new.open_for)),
        ("max_open_for_ms", ms(old.max_open_for), ms(new.max_open_for)),
        ("success_threshold", old.success_threshold.to_string(), new.success_threshold.to_string()),
        ("half_open_max_calls", old.half_open_max_calls.to_string(), new.half_open_max_calls.to_string()),
        (
            "failure_rate_percent",
            maybe(old.failure_rate_percent, |p| p.to_string()),
            maybe(new.failure_rate_percent, |p| p.to_string()),
        ),
        ("minimum_calls", old.minimum_calls.to_string(), new.minimum_calls.to_string()),
        (
            "window_calls",
            maybe(old.window_calls, |n| n.to_string()),
            maybe(new.window_calls, |n| n.to_string()),
        ),
        ("slow_call_ms", maybe(old.slow_call_duration, ms), maybe(new.slow_call_duration, ms)),
        (
            "slow_call_rate_percent",
            maybe(old.slow_call_rate_percent, |p| p.to_string()),
            maybe(new.slow_call_rate_percent, |p| p.to_string()),
        ),
        ("max_keys", old.max_keys.to_string(), new.max_keys.to_string()),
        ("idle_for_ms", ms(old.idle_for), ms(new.idle_for)),
    ])
}

pub(super) fn budget_diff(old: &BudgetConfig, new: &BudgetConfig) -> Vec<String> {
    match (old, new) {
        (BudgetConfig::TokenBucket(old), BudgetConfig::TokenBucket(new)) => changes(&[
            ("capacity", old.capacity.to_string(), new.capacity.to_string()),
            ("retry_cost", old.retry_cost.to_string(), new.retry_cost.to_string()),
            ("refill_per_success", old.refill_per_success.to_string(), new.refill_per_success.to_string()),
            (
                "timeout_cost",
                maybe(old.timeout_cost, |c| c.to_string()),
                maybe(new.timeout_cost, |c| c.to_string()),
            ),
            (
                "throttled_cost",
                maybe(old.throttled_cost, |c| c.to_string()),
                maybe(new.throttled_cost, |c| c.to_string()),
            ),
            ("refund_on_success", old.refund_on_success.to_string(), new.refund_on_success.to_string()),
        ]),
        (BudgetConfig::RetryThrottling(old), BudgetConfig::RetryThrottling(new)) => changes(&[
            ("max_tokens", old.max_tokens.to_string(), new.max_tokens.to_string()),
            ("token_ratio", old.token_ratio.to_string(), new.token_ratio.to_string()),
        ]),
        (BudgetConfig::Ratio(old), BudgetConfig::Ratio(new)) => changes(&[
            ("ratio", old.ratio.to_string(), new.ratio.to_string()),
            ("window_ms", ms(old.window), ms(new.window)),
            ("min_per_sec", old.min_per_sec.to_string(), new.min_per_sec.to_string()),
        ]),
        (old, new) => vec![format!("form {} -> {}", old.form(), new.form())],
    }
}

pub(super) fn bulkhead_diff(old: &BulkheadConfig, new: &BulkheadConfig) -> Vec<String> {
    changes(&[
        ("max_concurrent", old.max_concurrent.to_string(), new.max_concurrent.to_string()),
        ("max_wait_ms", maybe(old.max_wait, ms), maybe(new.max_wait, ms)),
        ("adaptive", maybe(old.adaptive, |a| a.to_string()), maybe(new.adaptive, |a| a.to_string())),
        ("max_keys", old.max_keys.to_string(), new.max_keys.to_string()),
        ("idle_for_ms", ms(old.idle_for), ms(new.idle_for)),
    ])
}

pub(super) fn throttle_diff(old: &ThrottleConfig, new: &ThrottleConfig) -> Vec<String> {
    changes(&[
        ("k", old.k.to_string(), new.k.to_string()),
        ("window_ms", ms(old.window), ms(new.window)),
        ("max_refusal_percent", old.max_refusal_percent.to_string(), new.max_refusal_percent.to_string()),
    ])
}

/// Only `max_wait_ms` can change: the quota is checked before.
pub(super) fn rate_limit_diff(old: &RateLimitConfig, new: &RateLimitConfig) -> Vec<String> {
    changes(&[
        ("max_wait_ms", maybe(old.max_wait, ms), maybe(new.max_wait, ms)),
        ("max_keys", old.max_keys.to_string(), new.max_keys.to_string()),
        ("idle_for_ms", ms(old.idle_for), ms(new.idle_for)),
    ])
}

pub(super) fn settings_diff(old: &Settings, new: &Settings) -> Vec<String> {
    changes(&[
        ("max_attempts", old.max_attempts.to_string(), new.max_attempts.to_string()),
        ("base_ms", ms(old.backoff.base), ms(new.backoff.base)),
        ("cap_ms", ms(old.backoff.cap), ms(new.backoff.cap)),
        ("factor", old.backoff.factor().to_string(), new.backoff.factor().to_string()),
        ("jitter", old.backoff.jitter.to_string(), new.backoff.jitter.to_string()),
        ("attempt_timeout_ms", maybe(old.attempt_timeout, ms), maybe(new.attempt_timeout, ms)),
        ("deadline_ms", maybe(old.deadline, ms), maybe(new.deadline, ms)),
        ("budget", on_or_none(old.budget).to_owned(), on_or_none(new.budget).to_owned()),
        ("breaker", on_or_none(old.breaker).to_owned(), on_or_none(new.breaker).to_owned()),
        ("priority", old.priority.to_string(), new.priority.to_string()),
    ])
}

/// How an operation's `budget` or `breaker` reads in a report: in use, or `"none"`.
fn on_or_none(used: bool) -> &'static str {
    if used { "on" } else { "none" }
}
