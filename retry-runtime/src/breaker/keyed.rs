//! A circuit breaker per key (see [`Keyed`](crate::keyed::Keyed)): each
//! key's breaker is a whole breaker on its template's settings, labelled
//! with its key in metrics, telling the template's hooks of its transitions.

use std::sync::Arc;
use std::time::Duration;

use super::{BreakerConfig, BreakerState, CircuitBreaker};
use crate::keyed::{Keyed, OTHER, PerKey};

/// A circuit breaker per key, bounded (see [`Keyed`]).
pub type KeyedBreakers = Keyed<CircuitBreaker>;

impl PerKey for CircuitBreaker {
    type Config = BreakerConfig;

    fn current_config(&self) -> BreakerConfig {
        self.config()
    }

    fn generation(&self) -> u64 {
        CircuitBreaker::generation(self)
    }

    fn bounds(config: &BreakerConfig) -> (u32, Duration) {
        (config.max_keys, config.idle_for)
    }

    /// Closed, its state gauge set under its label.
    fn for_key(&self, key: &str, label: Arc<str>, config: BreakerConfig) -> CircuitBreaker {
        let breaker = CircuitBreaker::unmeasured(self.name(), config)
            .unwrap_or_else(|_| unreachable!("a template's settings are valid"))
            .with_key(key, label);
        let breaker = match &self.hooks {
            Some(hooks) => breaker.with_hooks(Arc::clone(hooks)),
            None => breaker,
        };
        measure_closed(&breaker);
        breaker
    }

    fn follow(&self, config: BreakerConfig) {
        // The template's settings were valid when it took them.
        let _ = self.reconfigure(config);
    }

    /// A closed breaker goes first: an open one evicted would come back
    /// closed and let its tenant's calls through until it opened again.
    fn evicts_first(&self) -> bool {
        self.state() == BreakerState::Closed
    }

    /// Its state gauge reads closed, as the key's breaker will when it
    /// comes back (a series cannot be removed).
    fn forgotten(&self) {
        measure_closed(self);
    }
}

impl KeyedBreakers {
    /// The set's name (its template's).
    pub fn name(&self) -> &str {
        self.template().name()
    }

    /// The breakers it holds, most recently used first (idle ones forgotten).
    pub fn breakers(&self) -> Vec<Arc<CircuitBreaker>> {
        self.guards()
    }
}

/// Sets a key's state gauge to closed, unless the key is one of those
/// labelled `other`: that series is theirs together, and a key coming or
/// going closed says nothing of the others.
fn measure_closed(breaker: &CircuitBreaker) {
    if breaker.id().key.is_none_or(|(_, label)| label != OTHER) {
        breaker.measure_closed();
    }
}
