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
    /// use stormproof::{breaker::BreakerConfig, Registry};
    /// let registry = Registry::new();
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// registry.on_transition(move |t| log.lock().unwrap().push((t.breaker.to_owned(), t.from, t.to)));
    /// # registry.declare_breaker("b", BreakerConfig::default()).unwrap();
    /// ```
    pub fn on_transition(&self, hook: impl Fn(&BreakerTransition<'_>) + Send + Sync + 'static) {
        self.add_transition_hook(Arc::new(hook));
    }

    /// Adds `hook` as [`on_transition`](Self::on_transition) does, keeping
    /// it in a shared [`TransitionHook`] so that
    /// [`remove_transition_hook`](Self::remove_transition_hook) can take it
    /// out again (the dashboard's router does, when dropped).
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::sync::Arc;
    /// use stormproof::{Registry, breaker::TransitionHook};
    /// let registry = Registry::new();
    /// let hook: TransitionHook = Arc::new(|t| println!("{} went {:?}", t.breaker, t.to));
    /// registry.add_transition_hook(hook.clone());
    /// registry.remove_transition_hook(&hook);
    /// ```
    pub fn add_transition_hook(&self, hook: TransitionHook) {
        let mut hooks = self.inner.hooks.write().unwrap_or_else(|e| e.into_inner());
        *hooks = hooks.iter().cloned().chain([hook]).collect();
    }

    /// Takes out a hook added with
    /// [`add_transition_hook`](Self::add_transition_hook) (the same `Arc`):
    /// a transition announced after this no longer reaches it. One being
    /// announced now, with the list taken before, may still. A hook it
    /// does not hold is no error: nothing changes.
    pub fn remove_transition_hook(&self, hook: &TransitionHook) {
        let mut hooks = self.inner.hooks.write().unwrap_or_else(|e| e.into_inner());
        if hooks.iter().any(|kept| Arc::ptr_eq(kept, hook)) {
            *hooks = hooks.iter().filter(|kept| !Arc::ptr_eq(kept, hook)).cloned().collect();
        }
    }

    /// How many transition hooks it holds: a component that adds one for
    /// as long as it lives (the dashboard's router) can be checked to take
    /// it out.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// let registry = stormproof::Registry::new();
    /// registry.on_transition(|_| {});
    /// assert_eq!(registry.transition_hook_count(), 1);
    /// ```
    pub fn transition_hook_count(&self) -> usize {
        self.inner.hooks.read().unwrap_or_else(|e| e.into_inner()).len()
    }
}
