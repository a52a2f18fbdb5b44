//! A table of guards of one kind, by name.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockWriteGuard};

use super::RegistryError;

/// What a guard does when a table keeps it (declared, from a file or in
/// code, or made on first use), before any call can find it: a registry
/// makes guards it may set aside (one declared under a name already taken,
/// a reloaded file's, of which it keeps those that exist), and what such a
/// guard would report (a gauge) belongs to the one kept under its name.
pub(crate) trait Kept {
    fn kept(&self) {}
}

/// One kind of guard by name, remembering which were declared and which
/// were created with the defaults on first use.
pub(super) struct Table<T> {
    kind: &'static str,
    entries: RwLock<HashMap<String, Entry<T>>>,
}

struct Entry<T> {
    guard: Arc<T>,
    /// `false` when created with the defaults because a call named it.
    declared: bool,
    /// Whether a call's policy has looked it up.
    resolved: AtomicBool,
}

impl<T> Table<T> {
    pub(super) fn new(kind: &'static str) -> Self {
        Table { kind, entries: RwLock::new(HashMap::new()) }
    }

    pub(super) fn get(&self, name: &str) -> Option<Arc<T>> {
        self.read().get(name).map(|entry| entry.guard.clone())
    }

    pub(super) fn insert(&self, name: &str, value: T) -> Result<(), RegistryError>
    where
        T: Kept,
    {
        let mut entries = self.write();
        if entries.contains_key(name) {
            return Err(RegistryError::AlreadyDeclared { kind: self.kind, name: name.to_owned() });
        }
        value.kept();
        entries.insert(
            name.to_owned(),
            Entry { guard: Arc::new(value), declared: true, resolved: AtomicBool::new(false) },
        );
        Ok(())
    }

    /// Every guard, declared or created on first use, sorted by name.
    pub(super) fn all(&self) -> Vec<(String, Arc<T>)> {
        let mut all: Vec<(String, Arc<T>)> =
            self.read().iter().map(|(name, entry)| (name.clone(), entry.guard.clone())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Whether `name` was declared (not merely created on first use).
    #[cfg_attr(not(feature = "config"), allow(dead_code))]
    pub(super) fn is_declared(&self, name: &str) -> bool {
        self.read().get(name).is_some_and(|entry| entry.declared)
    }

    /// The names declared (not merely created on first use), sorted.
    pub(super) fn declared_names(&self) -> Vec<String> {
        let mut names: Vec<String> =
            self.read().iter().filter(|(_, entry)| entry.declared).map(|(name, _)| name.clone()).collect();
        names.sort();
        names
    }

    /// The names a call's policy has looked up, sorted.
    pub(super) fn resolved_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .read()
            .iter()
            .filter(|(_, entry)| entry.resolved.load(Ordering::Relaxed))
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }

    /// The table held for a configuration file's declarations: no guard of
    /// this kind is created, declared or looked up until it is let go.
    #[cfg_attr(not(feature = "config"), allow(dead_code))]
    pub(super) fn hold(&self) -> Held<'_, T> {
        Held { entries: self.write() }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Entry<T>>> {
        self.entries.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Entry<T>>> {
        self.entries.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The guard a call's policy names (once per policy and registry:
    /// policies cache what this returns), created with the defaults if it
    /// was never declared.
    pub(super) fn get_or_default(&self, name: &str, make: impl FnOnce() -> T) -> Arc<T>
    where
        T: Kept,
    {
        self.get_or_make(name, make, Undeclared::Said)
    }

    /// As [`get_or_default`](Self::get_or_default), for a guard every
    /// operation has by default (its own budget): made without a warning,
    /// since no one was meant to declare it.
    pub(super) fn get_or_make_quietly(&self, name: &str, make: impl FnOnce() -> T) -> Arc<T>
    where
        T: Kept,
    {
        self.get_or_make(name, make, Undeclared::Expected)
    }

    fn get_or_make(&self, name: &str, make: impl FnOnce() -> T, undeclared: Undeclared) -> Arc<T>
    where
        T: Kept,
    {
        if let Some(entry) = self.read().get(name) {
            entry.resolved.store(true, Ordering::Relaxed);
            return entry.guard.clone();
        }
        let mut entries = self.write();
        entries
            .entry(name.to_owned())
            .or_insert_with(|| {
                if undeclared == Undeclared::Said {
                    tracing::warn!(
                    target: crate::observe::target::REGISTRY,
                    kind = self.kind,
                    name,
                    "`{name}` was used but never declared: created with the default settings; declare it at start-up to choose them"
                    );
                }
                let guard = make();
                guard.kept();
                Entry { guard: Arc::new(guard), declared: false, resolved: AtomicBool::new(true) }
            })
            .guard
            .clone()
    }
}

/// Whether a guard made when a call first names it is said to be
/// undeclared (one warning), or was expected to be made so.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Undeclared {
    Said,
    Expected,
}

/// A table held by a configuration file while it declares its guards: a
/// call that names a guard never declared waits, rather than create it with
/// the defaults between the file's checks and its declarations.
#[cfg_attr(not(feature = "config"), allow(dead_code))]
pub(crate) struct Held<'t, T> {
    entries: RwLockWriteGuard<'t, HashMap<String, Entry<T>>>,
}

#[cfg_attr(not(feature = "config"), allow(dead_code))]
impl<T> Held<'_, T> {
    /// The guard under `name`, and whether it was declared (rather than
    /// created with the defaults when a call named it).
    pub(crate) fn get(&self, name: &str) -> Option<(&Arc<T>, bool)> {
        self.entries.get(name).map(|entry| (&entry.guard, entry.declared))
    }

    /// Declares `name` as `guard`, or, when a guard already has the name,
    /// counts that one as declared and drops `guard`. The guard under the
    /// name, and whether it is `guard`.
    pub(crate) fn declare(&mut self, name: &str, guard: T) -> (Arc<T>, bool)
    where
        T: Kept,
    {
        match self.entries.get_mut(name) {
            Some(entry) => {
                entry.declared = true;
                (entry.guard.clone(), false)
            }
            None => {
                guard.kept();
                let guard = Arc::new(guard);
                let entry = Entry { guard: guard.clone(), declared: true, resolved: AtomicBool::new(false) };
                self.entries.insert(name.to_owned(), entry);
                (guard, true)
            }
        }
    }
}
