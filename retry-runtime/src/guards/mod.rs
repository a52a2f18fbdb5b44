//! The guards of one policy: named in the policy, resolved in a registry,
//! cached so that calls never look a name up twice.
//!
//! A policy names its guards (breaker, budget, bulkhead, throttle, rate limit); which objects those
//! names mean depends on the registry in effect (the global one, or a
//! [`Registry::scope`](crate::Registry::scope) in tests). The global
//! registry's handles are resolved once and borrowed by every call (no lock,
//! no lookup, no reference count touched); a scoped registry's are resolved
//! once per registry and kept in a small cache.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, OnceLock};

use crate::breaker::CircuitBreaker;
use crate::budget::RetryBudget;
use crate::bulkhead::Bulkhead;
use crate::guard::{AdmissionOf, GuardSet, PendingOf, PermitsOf};
use crate::rate_limit::RateLimit;
use crate::registry::{self, GuardKind, Registry};
use crate::throttle::Throttle;

mod keyed_set;
mod shape;

pub(crate) use keyed_set::KeyedSet;
use keyed_set::PerKeyCache;
pub use shape::{AnyShape, Named, Shape, Unnamed};
pub(crate) use shape::{ShapedAdmission, ShapedPermits, narrow, widen, widen_pending};

/// The guard names of a policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GuardNames {
    pub(crate) breaker: Option<Cow<'static, str>>,
    pub(crate) budget: Option<Cow<'static, str>>,
    pub(crate) bulkhead: Option<Cow<'static, str>>,
    pub(crate) throttle: Option<Cow<'static, str>>,
    pub(crate) rate_limit: Option<Cow<'static, str>>,
    /// Whether `budget` is the operation's own budget, which every
    /// operation has unless it names one or says `budget = "none"` (see
    /// [`NO_BUDGET`](crate::budget::NO_BUDGET)): created quietly, and
    /// not reported as undeclared.
    pub(crate) budget_by_default: bool,
    /// Whether `breaker` is the operation's own breaker, as
    /// `budget_by_default` is for the budget (see
    /// [`NO_BREAKER`](crate::breaker::NO_BREAKER)).
    pub(crate) breaker_by_default: bool,
    /// Whether `breaker` names a set of breakers per key (see
    /// [`KeyedBreakers`](crate::breaker::KeyedBreakers)): each call's
    /// breaker is its key's, found as the call starts, and the policy's own
    /// guards have none.
    pub(crate) breaker_per: bool,
    /// Whether `rate_limit` names a set of rate limits per key, as
    /// `breaker_per` says of the breaker.
    pub(crate) rate_limit_per: bool,
    /// Whether `bulkhead` names a set of bulkheads per key, as
    /// `breaker_per` says of the breaker.
    pub(crate) bulkhead_per: bool,
}

impl GuardNames {
    /// Whether a call's key chooses any of its guards.
    #[inline(always)]
    pub(crate) const fn per_key(&self) -> bool {
        self.breaker_per || self.rate_limit_per || self.bulkhead_per
    }
}

impl GuardNames {
    /// The operation's own breaker and budget named after `operation`,
    /// where the names say it has them and none is named yet (a builder
    /// names them when it builds: its name may change before).
    pub(crate) fn with_own_named(mut self, operation: Cow<'static, str>) -> Self {
        if self.budget_by_default && self.budget.is_none() {
            self.budget = Some(operation.clone());
        }
        if self.breaker_by_default && self.breaker.is_none() {
            self.breaker = Some(operation);
        }
        self
    }

    /// These names with the operation's own breaker and budget unnamed
    /// again (for a builder, which names them after its name when it
    /// builds).
    pub(crate) fn with_own_unnamed(&self) -> Self {
        let mut names = self.clone();
        if names.budget_by_default {
            names.budget = None;
        }
        if names.breaker_by_default {
            names.breaker = None;
        }
        names
    }

    /// Whether the policy names any guard at all.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.breaker.is_none()
            && self.budget.is_none()
            && self.bulkhead.is_none()
            && self.throttle.is_none()
            && self.rate_limit.is_none()
    }

    /// The name of the guard of `kind`, if the policy names one.
    pub(crate) fn get(&self, kind: GuardKind) -> Option<&str> {
        match kind {
            GuardKind::Breaker => self.breaker.as_deref(),
            GuardKind::Budget => self.budget.as_deref(),
            GuardKind::Bulkhead => self.bulkhead.as_deref(),
            GuardKind::Throttle => self.throttle.as_deref(),
            GuardKind::RateLimit => self.rate_limit.as_deref(),
        }
    }

    /// The guards these names mean in `registry`; a name never declared
    /// there is created with the defaults (and one warning).
    fn resolve(&self, registry: &Registry) -> Guards {
        GuardSet {
            throttle: self.throttle.as_deref().map(|n| registry.throttle_or_default(n)),
            breaker: self.breaker.as_deref().filter(|_| !self.breaker_per).map(|n| {
                match self.breaker_by_default {
                    true => registry.operation_breaker(n),
                    false => registry.breaker_or_default(n),
                }
            }),
            bulkhead: self
                .bulkhead
                .as_deref()
                .filter(|_| !self.bulkhead_per)
                .map(|n| registry.bulkhead_or_default(n)),
            rate_limit: self
                .rate_limit
                .as_deref()
                .filter(|_| !self.rate_limit_per)
                .map(|n| registry.rate_limit_or_default(n)),
            budget: self.budget.as_deref().map(|n| match self.budget_by_default {
                true => registry.operation_budget(n),
                false => registry.budget_or_default(n),
            }),
        }
    }
}

/// The guards a policy resolved from one registry, in the one order they
/// are asked (see `guard::GuardSet`).
pub(crate) type Guards = GuardSet<
    Option<Arc<Throttle>>,
    Option<Arc<CircuitBreaker>>,
    Option<Arc<Bulkhead>>,
    Option<Arc<RateLimit>>,
    Option<Arc<RetryBudget>>,
>;

/// What an admitted attempt holds of `Guards`, every slot looked at.
pub(crate) type GuardPermits = PermitsOf<
    Option<Arc<Throttle>>,
    Option<Arc<CircuitBreaker>>,
    Option<Arc<Bulkhead>>,
    Option<Arc<RateLimit>>,
    Option<Arc<RetryBudget>>,
>;

/// What `Guards`' admission said, every slot looked at.
pub(crate) type GuardAdmission = AdmissionOf<
    Option<Arc<Throttle>>,
    Option<Arc<CircuitBreaker>>,
    Option<Arc<Bulkhead>>,
    Option<Arc<RateLimit>>,
    Option<Arc<RetryBudget>>,
>;

/// What an attempt of `Guards` waits for, every slot looked at.
pub(crate) type GuardPending = PendingOf<Option<Arc<Throttle>>, Option<Arc<Bulkhead>>>;

/// The guards of a policy that names none.
static NO_GUARDS: Guards =
    GuardSet { throttle: None, breaker: None, bulkhead: None, rate_limit: None, budget: None };

impl Guards {
    /// The guards of a policy that names none, in any registry.
    #[inline]
    pub(crate) fn none() -> &'static Guards {
        &NO_GUARDS
    }
}

/// The guards one call uses: the policy's cached handles for the global
/// registry (borrowed), or a scoped registry's.
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

impl<'p> GuardsRef<'p> {
    /// These guards with the breaker off, for a call whose operation's
    /// override says `breaker = "none"`: in its place, a breaker that
    /// admits every attempt and judges nothing (`CircuitBreaker::off`),
    /// since a function compiled with a breaker has a slot for one. A set
    /// with a breaker is copied (its handles cloned, one allocation per call
    /// of such an operation: an operator's switch, not a path to make
    /// cheap); one without is given back as it is.
    #[cold]
    #[inline(never)]
    pub(crate) fn with_breaker_off(self) -> GuardsRef<'p> {
        if self.breaker.is_none() {
            return self;
        }
        let off = Some(crate::breaker::CircuitBreaker::off());
        GuardsRef::Scoped(Arc::new(GuardSet { breaker: off, ..(*self).clone() }))
    }
}

/// How many scoped registries' guards one policy remembers (tests use one each).
const SCOPED_CACHE_SIZE: usize = 16;

/// Guard handles cached per registry.
#[derive(Debug, Default)]
pub(crate) struct GuardCache {
    /// Whether the policy names any guard (known when it is built, so that
    /// a call of a policy without guards reads one flag).
    named: bool,
    global: OnceLock<Guards>,
    scoped: Mutex<Vec<(u64, Arc<Guards>)>>,
    /// The global registry's sets per key, for a policy with any.
    keyed: PerKeyCache,
}

impl GuardCache {
    pub(crate) const fn new(named: bool) -> Self {
        GuardCache {
            named,
            global: OnceLock::new(),
            scoped: Mutex::new(Vec::new()),
            keyed: PerKeyCache::new(),
        }
    }

    /// The guards `names` mean for a call made now: in the scoped registry
    /// if the call runs inside [`Registry::scope`], else in the global one.
    #[inline]
    pub(crate) fn guards<'p>(&'p self, names: &GuardNames) -> GuardsRef<'p> {
        if !self.named {
            return GuardsRef::Cached(&NO_GUARDS);
        }
        match registry::with_scoped(|scoped| self.scoped(names, scoped)) {
            Some(guards) => GuardsRef::Scoped(guards),
            None => GuardsRef::Cached(self.global(names)),
        }
    }

    /// The global registry's guards for `names`, unless a call made now
    /// runs inside [`Registry::scope`] (then `None`): what a plain call uses,
    /// without an `Arc` clone in a scope. `named`: the caller knows the
    /// policy names a guard.
    #[inline(always)]
    pub(crate) fn global_unless_scoped<'p>(&'p self, names: &GuardNames, named: bool) -> Option<&'p Guards> {
        if !named && !self.named {
            return Some(&NO_GUARDS);
        }
        match registry::with_scoped(|_| ()) {
            Some(()) => None,
            None => Some(self.global(names)),
        }
    }

    /// The guards [`global_unless_scoped`](Self::global_unless_scoped)
    /// found for a call admitted outside a scope, found again (the same
    /// ones: the global registry's are resolved once per policy), to record
    /// that call's outcome from a future that cannot keep the borrow (the
    /// tower layer's, see `call::owned`), or to build the call after a
    /// plain first attempt failed (whatever scope it runs in by then).
    #[inline]
    pub(crate) fn global_again(&self, names: &GuardNames) -> &Guards {
        if !self.named { &NO_GUARDS } else { self.global(names) }
    }

    #[inline]
    fn global(&self, names: &GuardNames) -> &Guards {
        match self.global.get() {
            Some(guards) => guards,
            None => self.global.get_or_init(|| names.resolve(registry::registry())),
        }
    }

    #[inline(never)]
    fn scoped(&self, names: &GuardNames, registry: &Registry) -> Arc<Guards> {
        let mut cache = self.scoped.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, guards)) = cache.iter().find(|(id, _)| *id == registry.id()) {
            return guards.clone();
        }
        let guards = Arc::new(names.resolve(registry));
        if cache.len() == SCOPED_CACHE_SIZE {
            cache.remove(0);
        }
        cache.push((registry.id(), guards.clone()));
        guards
    }
}
