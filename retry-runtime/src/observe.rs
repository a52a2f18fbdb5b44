//! Traces and metrics: every retry, every stop and every breaker transition
//! is visible.
//!
//! `tracing` (always on): a span per call named `stormproof.call` with the
//! operation's name; a `DEBUG` event per retry (attempt, wait, error class);
//! an event per stop that gives up (why); an event per breaker transition
//! (name, from, to; opening is a `WARN`); a `DEBUG` event per hedge, per
//! fallback, per local refusal by a throttle or a rate limiter, and per
//! move of an adaptive bulkhead limit.
//!
//! With the `metrics` feature, through the `metrics` crate (labels are only
//! operation and registry names, so cardinality stays bounded):
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `stormproof_retries_total` | counter | `operation`, `class` |
//! | `stormproof_stops_total` | counter | `operation`, `reason`, `priority` |
//! | `stormproof_breaker_transitions_total` | counter | `breaker`, `from`, `to` |
//! | `stormproof_breaker_state` | gauge (0 closed, 1 open, 2 half-open) | `breaker` |
//! | `stormproof_budget_available` | gauge | `budget` |
//! | `stormproof_bulkhead_in_use` | gauge | `bulkhead` |
//! | `stormproof_bulkhead_limit` | gauge (an adaptive limit, as it moves) | `bulkhead` |
//! | `stormproof_hedges_total` | counter | `operation` |
//! | `stormproof_fallbacks_total` | counter | `operation` |
//! | `stormproof_throttle_refusals_total` | counter | `throttle` |
//! | `stormproof_throttle_refusal_probability` | gauge | `throttle` |
//! | `stormproof_rate_limited_total` | counter (refusals) | `limiter` |
//!
//! The Redis fleet's metrics (`stormproof_fleet_*`) are its crate's
//! (`stormproof::fleet`, its `observe` module).
//!
//! This module is a leaf: it takes plain names and labels, so every other
//! module may report through it without it knowing their types.

use std::time::Duration;

/// The tracing targets of the library's events and spans, one per concern,
/// all under `stormproof` so that `RUST_LOG=stormproof=debug` shows every
/// one of them, and `stormproof::breaker=info` one concern alone. They do
/// not follow the modules (a module can move; a target users filter on
/// should not).
pub(crate) mod target {
    /// A call: its span, retries, stops, hedges, fallbacks, nesting.
    pub(crate) const CALL: &str = "stormproof::call";
    /// Breaker transitions and their hooks.
    pub(crate) const BREAKER: &str = "stormproof::breaker";
    /// Local refusals by an adaptive throttle.
    pub(crate) const THROTTLE: &str = "stormproof::throttle";
    /// Refusals and waits of a rate limit.
    pub(crate) const RATE_LIMIT: &str = "stormproof::rate_limit";
    /// Moves of an adaptive bulkhead limit.
    pub(crate) const BULKHEAD: &str = "stormproof::bulkhead";
    /// Guards used but never declared, and what else the registry says.
    pub(crate) const REGISTRY: &str = "stormproof::registry";
    /// The tower layer and the reqwest middleware.
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    pub(crate) const HTTP: &str = "stormproof::http";
}

/// Milliseconds for a trace field, saturating (a server's `Retry-After` can
/// make a wait longer than `u64::MAX` ms).
fn millis(wait: Duration) -> u64 {
    u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)
}

// Inline: without a subscriber at DEBUG and without `metrics`, one test.
#[inline]
pub(crate) fn retry(operation: &str, attempt: u32, wait: Duration, class: &'static str) {
    tracing::debug!(target: target::CALL, operation, attempt, wait_ms = millis(wait), class, "retrying");
    #[cfg(feature = "metrics")]
    metrics::counter!("stormproof_retries_total", "operation" => operation.to_owned(), "class" => class)
        .increment(1);
}

pub(crate) fn stop(operation: &str, attempts: u32, reason: &'static str, priority: &'static str) {
    tracing::debug!(target: target::CALL, operation, attempts, reason, priority, "giving up");
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "stormproof_stops_total",
        "operation" => operation.to_owned(),
        "reason" => reason,
        "priority" => priority
    )
    .increment(1);
}

pub(crate) fn retries_suppressed(operation: &str, max_attempts: u32) {
    tracing::debug!(target: target::CALL,
        operation,
        max_attempts,
        "nested inside another resilient call's attempt: making a single attempt so retries do not multiply"
    );
}

/// A hedged call nested in another call's attempt makes its attempt without hedges.
#[cold]
pub(crate) fn hedging_suppressed(operation: &str) {
    tracing::debug!(target: target::CALL,
        operation,
        "nested inside another resilient call's attempt: no hedges, so requests do not multiply"
    );
}

/// Which breaker an event is about: its name, and for one of a breaker
/// per key ([`KeyedBreakers`](crate::breaker::KeyedBreakers)), its key
/// (for traces, whole) and the key's metrics label (bounded: the key
/// itself for the first `max_keys` keys a set labels, `other` after).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BreakerId<'a> {
    pub(crate) name: &'a str,
    pub(crate) key: Option<(&'a str, &'a str)>,
}

impl BreakerId<'_> {
    /// The key, for traces (empty for a breaker of one name).
    fn key(&self) -> &str {
        self.key.map_or("", |(key, _)| key)
    }

    #[cfg(feature = "metrics")]
    fn labels(&self) -> Vec<metrics::Label> {
        guard_labels("breaker", self.name, self.key.map(|(_, label)| label))
    }
}

/// A guard's metrics labels: its kind's label with its name, and for one
/// key's guard, `key` with the key's (bounded) label.
#[cfg(feature = "metrics")]
fn guard_labels(kind: &'static str, name: &str, key: Option<&str>) -> Vec<metrics::Label> {
    let mut labels = vec![metrics::Label::new(kind, name.to_owned())];
    if let Some(key) = key {
        labels.push(metrics::Label::new("key", key.to_owned()));
    }
    labels
}

/// A breaker went from `from` to `to` (`closed`, `open` or `half_open`).
pub(crate) fn breaker_transition(breaker: BreakerId<'_>, from: &'static str, to: &'static str) {
    let (name, key) = (breaker.name, breaker.key());
    if to == "open" {
        tracing::warn!(target: target::BREAKER, breaker = name, key, from, to, "circuit breaker opened");
    } else {
        tracing::info!(target: target::BREAKER, breaker = name, key, from, to, "circuit breaker transition");
    }
    #[cfg(feature = "metrics")]
    {
        let mut labels = breaker.labels();
        labels.push(metrics::Label::new("from", from));
        labels.push(metrics::Label::new("to", to));
        metrics::counter!("stormproof_breaker_transitions_total", labels).increment(1);
    }
    breaker_state(breaker, to);
}

/// A breaker judged an attempt's success slow (see
/// `BreakerConfig::slow_call_duration`).
pub(crate) fn slow_call(breaker: BreakerId<'_>) {
    #[cfg(feature = "metrics")]
    metrics::counter!("stormproof_breaker_slow_calls_total", breaker.labels()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = breaker;
}

/// A breaker's state gauge: set when it is made (closed), so that a
/// dashboard reads a breaker that never moved as closed rather than as
/// missing, and at every transition.
pub(crate) fn breaker_state(breaker: BreakerId<'_>, state: &'static str) {
    #[cfg(feature = "metrics")]
    {
        let level = match state {
            "closed" => 0.0,
            "open" => 1.0,
            _ => 2.0,
        };
        metrics::gauge!("stormproof_breaker_state", breaker.labels()).set(level);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (breaker, state);
}

/// Logs a transition hook's panic, with its message when it has one
/// (`panic!` with a literal or a format gives a `&str` or a `String`).
pub(crate) fn transition_hook_panicked(
    breaker: BreakerId<'_>,
    from: &'static str,
    to: &'static str,
    panic: &(dyn std::any::Any + Send),
) {
    let message = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)");
    tracing::error!(target: target::BREAKER,
        breaker = breaker.name,
        key = breaker.key(),
        from,
        to,
        panic = message,
        "a breaker transition hook panicked; the other hooks still ran"
    );
}

/// Sets a budget's `stormproof_budget_available` gauge. The level is worked
/// out only when the gauge exists: for a ratio budget it takes the window's
/// lock and a clock read, which a build without metrics never needs.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn budget_level(name: &str, available: impl FnOnce() -> u32) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("stormproof_budget_available", "budget" => name.to_owned()).set(f64::from(available()));
}

/// The key of a bulkhead's `stormproof_bulkhead_in_use` gauge, made once per
/// bulkhead: the gauge is set twice per attempt (a place taken, a place given
/// back), and the `gauge!` macro would build its key, label string included,
/// on the heap each time, with or without a recorder to hear it.
#[cfg(feature = "metrics")]
/// `key`: the key's label, for a bulkhead per key (bounded as a breaker's).
pub(crate) fn bulkhead_key(name: &str, key: Option<&str>) -> metrics::Key {
    metrics::Key::from_parts("stormproof_bulkhead_in_use", guard_labels("bulkhead", name, key))
}

#[cfg(feature = "metrics")]
pub(crate) fn bulkhead_level(key: &metrics::Key, in_use: usize) {
    // What `gauge!` does, with the key made beforehand.
    static METADATA: metrics::Metadata<'static> =
        metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));
    metrics::with_recorder(|recorder| recorder.register_gauge(key, &METADATA)).set(in_use as f64);
}

/// A hedge started beside the attempt `attempt` of a call (the `hedge`th of its round).
pub(crate) fn hedge(operation: &str, attempt: u32, hedge: u32) {
    tracing::debug!(target: target::CALL, operation, attempt, hedge, "hedging: another attempt beside a slow one");
    #[cfg(feature = "metrics")]
    metrics::counter!("stormproof_hedges_total", "operation" => operation.to_owned()).increment(1);
}

/// A call failed and its fallback runs instead.
pub(crate) fn fallback(operation: &str) {
    tracing::debug!(target: target::CALL, operation, "falling back");
    #[cfg(feature = "metrics")]
    metrics::counter!("stormproof_fallbacks_total", "operation" => operation.to_owned()).increment(1);
}

/// A throttle refused a request locally, with this probability.
pub(crate) fn throttle_refusal(name: &str, probability: f64) {
    tracing::debug!(target: target::THROTTLE, throttle = name, probability, "throttled locally");
    #[cfg(feature = "metrics")]
    metrics::counter!("stormproof_throttle_refusals_total", "throttle" => name.to_owned()).increment(1);
}

/// A throttle's refusal probability changed from zero, or to it, or while above it.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn throttle_probability(name: &str, probability: f64) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("stormproof_throttle_refusal_probability", "throttle" => name.to_owned())
        .set(probability);
}

/// A rate limiter refused an attempt that would have waited `wait`.
/// `key`: the key's label, for a limit per key (bounded as a breaker's).
pub(crate) fn rate_limited(name: &str, key: Option<&str>, wait: Duration) {
    tracing::debug!(target: target::RATE_LIMIT, limiter = name, key = key.unwrap_or_default(), wait_ms = millis(wait), "over the rate limit");
    #[cfg(feature = "metrics")]
    metrics::counter!("stormproof_rate_limited_total", guard_labels("limiter", name, key)).increment(1);
}

/// An adaptive bulkhead limit moved.
pub(crate) fn bulkhead_limit(name: &str, from: u32, to: u32) {
    tracing::debug!(target: target::BULKHEAD, bulkhead = name, from, to, "adaptive concurrency limit moved");
    #[cfg(feature = "metrics")]
    metrics::gauge!("stormproof_bulkhead_limit", "bulkhead" => name.to_owned()).set(f64::from(to));
}

/// A hook (`on_retry`, `on_stop`) panicked: the call went on without it.
#[cold]
pub(crate) fn hook_panicked(operation: &str, hook: &'static str) {
    tracing::warn!(target: target::CALL, operation, hook, "a hook panicked; the call goes on as if it had returned");
}
