//! A policy's guards as its calls find them: resolved in the registry in
//! effect, the global registry's cached, and a breaker per key's for a
//! call's key.

use super::Policy;
use crate::guards::{Guards, GuardsRef, KeyedSet};

impl Policy {
    /// The guards in effect for a call made now: from the scoped registry
    /// if any, else the global one; resolved by name once per registry.
    #[inline]
    pub(crate) fn guards(&self) -> GuardsRef<'_> {
        self.cache.guards(&self.guard_names)
    }

    /// The global registry's guards, unless a call made now runs inside a
    /// scoped registry.
    #[inline]
    pub(crate) fn global_guards(&self) -> Option<&Guards> {
        self.cache.global_unless_scoped(&self.guard_names, false)
    }

    /// The guards [`global_guards`](Self::global_guards) gave a call
    /// admitted earlier, found again (see `GuardCache::global_again`).
    #[inline]
    pub(crate) fn global_guards_again(&self) -> &Guards {
        self.cache.global_again(&self.guard_names)
    }

    /// [`global_guards`](Self::global_guards) for a caller that knows the
    /// policy names a guard (the attribute's, for a function that does).
    #[inline]
    pub(crate) fn global_named_guards(&self) -> Option<&Guards> {
        self.cache.global_unless_scoped(&self.guard_names, true)
    }

    /// Whether its calls are sheddable and it names a throttle: such a
    /// call's refusal is drawn for with its own multiple of `k`, so it is
    /// never plain (see `Throttle::admitted_quietly`).
    #[inline(always)]
    pub(crate) fn sheds_through_throttle(&self) -> bool {
        self.settings.sheds_through(self.guard_names.throttle.is_some())
    }

    /// Whether a call's key chooses any of its guards (see
    /// [`PolicyBuilder::breaker_per`](super::PolicyBuilder::breaker_per)).
    #[inline(always)]
    pub(crate) fn per_key(&self) -> bool {
        self.per_key
    }

    /// The guards of a call of this policy made now with `key` (see
    /// `GuardCache::per_key`).
    #[inline(always)]
    pub(crate) fn per_key_guards(&self, key: &str) -> KeyedSet<'_> {
        self.cache.per_key(&self.guard_names, key)
    }
}
