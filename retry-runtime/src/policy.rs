//! `Policy`: every setting of a resilient call, validated once.
//!
//! The attribute builds one `static` policy per function; code that cannot
//! carry an attribute (closures, trait objects, generated clients) builds
//! one with [`Policy::builder`] and calls [`Policy::run`]. Both go through
//! the same [`Execution`](crate::Execution) loop.

use std::borrow::Cow;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::backoff::{Backoff, Jitter, JitterRng, stream_seed};
use crate::breaker::CircuitBreaker;
use crate::budget::RetryBudget;
use crate::bulkhead::Bulkhead;
use crate::classify::Classify;
use crate::config::{ConfigError, PolicyError};
use crate::execution::{Execution, Step};
use crate::registry::{self, Registry};
use crate::rejection::Rejection;

/// Upper bound of `max_attempts`: a bound on amplification, not a target.
pub const MAX_ATTEMPTS_LIMIT: u32 = 100;

/// What a call made inside another resilient call's attempt does.
///
/// Three layers that each retry 3 times make 27 attempts against the
/// dependency at the bottom. By default only the outermost layer retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Nested {
    /// Make a single attempt (guards and timeouts still apply). The default.
    #[default]
    Once,
    /// Retry as if not nested.
    Retry,
}

/// The guards a policy resolved from one registry.
#[derive(Clone, Default, Debug)]
pub(crate) struct Guards {
    pub(crate) breaker: Option<Arc<CircuitBreaker>>,
    pub(crate) budget: Option<Arc<RetryBudget>>,
    pub(crate) bulkhead: Option<Arc<Bulkhead>>,
}

/// The guards one call uses: the policy's cached handles for the global
/// registry (borrowed: no reference count touched), or a scoped registry's.
///
/// Two words, both always written: the call's state stays small and cheap to move.
#[derive(Debug)]
pub(crate) enum GuardsRef<'p> {
    Cached(&'p Guards),
    Scoped(Arc<Guards>),
}

impl std::ops::Deref for GuardsRef<'_> {
    type Target = Guards;

    #[inline]
    fn deref(&self) -> &Guards {
        match self {
            GuardsRef::Cached(guards) => guards,
            GuardsRef::Scoped(guards) => guards,
        }
    }
}

/// Guard handles cached per registry, so calls never look a name up twice.
#[derive(Default)]
struct GuardCache {
    global: OnceLock<Guards>,
    /// A few recently used scoped registries (by id); tests use one each.
    scoped: Mutex<Vec<(u64, Arc<Guards>)>>,
}

const SCOPED_CACHE_SIZE: usize = 16;

/// The guards of a policy that names none.
static NO_GUARDS: Guards = Guards { breaker: None, budget: None, bulkhead: None };

/// The settings of a resilient call; see [`PolicyBuilder`] for every default.
///
/// ```
/// # use retry_runtime as resilient;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use resilient::{Jitter, Policy};
///
/// let policy = Policy::builder()
///     .max_attempts(3)
///     .base(Duration::from_millis(50))
///     .jitter(Jitter::None)
///     .build()?;
/// let mut calls = 0;
/// let answer = policy
///     .run(|| {
///         calls += 1;
///         let attempt = calls;
///         async move {
///             if attempt < 3 { Err(std::io::Error::from(std::io::ErrorKind::TimedOut)) } else { Ok(42) }
///         }
///     })
///     .await?;
/// assert_eq!((answer, calls), (42, 3));
/// # Ok(()) }
/// ```
pub struct Policy {
    pub(crate) operation: Cow<'static, str>,
    pub(crate) max_attempts: u32,
    pub(crate) backoff: Backoff,
    pub(crate) attempt_timeout: Option<Duration>,
    pub(crate) deadline: Option<Duration>,
    breaker: Option<Cow<'static, str>>,
    budget: Option<Cow<'static, str>>,
    bulkhead: Option<Cow<'static, str>>,
    seed: Option<u64>,
    pub(crate) nested: Nested,
    streams: AtomicU64,
    cache: GuardCache,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("operation", &self.operation)
            .field("max_attempts", &self.max_attempts)
            .field("backoff", &self.backoff)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("deadline", &self.deadline)
            .field("breaker", &self.breaker)
            .field("budget", &self.budget)
            .field("bulkhead", &self.bulkhead)
            .field("seed", &self.seed)
            .field("nested", &self.nested)
            .finish()
    }
}

impl Clone for Policy {
    /// The same settings; the clone resolves its own guard handles.
    fn clone(&self) -> Self {
        self.to_builder().into_policy()
    }
}

/// The attribute's arguments, checked at compile time by the macro.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct AttributeConfig {
    pub operation: &'static str,
    pub max_attempts: u32,
    pub base_ms: u64,
    pub cap_ms: u64,
    pub jitter: Jitter,
    pub attempt_timeout_ms: Option<u64>,
    pub deadline_ms: Option<u64>,
    pub breaker: Option<&'static str>,
    pub budget: Option<&'static str>,
    pub bulkhead: Option<&'static str>,
    pub nested_retry: bool,
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

impl Policy {
    /// A builder with every default: 4 attempts, base 100 ms, cap 20 s, full
    /// jitter, no timeouts, no guards.
    pub fn builder() -> PolicyBuilder {
        PolicyBuilder::default()
    }

    /// The builder that made this policy, to derive a variant.
    pub fn to_builder(&self) -> PolicyBuilder {
        PolicyBuilder {
            operation: self.operation.clone(),
            max_attempts: self.max_attempts,
            base: self.backoff.base,
            cap: self.backoff.cap,
            jitter: self.backoff.jitter,
            attempt_timeout: self.attempt_timeout,
            deadline: self.deadline,
            breaker: self.breaker.clone(),
            budget: self.budget.clone(),
            bulkhead: self.bulkhead.clone(),
            seed: self.seed,
            nested: self.nested,
        }
    }

    /// A policy from the attribute's (compile-time validated) arguments,
    /// usable in a `static`.
    #[doc(hidden)]
    pub const fn from_attribute(cfg: AttributeConfig) -> Policy {
        Policy {
            operation: Cow::Borrowed(cfg.operation),
            max_attempts: cfg.max_attempts,
            backoff: Backoff::new(
                Duration::from_millis(cfg.base_ms),
                Duration::from_millis(cfg.cap_ms),
                cfg.jitter,
            ),
            attempt_timeout: millis(cfg.attempt_timeout_ms),
            deadline: millis(cfg.deadline_ms),
            breaker: borrowed(cfg.breaker),
            budget: borrowed(cfg.budget),
            bulkhead: borrowed(cfg.bulkhead),
            seed: None,
            nested: if cfg.nested_retry { Nested::Retry } else { Nested::Once },
            streams: AtomicU64::new(0),
            cache: GuardCache { global: OnceLock::new(), scoped: Mutex::new(Vec::new()) },
        }
    }

    /// The operation's name, used in traces and metrics.
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// Attempts in all, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The backoff curve.
    pub fn backoff(&self) -> Backoff {
        self.backoff
    }

    /// Runs `op` (one call per attempt) under this policy.
    ///
    /// Returns the first success, or the last error an attempt produced, or
    /// a [`Rejection`] converted into `E` when no attempt could run or the
    /// deadline cut one short.
    pub async fn run<T, E, F, Fut>(&self, op: F) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Classify + From<Rejection>,
    {
        self.drive(self.execution(None), op).await
    }

    /// [`run`](Self::run) with an idempotency key, which every attempt reads
    /// through [`idempotency_key()`](crate::idempotency_key).
    pub async fn run_with_key<K, T, E, F, Fut>(&self, key: K, op: F) -> Result<T, E>
    where
        K: std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Classify + From<Rejection>,
    {
        self.drive(self.execution(Some(key_of(&key))), op).await
    }

    async fn drive<T, E, F, Fut>(&self, mut execution: Execution<'_>, mut op: F) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Classify + From<Rejection>,
    {
        loop {
            if let Step::Done(result) = execution.attempt_with(&mut op).await {
                return result;
            }
        }
    }

    /// Starts one call: the state of its retry loop.
    #[inline(always)]
    pub fn execution(&self, key: Option<Arc<str>>) -> Execution<'_> {
        Execution::new(self, key)
    }

    /// Whether this policy names any guard.
    #[inline]
    fn has_guards(&self) -> bool {
        self.breaker.is_some() || self.budget.is_some() || self.bulkhead.is_some()
    }

    /// The guards in effect for this call: from the scoped registry if any,
    /// else the global one; resolved by name once per registry.
    ///
    /// Outside a scope this borrows the cached handles: no lock, no lookup,
    /// no reference count touched.
    #[inline]
    pub(crate) fn guards(&self) -> GuardsRef<'_> {
        if !self.has_guards() {
            return GuardsRef::Cached(&NO_GUARDS);
        }
        match registry::with_scoped(|scoped| self.scoped_guards(scoped)) {
            Some(guards) => GuardsRef::Scoped(guards),
            None => GuardsRef::Cached(self.global_guards()),
        }
    }

    #[inline]
    fn global_guards(&self) -> &Guards {
        match self.cache.global.get() {
            Some(guards) => guards,
            None => self.cache.global.get_or_init(|| self.resolve(registry::registry())),
        }
    }

    #[inline(never)]
    fn scoped_guards(&self, registry: &Registry) -> Arc<Guards> {
        let mut cache = self.cache.scoped.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, guards)) = cache.iter().find(|(id, _)| *id == registry.id()) {
            return guards.clone();
        }
        let guards = Arc::new(self.resolve(registry));
        if cache.len() == SCOPED_CACHE_SIZE {
            cache.remove(0);
        }
        cache.push((registry.id(), guards.clone()));
        guards
    }

    fn resolve(&self, registry: &Registry) -> Guards {
        Guards {
            breaker: self.breaker.as_deref().map(|n| registry.breaker_or_default(n)),
            budget: self.budget.as_deref().map(|n| registry.budget_or_default(n)),
            bulkhead: self.bulkhead.as_deref().map(|n| registry.bulkhead_or_default(n)),
        }
    }

    /// The jitter source of one call: the policy's seed, else the registry's,
    /// else entropy. Made only when a call first needs to wait.
    pub(crate) fn jitter_rng(&self) -> JitterRng {
        if let Some(seed) = self.seed {
            let stream = self.streams.fetch_add(1, Ordering::Relaxed);
            return JitterRng::seeded(stream_seed(seed, stream));
        }
        match registry::with_current(Registry::next_jitter_seed) {
            Some(seed) => JitterRng::seeded(seed),
            None => JitterRng::from_entropy(),
        }
    }
}

/// Formats an idempotency key once per call.
#[doc(hidden)]
pub fn key_of(value: &(impl std::fmt::Display + ?Sized)) -> Arc<str> {
    Arc::from(value.to_string())
}

/// Builds a [`Policy`]; [`build`](Self::build) checks every setting.
///
/// | setting | default |
/// |---|---|
/// | `max_attempts` | 4 (1..=100; 1 never retries) |
/// | `base` | 100 ms |
/// | `cap` | 20 s (must be >= `base`) |
/// | `jitter` | [`Jitter::Full`] |
/// | `attempt_timeout` | none (must be > 0 and <= `deadline`) |
/// | `deadline` | none (must be > 0) |
/// | `breaker`, `budget`, `bulkhead` | none (names in the registry in effect) |
/// | `seed` | none (the registry's seed, else entropy) |
/// | `nested` | [`Nested::Once`] |
/// | `name` | `"anonymous"` |
///
/// ```
/// # use retry_runtime as resilient;
/// use std::time::Duration;
/// use resilient::Policy;
/// let err = Policy::builder().base(Duration::from_secs(2)).cap(Duration::from_secs(1)).build().unwrap_err();
/// assert_eq!(err.field, "base");
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct PolicyBuilder {
    operation: Cow<'static, str>,
    max_attempts: u32,
    base: Duration,
    cap: Duration,
    jitter: Jitter,
    attempt_timeout: Option<Duration>,
    deadline: Option<Duration>,
    breaker: Option<Cow<'static, str>>,
    budget: Option<Cow<'static, str>>,
    bulkhead: Option<Cow<'static, str>>,
    seed: Option<u64>,
    nested: Nested,
}

impl Default for PolicyBuilder {
    fn default() -> Self {
        PolicyBuilder {
            operation: Cow::Borrowed("anonymous"),
            max_attempts: 4,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(20),
            jitter: Jitter::Full,
            attempt_timeout: None,
            deadline: None,
            breaker: None,
            budget: None,
            bulkhead: None,
            seed: None,
            nested: Nested::Once,
        }
    }
}

impl PolicyBuilder {
    /// The operation's name in traces and metrics.
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

    /// Cancels each attempt (drops its future) after this long; the attempt
    /// then fails with the transient [`Rejection::AttemptTimeout`].
    pub fn attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = Some(timeout);
        self
    }

    /// The whole call, waits included, ends by this long after it starts.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Guards every attempt with the named circuit breaker.
    pub fn breaker(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.breaker = Some(name.into());
        self
    }

    /// Pays for retries from the named retry budget.
    pub fn budget(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.budget = Some(name.into());
        self
    }

    /// Limits concurrent attempts with the named bulkhead.
    pub fn bulkhead(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.bulkhead = Some(name.into());
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

    /// Checks every setting; the error names the first invalid field.
    pub fn build(self) -> Result<Policy, PolicyError> {
        if !(1..=MAX_ATTEMPTS_LIMIT).contains(&self.max_attempts) {
            return Err(ConfigError::new(
                "max_attempts",
                format!("must be in 1..={MAX_ATTEMPTS_LIMIT}, got {}", self.max_attempts),
            ));
        }
        if self.base > self.cap {
            return Err(ConfigError::new(
                "base",
                format!("must not exceed `cap` ({:?}), got {:?}", self.cap, self.base),
            ));
        }
        if self.attempt_timeout.is_some_and(|t| t.is_zero()) {
            return Err(ConfigError::new("attempt_timeout", "must be greater than zero"));
        }
        if self.deadline.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new("deadline", "must be greater than zero"));
        }
        if let (Some(timeout), Some(deadline)) = (self.attempt_timeout, self.deadline) {
            if timeout > deadline {
                return Err(ConfigError::new(
                    "attempt_timeout",
                    format!("{timeout:?} is longer than the deadline ({deadline:?}), so it could never fire"),
                ));
            }
        }
        for (field, name) in
            [("breaker", &self.breaker), ("budget", &self.budget), ("bulkhead", &self.bulkhead)]
        {
            if name.as_deref().is_some_and(|n| n.trim().is_empty()) {
                return Err(ConfigError::new(field, "the name must not be empty"));
            }
        }
        Ok(self.into_policy())
    }

    fn into_policy(self) -> Policy {
        Policy {
            operation: self.operation,
            max_attempts: self.max_attempts,
            backoff: Backoff::new(self.base, self.cap, self.jitter),
            attempt_timeout: self.attempt_timeout,
            deadline: self.deadline,
            breaker: self.breaker,
            budget: self.budget,
            bulkhead: self.bulkhead,
            seed: self.seed,
            nested: self.nested,
            streams: AtomicU64::new(0),
            cache: GuardCache::default(),
        }
    }
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
        ];
        for (builder, field) in cases {
            let err = builder.build().unwrap_err();
            assert_eq!(err.field, field, "{err}");
        }
        assert!(Policy::builder().max_attempts(100).build().is_ok());
        assert!(Policy::builder().max_attempts(1).base(ms(0)).cap(ms(0)).build().is_ok());
    }

    #[test]
    fn a_clone_keeps_every_setting() {
        let p = Policy::builder().name("x").max_attempts(7).seed(3).breaker("b").build().unwrap();
        assert_eq!(format!("{:?}", p.clone()), format!("{p:?}"));
    }
}
