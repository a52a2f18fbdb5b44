//! The registry's guards per key: one set per kind and name, its settings
//! the guard of that name's (see `keyed`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::Registry;
use crate::breaker::{CircuitBreaker, KeyedBreakers};
use crate::bulkhead::{Bulkhead, KeyedBulkheads};
use crate::keyed::{Keyed, PerKey};
use crate::rate_limit::{KeyedRateLimits, RateLimit};

/// The sets of one kind, by name.
pub(super) type Sets<G> = Mutex<HashMap<String, Arc<Keyed<G>>>>;

impl Registry {
    /// The breaker of `key` in the set of breakers per key named `name`
    /// (made on first use, with the settings of the breaker declared under
    /// `name`, or the defaults): the one every call of
    /// `#[resilient(breaker = "search", per = tenant)]` with that tenant
    /// uses. It makes the key if the set does not hold it, as a call would;
    /// [`Keyed::peek`] reads a key's without.
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

    /// The rate limit of `key` in the set of rate limits per key named
    /// `name` (made as [`breaker_for`](Self::breaker_for) makes a breaker):
    /// the quota every call of `#[resilient(rate_limit = "api", per =
    /// tenant)]` with that tenant takes its turns from.
    pub fn rate_limit_for(&self, name: &str, key: impl std::fmt::Display) -> Arc<RateLimit> {
        self.keyed_rate_limits_or_default(name).get(&key.to_string())
    }

    /// The bulkhead of `key` in the set of bulkheads per key named `name`
    /// (made as [`breaker_for`](Self::breaker_for) makes a breaker): the
    /// limit on every call of `#[resilient(bulkhead = "db", per = tenant)]`
    /// with that tenant in flight at once.
    pub fn bulkhead_for(&self, name: &str, key: impl std::fmt::Display) -> Arc<Bulkhead> {
        self.keyed_bulkheads_or_default(name).get(&key.to_string())
    }

    /// The set of bulkheads per key named `name`, if a call or
    /// [`bulkhead_for`](Self::bulkhead_for) made it.
    pub fn keyed_bulkheads(&self, name: &str) -> Option<Arc<KeyedBulkheads>> {
        lock(&self.inner.keyed_bulkheads).get(name).cloned()
    }

    /// Every set of bulkheads per key, sorted by name.
    pub fn all_keyed_bulkheads(&self) -> Vec<(String, Arc<KeyedBulkheads>)> {
        all(&self.inner.keyed_bulkheads)
    }

    /// The set of bulkheads named `name`, made as the breakers' is.
    pub(crate) fn keyed_bulkheads_or_default(&self, name: &str) -> Arc<KeyedBulkheads> {
        or_default(&self.inner.keyed_bulkheads, name, || self.bulkhead_or_default(name))
    }

    /// The set of breakers per key named `name`, if a call or
    /// [`breaker_for`](Self::breaker_for) made it.
    pub fn keyed_breakers(&self, name: &str) -> Option<Arc<KeyedBreakers>> {
        lock(&self.inner.keyed_breakers).get(name).cloned()
    }

    /// The set of rate limits per key named `name`, if a call or
    /// [`rate_limit_for`](Self::rate_limit_for) made it.
    pub fn keyed_rate_limits(&self, name: &str) -> Option<Arc<KeyedRateLimits>> {
        lock(&self.inner.keyed_rate_limits).get(name).cloned()
    }

    /// Every set of breakers per key, sorted by name: for dashboards.
    pub fn all_keyed_breakers(&self) -> Vec<(String, Arc<KeyedBreakers>)> {
        all(&self.inner.keyed_breakers)
    }

    /// Every set of rate limits per key, sorted by name.
    pub fn all_keyed_rate_limits(&self) -> Vec<(String, Arc<KeyedRateLimits>)> {
        all(&self.inner.keyed_rate_limits)
    }

    /// The set of breakers named `name`, made now if it was not: its
    /// template is the breaker of that name (declared, or made with the
    /// defaults and one warning, as a breaker named by a call is).
    pub(crate) fn keyed_breakers_or_default(&self, name: &str) -> Arc<KeyedBreakers> {
        or_default(&self.inner.keyed_breakers, name, || self.breaker_or_default(name))
    }

    /// The set of rate limits named `name`, made as the breakers' is.
    pub(crate) fn keyed_rate_limits_or_default(&self, name: &str) -> Arc<KeyedRateLimits> {
        or_default(&self.inner.keyed_rate_limits, name, || self.rate_limit_or_default(name))
    }
}

fn lock<G: PerKey>(sets: &Sets<G>) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Keyed<G>>>> {
    sets.lock().unwrap_or_else(|e| e.into_inner())
}

fn all<G: PerKey>(sets: &Sets<G>) -> Vec<(String, Arc<Keyed<G>>)> {
    let mut all: Vec<_> = lock(sets).iter().map(|(name, set)| (name.clone(), Arc::clone(set))).collect();
    all.sort_by(|(a, _), (b, _)| a.cmp(b));
    all
}

/// The set named `name`, made with `template` if there was none (looked
/// up outside the sets' lock: it may take the registry's tables').
fn or_default<G: PerKey>(sets: &Sets<G>, name: &str, template: impl FnOnce() -> Arc<G>) -> Arc<Keyed<G>> {
    if let Some(set) = lock(sets).get(name) {
        return Arc::clone(set);
    }
    let template = template();
    Arc::clone(lock(sets).entry(name.to_owned()).or_insert_with(|| Arc::new(Keyed::new(template))))
}
