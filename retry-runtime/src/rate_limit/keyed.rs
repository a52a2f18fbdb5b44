//! A rate limit per key (see [`Keyed`](crate::keyed::Keyed)): a quota for
//! each tenant, on its template's settings, labelled with its key in metrics.

use std::sync::Arc;
use std::time::Duration;

use super::{RateLimit, RateLimitConfig};
use crate::keyed::{Keyed, PerKey};

/// A rate limit per key, bounded (see [`Keyed`]).
pub type KeyedRateLimits = Keyed<RateLimit>;

impl PerKey for RateLimit {
    type Config = RateLimitConfig;

    fn current_config(&self) -> RateLimitConfig {
        self.config()
    }

    fn generation(&self) -> u64 {
        self.keyed.generation()
    }

    fn bounds(config: &RateLimitConfig) -> (u32, Duration) {
        (config.max_keys, config.idle_for)
    }

    /// Its quota full.
    fn for_key(&self, key: &str, label: Arc<str>, config: RateLimitConfig) -> RateLimit {
        let limit = RateLimit::new(self.name(), config)
            .unwrap_or_else(|_| unreachable!("a template's settings are valid"));
        RateLimit { keyed: crate::keyed::KeyedPart::of(key, label), ..limit }
    }

    fn follow(&self, config: RateLimitConfig) {
        // The template took them, so its quota is this one's.
        let _ = self.reconfigure(config);
    }
}

impl RateLimit {
    /// Its key, for one of a rate limit per key ([`KeyedRateLimits`]).
    pub fn key(&self) -> Option<&str> {
        self.keyed.key()
    }
}
