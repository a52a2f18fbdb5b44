//! [`PolicyBuilder`]: every setting of a [`Policy`], checked by `build`.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::{LoopGuards, MAX_ATTEMPTS_LIMIT, Nested, Policy, Settings};
use crate::backoff::{Backoff, Jitter};
use crate::breaker::NO_BREAKER;
use crate::budget::NO_BUDGET;
use crate::config::ConfigError;
use crate::guards::{GuardCache, GuardNames};
use crate::hooks::{Hooks, OnRetry, OnStop, RetryEvent, StopEvent};
use crate::registry::{GuardKind, PolicyOverrides};
use crate::settings::Hedge;

/// Builds a [`Policy`]; [`build`](Self::build) checks every setting.
///
/// | setting | default |
/// |---|---|
/// | `max_attempts` | 4 (1..=100; 1 never retries) |
/// | `base` | 100 ms |
/// | `cap` | 20 s (must be >= `base`) |
/// | `jitter` | [`Jitter::Full`] |
/// | `attempt_timeout` | none (must be > 0 and < `deadline`) |
/// | `deadline` | none (must be > 0) |
/// | `breaker`, `budget`, `bulkhead`, `throttle`, `rate_limit` | none (names in the registry in effect) |
/// | `hedge` | none (`after` > 0, `max` in 1..=3) |
/// | `seed` | none (the registry's seed, else entropy) |
/// | `nested` | [`Nested::Once`] |
/// | `name` | where `Policy::builder()` was called, `src/orders.rs:42` (must not be empty) |
///
/// Durations too long to represent as an instant (such as
/// `Duration::MAX`) are accepted and mean "never": such a deadline or
/// attempt timeout never fires.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::Policy;
/// let err = Policy::builder().base(Duration::from_secs(2)).cap(Duration::from_secs(1)).build().unwrap_err();
/// assert_eq!(err.field, "base");
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct PolicyBuilder {
    pub(super) operation: Cow<'static, str>,
    pub(super) max_attempts: u32,
    pub(super) base: Duration,
    pub(super) cap: Duration,
    pub(super) jitter: Jitter,
    /// As given: checked (and kept in thousandths) by `build`.
    pub(super) factor: f64,
    pub(super) attempt_timeout: Option<Duration>,
    pub(super) deadline: Option<Duration>,
    pub(super) hedge: Option<Hedge>,
    pub(super) priority: crate::Priority,
    pub(super) guard_names: GuardNames,
    pub(super) seed: Option<u64>,
    pub(super) nested: Nested,
    pub(super) hooks: Hooks,
}

/// The defaults, shared with the attribute (its test checks they agree).
pub(crate) const DEFAULT_MAX_ATTEMPTS: u32 = 4;
pub(crate) const DEFAULT_BASE: Duration = Duration::from_millis(100);
pub(crate) const DEFAULT_CAP: Duration = Duration::from_secs(20);

/// A builder with every default, named after the place it is called from
/// (see [`Policy::builder`]).
impl Default for PolicyBuilder {
    #[track_caller]
    fn default() -> Self {
        let at = std::panic::Location::caller();
        PolicyBuilder {
            operation: Cow::Owned(format!("{}:{}", at.file(), at.line())),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            base: DEFAULT_BASE,
            cap: DEFAULT_CAP,
            jitter: Jitter::Full,
            factor: 2.0,
            attempt_timeout: None,
            deadline: None,
            hedge: None,
            priority: crate::Priority::Default,
            guard_names: GuardNames {
                budget_by_default: true,
                breaker_by_default: true,
                ..GuardNames::default()
            },
            seed: None,
            nested: Nested::Once,
            hooks: Hooks::NONE,
        }
    }
}

impl PolicyBuilder {
    /// The operation's name in traces, metrics and hooks; without one, the
    /// place `Policy::builder()` was called from (`src/orders.rs:42`).
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.operation = name.into();
        self
    }

    /// Attempts in all, the first included (1..=100).
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// The first wait before jitter.
    pub fn base(mut self, base: Duration) -> Self {
        self.base = base;
        self
    }

    /// The longest wait before jitter.
    pub fn cap(mut self, cap: Duration) -> Self {
        self.cap = cap;
        self
    }

    /// How waits are randomised.
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// How much the calls matter when a guard is saturated: a saturated
    /// bulkhead, rate limit or throttle refuses [`Sheddable`] calls first
    /// and [`Critical`] ones last (see [`crate::priority`]). Default:
    /// [`Priority::Default`](crate::Priority::Default).
    ///
    /// [`Sheddable`]: crate::Priority::Sheddable
    /// [`Critical`]: crate::Priority::Critical
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::{Policy, Priority};
    /// let prefetch = Policy::builder().name("prefetch").priority(Priority::Sheddable).build().unwrap();
    /// assert_eq!(prefetch.settings().priority, Priority::Sheddable);
    /// ```
    pub fn priority(mut self, priority: crate::Priority) -> Self {
        self.priority = priority;
        self
    }

    /// How much each wait grows: 2 (the default) doubles it, 1.5 grows it
    /// by half; 1.0..=10.0, with at most three decimals (see
    /// [`Backoff`](crate::backoff::Backoff) for the exact formula of each
    /// jitter).
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::time::Duration;
    /// let policy = stormproof::Policy::builder().base(Duration::from_millis(100)).factor(1.5).build().unwrap();
    /// assert_eq!(policy.backoff().exp(2), Duration::from_millis(225));
    /// let err = stormproof::Policy::builder().factor(0.5).build().unwrap_err();
    /// assert_eq!(err.field, "factor");
    /// ```
    pub fn factor(mut self, factor: f64) -> Self {
        self.factor = factor;
        self
    }

    /// Cancels each attempt (drops its future) after this long; the attempt
    /// then fails with the transient
    /// [`Rejection::AttemptTimeout`](crate::Rejection::AttemptTimeout).
    /// Timed from its admission; a plain first attempt without a deadline,
    /// from when it first waits (one answered at once reads no clock).
    pub fn attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = Some(timeout);
        self
    }

    /// The whole call, waits included, ends by this long after it starts.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Guards every attempt with the named circuit breaker instead of the
    /// operation's own; [`NO_BREAKER`] (`"none"`) for no breaker at all.
    ///
    /// Every operation has a breaker unless it says otherwise: without
    /// this, the registry's breaker named after the operation (see
    /// [`Policy::has_default_breaker`]), which opens when half of the last
    /// 100 attempts failed ([`BreakerConfig::per_operation`](crate::breaker::BreakerConfig::per_operation)),
    /// so that a dependency that is down, or so slow that every attempt
    /// times out, is given time to recover.
    pub fn breaker(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        let name = name.into();
        self.guard_names.breaker_by_default = false;
        self.guard_names.breaker = (name != NO_BREAKER).then_some(name);
        self.guard_names.breaker_per = false;
        self
    }

    /// Pays for retries from the named retry budget instead of the
    /// operation's own; [`NO_BUDGET`] (`"none"`) for no budget at all.
    ///
    /// Every operation has a budget unless it says otherwise: without this,
    /// the registry's budget named after the operation (see
    /// [`Policy::has_default_budget`]), so that retries stay a share of the
    /// operation's traffic (10 % over 10 s, and at least 10 a second, by
    /// default) and a failing dependency is not sent a storm.
    pub fn budget(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        let name = name.into();
        self.guard_names.budget_by_default = false;
        self.guard_names.budget = (name != NO_BUDGET).then_some(name);
        self
    }

    /// Limits concurrent attempts with the named bulkhead.
    pub fn bulkhead(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.guard_names.bulkhead = Some(name.into());
        self.guard_names.bulkhead_per = false;
        self
    }

    /// Refuses attempts locally with the named client-side throttle while
    /// the dependency refuses most of what it is sent (see [`Throttle`](crate::throttle::Throttle)).
    pub fn throttle(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.guard_names.throttle = Some(name.into());
        self
    }

    /// Paces attempts with the named rate limiter (see [`RateLimit`](crate::rate_limit::RateLimit)).
    pub fn rate_limit(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.guard_names.rate_limit = Some(name.into());
        self.guard_names.rate_limit_per = false;
        self
    }

    /// Starts another attempt beside one that has not finished `after` it
    /// started, up to `max` more (1..=3); the first success wins (see
    /// [`Hedge`]). [`Policy::run`] runs the attempts of a round side by side.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::time::Duration;
    /// use stormproof::Policy;
    /// let policy = Policy::builder().hedge(Duration::from_millis(50), 2).build().unwrap();
    /// assert_eq!(policy.settings().hedge.unwrap().max, 2);
    /// assert_eq!(Policy::builder().hedge(Duration::from_millis(50), 4).build().unwrap_err().field, "max_hedges");
    /// ```
    pub fn hedge(mut self, after: Duration, max: u32) -> Self {
        self.hedge = Some(Hedge { after, max });
        self
    }

    /// Makes the jitter of this policy's calls reproducible.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// What a call nested in another resilient call's attempt does.
    pub fn nested(mut self, nested: Nested) -> Self {
        self.nested = nested;
        self
    }

    /// Calls `hook` once per retry, before its wait, with the failed
    /// attempt, its error's class, the wait and, where the error type
    /// allows it, the error (see [`hooks`](crate::hooks)). Never on
    /// success; a panic in it is caught and the call goes on.
    pub fn on_retry(mut self, hook: impl Fn(&RetryEvent<'_>) + Send + Sync + 'static) -> Self {
        self.hooks.on_retry = Some(OnRetry::Shared(Arc::new(hook)));
        self
    }

    /// Calls `hook` once per call that gives up, with why, the attempts it
    /// made and the time it took (see [`hooks`](crate::hooks)). Never on
    /// success; a panic in it is caught and the call's error is returned.
    pub fn on_stop(mut self, hook: impl Fn(&StopEvent<'_>) + Send + Sync + 'static) -> Self {
        self.hooks.on_stop = Some(OnStop::Shared(Arc::new(hook)));
        self
    }

    /// Checks every setting; the error names the first invalid field.
    pub fn build(self) -> Result<Policy, ConfigError> {
        if !(1..=MAX_ATTEMPTS_LIMIT).contains(&self.max_attempts) {
            return Err(ConfigError::new(
                "max_attempts",
                format!("must be in 1..={MAX_ATTEMPTS_LIMIT}, got {}", self.max_attempts),
            ));
        }
        if self.base > self.cap {
            // As the attribute says it: a `cap` alone below the default
            // base is the usual way here, and the base was never given.
            let default =
                if self.base == DEFAULT_BASE { " (the default base: set a lower `base` too)" } else { "" };
            return Err(ConfigError::new(
                "base",
                format!("must not exceed `cap` ({:?}), got {:?}{default}", self.cap, self.base),
            ));
        }
        Backoff::validate_factor(factor_milli(self.factor)?)?;
        if self.attempt_timeout.is_some_and(|t| t.is_zero()) {
            return Err(ConfigError::new("attempt_timeout", "must be greater than zero"));
        }
        if self.deadline.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new("deadline", "must be greater than zero"));
        }
        if let (Some(timeout), Some(deadline)) = (self.attempt_timeout, self.deadline) {
            // On a tie the deadline wins, so an equal timeout could never fire either.
            if timeout >= deadline {
                return Err(ConfigError::new(
                    "attempt_timeout",
                    format!(
                        "must be less than the deadline ({deadline:?}), got {timeout:?}: the deadline would always end the attempt first"
                    ),
                ));
            }
        }
        if let Some(hedge) = &self.hedge {
            hedge.validate()?;
        }
        // The attribute refuses `name = ""`: an empty operation name labels
        // traces and metrics with nothing, and no override can name it.
        if self.operation.trim().is_empty() {
            return Err(ConfigError::new("name", "the name must not be empty"));
        }
        for kind in GuardKind::ALL {
            if self.guard_names.get(kind).is_some_and(|n| n.trim().is_empty()) {
                return Err(ConfigError::new(kind.label(), "the name must not be empty"));
            }
        }
        Ok(self.into_policy())
    }

    pub(super) fn into_policy(mut self) -> Policy {
        self.guard_names = std::mem::take(&mut self.guard_names).with_own_named(self.operation.clone());
        let named = !self.guard_names.is_empty();
        let settings = Settings {
            max_attempts: self.max_attempts,
            // Checked by `build`; `to_builder` gives back a valid one.
            backoff: Backoff::new(self.base, self.cap, self.jitter)
                .with_factor(factor_milli(self.factor).unwrap_or(crate::backoff::DOUBLING)),
            attempt_timeout: self.attempt_timeout,
            deadline: self.deadline,
            hedge: self.hedge,
            budget: self.guard_names.budget.is_some(),
            breaker: self.guard_names.breaker.is_some(),
            priority: self.priority,
        };
        let (on_stop, per_key) = (self.hooks.on_stop.is_some(), self.guard_names.per_key());
        let loop_guards = LoopGuards::of(
            self.guard_names.breaker.is_some(),
            self.guard_names.budget.is_some(),
            self.guard_names.bulkhead.is_some()
                || self.guard_names.throttle.is_some()
                || self.guard_names.rate_limit.is_some(),
            settings.times_first_attempt(on_stop),
        );
        Policy {
            operation: self.operation,
            plain_settings: settings.allow_plain_with(on_stop, per_key, self.guard_names.throttle.is_some()),
            plain_start: settings.deadline.is_none() && !on_stop,
            per_key,
            hooks: self.hooks,
            loop_guards,
            settings,
            guard_names: self.guard_names,
            idempotent: true,
            has_key: false,
            overrides: PolicyOverrides::new(),
            seed: self.seed,
            nested: self.nested,
            streams: AtomicU64::new(0),
            cache: GuardCache::new(named),
        }
    }
}

/// A growth factor as given (`1.5`) in thousandths (`1500`): refused when
/// it is not a number or has more than three decimals, which the curve
/// would otherwise round without a word.
pub(crate) fn factor_milli(factor: f64) -> Result<u32, ConfigError> {
    let milli = (factor * 1000.0).round();
    if !factor.is_finite()
        || (milli / 1000.0 - factor).abs() > 1e-9
        || !(0.0..=f64::from(u32::MAX)).contains(&milli)
    {
        return Err(ConfigError::new(
            "factor",
            format!("must be a number in 1.0..=10.0 with at most three decimals, got {factor}"),
        ));
    }
    // In range and whole: the cast is exact.
    Ok(milli as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_setting_names_its_field() {
        let ms = Duration::from_millis;
        let cases = [
            (Policy::builder().max_attempts(0), "max_attempts"),
            (Policy::builder().max_attempts(101), "max_attempts"),
            (Policy::builder().base(ms(10)).cap(ms(5)), "base"),
            (Policy::builder().attempt_timeout(ms(0)), "attempt_timeout"),
            (Policy::builder().deadline(ms(0)), "deadline"),
            (Policy::builder().attempt_timeout(ms(20)).deadline(ms(10)), "attempt_timeout"),
            (Policy::builder().breaker(""), "breaker"),
            (Policy::builder().budget(" "), "budget"),
            (Policy::builder().bulkhead(""), "bulkhead"),
            (Policy::builder().throttle(""), "throttle"),
            (Policy::builder().rate_limit(" "), "rate_limit"),
            (Policy::builder().hedge(ms(0), 1), "hedge_after"),
            (Policy::builder().hedge(ms(10), 0), "max_hedges"),
            (Policy::builder().name(""), "name"),
            (Policy::builder().factor(0.5), "factor"),
            (Policy::builder().factor(10.5), "factor"),
            (Policy::builder().factor(1.2345), "factor"),
            (Policy::builder().factor(f64::NAN), "factor"),
            (Policy::builder().name("  "), "name"),
        ];
        for (builder, field) in cases {
            let err = builder.build().unwrap_err();
            assert_eq!(err.field, field, "{err}");
        }
        assert!(Policy::builder().max_attempts(100).build().is_ok());
        assert!(Policy::builder().max_attempts(1).base(ms(0)).cap(ms(0)).build().is_ok());
    }

    #[test]
    fn a_cap_alone_below_the_default_base_says_the_base_is_the_default() {
        let ms = Duration::from_millis;
        let alone = Policy::builder().cap(ms(50)).build().unwrap_err();
        assert_eq!(
            alone.to_string(),
            "invalid `base`: must not exceed `cap` (50ms), got 100ms (the default base: set a lower `base` too)"
        );
        let given = Policy::builder().base(ms(80)).cap(ms(50)).build().unwrap_err();
        assert_eq!(given.to_string(), "invalid `base`: must not exceed `cap` (50ms), got 80ms");
    }

    #[test]
    fn an_attempt_timeout_equal_to_the_deadline_is_refused_as_the_attribute_refuses_it() {
        let ms = Duration::from_millis;
        let err = Policy::builder().attempt_timeout(ms(10)).deadline(ms(10)).build().unwrap_err();
        assert_eq!(err.field, "attempt_timeout");
        assert!(err.problem.contains("less than the deadline"), "{err}");
        assert!(Policy::builder().attempt_timeout(ms(9)).deadline(ms(10)).build().is_ok());
    }

    #[test]
    fn durations_too_long_to_represent_are_accepted() {
        let policy = Policy::builder()
            .deadline(Duration::MAX)
            .attempt_timeout(Duration::MAX - Duration::from_nanos(1))
            .base(Duration::MAX)
            .cap(Duration::MAX)
            .build()
            .unwrap();
        assert_eq!(policy.deadline(), Some(Duration::MAX));
    }

    #[test]
    fn a_clone_keeps_every_setting() {
        let p = Policy::builder().name("x").max_attempts(7).seed(3).breaker("b").build().unwrap();
        assert_eq!(format!("{:?}", p.clone()), format!("{p:?}"));
    }
}
