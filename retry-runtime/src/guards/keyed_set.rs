//! One call's guards when its policy has guards per key (`per = tenant`):
//! the policy's own, borrowed as any call borrows them, and its key's for
//! the slots per key, held beside them. A plain call sees the slots one by
//! one (`Shape::hold_keyed`) and never builds a set of its own; a path
//! that needs the guards as one set (a failed first attempt, a call that
//! is not plain) has it made once, then borrows it.
//!
//! Found here too: a policy's sets per key in the registry in effect
//! (`PerKeyCache`, the global registry's found once), and a call's key's
//! guards in them (`GuardCache::per_key`).

use std::sync::{Arc, OnceLock};

use crate::breaker::CircuitBreaker;
use crate::budget::RetryBudget;
use crate::bulkhead::Bulkhead;
use crate::guard::GuardSet;
use crate::rate_limit::RateLimit;
use crate::throttle::Throttle;

use super::{GuardCache, GuardNames, Guards, GuardsRef};
use crate::breaker::KeyedBreakers;
use crate::bulkhead::KeyedBulkheads;
use crate::keyed::{Keyed, PerKey};
use crate::rate_limit::KeyedRateLimits;
use crate::registry::{self, Registry};

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

/// One slot's guard for a call with `key`, when the slot is per key
/// (`per`): its key's, in the set named `name` (found by `set`). `None`:
/// the policy's own.
#[inline(always)]
fn key_slot<'s, G: PerKey>(
    per: bool,
    name: Option<&str>,
    key: &str,
    set: impl FnOnce(&str) -> &'s Keyed<G>,
) -> Option<Arc<G>> {
    match (per, name) {
        (true, Some(name)) => Some(set(name).get_inlined(key)),
        _ => None,
    }
}

/// A policy's sets per key in one registry: the global one's, found once
/// (a scoped registry's are found at each call, in a fresh cache).
#[derive(Debug, Default)]
pub(super) struct PerKeyCache {
    breakers: OnceLock<Arc<KeyedBreakers>>,
    rate_limits: OnceLock<Arc<KeyedRateLimits>>,
    bulkheads: OnceLock<Arc<KeyedBulkheads>>,
}

impl PerKeyCache {
    pub(super) const fn new() -> Self {
        PerKeyCache { breakers: OnceLock::new(), rate_limits: OnceLock::new(), bulkheads: OnceLock::new() }
    }

    fn breakers(&self, registry: &Registry, name: &str) -> &KeyedBreakers {
        self.breakers.get_or_init(|| registry.keyed_breakers_or_default(name))
    }

    fn rate_limits(&self, registry: &Registry, name: &str) -> &KeyedRateLimits {
        self.rate_limits.get_or_init(|| registry.keyed_rate_limits_or_default(name))
    }

    fn bulkheads(&self, registry: &Registry, name: &str) -> &KeyedBulkheads {
        self.bulkheads.get_or_init(|| registry.keyed_bulkheads_or_default(name))
    }
}

impl GuardCache {
    /// The guards of a call made now with `key`, for a policy whose names
    /// give it a guard per key: its other guards as [`guards`](Self::guards)
    /// finds them, and its key's breaker, rate limit and bulkhead, from the
    /// registry in effect.
    #[inline(always)]
    pub(crate) fn per_key<'p>(&'p self, names: &GuardNames, key: &str) -> KeyedSet<'p> {
        match registry::with_scoped(|_| ()) {
            Some(()) => self.per_key_scoped(names, key),
            None => self.per_key_in(
                registry::registry(),
                &self.keyed,
                GuardsRef::Cached(self.global(names)),
                names,
                key,
            ),
        }
    }

    /// [`per_key`](Self::per_key) in the scoped registry in effect, whose
    /// sets per key are looked up at each call.
    #[cold]
    #[inline(never)]
    fn per_key_scoped<'p>(&'p self, names: &GuardNames, key: &str) -> KeyedSet<'p> {
        let scoped = registry::Registry::current();
        let base = GuardsRef::Scoped(self.scoped(names, &scoped));
        self.per_key_in(&scoped, &PerKeyCache::default(), base, names, key)
    }

    /// The guards of a call with `key` in `registry`, whose sets per key
    /// `keyed` finds: `base` and the key's.
    #[inline(always)]
    fn per_key_in<'p>(
        &'p self,
        registry: &Registry,
        keyed: &PerKeyCache,
        base: GuardsRef<'p>,
        names: &GuardNames,
        key: &str,
    ) -> KeyedSet<'p> {
        KeyedSet {
            breaker: key_slot(names.breaker_per, names.breaker.as_deref(), key, |name| {
                keyed.breakers(registry, name)
            }),
            rate_limit: key_slot(names.rate_limit_per, names.rate_limit.as_deref(), key, |name| {
                keyed.rate_limits(registry, name)
            }),
            bulkhead: key_slot(names.bulkhead_per, names.bulkhead.as_deref(), key, |name| {
                keyed.bulkheads(registry, name)
            }),
            base,
            whole: OnceLock::new(),
        }
    }
}
