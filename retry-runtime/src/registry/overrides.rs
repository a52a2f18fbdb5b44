//! Per-operation settings from a configuration file, held by a registry.
//!
//! The annotated function's policy counts the registries that hold an
//! override for it, so that a call pays one relaxed load while none does.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::operations;
use crate::policy::Settings;

#[derive(Default)]
pub(super) struct Overrides {
    by_operation: RwLock<HashMap<String, Arc<Settings>>>,
}

impl Overrides {
    pub(super) fn get(&self, operation: &str) -> Option<Arc<Settings>> {
        self.by_operation.read().unwrap_or_else(|e| e.into_inner()).get(operation).cloned()
    }

    /// The operation names with an override, sorted.
    pub(super) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> =
            self.by_operation.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        names.sort();
        names
    }

    /// Replaces every override with `new`.
    pub(super) fn replace(&self, new: HashMap<String, Settings>) {
        let mut current = self.by_operation.write().unwrap_or_else(|e| e.into_inner());
        for name in current.keys().filter(|name| !new.contains_key(*name)) {
            operations::named(name).for_each(|policy| policy.count_override(false));
        }
        for name in new.keys().filter(|name| !current.contains_key(*name)) {
            operations::named(name).for_each(|policy| policy.count_override(true));
        }
        *current = new.into_iter().map(|(name, settings)| (name, Arc::new(settings))).collect();
    }
}

impl Drop for Overrides {
    fn drop(&mut self) {
        let current = self.by_operation.get_mut().unwrap_or_else(|e| e.into_inner());
        for name in current.keys() {
            operations::named(name).for_each(|policy| policy.count_override(false));
        }
    }
}
