//! The shape of a call: which of the guard set's slots the function names,
//! known when it is compiled, so that a call looks only at those (the
//! compiler sees through the others) and holds only their permits.

use std::sync::Arc;

use crate::breaker::CircuitBreaker;
use crate::budget::RetryBudget;
use crate::bulkhead::Bulkhead;
use crate::guard::{Absent, Admission, Guard, GuardSet, Pending, Permits};
use crate::rate_limit::RateLimit;
use crate::throttle::Throttle;

use super::{GuardPending, GuardPermits, Guards, KeyedSet};

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

/// A slot the function names (see `Slot`): its guard is always there
/// (a name resolves to a guard, declared or made with the defaults).
#[derive(Debug, Clone, Copy)]
pub enum Named {}

/// A slot that may or may not hold a guard, as the call finds it: for
/// callers that do not know which guards a policy names (see [`AnyShape`]).
#[derive(Debug, Clone, Copy)]
pub enum Maybe {}

/// A slot the function does not name (see `Slot`).
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
/// a tuple of [`Named`] and [`Unnamed`] (see `Slot`).
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

    /// What an attempt of this shape keeps of a call's guards for its key.
    fn hold_keyed<'g>(keyed: &'g KeyedSet<'_>) -> Self::Held<'g>;

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

    /// Slot by slot: no set is made.
    #[inline(always)]
    fn hold_keyed<'g>(keyed: &'g KeyedSet<'_>) -> View<'g, Self> {
        GuardSet {
            throttle: T::view(keyed.throttle()),
            breaker: B::view(keyed.breaker()),
            bulkhead: K::view(keyed.bulkhead()),
            rate_limit: R::view(keyed.rate_limit()),
            budget: U::view(keyed.budget()),
        }
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

    /// The slots as one set, made once.
    #[inline(always)]
    fn hold_keyed<'g>(keyed: &'g KeyedSet<'_>) -> &'g Guards {
        keyed.whole()
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
