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
use crate::guard::{Absent, Admission, AdmissionOf, Guard, GuardSet, Pending, PendingOf, Permits, PermitsOf};
use crate::rate_limit::RateLimit;
use crate::registry::{self, GuardKind, Registry};
use crate::throttle::Throttle;

/// The guard names of a policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GuardNames {
    pub(crate) breaker: Option<Cow<'static, str>>,
    pub(crate) budget: Option<Cow<'static, str>>,
    pub(crate) bulkhead: Option<Cow<'static, str>>,
    pub(crate) throttle: Option<Cow<'static, str>>,
    pub(crate) rate_limit: Option<Cow<'static, str>>,
}

impl GuardNames {
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
            breaker: self.breaker.as_deref().map(|n| registry.breaker_or_default(n)),
            bulkhead: self.bulkhead.as_deref().map(|n| registry.bulkhead_or_default(n)),
            rate_limit: self.rate_limit.as_deref().map(|n| registry.rate_limit_or_default(n)),
            budget: self.budget.as_deref().map(|n| registry.budget_or_default(n)),
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

/// Which slots of a call's guard set a function names, known when it is
/// compiled: a guard it names is looked at (`Named`: its slot, which a
/// registry fills), one it does not is [`Absent`], which the compiler
/// sees through, so a call pays nothing for a guard its function does not
/// name. The attribute, which knows the names, picks the shape;
/// `Policy::run` and the HTTP layers, which do not, look at every slot
/// ([`AnyShape`]).
pub trait Slot<X: 'static> {
    /// Whether the function names the slot's guard.
    const NAMED: bool;
    /// The slot as the call sees it.
    type View<'g>: Guard<Permit = Self::Permit> + Copy;
    /// What an admitted attempt holds of it.
    type Permit;
    /// The view of `slot`.
    fn view(slot: &Option<Arc<X>>) -> Self::View<'_>;
    /// `permit` as the whole set's (every slot looked at) holds it.
    fn widen(permit: Self::Permit) -> Option<<X as Guard>::Permit>
    where
        X: Guard;
    /// The whole set's `permit` as this slot holds it: none for a slot the
    /// function does not name (whose guard, resolved from its names, is
    /// never there).
    fn narrow(permit: Option<<X as Guard>::Permit>) -> Self::Permit
    where
        X: Guard;
}

/// A slot the function names (see `guards::Slot`): its guard is always there
/// (a name resolves to a guard, declared or made with the defaults).
#[derive(Debug, Clone, Copy)]
pub enum Named {}

/// A slot that may or may not hold a guard, as the call finds it: for
/// callers that do not know which guards a policy names (see [`AnyShape`]).
#[derive(Debug, Clone, Copy)]
pub enum Maybe {}

/// A slot the function does not name (see `guards::Slot`).
#[derive(Debug, Clone, Copy)]
pub enum Unnamed {}

impl<X: Guard + 'static> Slot<X> for Named {
    const NAMED: bool = true;
    type View<'g> = &'g X;
    type Permit = X::Permit;

    #[inline(always)]
    fn view(slot: &Option<Arc<X>>) -> &X {
        match slot {
            Some(guard) => guard,
            None => unreachable!("a guard a function names is resolved with its call's guards"),
        }
    }

    #[inline(always)]
    fn widen(permit: X::Permit) -> Option<X::Permit> {
        Some(permit)
    }

    #[inline(always)]
    fn narrow(permit: Option<X::Permit>) -> X::Permit {
        match permit {
            Some(permit) => permit,
            None => unreachable!("a guard a function names gives every attempt a permit"),
        }
    }
}

impl<X: Guard + 'static> Slot<X> for Maybe {
    const NAMED: bool = true;
    type View<'g> = &'g Option<Arc<X>>;
    type Permit = Option<X::Permit>;

    #[inline(always)]
    fn view(slot: &Option<Arc<X>>) -> &Option<Arc<X>> {
        slot
    }

    #[inline(always)]
    fn widen(permit: Option<X::Permit>) -> Option<X::Permit> {
        permit
    }

    #[inline(always)]
    fn narrow(permit: Option<X::Permit>) -> Option<X::Permit> {
        permit
    }
}

impl<X: Guard + 'static> Slot<X> for Unnamed {
    const NAMED: bool = false;
    type View<'g> = Absent;
    type Permit = ();

    #[inline(always)]
    fn view(_slot: &Option<Arc<X>>) -> Absent {
        Absent
    }

    #[inline(always)]
    fn widen((): ()) -> Option<X::Permit> {
        None
    }

    #[inline(always)]
    fn narrow(_permit: Option<X::Permit>) {}
}

/// Which guards a function names, slot by slot in the set's order:
/// a tuple of [`Named`] and [`Unnamed`] (see [`Slot`]).
pub trait Shape: 'static {
    /// The throttle's slot.
    type Throttle: Slot<Throttle>;
    /// The breaker's slot.
    type Breaker: Slot<CircuitBreaker>;
    /// The bulkhead's slot.
    type Bulkhead: Slot<Bulkhead>;
    /// The rate limit's slot.
    type RateLimit: Slot<RateLimit>;
    /// The budget's slot.
    type Budget: Slot<RetryBudget>;

    /// Whether the shape is the function's own (every slot [`Named`] or
    /// [`Unnamed`]), as the attribute knows it: then a shape that is not
    /// [`NONE`](Self::NONE) names a guard.
    const EXACT: bool = true;

    /// Whether the function names no guard at all.
    const NONE: bool = !(<Self::Throttle as Slot<Throttle>>::NAMED
        || <Self::Breaker as Slot<CircuitBreaker>>::NAMED
        || <Self::Bulkhead as Slot<Bulkhead>>::NAMED
        || <Self::RateLimit as Slot<RateLimit>>::NAMED
        || <Self::Budget as Slot<RetryBudget>>::NAMED);

    /// What an attempt keeps of its call's guards, to record its outcome
    /// in them: for a known shape, the view itself (a reference per guard
    /// named, nothing for a function that names none), looked up once; for
    /// [`AnyShape`], the set (one reference where the view would be five).
    type Held<'g>: Copy;

    /// What an attempt of this shape keeps of `guards`.
    fn hold(guards: &Guards) -> Self::Held<'_>;

    /// The guards `held` keeps, as this shape sees them.
    fn held_view<'g>(held: Self::Held<'g>) -> View<'g, Self>;
}

impl<T, B, K, R, U> Shape for (T, B, K, R, U)
where
    T: Slot<Throttle> + 'static,
    B: Slot<CircuitBreaker> + 'static,
    K: Slot<Bulkhead> + 'static,
    R: Slot<RateLimit> + 'static,
    U: Slot<RetryBudget> + 'static,
{
    type Throttle = T;
    type Breaker = B;
    type Bulkhead = K;
    type RateLimit = R;
    type Budget = U;
    type Held<'g> = View<'g, Self>;

    #[inline(always)]
    fn hold(guards: &Guards) -> View<'_, Self> {
        guards.view::<Self>()
    }

    #[inline(always)]
    fn held_view<'g>(held: Self::Held<'g>) -> View<'g, Self> {
        held
    }
}

/// Every slot looked at: for callers that do not know which guards a
/// policy names (`Policy::run`, the HTTP layers).
#[derive(Debug, Clone, Copy)]
pub enum AnyShape {}

impl Shape for AnyShape {
    const EXACT: bool = false;
    type Throttle = Maybe;
    type Breaker = Maybe;
    type Bulkhead = Maybe;
    type RateLimit = Maybe;
    type Budget = Maybe;
    type Held<'g> = &'g Guards;

    #[inline(always)]
    fn hold(guards: &Guards) -> &Guards {
        guards
    }

    #[inline(always)]
    fn held_view<'g>(held: Self::Held<'g>) -> View<'g, Self> {
        held.view::<Self>()
    }
}

/// `Guards` as a call of shape `V` sees it.
pub(crate) type View<'g, V> = GuardSet<
    <<V as Shape>::Throttle as Slot<Throttle>>::View<'g>,
    <<V as Shape>::Breaker as Slot<CircuitBreaker>>::View<'g>,
    <<V as Shape>::Bulkhead as Slot<Bulkhead>>::View<'g>,
    <<V as Shape>::RateLimit as Slot<RateLimit>>::View<'g>,
    <<V as Shape>::Budget as Slot<RetryBudget>>::View<'g>,
>;

/// What an admitted attempt of a call of shape `V` holds.
pub(crate) type ShapedPermits<V> = Permits<
    <<V as Shape>::Throttle as Slot<Throttle>>::Permit,
    <<V as Shape>::Breaker as Slot<CircuitBreaker>>::Permit,
    <<V as Shape>::Bulkhead as Slot<Bulkhead>>::Permit,
    <<V as Shape>::RateLimit as Slot<RateLimit>>::Permit,
    <<V as Shape>::Budget as Slot<RetryBudget>>::Permit,
>;

/// What admission said to a call of shape `V`.
pub(crate) type ShapedAdmission<V> = Admission<
    <<V as Shape>::Throttle as Slot<Throttle>>::Permit,
    <<V as Shape>::Breaker as Slot<CircuitBreaker>>::Permit,
    <<V as Shape>::Bulkhead as Slot<Bulkhead>>::Permit,
    <<V as Shape>::RateLimit as Slot<RateLimit>>::Permit,
    <<V as Shape>::Budget as Slot<RetryBudget>>::Permit,
>;

/// What an attempt of a call of shape `V` waits for.
pub(crate) type ShapedPending<V> = Pending<
    <<V as Shape>::Throttle as Slot<Throttle>>::Permit,
    <<V as Shape>::Bulkhead as Slot<Bulkhead>>::Permit,
>;

/// An attempt's permits as the whole set holds them.
#[inline(always)]
pub(crate) fn widen<V: Shape>(permits: ShapedPermits<V>) -> GuardPermits {
    Permits {
        throttle: V::Throttle::widen(permits.throttle),
        breaker: V::Breaker::widen(permits.breaker),
        bulkhead: V::Bulkhead::widen(permits.bulkhead),
        rate_limit: V::RateLimit::widen(permits.rate_limit),
        budget: V::Budget::widen(permits.budget),
    }
}

/// The whole set's permits as an attempt of a call of shape `V` holds them.
#[inline(always)]
pub(crate) fn narrow<V: Shape>(permits: GuardPermits) -> ShapedPermits<V> {
    Permits {
        throttle: V::Throttle::narrow(permits.throttle),
        breaker: V::Breaker::narrow(permits.breaker),
        bulkhead: V::Bulkhead::narrow(permits.bulkhead),
        rate_limit: V::RateLimit::narrow(permits.rate_limit),
        budget: V::Budget::narrow(permits.budget),
    }
}

/// What an attempt of a call of shape `V` waits for, as the whole set holds it.
#[inline]
pub(crate) fn widen_pending<V: Shape>(pending: ShapedPending<V>) -> GuardPending {
    match pending {
        Pending::Place { throttle } => Pending::Place { throttle: V::Throttle::widen(throttle) },
        Pending::Turn { throttle, place } => {
            Pending::Turn { throttle: V::Throttle::widen(throttle), place: V::Bulkhead::widen(place) }
        }
    }
}

impl Guards {
    /// The set as a call of shape `V` sees it.
    #[inline(always)]
    pub(crate) fn view<V: Shape>(&self) -> View<'_, V> {
        GuardSet {
            throttle: V::Throttle::view(&self.throttle),
            breaker: V::Breaker::view(&self.breaker),
            bulkhead: V::Bulkhead::view(&self.bulkhead),
            rate_limit: V::RateLimit::view(&self.rate_limit),
            budget: V::Budget::view(&self.budget),
        }
    }
}

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
}

impl GuardCache {
    pub(crate) const fn new(named: bool) -> Self {
        GuardCache { named, global: OnceLock::new(), scoped: Mutex::new(Vec::new()) }
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
