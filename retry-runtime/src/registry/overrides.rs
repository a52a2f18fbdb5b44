//! Per-operation settings from a configuration file, held by a registry.
//!
//! Each overridden operation's policies count the registries that hold an
//! override for them, so that a call pays one relaxed load while none does.
//! The registry keeps those counters (plain atomics, given by whoever
//! applies the file) and gives its count back when an override goes, or
//! when the registry itself goes.
//!
//! An override counts once in the counter's low half, and once more in its
//! high half ([`FORBIDS_PLAIN`]) when it sets what a plain first attempt
//! cannot honour (a deadline or an attempt timeout, which must be armed as
//! the call starts). One that only tunes the retries (`max_attempts`, the
//! backoff) leaves the first attempt plain: its settings are looked up only
//! if that attempt fails, when the retries begin. So a file that tunes
//! retries costs a successful call nothing, and the lookup (a read lock, a
//! hash of the name) is paid once per failed call, not on every call.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};

use crate::settings::Settings;

/// The override counters of the policies of one operation name.
pub(crate) type OverrideCounters = Vec<&'static AtomicU32>;

/// What an override that a plain first attempt cannot honour adds to a
/// counter, beside the one every override adds: a counter at or above it
/// means that some registry holds one. (65,536 registries overriding one
/// operation at once would carry into it: the calls would then only lose
/// their plain first attempt.)
pub(crate) const FORBIDS_PLAIN: u32 = 1 << 16;

/// What an override of `settings` adds to its policies' counters.
fn weight(settings: &Settings) -> u32 {
    1 + if settings.allow_plain() { 0 } else { FORBIDS_PLAIN }
}

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
    /// the operations it gains, out for those it loses, and again for those
    /// whose override changes weight.
    pub(super) fn replace(&self, new: HashMap<String, (Settings, OverrideCounters)>) {
        let mut current = self.by_operation.write().unwrap_or_else(|e| e.into_inner());
        for (name, (settings, counters)) in current.iter() {
            let kept = new.get(name).is_some_and(|(new, _)| weight(new) == weight(settings));
            if !kept {
                counters.iter().for_each(|counter| count_out(counter, weight(settings)));
            }
        }
        for (name, (settings, counters)) in &new {
            let kept = current.get(name).is_some_and(|(old, _)| weight(old) == weight(settings));
            if !kept {
                counters.iter().for_each(|counter| {
                    counter.fetch_add(weight(settings), Ordering::Relaxed);
                });
            }
        }
        *current = new
            .into_iter()
            .map(|(name, (settings, counters))| (name, (Arc::new(settings), counters)))
            .collect();
    }
}

fn count_out(counter: &AtomicU32, weight: u32) {
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(weight));
}

impl Drop for Overrides {
    fn drop(&mut self) {
        let current = self.by_operation.get_mut().unwrap_or_else(|e| e.into_inner());
        for (settings, counters) in current.values() {
            counters.iter().for_each(|counter| count_out(counter, weight(settings)));
        }
    }
}
