//! The registry's breakers per key: one set per name, its settings the
//! breaker of that name's (see `breaker::keyed`).

use std::sync::Arc;

use super::Registry;
use crate::breaker::{CircuitBreaker, KeyedBreakers};

impl Registry {
    /// The breaker of `key` in the set of breakers per key named `name`
    /// (made on first use, with the settings of the breaker declared under
    /// `name`, or the defaults): the one every call of
    /// `#[resilient(breaker = "search", per = tenant)]` with that tenant uses.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use stormproof::{Registry, breaker::BreakerState};
    /// let registry = Registry::new();
    /// registry.breaker_for("search", "tenant-a").force_open();
    /// assert_eq!(registry.breaker_for("search", "tenant-a").state(), BreakerState::Open);
    /// assert_eq!(registry.breaker_for("search", 42).state(), BreakerState::Closed);
    /// # }
    /// ```
    pub fn breaker_for(&self, name: &str, key: impl std::fmt::Display) -> Arc<CircuitBreaker> {
        self.keyed_breakers_or_default(name).get(&key.to_string())
    }

    /// The set of breakers per key named `name`, if a call or
    /// [`breaker_for`](Self::breaker_for) made it.
    pub fn keyed_breakers(&self, name: &str) -> Option<Arc<KeyedBreakers>> {
        self.inner.keyed_breakers.lock().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
    }

    /// Every set of breakers per key, sorted by name: for dashboards.
    pub fn all_keyed_breakers(&self) -> Vec<(String, Arc<KeyedBreakers>)> {
        let sets = self.inner.keyed_breakers.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<_> = sets.iter().map(|(name, set)| (name.clone(), Arc::clone(set))).collect();
        all.sort_by(|(a, _), (b, _)| a.cmp(b));
        all
    }

    /// The set named `name`, made now if it was not: its template is the
    /// breaker of that name (declared, or made with the defaults and one
    /// warning, as a breaker named by a call is).
    pub(crate) fn keyed_breakers_or_default(&self, name: &str) -> Arc<KeyedBreakers> {
        if let Some(set) = self.keyed_breakers(name) {
            return set;
        }
        let template = self.breaker_or_default(name);
        let mut sets = self.inner.keyed_breakers.lock().unwrap_or_else(|e| e.into_inner());
        let set = sets
            .entry(name.to_owned())
            .or_insert_with(|| Arc::new(KeyedBreakers::new(template, Some(self.inner.hooks.clone()))));
        Arc::clone(set)
    }
}
