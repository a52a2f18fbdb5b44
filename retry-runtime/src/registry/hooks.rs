//! A registry's breaker transition hooks: added and taken out here, shared
//! with its breakers, which announce their transitions to them.

use std::sync::Arc;

use super::Registry;
use crate::breaker::{BreakerTransition, TransitionHook};

impl Registry {
    /// Calls `hook` on every transition of every breaker of this registry,
    /// outside the breaker's lock (a hook may read the breaker).
    ///
    /// A breaker's transitions reach the hooks one at a time and in the
    /// order they were made, so a hook that sets a gauge or appends to a
    /// log ends on the breaker's state. A transition made on one thread
    /// while another is announcing an earlier one is announced by that
    /// other thread, right after: the call that made it may return first.
    ///
    /// A hook that panics is logged at ERROR (target `stormproof_runtime`, with
    /// the breaker, the transition and the panic's message); the other hooks
    /// still hear the transition, and the call announcing it, which may be
    /// another thread's, carries on. Its panic never reaches a caller. (This
    /// needs unwinding: under `panic = "abort"` a hook's panic ends the
    /// process, as any panic does.)
    ///
    /// A hook may add hooks (and read or force breakers): one added while a
    /// transition is announced hears the transitions after it.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::sync::{Arc, Mutex};
    /// use stormproof::{BreakerConfig, Registry};
    /// let registry = Registry::new();
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// registry.on_transition(move |t| log.lock().unwrap().push((t.breaker.to_owned(), t.from, t.to)));
    /// # registry.declare_breaker("b", BreakerConfig::default()).unwrap();
    /// ```
    pub fn on_transition(&self, hook: impl Fn(&BreakerTransition<'_>) + Send + Sync + 'static) {
        self.add_hook(Arc::new(hook));
    }

    /// Adds `hook`, which [`remove_hook`](Self::remove_hook) can take out.
    pub(crate) fn add_hook(&self, hook: TransitionHook) {
        let mut hooks = self.inner.hooks.write().unwrap_or_else(|e| e.into_inner());
        *hooks = hooks.iter().cloned().chain([hook]).collect();
    }

    /// Takes out a hook added with [`add_hook`](Self::add_hook) (the same
    /// `Arc`): a transition announced after this no longer reaches it. One
    /// being announced now, with the list taken before, may still.
    // Only the admin router (feature `axum`) takes its hook out.
    #[cfg_attr(not(feature = "axum"), allow(dead_code))]
    pub(crate) fn remove_hook(&self, hook: &TransitionHook) {
        let mut hooks = self.inner.hooks.write().unwrap_or_else(|e| e.into_inner());
        if hooks.iter().any(|kept| Arc::ptr_eq(kept, hook)) {
            *hooks = hooks.iter().filter(|kept| !Arc::ptr_eq(kept, hook)).cloned().collect();
        }
    }

    /// How many hooks it holds.
    #[cfg(test)]
    pub(crate) fn hook_count(&self) -> usize {
        self.inner.hooks.read().unwrap_or_else(|e| e.into_inner()).len()
    }
}
