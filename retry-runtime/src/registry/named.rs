//! The registry's named guards: declared, looked up, listed, and created
//! with the defaults when a call names one never declared.

use std::sync::Arc;

use super::table::{Held, Kept};
use super::{GuardKind, Registry, RegistryError, invalid};
use crate::breaker::{BreakerConfig, CircuitBreaker, NO_BREAKER};
use crate::budget::{BudgetConfig, NO_BUDGET, RetryBudget};
use crate::bulkhead::{Bulkhead, BulkheadConfig};
use crate::config::ConfigError;
use crate::rate_limit::{RateLimit, RateLimitConfig};
use crate::throttle::{Throttle, ThrottleConfig};

impl Registry {
    /// Declares a named circuit breaker.
    pub fn declare_breaker(&self, name: &str, config: BreakerConfig) -> Result<(), RegistryError> {
        if name == NO_BREAKER {
            let why = format!(
                "`{NO_BREAKER}` is reserved: `breaker = \"{NO_BREAKER}\"` means an operation has no breaker"
            );
            return Err(invalid(name, ConfigError::new("name", why)));
        }
        let breaker = self.new_breaker(name, config).map_err(|error| invalid(name, error))?;
        self.inner.breakers.insert(name, breaker)
    }

    /// Declares a named retry budget.
    pub fn declare_budget(&self, name: &str, config: impl Into<BudgetConfig>) -> Result<(), RegistryError> {
        if name == NO_BUDGET {
            let why = format!(
                "`{NO_BUDGET}` is reserved: `budget = \"{NO_BUDGET}\"` means an operation has no budget"
            );
            return Err(invalid(name, ConfigError::new("name", why)));
        }
        let budget = self.new_budget(name, config.into()).map_err(|error| invalid(name, error))?;
        self.inner.budgets.insert(name, budget)
    }

    /// Declares a named bulkhead.
    pub fn declare_bulkhead(&self, name: &str, config: BulkheadConfig) -> Result<(), RegistryError> {
        let bulkhead = self.new_bulkhead(name, config).map_err(|error| invalid(name, error))?;
        self.inner.bulkheads.insert(name, bulkhead)
    }

    /// Declares a named client-side throttle; its draws are reproducible
    /// when the registry is seeded ([`Registry::with_seed`]).
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use stormproof::{Registry, throttle::ThrottleConfig};
    /// let registry = Registry::new();
    /// registry.declare_throttle("search", ThrottleConfig { k: 1.5, ..Default::default() }).unwrap();
    /// assert_eq!(registry.throttle("search").unwrap().refusal_probability(), 0.0);
    /// # }
    /// ```
    pub fn declare_throttle(&self, name: &str, config: ThrottleConfig) -> Result<(), RegistryError> {
        let throttle = self.new_throttle(name, config).map_err(|error| invalid(name, error))?;
        self.inner.throttles.insert(name, throttle)
    }

    /// Declares a named rate limiter.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use stormproof::{rate_limit::RateLimitConfig, Registry};
    /// let registry = Registry::new();
    /// registry.declare_rate_limit("geo-api", RateLimitConfig { per_second: 50, burst: 5, max_wait: None, ..Default::default() }).unwrap();
    /// assert_eq!(registry.rate_limit("geo-api").unwrap().config().per_second, 50);
    /// # }
    /// ```
    pub fn declare_rate_limit(&self, name: &str, config: RateLimitConfig) -> Result<(), RegistryError> {
        let limit = self.new_rate_limit(name, config).map_err(|error| invalid(name, error))?;
        self.inner.rate_limits.insert(name, limit)
    }

    /// A breaker for this registry (with its transition hooks), not yet in
    /// it, nor its state gauge set (the table sets it if it keeps it: `Kept`).
    pub(crate) fn new_breaker(
        &self,
        name: &str,
        config: BreakerConfig,
    ) -> Result<CircuitBreaker, ConfigError> {
        named(name)?;
        Ok(CircuitBreaker::unmeasured(name, config)?.with_hooks(self.inner.hooks.clone()))
    }

    /// A budget for this registry, not yet in it, nor its level gauge set.
    pub(crate) fn new_budget(&self, name: &str, config: BudgetConfig) -> Result<RetryBudget, ConfigError> {
        named(name)?;
        RetryBudget::unmeasured(name, config)
    }

    /// A bulkhead for this registry, not yet in it.
    pub(crate) fn new_bulkhead(&self, name: &str, config: BulkheadConfig) -> Result<Bulkhead, ConfigError> {
        named(name)?;
        Bulkhead::new(name, config)
    }

    /// A throttle for this registry (seeded from it), not yet in it.
    pub(crate) fn new_throttle(&self, name: &str, config: ThrottleConfig) -> Result<Throttle, ConfigError> {
        named(name)?;
        Throttle::new(name, config, self.guard_seed(name))
    }

    /// A rate limiter for this registry, not yet in it.
    pub(crate) fn new_rate_limit(
        &self,
        name: &str,
        config: RateLimitConfig,
    ) -> Result<RateLimit, ConfigError> {
        named(name)?;
        RateLimit::new(name, config)
    }

    /// Every table of guards, held (always in this order) while a
    /// configuration file declares its guards: see [`Held`].
    #[cfg_attr(not(feature = "config"), allow(dead_code))]
    pub(crate) fn hold_guards(&self) -> HeldGuards<'_> {
        HeldGuards {
            breakers: self.inner.breakers.hold(),
            budgets: self.inner.budgets.hold(),
            bulkheads: self.inner.bulkheads.hold(),
            throttles: self.inner.throttles.hold(),
            rate_limits: self.inner.rate_limits.hold(),
        }
    }

    /// The breaker declared (or created on first use) under `name`.
    pub fn breaker(&self, name: &str) -> Option<Arc<CircuitBreaker>> {
        self.inner.breakers.get(name)
    }

    /// The budget declared (or created on first use) under `name`.
    pub fn budget(&self, name: &str) -> Option<Arc<RetryBudget>> {
        self.inner.budgets.get(name)
    }

    /// The bulkhead declared (or created on first use) under `name`.
    pub fn bulkhead(&self, name: &str) -> Option<Arc<Bulkhead>> {
        self.inner.bulkheads.get(name)
    }

    /// The throttle declared (or created on first use) under `name`.
    pub fn throttle(&self, name: &str) -> Option<Arc<Throttle>> {
        self.inner.throttles.get(name)
    }

    /// The rate limiter declared (or created on first use) under `name`.
    pub fn rate_limit(&self, name: &str) -> Option<Arc<RateLimit>> {
        self.inner.rate_limits.get(name)
    }

    /// Every breaker of this registry, declared or created on first use,
    /// sorted by name: for dashboards and fleet sync.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::{breaker::BreakerConfig, Registry};
    /// let registry = Registry::new();
    /// registry.declare_breaker("b", BreakerConfig::default()).unwrap();
    /// registry.declare_breaker("a", BreakerConfig::default()).unwrap();
    /// let names: Vec<String> = registry.breakers().into_iter().map(|(name, _)| name).collect();
    /// assert_eq!(names, ["a", "b"]);
    /// ```
    pub fn breakers(&self) -> Vec<(String, Arc<CircuitBreaker>)> {
        self.inner.breakers.all()
    }

    /// Every budget of this registry, sorted by name.
    pub fn budgets(&self) -> Vec<(String, Arc<RetryBudget>)> {
        self.inner.budgets.all()
    }

    /// Every bulkhead of this registry, sorted by name.
    pub fn bulkheads(&self) -> Vec<(String, Arc<Bulkhead>)> {
        self.inner.bulkheads.all()
    }

    /// Every throttle of this registry, sorted by name.
    pub fn throttles(&self) -> Vec<(String, Arc<Throttle>)> {
        self.inner.throttles.all()
    }

    /// Every rate limiter of this registry, sorted by name.
    pub fn rate_limits(&self) -> Vec<(String, Arc<RateLimit>)> {
        self.inner.rate_limits.all()
    }

    /// The names of `kind` declared here (not merely created on first use), sorted.
    pub(crate) fn declared_names(&self, kind: GuardKind) -> Vec<String> {
        match kind {
            GuardKind::Breaker => self.inner.breakers.declared_names(),
            GuardKind::Budget => self.inner.budgets.declared_names(),
            GuardKind::Bulkhead => self.inner.bulkheads.declared_names(),
            GuardKind::Throttle => self.inner.throttles.declared_names(),
            GuardKind::RateLimit => self.inner.rate_limits.declared_names(),
        }
    }

    /// Whether a guard of `kind` was declared under `name` (not merely
    /// created on first use).
    #[cfg_attr(not(feature = "config"), allow(dead_code))]
    pub(crate) fn is_declared(&self, kind: GuardKind, name: &str) -> bool {
        match kind {
            GuardKind::Breaker => self.inner.breakers.is_declared(name),
            GuardKind::Budget => self.inner.budgets.is_declared(name),
            GuardKind::Bulkhead => self.inner.bulkheads.is_declared(name),
            GuardKind::Throttle => self.inner.throttles.is_declared(name),
            GuardKind::RateLimit => self.inner.rate_limits.is_declared(name),
        }
    }

    /// The names of `kind` a call's policy has looked up here, sorted.
    pub(crate) fn resolved_names(&self, kind: GuardKind) -> Vec<String> {
        match kind {
            GuardKind::Breaker => self.inner.breakers.resolved_names(),
            GuardKind::Budget => self.inner.budgets.resolved_names(),
            GuardKind::Bulkhead => self.inner.bulkheads.resolved_names(),
            GuardKind::Throttle => self.inner.throttles.resolved_names(),
            GuardKind::RateLimit => self.inner.rate_limits.resolved_names(),
        }
    }

    pub(crate) fn breaker_or_default(&self, name: &str) -> Arc<CircuitBreaker> {
        self.inner.breakers.get_or_default(name, || self.undeclared_breaker(name, BreakerConfig::default()))
    }

    /// An operation's own breaker (see [`NO_BREAKER`]): the breaker named
    /// after it, made with [`BreakerConfig::per_operation`], quietly, when
    /// none was declared.
    pub(crate) fn operation_breaker(&self, operation: &str) -> Arc<CircuitBreaker> {
        self.inner.breakers.get_or_make_quietly(operation, || {
            self.undeclared_breaker(operation, BreakerConfig::per_operation())
        })
    }

    /// A breaker made at a call that names it, with settings known valid.
    fn undeclared_breaker(&self, name: &str, config: BreakerConfig) -> CircuitBreaker {
        CircuitBreaker::unmeasured(name, config)
            .unwrap_or_else(|_| unreachable!("the default settings are valid"))
            .with_hooks(self.inner.hooks.clone())
    }

    pub(crate) fn budget_or_default(&self, name: &str) -> Arc<RetryBudget> {
        self.inner.budgets.get_or_default(name, || {
            RetryBudget::unmeasured(name, BudgetConfig::default())
                .unwrap_or_else(|_| unreachable!("the default budget config is valid"))
        })
    }

    /// An operation's own budget (see [`NO_BUDGET`]): the budget named
    /// after it, made with the defaults, quietly, when none was declared.
    pub(crate) fn operation_budget(&self, operation: &str) -> Arc<RetryBudget> {
        self.inner.budgets.get_or_make_quietly(operation, || {
            RetryBudget::unmeasured(operation, BudgetConfig::default())
                .unwrap_or_else(|_| unreachable!("the default budget config is valid"))
        })
    }

    pub(crate) fn bulkhead_or_default(&self, name: &str) -> Arc<Bulkhead> {
        self.inner.bulkheads.get_or_default(name, || {
            Bulkhead::new(name, BulkheadConfig::default())
                .unwrap_or_else(|_| unreachable!("the default bulkhead config is valid"))
        })
    }

    pub(crate) fn throttle_or_default(&self, name: &str) -> Arc<Throttle> {
        self.inner.throttles.get_or_default(name, || {
            Throttle::new(name, ThrottleConfig::default(), self.guard_seed(name))
                .unwrap_or_else(|_| unreachable!("the default throttle config is valid"))
        })
    }

    pub(crate) fn rate_limit_or_default(&self, name: &str) -> Arc<RateLimit> {
        self.inner.rate_limits.get_or_default(name, || {
            RateLimit::new(name, RateLimitConfig::default())
                .unwrap_or_else(|_| unreachable!("the default rate limit config is valid"))
        })
    }

    /// The seed of a guard's own draws when the registry is seeded: from
    /// the registry's seed and the guard's name, so that it does not depend
    /// on the order guards are made in, nor shift the calls' jitter streams.
    fn guard_seed(&self, name: &str) -> Option<u64> {
        // FNV-1a: a stable hash of the name (std's hasher is randomised per process).
        let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
        Some(crate::backoff::stream_seed(self.seed()?, hash))
    }
}

/// A guard is declared under a name a function can give: not empty, as the
/// attribute, `Policy::builder` and a configuration file require.
fn named(name: &str) -> Result<(), ConfigError> {
    if name.trim().is_empty() {
        return Err(ConfigError::new("name", "a guard needs a name, not an empty string"));
    }
    Ok(())
}

/// Every table of a registry's guards, held: see [`Registry::hold_guards`].
#[cfg_attr(not(feature = "config"), allow(dead_code))]
pub(crate) struct HeldGuards<'r> {
    pub(crate) breakers: Held<'r, CircuitBreaker>,
    pub(crate) budgets: Held<'r, RetryBudget>,
    pub(crate) bulkheads: Held<'r, Bulkhead>,
    pub(crate) throttles: Held<'r, Throttle>,
    pub(crate) rate_limits: Held<'r, RateLimit>,
}

/// A breaker kept reads closed, not missing, until its first transition.
impl Kept for CircuitBreaker {
    fn kept(&self) {
        self.measure_closed();
    }
}

/// A budget kept reports its level from the start.
impl Kept for RetryBudget {
    fn kept(&self) {
        self.measure_level();
    }
}

impl Kept for Bulkhead {}
impl Kept for Throttle {}
impl Kept for RateLimit {}
