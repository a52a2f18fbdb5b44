//! Loading and reloading a registry from a configuration file (feature
//! `config`): all or nothing, keeping every guard's state.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use super::overrides::{compiled, merged_operations};
use super::parse::{ConfigFile, Named, parse};
use super::report::{Change, ReloadReport, settings_diff};
use super::{ConfigFileError, Problems};
use crate::config::ConfigError;
use crate::operations;
use crate::policy::Policy;
use crate::registry::{GuardKind, Registry};
use crate::settings::Settings;

/// Whether a file declares guards (a first load) or changes them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Load,
    Reload,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Load => "load",
            Mode::Reload => "reload",
        })
    }
}

impl Registry {
    /// Declares every guard and operation override of a TOML text (see the
    /// schema in the crate docs), beside those already in force (a second
    /// file adds to the first). A guard already declared, or an operation
    /// that already has an override, is an error: use
    /// [`reload_toml`](Self::reload_toml) to change it. A guard that a call
    /// created with the defaults (it named one never declared) takes the
    /// file's settings and its state is kept, as on a reload. Nothing is applied
    /// from a text with any error; every error says where it is.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::Registry;
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
    ///
    /// Only a regular file is read (links are followed), of at most 1 MiB,
    /// in UTF-8: a FIFO, a device, a directory, a larger file or bytes that
    /// are not UTF-8 are an error naming the path and what it found (the
    /// line and column of a bad byte), and nothing is applied. A FIFO with
    /// no writer is refused at once rather than waited on.
    pub fn load_file(&self, path: impl AsRef<Path>) -> Result<(), ConfigFileError> {
        let (text, name) = super::read::read(path.as_ref())?;
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
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::Registry;
    /// let registry = Registry::new();
    /// registry.load_toml("[budgets.db]\ncapacity = 50").unwrap();
    /// let report = registry.reload_toml("[budgets.db]\ncapacity = 20").unwrap();
    /// assert_eq!(report.to_string(), "budget `db`: capacity 50 -> 20");
    /// ```
    pub fn reload_toml(&self, text: &str) -> Result<ReloadReport, ConfigFileError> {
        self.apply(text, "<toml>", Mode::Reload)
    }

    /// [`reload_toml`](Self::reload_toml) from a file, read as
    /// [`load_file`](Self::load_file) reads it: a path refused there leaves
    /// the running configuration as it was.
    pub fn reload_file(&self, path: impl AsRef<Path>) -> Result<ReloadReport, ConfigFileError> {
        let (text, name) = super::read::read(path.as_ref())?;
        self.apply(&text, &name, Mode::Reload)
    }

    fn apply(&self, text: &str, name: &str, mode: Mode) -> Result<ReloadReport, ConfigFileError> {
        let parsed = parse(text, name)?;
        // One file at a time: the checks below and the changes after them
        // see the same registry.
        let _applying = self.applying();
        let mut problems = Problems::new(text, name);
        if mode == Mode::Load {
            self.refuse_existing(&parsed, &mut problems);
        }
        // A load takes over a guard a call created with the defaults (see
        // `refuse_existing`), as a reload changes one that exists: on the
        // same terms, which the guard's state sets.
        let origin = match mode {
            Mode::Load => " (a call created it with the defaults before the file was loaded)",
            Mode::Reload => "",
        };
        for table in &parsed.budgets {
            let current = self.budget(&table.name).map(|budget| budget.config());
            if let Some(current) = current.filter(|current| current.form() != table.value.form()) {
                let (is, file) = (current.form(), table.value.form());
                problems.push(
                    &table.span,
                    Some(&table.name),
                    format!(
                        "budget `{}` is a {is} budget{origin}: a {mode} cannot make it a {file} budget, its state would be lost (restart to change it)",
                        table.name
                    ),
                );
            }
        }
        for table in &parsed.rate_limits {
            let Some(limit) = self.rate_limit(&table.name) else { continue };
            if let Err(error) = limit.check_reconfigure(&table.value) {
                table.refused(format_args!("rate limit `{}`{origin}: ", table.name), error, &mut problems);
            }
        }
        #[cfg(feature = "redis")]
        {
            if mode == Mode::Reload {
                super::fleet::reload_check(self.joined_fleet().as_ref(), &parsed, &mut problems);
            }
            // A breaker a fleet shares keeps the fleet's rule, which it
            // would enforce as the file is applied: refused here, the file
            // is refused whole (a load has no report to say it in). Whether
            // a fleet shares it holds until the file is applied: a join
            // waits for it.
            for table in &parsed.breakers {
                let Some(breaker) = self.breaker(&table.name) else { continue };
                if let Err(error) = breaker.check_fleet_rule(&table.value) {
                    table.refused(format_args!("breaker `{}`{origin}: ", table.name), error, &mut problems);
                }
            }
        }
        let mut overrides = merged_operations(&parsed.operations, &mut problems);
        let parsed = problems.finish(parsed)?;
        // The guards, then the overrides: the guards' step is the last
        // that can refuse the file (see `declare`).
        let mut report = self.declare_guards(&parsed, mode, Problems::new(text, name))?;
        let before: HashMap<String, Settings> = self
            .overridden_operations()
            .into_iter()
            .filter_map(|name| Some((name.clone(), *self.operation_override(&name)?)))
            .collect();
        for (name, settings) in &overrides {
            let compiled = before.get(name).copied().or_else(|| compiled(name).map(Policy::settings));
            let details = match compiled {
                Some(old) if old == *settings && before.contains_key(name) => continue,
                // A new override that repeats the compiled settings changes
                // no key, but it is set (a later reload reports its removal).
                Some(old) if old == *settings => vec!["override set".to_owned()],
                Some(old) => settings_diff(&old, settings),
                None => vec!["override set".to_owned()],
            };
            report.changes.push(Change { kind: "operation", name: name.clone(), details });
        }
        match mode {
            // A reload's overrides are the file's: one it no longer has goes.
            Mode::Reload => {
                for name in before.keys().filter(|name| !overrides.contains_key(*name)) {
                    report.push("operation", name, Some(vec!["override removed".to_owned()]));
                }
            }
            // A load adds its overrides to those in force (it refused any
            // for an operation that has one).
            Mode::Load => overrides.extend(before),
        }
        let counted = overrides
            .into_iter()
            .map(|(name, settings)| {
                let counters = operations::named(&name).map(Policy::overrides).collect();
                (name, (settings, counters))
            })
            .collect();
        self.replace_overrides(counted);
        Ok(report)
    }

    /// A load's problems for the guards and overrides already declared. A
    /// guard a call created with the defaults (it named one never declared)
    /// is not refused: the load gives it the file's settings, whether the
    /// call came before the load or during it (see `declare_guards`).
    fn refuse_existing(&self, parsed: &ConfigFile, problems: &mut Problems<'_>) {
        let declared = |kind| move |n: &str| self.is_declared(kind, n);
        refuse("breaker", &parsed.breakers, declared(GuardKind::Breaker), problems);
        refuse("budget", &parsed.budgets, declared(GuardKind::Budget), problems);
        refuse("bulkhead", &parsed.bulkheads, declared(GuardKind::Bulkhead), problems);
        refuse("throttle", &parsed.throttles, declared(GuardKind::Throttle), problems);
        refuse("rate limit", &parsed.rate_limits, declared(GuardKind::RateLimit), problems);
        let overridden = |n: &str| self.operation_override(n).is_some();
        refuse("override of operation", &parsed.operations, overridden, problems);
    }
}

/// A load's problem for each table naming a guard that already exists.
pub(super) fn refuse<T>(
    kind: &str,
    named: &[Named<T>],
    exists: impl Fn(&str) -> bool,
    problems: &mut Problems<'_>,
) {
    for table in named.iter().filter(|table| exists(&table.name)) {
        problems.push(
            &table.span,
            Some(&table.name),
            format!("{kind} `{}` already exists: loading declares, use reload to change it", table.name),
        );
    }
}

/// Applies `new` through `apply` when it differs from `old`: what changed
/// between `old` and what the guard keeps once it is applied (`kept`), or
/// the guard's refusal (one the file's checks did not foresee: they ask
/// the guards first), to be reported rather than taken for no change. A guard may
/// keep a setting otherwise than the file gives it: a `max_wait` longer
/// than u64::MAX nanoseconds (about 584 years) is kept as that, so a file
/// that says more is no change once it is in force, and reloading it
/// unchanged must say so.
pub(super) fn reconfigure<C: PartialEq + Copy>(
    old: &C,
    new: &C,
    diff: fn(&C, &C) -> Vec<String>,
    apply: impl FnOnce(C) -> Result<(), ConfigError>,
    kept: impl FnOnce() -> C,
) -> Result<Option<Vec<String>>, ConfigError> {
    if old == new {
        return Ok(None);
    }
    apply(*new)?;
    let kept = kept();
    Ok((kept != *old).then(|| diff(old, &kept)))
}

/// A file's text and the name its errors use.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::operations::Operation;
    use crate::policy::AttributeConfig;

    static SAME: Policy = Policy::from_attribute(AttributeConfig::bare("file-unit::same"));

    inventory::submit! { Operation::new(&SAME) }

    #[test]
    fn an_override_that_repeats_the_compiled_settings_is_reported_set_not_as_an_empty_change() {
        let registry = Registry::new();
        let text = "[operations.\"file-unit::same\"]\nmax_attempts = 4\n";
        let report = registry.reload_toml(text).unwrap();
        assert_eq!(report.to_string(), "operation `file-unit::same`: override set");
        assert!(registry.reload_toml(text).unwrap().is_empty(), "the same file again changes nothing");
        let removed = registry.reload_toml("").unwrap();
        assert_eq!(removed.to_string(), "operation `file-unit::same`: override removed");
    }

    /// A load that gives a breaker a call created with the defaults, which a
    /// fleet joined in code shares, settings that break the fleet's rule
    /// (`success_threshold <= half_open_max_calls`) is refused at the key,
    /// with nothing applied: the breaker would refuse them, and a load has
    /// no report to say so in.
    #[cfg(feature = "redis")]
    #[test]
    fn a_file_that_breaks_the_rule_of_a_fleet_sharing_a_breaker_is_refused_at_the_key() {
        use crate::breaker::BreakerConfig;
        let registry = Registry::new();
        let breaker = registry.breaker_or_default("dep");
        crate::file::while_a_fleet_shares_dep(&registry, async || {
            let text = "[breakers.dep]\nfailure_threshold = 9\nsuccess_threshold = 3\n[bulkheads.h]\n";
            let error = registry.load_toml(text).unwrap_err();
            assert_eq!(
                error.to_string(),
                "<toml>:3:21: breaker `dep` (a call created it with the defaults before the file was loaded): `success_threshold` must be at most half_open_max_calls (2) while a fleet shares the breaker (the fleet's probes per round), got 3: lower it or raise half_open_max_calls"
            );
            assert_eq!(breaker.config(), BreakerConfig::default(), "nothing applied");
            assert!(registry.bulkhead("h").is_none(), "nothing applied");
            let text = "[breakers.dep]\nhalf_open_max_calls = 1\n";
            let error = registry.load_toml(text).unwrap_err();
            assert_eq!(error.problems[0].field.as_deref(), Some("half_open_max_calls"), "{error}");
        });
        registry.load_toml("[breakers.dep]\nsuccess_threshold = 3\n").expect("left: its own settings again");
        assert_eq!(breaker.config().success_threshold, 3);
    }
}
