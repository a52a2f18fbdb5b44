//! One call's guards when its policy has guards per key (`per = tenant`):
//! the policy's own, borrowed as any call borrows them, and its key's for
//! the slots per key, held beside them. A plain call sees the slots one by
//! one (`Shape::hold_keyed`) and never builds a set of its own; a path
//! that needs the guards as one set (a failed first attempt, a call that
//! is not plain) has it made once, then borrows it.

use std::sync::{Arc, OnceLock};

use crate::breaker::CircuitBreaker;
use crate::budget::RetryBudget;
use crate::bulkhead::Bulkhead;
use crate::guard::GuardSet;
use crate::rate_limit::RateLimit;
use crate::throttle::Throttle;

use super::{Guards, GuardsRef};

/// A call's guards for its key (see the module docs).
#[derive(Debug)]
pub struct KeyedSet<'p> {
    /// The policy's guards in the registry in effect.
    pub(super) base: GuardsRef<'p>,
    /// The key's breaker, for a breaker per key.
    pub(super) breaker: Option<Arc<CircuitBreaker>>,
    /// The key's bulkhead, for a bulkhead per key.
    pub(super) bulkhead: Option<Arc<Bulkhead>>,
    /// The key's rate limit, for a rate limit per key.
    pub(super) rate_limit: Option<Arc<RateLimit>>,
    /// The whole set, once a path asked for it.
    pub(super) whole: OnceLock<Guards>,
}

impl KeyedSet<'_> {
    /// The throttle's slot: the policy's (a throttle is never per key).
    #[inline(always)]
    pub(crate) fn throttle(&self) -> &Option<Arc<Throttle>> {
        &self.base.throttle
    }

    /// The breaker's slot: the key's, else the policy's.
    #[inline(always)]
    pub(crate) fn breaker(&self) -> &Option<Arc<CircuitBreaker>> {
        if self.breaker.is_some() { &self.breaker } else { &self.base.breaker }
    }

    /// The bulkhead's slot: the key's, else the policy's.
    #[inline(always)]
    pub(crate) fn bulkhead(&self) -> &Option<Arc<Bulkhead>> {
        if self.bulkhead.is_some() { &self.bulkhead } else { &self.base.bulkhead }
    }

    /// The rate limit's slot: the key's, else the policy's.
    #[inline(always)]
    pub(crate) fn rate_limit(&self) -> &Option<Arc<RateLimit>> {
        if self.rate_limit.is_some() { &self.rate_limit } else { &self.base.rate_limit }
    }

    /// The budget's slot: the policy's (a budget is never per key).
    #[inline(always)]
    pub(crate) fn budget(&self) -> &Option<Arc<RetryBudget>> {
        &self.base.budget
    }

    /// The slots as one set, made at the first call of this and kept.
    #[inline]
    pub(crate) fn whole(&self) -> &Guards {
        self.whole.get_or_init(|| self.to_set())
    }

    /// The slots as one set, made now (its handles cloned).
    #[cold]
    #[inline(never)]
    pub(crate) fn to_set(&self) -> Guards {
        GuardSet {
            throttle: self.throttle().clone(),
            breaker: self.breaker().clone(),
            bulkhead: self.bulkhead().clone(),
            rate_limit: self.rate_limit().clone(),
            budget: self.budget().clone(),
        }
    }
}
