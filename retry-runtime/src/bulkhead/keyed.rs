//! A bulkhead per key (see [`Keyed`](crate::keyed::Keyed)): a concurrency
//! limit for each tenant, on its template's settings, labelled with its key
//! in metrics.

use std::sync::Arc;
use std::time::Duration;

use super::{Bulkhead, BulkheadConfig};
use crate::keyed::{Keyed, PerKey};

/// A bulkhead per key, bounded (see [`Keyed`]).
pub type KeyedBulkheads = Keyed<Bulkhead>;

impl PerKey for Bulkhead {
    type Config = BulkheadConfig;

    fn current_config(&self) -> BulkheadConfig {
        self.config()
    }

    fn generation(&self) -> u64 {
        self.keyed.generation()
    }

    fn bounds(config: &BulkheadConfig) -> (u32, Duration) {
        (config.max_keys, config.idle_for)
    }

    /// Every place free.
    fn for_key(&self, key: &str, label: Arc<str>, config: BulkheadConfig) -> Bulkhead {
        let bulkhead = Bulkhead::new(self.name(), config)
            .unwrap_or_else(|_| unreachable!("a template's settings are valid"));
        Bulkhead {
            #[cfg(feature = "metrics")]
            gauge_key: crate::observe::bulkhead_key(self.name(), Some(&label)),
            keyed: crate::keyed::KeyedPart::of(key, label),
            ..bulkhead
        }
    }

    fn follow(&self, config: BulkheadConfig) {
        // The template took them.
        let _ = self.reconfigure(config);
    }

    /// One with no attempt in flight goes first: one evicted with attempts
    /// in flight would let its key's next calls in beside them.
    fn evicts_first(&self) -> bool {
        self.in_use() == 0
    }
}

impl Bulkhead {
    /// Its key, for one of a bulkhead per key ([`KeyedBulkheads`]).
    pub fn key(&self) -> Option<&str> {
        self.keyed.key()
    }
}
