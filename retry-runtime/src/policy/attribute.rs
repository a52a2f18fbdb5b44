//! A policy from the attribute's arguments, which the macro checked when
//! the function was compiled: built in a `const`, so that each annotated
//! function's policy is a `static`.

use std::borrow::Cow;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::{LoopGuards, Nested, Policy};
use crate::backoff::{Backoff, Jitter};
use crate::guards::{GuardCache, GuardNames};
use crate::hooks::{Hooks, OnRetry, OnStop, RetryEvent, StopEvent};
use crate::registry::PolicyOverrides;
use crate::settings::{Hedge, Settings};

/// The attribute's arguments, checked at compile time by the macro.
///
/// Only the code `#[resilient]` generates builds one.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct AttributeConfig {
    pub operation: &'static str,
    pub max_attempts: u32,
    pub base_ms: u64,
    pub cap_ms: u64,
    pub jitter: Jitter,
    pub factor_milli: u32,
    pub attempt_timeout_ms: Option<u64>,
    pub deadline_ms: Option<u64>,
    pub hedge_after_ms: Option<u64>,
    pub max_hedges: u32,
    pub breaker: Option<&'static str>,
    /// Whether the operation has its own breaker: `breaker` is not named
    /// and not `"none"`.
    pub default_breaker: bool,
    /// Whether `breaker` is a breaker per key (`per = param`).
    pub breaker_per: bool,
    /// Whether `rate_limit` is a rate limit per key (`per = param`).
    pub rate_limit_per: bool,
    /// Whether `bulkhead` is a bulkhead per key (`per = param`).
    pub bulkhead_per: bool,
    pub budget: Option<&'static str>,
    /// Whether the operation has its own budget: `budget` is not named and
    /// not `"none"`.
    pub default_budget: bool,
    pub bulkhead: Option<&'static str>,
    pub throttle: Option<&'static str>,
    pub rate_limit: Option<&'static str>,
    pub nested_retry: bool,
    pub idempotent: bool,
    pub has_key: bool,
    /// `priority = "..."` (see [`Priority`](crate::Priority)).
    pub priority: crate::Priority,
    pub on_retry: Option<fn(&RetryEvent<'_>)>,
    pub on_stop: Option<fn(&StopEvent<'_>)>,
}

const fn millis(ms: Option<u64>) -> Option<Duration> {
    match ms {
        Some(ms) => Some(Duration::from_millis(ms)),
        None => None,
    }
}

const fn borrowed(name: Option<&'static str>) -> Option<Cow<'static, str>> {
    match name {
        Some(name) => Some(Cow::Borrowed(name)),
        None => None,
    }
}

/// The guard a function names, else the operation's own (named after it)
/// unless it said `"none"`.
const fn guard_name(named: Option<&'static str>, own: bool, operation: &'static str) -> Option<&'static str> {
    match (named, own) {
        (Some(name), _) => Some(name),
        (None, true) => Some(operation),
        (None, false) => None,
    }
}

impl Policy {
    /// A policy from the attribute's (compile-time validated) arguments,
    /// usable in a `static`.
    #[doc(hidden)]
    pub const fn from_attribute(cfg: AttributeConfig) -> Policy {
        let budget = guard_name(cfg.budget, cfg.default_budget, cfg.operation);
        let breaker = guard_name(cfg.breaker, cfg.default_breaker, cfg.operation);
        let settings = Settings {
            max_attempts: cfg.max_attempts,
            backoff: Backoff::new(
                Duration::from_millis(cfg.base_ms),
                Duration::from_millis(cfg.cap_ms),
                cfg.jitter,
            )
            .with_factor(cfg.factor_milli),
            attempt_timeout: millis(cfg.attempt_timeout_ms),
            deadline: millis(cfg.deadline_ms),
            hedge: match cfg.hedge_after_ms {
                Some(after) => Some(Hedge { after: Duration::from_millis(after), max: cfg.max_hedges }),
                None => None,
            },
            budget: budget.is_some(),
            breaker: breaker.is_some(),
            priority: cfg.priority,
        };
        let guard_names = GuardNames {
            breaker: borrowed(breaker),
            breaker_by_default: cfg.breaker.is_none() && cfg.default_breaker,
            breaker_per: cfg.breaker_per && cfg.breaker.is_some(),
            rate_limit_per: cfg.rate_limit_per && cfg.rate_limit.is_some(),
            bulkhead_per: cfg.bulkhead_per && cfg.bulkhead.is_some(),
            budget: borrowed(budget),
            budget_by_default: cfg.budget.is_none() && cfg.default_budget,
            bulkhead: borrowed(cfg.bulkhead),
            throttle: borrowed(cfg.throttle),
            rate_limit: borrowed(cfg.rate_limit),
        };
        let per_key = guard_names.per_key();
        Policy {
            operation: Cow::Borrowed(cfg.operation),
            plain_settings: settings.allow_plain_with(cfg.on_stop.is_some(), per_key, cfg.throttle.is_some()),
            plain_start: settings.deadline.is_none() && cfg.on_stop.is_none(),
            per_key,
            hooks: Hooks {
                on_retry: match cfg.on_retry {
                    Some(hook) => Some(OnRetry::Fn(hook)),
                    None => None,
                },
                on_stop: match cfg.on_stop {
                    Some(hook) => Some(OnStop::Fn(hook)),
                    None => None,
                },
            },
            loop_guards: LoopGuards::of(
                breaker.is_some(),
                budget.is_some(),
                cfg.bulkhead.is_some() || cfg.throttle.is_some() || cfg.rate_limit.is_some(),
                settings.times_first_attempt(cfg.on_stop.is_some()),
            ),
            settings,
            idempotent: cfg.idempotent,
            has_key: cfg.has_key,
            overrides: PolicyOverrides::new(),
            guard_names,
            seed: None,
            nested: if cfg.nested_retry { Nested::Retry } else { Nested::Once },
            streams: AtomicU64::new(0),
            cache: GuardCache::new(
                breaker.is_some()
                    || budget.is_some()
                    || cfg.bulkhead.is_some()
                    || cfg.throttle.is_some()
                    || cfg.rate_limit.is_some(),
            ),
        }
    }
}

#[cfg(test)]
impl AttributeConfig {
    /// What `#[resilient]` with no arguments compiles to, named `operation`.
    pub(crate) const fn bare(operation: &'static str) -> Self {
        AttributeConfig {
            operation,
            max_attempts: 4,
            base_ms: 100,
            cap_ms: 20_000,
            jitter: Jitter::Full,
            factor_milli: crate::backoff::DOUBLING,
            attempt_timeout_ms: None,
            deadline_ms: None,
            hedge_after_ms: None,
            max_hedges: 1,
            breaker: None,
            default_breaker: true,
            breaker_per: false,
            rate_limit_per: false,
            bulkhead_per: false,
            budget: None,
            default_budget: true,
            bulkhead: None,
            throttle: None,
            rate_limit: None,
            nested_retry: false,
            priority: crate::Priority::Default,
            idempotent: true,
            has_key: false,
            on_retry: None,
            on_stop: None,
        }
    }
}
