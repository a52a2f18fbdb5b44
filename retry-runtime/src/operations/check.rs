//! [`Registry::check`]: guard names that would silently get the defaults,
//! guards nothing uses, and configured operations that match nothing.

use std::fmt;

use crate::operations;
use crate::registry::{GuardKind, Registry};
use crate::suggest::closest;

/// What [`Registry::check`] found; [`is_clean`](Self::is_clean) when nothing.
///
/// Its `Display` is one line per finding, ready for a start-up log or panic
/// message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckReport {
    /// Guard names an annotated function uses that are not declared in the
    /// registry: its first call would create them with the defaults.
    pub undeclared: Vec<Undeclared>,
    /// Declared guards that no annotated function names and no call has used.
    pub unused: Vec<Unused>,
    /// Operations configured (`[operations."..."]`) that no annotated function has.
    pub unknown_operations: Vec<String>,
}

/// A guard name used but never declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undeclared {
    /// `breaker`, `budget`, `bulkhead`, `throttle` or `rate_limit` (as [`GuardKind::label`]).
    pub kind: &'static str,
    /// The name as the function wrote it.
    pub name: String,
    /// The operation that uses it.
    pub used_by: String,
    /// The declared name of the same kind it most likely meant.
    pub closest: Option<String>,
}

/// A declared guard that nothing uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unused {
    /// `breaker`, `budget`, `bulkhead`, `throttle` or `rate_limit` (as [`GuardKind::label`]).
    pub kind: &'static str,
    /// Its name.
    pub name: String,
}

impl CheckReport {
    /// Whether nothing was found.
    pub fn is_clean(&self) -> bool {
        self.undeclared.is_empty() && self.unused.is_empty() && self.unknown_operations.is_empty()
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_clean() {
            return f
                .write_str("every guard name is declared and used, and every configured operation exists");
        }
        let mut lines = Vec::new();
        for u in &self.undeclared {
            let hint = u.closest.as_ref().map(|c| format!("; did you mean `{c}`?")).unwrap_or_default();
            lines.push(format!("{} `{}` used by `{}` is not declared{hint}", u.kind, u.name, u.used_by));
        }
        for u in &self.unused {
            lines.push(format!("{} `{}` is declared but nothing uses it", u.kind, u.name));
        }
        for name in &self.unknown_operations {
            lines.push(format!("operation `{name}` is configured but no #[resilient] fn has that name"));
        }
        f.write_str(&lines.join("\n"))
    }
}

impl Registry {
    /// Checks the names in use against this registry: every guard an
    /// annotated function names must be declared (else its first call
    /// creates it with the defaults, usually a typo), every declared guard
    /// should be used, and every configured operation should exist.
    ///
    /// Functions are known from a link-time list of every `#[resilient]`
    /// function in the program. Guards used only through
    /// [`Policy::builder`](crate::Policy::builder) are seen once a call has
    /// used them.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::{breaker::BreakerConfig, Registry};
    /// let registry = Registry::new();
    /// registry.declare_breaker("never-used-in-docs", BreakerConfig::default()).unwrap();
    /// let report = registry.check();
    /// assert!(!report.is_clean());
    /// assert!(report.to_string().contains("breaker `never-used-in-docs` is declared but nothing uses it"));
    /// ```
    pub fn check(&self) -> CheckReport {
        let mut report = CheckReport::default();
        let tables = GuardKind::ALL
            .map(|kind| (kind, kind.label(), self.declared_names(kind), self.resolved_names(kind)));
        let mut used: Vec<(&'static str, String)> = Vec::new();
        for policy in operations::registered() {
            for (guard_kind, kind, declared, _) in &tables {
                let Some(name) = policy.guard_name(*guard_kind) else { continue };
                used.push((kind, name.to_owned()));
                // An operation's own budget and breaker are not meant to be declared.
                let expected = match guard_kind {
                    GuardKind::Budget => policy.has_default_budget(),
                    GuardKind::Breaker => policy.has_default_breaker(),
                    _ => false,
                };
                if !expected && !declared.iter().any(|d| d == name) {
                    report.undeclared.push(Undeclared {
                        kind,
                        name: name.to_owned(),
                        used_by: policy.operation().to_owned(),
                        closest: closest(name, declared.iter().map(String::as_str)).map(str::to_owned),
                    });
                }
            }
        }
        for (_, kind, declared, resolved) in &tables {
            for name in declared {
                let named = used.iter().any(|(k, n)| k == kind && n == name);
                if !named && !resolved.contains(name) {
                    report.unused.push(Unused { kind, name: name.clone() });
                }
            }
        }
        for name in self.overridden_operations() {
            if operations::named(&name).next().is_none() {
                report.unknown_operations.push(name);
            }
        }
        report.undeclared.sort_by(|a, b| (a.kind, &a.name, &a.used_by).cmp(&(b.kind, &b.name, &b.used_by)));
        report.undeclared.dedup();
        report
    }
}
