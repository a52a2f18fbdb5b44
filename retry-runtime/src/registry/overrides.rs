//! Per-operation settings from a configuration file, held by a registry.
//!
//! Each overridden operation's policies count the registries that hold an
//! override for them, so that a call pays one relaxed load while none does.
//! The registry keeps those counters (in each policy's [`PolicyOverrides`],
//! given by whoever applies the file) and gives its count back when an
//! override goes, or when the registry itself goes.
//!
//! The global registry also hands each policy its override itself, so
//! that a call through it (every call outside a scoped registry) reads the
//! override without the registry's lock or a hash of the operation's name:
//! a load from the policy's own `ArcSwapOption`, which writes no shared
//! memory but the `Arc`'s count. A scoped registry is looked up by name.
//!
//! An override counts once in the counter's low half, and once more in its
//! high half ([`FORBIDS_PLAIN`]) when it sets what a plain first attempt
//! cannot honour (a deadline or an attempt timeout, which must be armed as
//! the call starts). One that only tunes the retries (`max_attempts`, the
//! backoff) leaves the first attempt plain: its settings are looked up only
//! if that attempt fails, when the retries begin. So a file that tunes
//! retries costs a successful call nothing, and the lookup is paid once per
//! failed call, not on every call.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};

use arc_swap::ArcSwapOption;

use crate::settings::{SettingSource, SettingSources, Settings};

/// What the registries tell a policy of the overrides of its operation.
pub(crate) struct PolicyOverrides {
    /// How many registries hold an override for the operation, and how many
    /// of those a plain first attempt cannot honour (weighted: see [`FORBIDS_PLAIN`]).
    count: AtomicU32,
    /// The global registry's override, if it holds one.
    global: ArcSwapOption<Settings>,
}

impl PolicyOverrides {
    /// No override anywhere.
    pub(crate) const fn new() -> Self {
        PolicyOverrides { count: AtomicU32::new(0), global: ArcSwapOption::const_empty() }
    }

    /// Whether a registry may hold an override (then look it up): one relaxed load.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    /// Whether a registry may hold an override that a plain first attempt
    /// cannot honour: one relaxed load.
    #[inline]
    pub(crate) fn forbid_plain(&self) -> bool {
        self.count.load(Ordering::Relaxed) >= FORBIDS_PLAIN
    }

    /// The global registry's override, if it holds one.
    #[inline]
    pub(crate) fn global(&self) -> Option<Arc<Settings>> {
        self.global.load_full()
    }
}

/// The policies of one operation name: what each knows of its overrides,
/// and the settings it was compiled with (an override lays its keys over
/// each one's own: see `Settings::overlaid`).
pub(crate) type OverriddenPolicies = Vec<(&'static PolicyOverrides, Settings)>;

/// What an override that a plain first attempt cannot honour adds to a
/// counter, beside the one every override adds: a counter at or above it
/// means that some registry holds one. (65,536 registries overriding one
/// operation at once would carry into it: the calls would then only lose
/// their plain first attempt.)
pub(crate) const FORBIDS_PLAIN: u32 = 1 << 16;

/// What an override of `settings` (whose keys came from `sources`) adds
/// to its policies' counters. Besides settings a plain first attempt
/// cannot honour (a deadline, an attempt timeout, hedging), a file's
/// `breaker = "none"` and `priority` forbid it too: a plain first attempt
/// asks the guards it was compiled with, with the priority it was compiled
/// with, should it have to be admitted properly after all.
fn weight(settings: &Settings, sources: &SettingSources) -> u32 {
    let plain = settings.allow_plain() && settings.breaker && sources.priority == SettingSource::Compiled;
    1 + if plain { 0 } else { FORBIDS_PLAIN }
}

#[derive(Default)]
pub(super) struct Overrides {
    by_operation: RwLock<HashMap<String, Override>>,
}

/// One operation's override: its settings (the first function's, with the
/// file's keys), where each comes from, and the operation's policies, each
/// with its own settings under the override.
struct Override {
    settings: Arc<Settings>,
    sources: SettingSources,
    policies: Vec<(&'static PolicyOverrides, Arc<Settings>)>,
}

impl Override {
    /// The settings a policy (its counters `overrides`, compiled with
    /// `compiled`) runs on under this override: one of the operation's
    /// functions finds its own made already; another policy of the name
    /// (a builder's) has them made now.
    fn for_policy(&self, overrides: &PolicyOverrides, compiled: Settings) -> Arc<Settings> {
        match self.policies.iter().find(|(policy, _)| std::ptr::eq(*policy, overrides)) {
            Some((_, settings)) => Arc::clone(settings),
            None => Arc::new(compiled.overlaid(&self.settings, &self.sources)),
        }
    }
}

impl Overrides {
    /// Whether an override of `operation` is held.
    #[cfg_attr(not(feature = "config"), allow(dead_code))]
    pub(super) fn contains(&self, operation: &str) -> bool {
        self.by_operation.read().unwrap_or_else(|e| e.into_inner()).contains_key(operation)
    }

    /// The settings a policy of `operation` (its counters `overrides`,
    /// compiled with `compiled`) runs on under the override held, if any.
    pub(super) fn get_for(
        &self,
        operation: &str,
        overrides: &PolicyOverrides,
        compiled: Settings,
    ) -> Option<Arc<Settings>> {
        let current = self.by_operation.read().unwrap_or_else(|e| e.into_inner());
        current.get(operation).map(|o| o.for_policy(overrides, compiled))
    }

    pub(super) fn get_with_sources(&self, operation: &str) -> Option<(Settings, SettingSources)> {
        let current = self.by_operation.read().unwrap_or_else(|e| e.into_inner());
        current.get(operation).map(|o| (*o.settings, o.sources.clone()))
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
    /// whose override changes weight. The global registry (`global`) also
    /// hands each policy its new override, or takes back the one it lost.
    pub(super) fn replace(
        &self,
        new: HashMap<String, (Settings, SettingSources, OverriddenPolicies)>,
        global: bool,
    ) {
        let mut current = self.by_operation.write().unwrap_or_else(|e| e.into_inner());
        for (name, Override { settings, sources, policies }) in current.iter() {
            let kept = new
                .get(name)
                .is_some_and(|(new, new_sources, _)| weight(new, new_sources) == weight(settings, sources));
            if !kept {
                policies.iter().for_each(|(policy, _)| count_out(&policy.count, weight(settings, sources)));
            }
            if global && !new.contains_key(name) {
                policies.iter().for_each(|(policy, _)| policy.global.store(None));
            }
        }
        for (name, (settings, sources, policies)) in &new {
            let kept = current
                .get(name)
                .is_some_and(|old| weight(&old.settings, &old.sources) == weight(settings, sources));
            if !kept {
                policies.iter().for_each(|(policy, _)| {
                    policy.count.fetch_add(weight(settings, sources), Ordering::Relaxed);
                });
            }
        }
        *current = new
            .into_iter()
            .map(|(name, (settings, sources, policies))| {
                let policies = policies
                    .into_iter()
                    .map(|(policy, compiled)| (policy, Arc::new(compiled.overlaid(&settings, &sources))))
                    .collect();
                (name, Override { settings: Arc::new(settings), sources, policies })
            })
            .collect();
        if global {
            for Override { policies, .. } in current.values() {
                policies
                    .iter()
                    .for_each(|(policy, settings)| policy.global.store(Some(Arc::clone(settings))));
            }
        }
    }
}

fn count_out(counter: &AtomicU32, weight: u32) {
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(weight));
}

impl Drop for Overrides {
    // Only a registry that is not the global one goes: it hands out no overrides.
    fn drop(&mut self) {
        let current = self.by_operation.get_mut().unwrap_or_else(|e| e.into_inner());
        for Override { settings, sources, policies } in current.values() {
            policies.iter().for_each(|(policy, _)| count_out(&policy.count, weight(settings, sources)));
        }
    }
}
