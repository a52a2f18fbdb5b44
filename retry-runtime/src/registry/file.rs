//! Loading and reloading a registry from a configuration file (feature
//! `config`): all or nothing, keeping every guard's state.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use super::Registry;
use crate::breaker::BreakerConfig;
use crate::budget::BudgetConfig;
use crate::bulkhead::BulkheadConfig;
use crate::file::{self, ConfigFile, ConfigFileError, Named, OperationOverride, Problem, Problems};
use crate::operations;
use crate::policy::{MAX_ATTEMPTS_LIMIT, Policy, Settings};

/// What a reload changed, one entry per guard or operation.
///
/// Its `Display` is one line per change, for the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReloadReport {
    /// Each change, in the order of the file's sections.
    pub changes: Vec<Change>,
}

/// One guard's or operation's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `breaker`, `budget`, `bulkhead` or `operation`.
    pub kind: &'static str,
    /// Its name.
    pub name: String,
    /// What changed: `declared`, `override removed`, or `key old -> new` per key.
    pub details: Vec<String>,
}

impl ReloadReport {
    /// Whether the reload changed nothing.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}

impl fmt::Display for ReloadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.changes.is_empty() {
            return f.write_str("nothing changed");
        }
        let lines: Vec<String> = self
            .changes
            .iter()
            .map(|c| format!("{} `{}`: {}", c.kind, c.name, c.details.join(", ")))
            .collect();
        f.write_str(&lines.join("\n"))
    }
}

/// Whether a file declares guards (a first load) or changes them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Load,
    Reload,
}

impl Registry {
    /// Declares every guard and operation override of a TOML text (see the
    /// schema in the crate docs). A guard that already exists is an error:
    /// use [`reload_toml`](Self::reload_toml) to change it. Nothing is
    /// applied from a text with any error; every error says where it is.
    ///
    /// ```
    /// # use retry_runtime as resilient;
    /// use resilient::Registry;
    /// let registry = Registry::new();
    /// registry.load_toml("[breakers.payment]\nfailure_threshold = 8\nopen_for_ms = 5_000").unwrap();
    /// assert_eq!(registry.breaker("payment").unwrap().config().failure_threshold, 8);
    ///
    /// let err = Registry::new().load_toml("[breakers.payment]\nfailure_threshold = 0").unwrap_err();
    /// assert_eq!(err.to_string(), "<toml>:2:21: `failure_threshold` must be greater than zero");
    /// ```
    pub fn load_toml(&self, text: &str) -> Result<(), ConfigFileError> {
        self.apply(text, "<toml>", Mode::Load).map(drop)
    }

    /// [`load_toml`](Self::load_toml) from a file.
    pub fn load_file(&self, path: impl AsRef<Path>) -> Result<(), ConfigFileError> {
        let (text, name) = read(path.as_ref())?;
        self.apply(&text, &name, Mode::Load).map(drop)
    }

    /// Applies a changed TOML text, all or nothing, keeping every guard's
    /// state: an open breaker stays open (its remaining time recomputed from
    /// the new `open_for_ms`), its failure history is kept and judged by the
    /// new threshold at the next event, budget tokens are kept (clamped to
    /// a smaller capacity), a bulkhead is resized without touching permits
    /// in use. Guards the text does not mention keep their settings; new
    /// ones are declared. Operation overrides become the text's: one it no
    /// longer has is removed, and the function runs on its compiled
    /// settings again from its next call. Returns what changed.
    ///
    /// ```
    /// # use retry_runtime as resilient;
    /// use resilient::Registry;
    /// let registry = Registry::new();
    /// registry.load_toml("[budgets.db]\ncapacity = 50").unwrap();
    /// let report = registry.reload_toml("[budgets.db]\ncapacity = 20").unwrap();
    /// assert_eq!(report.to_string(), "budget `db`: capacity 50 -> 20");
    /// ```
    pub fn reload_toml(&self, text: &str) -> Result<ReloadReport, ConfigFileError> {
        self.apply(text, "<toml>", Mode::Reload)
    }

    /// [`reload_toml`](Self::reload_toml) from a file.
    pub fn reload_file(&self, path: impl AsRef<Path>) -> Result<ReloadReport, ConfigFileError> {
        let (text, name) = read(path.as_ref())?;
        self.apply(&text, &name, Mode::Reload)
    }

    fn apply(&self, text: &str, name: &str, mode: Mode) -> Result<ReloadReport, ConfigFileError> {
        let parsed = file::parse(text, name)?;
        // One file at a time: the checks below and the changes after them
        // see the same registry.
        let _applying = self.inner.applying.lock().unwrap_or_else(|e| e.into_inner());
        let mut problems = Problems::new(text, name);
        if mode == Mode::Load {
            self.refuse_existing(&parsed, &mut problems);
        }
        let operations = merged_operations(&parsed.operations, &mut problems);
        let parsed = problems.finish(parsed)?;
        // Everything is valid: from here on nothing can fail.
        let mut report = ReloadReport::default();
        for Named { name, value, .. } in &parsed.breakers {
            let change = match self.inner.breakers.get(name) {
                Some(breaker) => {
                    reconfigure(&breaker.config(), value, breaker_diff, |c| breaker.reconfigure(c))
                }
                None => Some(declared(self.declare_breaker(name, *value))),
            };
            report.push("breaker", name, change);
        }
        for Named { name, value, .. } in &parsed.budgets {
            let change = match self.inner.budgets.get(name) {
                Some(budget) => reconfigure(&budget.config(), value, budget_diff, |c| budget.reconfigure(c)),
                None => Some(declared(self.declare_budget(name, *value))),
            };
            report.push("budget", name, change);
        }
        for Named { name, value, .. } in &parsed.bulkheads {
            let change = match self.inner.bulkheads.get(name) {
                Some(bulkhead) => {
                    reconfigure(&bulkhead.config(), value, bulkhead_diff, |c| bulkhead.reconfigure(c))
                }
                None => Some(declared(self.declare_bulkhead(name, *value))),
            };
            report.push("bulkhead", name, change);
        }
        let before: HashMap<String, Settings> = self
            .inner
            .overrides
            .names()
            .into_iter()
            .filter_map(|name| Some((name.clone(), *self.inner.overrides.get(&name)?)))
            .collect();
        for (name, settings) in &operations {
            let compiled = before.get(name).copied().or_else(|| compiled(name).map(Policy::settings));
            let details = match compiled {
                Some(old) if old == *settings && before.contains_key(name) => continue,
                Some(old) => settings_diff(&old, settings),
                None => vec!["override set".to_owned()],
            };
            report.changes.push(Change { kind: "operation", name: name.clone(), details });
        }
        for name in before.keys().filter(|name| !operations.contains_key(*name)) {
            report.push("operation", name, Some(vec!["override removed".to_owned()]));
        }
        self.inner.overrides.replace(operations);
        Ok(report)
    }

    fn refuse_existing(&self, parsed: &ConfigFile, problems: &mut Problems<'_>) {
        refuse("breaker", &parsed.breakers, |n| self.inner.breakers.get(n).is_some(), problems);
        refuse("budget", &parsed.budgets, |n| self.inner.budgets.get(n).is_some(), problems);
        refuse("bulkhead", &parsed.bulkheads, |n| self.inner.bulkheads.get(n).is_some(), problems);
    }
}

impl ReloadReport {
    fn push(&mut self, kind: &'static str, name: &str, details: Option<Vec<String>>) {
        if let Some(details) = details.filter(|d| !d.is_empty()) {
            self.changes.push(Change { kind, name: name.to_owned(), details });
        }
    }
}

/// A load's problem for each table naming a guard that already exists.
fn refuse<T>(kind: &str, named: &[Named<T>], exists: impl Fn(&str) -> bool, problems: &mut Problems<'_>) {
    for table in named.iter().filter(|table| exists(&table.name)) {
        problems.push(
            &table.span,
            Some(&table.name),
            format!("{kind} `{}` already exists: loading declares, use reload to change it", table.name),
        );
    }
}

/// Applies `new` through `apply` when it differs from `old`; what changed.
fn reconfigure<C: PartialEq + Copy, E: fmt::Debug>(
    old: &C,
    new: &C,
    diff: fn(&C, &C) -> Vec<String>,
    apply: impl FnOnce(C) -> Result<(), E>,
) -> Option<Vec<String>> {
    if old == new {
        return None;
    }
    // Validated with the rest of the file before anything was applied.
    apply(*new).ok()?;
    Some(diff(old, new))
}

fn declared<E>(result: Result<(), E>) -> Vec<String> {
    match result {
        Ok(()) => vec!["declared".to_owned()],
        // Refused only if declared meanwhile, which the lock rules out.
        Err(_) => Vec::new(),
    }
}

/// `key old -> new` for each key that differs.
fn changes(pairs: &[(&str, String, String)]) -> Vec<String> {
    pairs
        .iter()
        .filter(|(_, old, new)| old != new)
        .map(|(key, old, new)| format!("{key} {old} -> {new}"))
        .collect()
}

fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

fn maybe<T>(value: Option<T>, show: impl Fn(T) -> String) -> String {
    value.map_or_else(|| "none".to_owned(), show)
}

fn breaker_diff(old: &BreakerConfig, new: &BreakerConfig) -> Vec<String> {
    changes(&[
        ("failure_threshold", old.failure_threshold.to_string(), new.failure_threshold.to_string()),
        ("window_ms", ms(old.window), ms(new.window)),
        ("open_for_ms", ms(old.open_for), ms(new.open_for)),
        ("success_threshold", old.success_threshold.to_string(), new.success_threshold.to_string()),
        ("half_open_max_calls", old.half_open_max_calls.to_string(), new.half_open_max_calls.to_string()),
        (
            "failure_rate_percent",
            maybe(old.failure_rate_percent, |p| p.to_string()),
            maybe(new.failure_rate_percent, |p| p.to_string()),
        ),
        ("minimum_calls", old.minimum_calls.to_string(), new.minimum_calls.to_string()),
    ])
}

fn budget_diff(old: &BudgetConfig, new: &BudgetConfig) -> Vec<String> {
    changes(&[
        ("capacity", old.capacity.to_string(), new.capacity.to_string()),
        ("retry_cost", old.retry_cost.to_string(), new.retry_cost.to_string()),
        ("refill_per_success", old.refill_per_success.to_string(), new.refill_per_success.to_string()),
    ])
}

fn bulkhead_diff(old: &BulkheadConfig, new: &BulkheadConfig) -> Vec<String> {
    changes(&[
        ("max_concurrent", old.max_concurrent.to_string(), new.max_concurrent.to_string()),
        ("max_wait_ms", maybe(old.max_wait, ms), maybe(new.max_wait, ms)),
    ])
}

fn settings_diff(old: &Settings, new: &Settings) -> Vec<String> {
    changes(&[
        ("max_attempts", old.max_attempts.to_string(), new.max_attempts.to_string()),
        ("base_ms", ms(old.backoff.base), ms(new.backoff.base)),
        ("cap_ms", ms(old.backoff.cap), ms(new.backoff.cap)),
        ("jitter", old.backoff.jitter.to_string(), new.backoff.jitter.to_string()),
        ("attempt_timeout_ms", maybe(old.attempt_timeout, ms), maybe(new.attempt_timeout, ms)),
        ("deadline_ms", maybe(old.deadline, ms), maybe(new.deadline, ms)),
    ])
}

/// The first annotated function with this operation name.
fn compiled(name: &str) -> Option<&'static Policy> {
    operations::named(name).next()
}

/// Each operation's settings with its overrides applied, checked as the
/// attribute checks its arguments, and against every compile-time promise
/// of the functions of that name.
fn merged_operations(
    operations: &[Named<OperationOverride>],
    problems: &mut Problems<'_>,
) -> HashMap<String, Settings> {
    let mut merged = HashMap::new();
    for Named { name, span, value } in operations {
        let policies: Vec<&'static Policy> = operations::named(name).collect();
        let base = policies
            .first()
            .map_or_else(|| Policy::builder().build().map(|p| p.settings()).ok(), |p| Some(p.settings()));
        let Some(mut settings) = base else { continue };
        if let Some((n, _)) = &value.max_attempts {
            settings.max_attempts = *n;
        }
        if let Some((d, _)) = &value.base {
            settings.backoff.base = *d;
        }
        if let Some((d, _)) = &value.cap {
            settings.backoff.cap = *d;
        }
        if let Some((j, _)) = &value.jitter {
            settings.backoff.jitter = *j;
        }
        if let Some((d, _)) = &value.attempt_timeout {
            settings.attempt_timeout = Some(*d);
        }
        if let Some((d, _)) = &value.deadline {
            settings.deadline = Some(*d);
        }
        let at = |key: Option<file::Span>| key.unwrap_or_else(|| span.clone());
        let before = problems.len();
        if !(1..=MAX_ATTEMPTS_LIMIT).contains(&settings.max_attempts) {
            let message =
                format!("`max_attempts` must be in 1..={MAX_ATTEMPTS_LIMIT}, got {}", settings.max_attempts);
            problems.push(
                &at(value.max_attempts.as_ref().map(|(_, s)| s.clone())),
                Some("max_attempts"),
                message,
            );
        }
        if settings.backoff.base > settings.backoff.cap {
            let message = format!(
                "`base_ms` must not exceed `cap_ms` ({} > {})",
                settings.backoff.base.as_millis(),
                settings.backoff.cap.as_millis()
            );
            let given = value.base.as_ref().or(value.cap.as_ref()).map(|(_, s)| s.clone());
            problems.push(&at(given), Some("base_ms"), message);
        }
        for (key, given) in [("attempt_timeout_ms", &value.attempt_timeout), ("deadline_ms", &value.deadline)]
        {
            if let Some((_, span)) = given.as_ref().filter(|(d, _)| d.is_zero()) {
                problems.push(span, Some(key), format!("`{key}` must be greater than 0"));
            }
        }
        if let (Some(timeout), Some(deadline)) = (settings.attempt_timeout, settings.deadline) {
            if timeout >= deadline && !deadline.is_zero() {
                let message = format!(
                    "`attempt_timeout_ms` must be less than `deadline_ms`: a {} ms attempt timeout could never fire, the {} ms deadline ends the call first",
                    timeout.as_millis(),
                    deadline.as_millis()
                );
                let given =
                    value.attempt_timeout.as_ref().or(value.deadline.as_ref()).map(|(_, s)| s.clone());
                problems.push(&at(given), Some("attempt_timeout_ms"), message);
            }
        }
        if settings.max_attempts > 1 {
            for policy in &policies {
                let promise = if !policy.is_idempotent() && !policy.has_key() {
                    Some(format!(
                        "`{name}` is declared `idempotent = false` without a `key`: a non-idempotent operation may only be retried with an idempotency key"
                    ))
                } else if policy.max_attempts() == 1 {
                    Some(format!(
                        "`{name}` was compiled with `max_attempts = 1`: it has no retry loop, so it cannot be given retries"
                    ))
                } else {
                    None
                };
                if let Some(message) = promise {
                    problems.push(
                        &at(value.max_attempts.as_ref().map(|(_, s)| s.clone())),
                        Some("max_attempts"),
                        message,
                    );
                    break;
                }
            }
        }
        if problems.len() == before {
            merged.insert(name.clone(), settings);
        }
    }
    merged
}

/// A file's text and the name its errors use.
fn read(path: &Path) -> Result<(String, String), ConfigFileError> {
    let name = path.display().to_string();
    std::fs::read_to_string(path).map(|text| (text, name.clone())).map_err(|error| ConfigFileError {
        file: name,
        problems: vec![Problem {
            line: 1,
            column: 1,
            field: None,
            message: format!("cannot read the file: {error}"),
        }],
    })
}
