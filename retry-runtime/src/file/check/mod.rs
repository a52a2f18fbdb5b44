//! Checking: whether a parsed file can be applied to this registry now.
//! Parse judged each table on its own; this step judges what a table asks
//! of the rest of the file (`fleet`: a shared guard needs a `[fleet]`
//! table, and must be one a fleet can share), of the registry's current
//! guards (a load declares, so a guard or an override that exists is
//! refused; a budget keeps its form, a rate limit its quota, a breaker a
//! fleet shares the fleet's rule), and of the compiled functions
//! (`operations`: an override passes the attribute's checks and keeps the
//! promises the function was compiled with).
//!
//! Nothing is changed here: the registry is only read, under the lock the
//! caller holds (`Registry::applying`) until the file is applied, so no
//! other file and no fleet's join comes between these checks and the
//! changes. A guard that a call or code makes meanwhile does not wait for
//! the lock: the apply step meets it.
//!
//! Every problem of the file is found in one pass and reported together:
//! parse's, carried in `Parsed`, and this step's, for every table parse
//! could read, whatever problems the others have. A table parse could not
//! read whole is not here to check, so no check blames a default for
//! what the file got wrong.

mod fleet;
mod operations;

use std::collections::HashMap;

use super::parse::{ConfigFile, Named, Parsed};
use super::{ConfigFileError, Mode, Problems};
use crate::registry::{GuardKind, Registry};
use crate::settings::{SettingSources, Settings};

#[cfg(feature = "fleet")]
use crate::fleet::FleetConfig;
pub(super) use operations::compiled;

/// A file that passed every check: its tables, and each operation it
/// overrides with its settings once the overrides are applied.
pub(super) struct Checked {
    pub(super) file: ConfigFile,
    pub(super) operations: HashMap<String, (Settings, SettingSources)>,
}

/// The fleet a file declares (its `[fleet]` table and the guards with
/// `fleet = true`), or `None` when it has no `[fleet]` table: the file
/// checked on its own, its tables against each other, with no registry.
#[cfg(feature = "fleet")]
pub(super) fn declared_fleet(parsed: Parsed<'_>) -> Result<Option<FleetConfig>, ConfigFileError> {
    let Parsed { file, mut problems } = parsed;
    fleet::cross_check(&file, &mut problems);
    Ok(fleet::fleet_config(&problems.finish(file)?))
}

/// Checks `parsed` for a `mode` of `registry`: the file and its
/// operations' settings to apply, or every problem of the file, parse's
/// and these, in one report. Each table parse read is checked, whatever
/// problems the others have. The caller holds `registry.applying()`.
pub(super) fn check(registry: &Registry, parsed: Parsed<'_>, mode: Mode) -> Result<Checked, ConfigFileError> {
    let Parsed { file, mut problems } = parsed;
    fleet::cross_check(&file, &mut problems);
    if mode == Mode::Load {
        refuse_existing(registry, &file, &mut problems);
    }
    // A load takes over a guard a call created with the defaults (see
    // `refuse_existing`), as a reload changes one that exists: on the
    // same terms, which the guard's state sets.
    let origin = match mode {
        Mode::Load => " (a call created it with the defaults before the file was loaded)",
        Mode::Reload => "",
    };
    for table in &file.budgets {
        let current = registry.budget(&table.name).map(|budget| budget.config());
        if let Some(current) = current.filter(|current| current.form() != table.value.form()) {
            let (is, form) = (current.form(), table.value.form());
            problems.push(
                &table.span,
                Some(&table.name),
                format!(
                    "budget `{}` is a {is} budget{origin}: a {mode} cannot make it a {form} budget, its state would be lost (restart to change it)",
                    table.name
                ),
            );
        }
    }
    for table in &file.rate_limits {
        let Some(limit) = registry.rate_limit(&table.name) else { continue };
        if let Err(error) = limit.check_reconfigure(&table.value) {
            table.refused(format_args!("rate limit `{}`{origin}: ", table.name), error, &mut problems);
        }
    }
    #[cfg(feature = "fleet")]
    {
        if mode == Mode::Reload {
            fleet::reload_check(registry.joined_fleet().as_ref(), &file, &mut problems);
        }
        // A breaker a fleet shares keeps the fleet's rule, which it
        // would enforce as the file is applied: refused here, the file
        // is refused whole (a load has no report to say it in). Whether
        // a fleet shares it holds until the file is applied: a join
        // waits for it. One the file says is shared (`fleet = true`) is
        // held to the same rule by `fleet::cross_check`, which said so
        // if it breaks it.
        for table in &file.breakers {
            if table.fleet.as_ref().is_some_and(|(shared, _)| *shared) {
                continue;
            }
            let Some(breaker) = registry.breaker(&table.name) else { continue };
            if let Err(error) = breaker.check_fleet_rule(&table.value) {
                table.refused(format_args!("breaker `{}`{origin}: ", table.name), error, &mut problems);
            }
        }
    }
    let operations = operations::merged_operations(&file.operations, &mut problems);
    problems.finish(Checked { file, operations })
}

/// A load's problems for the guards and overrides already declared. A
/// guard a call created with the defaults (it named one never declared)
/// is not refused: the load gives it the file's settings, whether the
/// call came before the load or during it (see `declare_guards`).
fn refuse_existing(registry: &Registry, file: &ConfigFile, problems: &mut Problems<'_>) {
    let declared = |kind| move |n: &str| registry.is_declared(kind, n);
    refuse("breaker", &file.breakers, declared(GuardKind::Breaker), problems);
    refuse("budget", &file.budgets, declared(GuardKind::Budget), problems);
    refuse("bulkhead", &file.bulkheads, declared(GuardKind::Bulkhead), problems);
    refuse("throttle", &file.throttles, declared(GuardKind::Throttle), problems);
    refuse("rate limit", &file.rate_limits, declared(GuardKind::RateLimit), problems);
    let overridden = |n: &str| registry.overrides_operation(n);
    refuse("override of operation", &file.operations, overridden, problems);
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

#[cfg(test)]
mod tests {
    use crate::registry::Registry;

    /// A load that gives a breaker a call created with the defaults, which a
    /// fleet joined in code shares, settings that break the fleet's rule
    /// (`success_threshold <= half_open_max_calls`) is refused at the key,
    /// with nothing applied: the breaker would refuse them, and a load has
    /// no report to say so in.
    #[cfg(feature = "fleet")]
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

    /// A breaker the file shares (`fleet = true`), which the registry's
    /// fleet shares too, is held to the fleet's rule once: the file's own
    /// check says it breaks it, and the registry's does not say it again.
    #[cfg(feature = "fleet")]
    #[test]
    fn a_shared_breaker_that_breaks_the_fleets_rule_is_said_once() {
        use crate::breaker::BreakerConfig;
        let registry = Registry::new();
        registry.declare_breaker("dep", BreakerConfig::default()).unwrap();
        crate::file::while_a_fleet_shares_dep(&registry, async || {
            let text = "[fleet]\nurl = \"redis://127.0.0.1:1/\"\n[breakers.dep]\nsuccess_threshold = 3\nfleet = true\n";
            let error = registry.reload_toml(text).unwrap_err();
            assert_eq!(
                error.to_string(),
                "<toml>:5:9: breaker `dep` cannot be shared: its success_threshold (3) is above its half_open_max_calls (2), the fleet's probes per round: lower the one or raise the other"
            );
            assert_eq!(
                registry.breaker("dep").unwrap().config(),
                BreakerConfig::default(),
                "nothing applied"
            );
        });
    }

    /// A breaker whose `fleet` cannot be read is said to be wrong there,
    /// and not taken for local: a reload under a fleet that shares it does
    /// not also say the file makes it local.
    #[cfg(feature = "fleet")]
    #[test]
    fn a_breaker_whose_fleet_cannot_be_read_is_not_taken_for_local() {
        use crate::breaker::BreakerConfig;
        let registry = Registry::new();
        registry.declare_breaker("dep", BreakerConfig::default()).unwrap();
        crate::file::while_a_fleet_shares_dep(&registry, async || {
            let text = "[fleet]\nurl = \"redis://127.0.0.1:1/\"\n[breakers.dep]\nfleet = \"yes\"\n";
            let error = registry.reload_toml(text).unwrap_err();
            assert_eq!(error.to_string(), "<toml>:4:9: `fleet` must be `true` or `false`");
        });
    }
}
