//! Per-operation settings from a configuration file, held by a registry.
//!
//! Each overridden operation's policies count the registries that hold an
//! override for them, so that a call pays one relaxed load while none does.
//! The registry keeps those counters (plain atomics, given by whoever
//! applies the file) and gives its count back when an override goes, or
//! when the registry itself goes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};

use crate::settings::Settings;

/// The override counters of the policies of one operation name.
pub(crate) type OverrideCounters = Vec<&'static AtomicU32>;

#[derive(Default)]
pub(super) struct Overrides {
    by_operation: RwLock<HashMap<String, (Arc<Settings>, OverrideCounters)>>,
}

impl Overrides {
    pub(super) fn get(&self, operation: &str) -> Option<Arc<Settings>> {
        self.by_operation.read().unwrap_or_else(|e| e.into_inner()).get(operation).map(|(s, _)| s.clone())
    }

    /// The operation names with an override, sorted.
    pub(super) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> =
            self.by_operation.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        names.sort();
        names
    }

    /// Replaces every override with `new`, counting this registry in for
    /// the operations it gains and out for those it loses.
    pub(super) fn replace(&self, new: HashMap<String, (Settings, OverrideCounters)>) {
        let mut current = self.by_operation.write().unwrap_or_else(|e| e.into_inner());
        for (name, (_, counters)) in current.iter() {
            if !new.contains_key(name) {
                counters.iter().for_each(|counter| count_out(counter));
            }
        }
        for (name, (_, counters)) in &new {
            if !current.contains_key(name) {
                counters.iter().for_each(|counter| {
                    counter.fetch_add(1, Ordering::Relaxed);
                });
            }
        }
        *current = new
            .into_iter()
            .map(|(name, (settings, counters))| (name, (Arc::new(settings), counters)))
            .collect();
    }
}

fn count_out(counter: &AtomicU32) {
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
}

impl Drop for Overrides {
    fn drop(&mut self) {
        let current = self.by_operation.get_mut().unwrap_or_else(|e| e.into_inner());
        for (_, counters) in current.values() {
            counters.iter().for_each(|counter| count_out(counter));
        }
    }
}
