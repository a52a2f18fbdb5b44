//! A checked file's guards put in the registry: each declared, or, where a
//! guard of that name exists, reconfigured. The registry's tables are held
//! meanwhile, so that a call naming one of the file's guards cannot create
//! it with the defaults between this step's checks and its declarations;
//! one created before them (after the file's checks) takes the file's
//! settings, or, when it cannot, the file is refused with nothing applied.

use std::sync::Arc;

use super::reconfigure;
use super::report::{
    Refusal, ReloadReport, breaker_diff, budget_diff, bulkhead_diff, rate_limit_diff, throttle_diff,
};
use crate::breaker::{BreakerConfig, CircuitBreaker};
use crate::budget::{BudgetConfig, RetryBudget};
use crate::bulkhead::{Bulkhead, BulkheadConfig};
use crate::config::ConfigError;
use crate::file::check::refuse;
use crate::file::parse::values::key_of;
use crate::file::parse::{ConfigFile, Named};
use crate::file::{ConfigFileError, Mode, Problems};
use crate::rate_limit::{RateLimit, RateLimitConfig};
use crate::registry::Registry;
use crate::throttle::{Throttle, ThrottleConfig};

/// A guard a file configures: its settings, read and changed in place.
trait Guard {
    type Config: Copy + PartialEq;
    fn config(&self) -> Self::Config;
    fn reconfigure(&self, config: Self::Config) -> Result<(), ConfigError>;
}

macro_rules! guard {
    ($guard:ty, $config:ty) => {
        impl Guard for $guard {
            type Config = $config;
            fn config(&self) -> $config {
                <$guard>::config(self)
            }
            fn reconfigure(&self, config: $config) -> Result<(), ConfigError> {
                <$guard>::reconfigure(self, config)
            }
        }
    };
}

guard!(CircuitBreaker, BreakerConfig);
guard!(RetryBudget, BudgetConfig);
guard!(Bulkhead, BulkheadConfig);
guard!(Throttle, ThrottleConfig);
guard!(RateLimit, RateLimitConfig);

/// Each table of a kind with the guard made from it (not yet in the registry).
type Built<'f, G> = Vec<(&'f Named<<G as Guard>::Config>, G)>;
/// Each table of a kind with the guard now under its name, and whether
/// that guard was made from the table (else it existed, and is reconfigured).
type Declared<'f, G> = Vec<(&'f Named<<G as Guard>::Config>, Arc<G>, bool)>;

impl Registry {
    /// Declares the guards of a checked file, or reconfigures those that
    /// exist, all or nothing. A guard that appeared since the file's checks
    /// (a call named it, and it was created with the defaults) takes the
    /// file's settings as one that existed before would on a reload; one
    /// that cannot (a budget of the other form, a rate limit of another
    /// quota), or, for a load, one declared meanwhile, refuses the file.
    pub(super) fn declare_guards(
        &self,
        parsed: &ConfigFile,
        mode: Mode,
        mut problems: Problems<'_>,
    ) -> Result<ReloadReport, ConfigFileError> {
        let breakers = built(&parsed.breakers, |n, c| self.new_breaker(n, c), &mut problems);
        let budgets = built(&parsed.budgets, |n, c| self.new_budget(n, c), &mut problems);
        let bulkheads = built(&parsed.bulkheads, |n, c| self.new_bulkhead(n, c), &mut problems);
        let throttles = built(&parsed.throttles, |n, c| self.new_throttle(n, c), &mut problems);
        let rate_limits = built(&parsed.rate_limits, |n, c| self.new_rate_limit(n, c), &mut problems);
        let mut held = self.hold_guards();
        if mode == Mode::Load {
            let p = &mut problems;
            refuse("breaker", &parsed.breakers, |n| held.breakers.get(n).is_some_and(|g| g.1), p);
            refuse("budget", &parsed.budgets, |n| held.budgets.get(n).is_some_and(|g| g.1), p);
            refuse("bulkhead", &parsed.bulkheads, |n| held.bulkheads.get(n).is_some_and(|g| g.1), p);
            refuse("throttle", &parsed.throttles, |n| held.throttles.get(n).is_some_and(|g| g.1), p);
            refuse("rate limit", &parsed.rate_limits, |n| held.rate_limits.get(n).is_some_and(|g| g.1), p);
        }
        // What the file's checks found of the guards that existed then
        // holds still; these can only be guards that appeared since.
        for table in &parsed.budgets {
            let Some((budget, _)) = held.budgets.get(&table.name) else { continue };
            let (is, file) = (budget.config().form(), table.value.form());
            if is != file {
                problems.push(
                    &table.span,
                    Some(&table.name),
                    format!(
                        "budget `{}` was created as a {is} budget while the file was applied (a call named it before it was declared, or it was declared meanwhile): it cannot become a {file} budget, its state would be lost (restart, and apply the file before calls name its guards)",
                        table.name
                    ),
                );
            }
        }
        for table in &parsed.rate_limits {
            let Some((limit, _)) = held.rate_limits.get(&table.name) else { continue };
            if let Err(error) = limit.check_reconfigure(&table.value) {
                let whose = format_args!(
                    "rate limit `{}` was created while the file was applied (a call named it before it was declared, or it was declared meanwhile): ",
                    table.name
                );
                table.refused(whose, error, &mut problems);
            }
        }
        problems.finish(())?;
        // Nothing can fail from here on.
        let breakers = declared(breakers, |n, g| held.breakers.declare(n, g));
        let budgets = declared(budgets, |n, g| held.budgets.declare(n, g));
        let bulkheads = declared(bulkheads, |n, g| held.bulkheads.declare(n, g));
        let throttles = declared(throttles, |n, g| held.throttles.declare(n, g));
        let rate_limits = declared(rate_limits, |n, g| held.rate_limits.declare(n, g));
        drop(held);
        let mut report = ReloadReport::default();
        changed(&mut report, "breaker", breakers, breaker_diff);
        changed(&mut report, "budget", budgets, budget_diff);
        changed(&mut report, "bulkhead", bulkheads, bulkhead_diff);
        changed(&mut report, "throttle", throttles, throttle_diff);
        changed(&mut report, "rate limit", rate_limits, rate_limit_diff);
        Ok(report)
    }
}

/// A guard made from each table by `make`; a problem, at its key, for any
/// that cannot be (none can: the file was checked).
fn built<'f, G: Guard>(
    tables: &'f [Named<G::Config>],
    make: impl Fn(&str, G::Config) -> Result<G, ConfigError>,
    problems: &mut Problems<'_>,
) -> Built<'f, G> {
    let mut out = Vec::new();
    for table in tables {
        match make(&table.name, table.value) {
            Ok(guard) => out.push((table, guard)),
            Err(error) => table.refused("", error, problems),
        }
    }
    out
}

fn declared<'f, G: Guard>(
    built: Built<'f, G>,
    mut declare: impl FnMut(&str, G) -> (Arc<G>, bool),
) -> Declared<'f, G> {
    built
        .into_iter()
        .map(|(table, guard)| {
            let (guard, new) = declare(&table.name, guard);
            (table, guard, new)
        })
        .collect()
}

/// Each guard's change, onto `report`: a new one is declared, one that
/// existed takes the file's settings, or refuses them (see
/// [`ReloadReport::refused`]).
fn changed<G: Guard>(
    report: &mut ReloadReport,
    kind: &'static str,
    declared: Declared<'_, G>,
    diff: fn(&G::Config, &G::Config) -> Vec<String>,
) {
    for (table, guard, new) in declared {
        let change = if new {
            Some(vec!["declared".to_owned()])
        } else {
            match reconfigure(
                &guard.config(),
                &table.value,
                diff,
                |c| guard.reconfigure(c),
                || guard.config(),
            ) {
                Ok(change) => change,
                Err(error) => {
                    let (field, problem) = (key_of(error.field), error.problem);
                    report.refused.push(Refusal { kind, name: table.name.clone(), field, problem });
                    continue;
                }
            }
        };
        report.push(kind, &table.name, change);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::budget::RatioBudget;
    use crate::file::parse::{Parsed, parse};
    use crate::registry::GuardKind;

    const FILE: &str = "[breakers.b]\nfailure_threshold = 3\n[budgets.r]\nratio = 0.3\n[bulkheads.h]\nmax_concurrent = 4\n[throttles.t]\nk = 1.5\n[rate_limits.l]\nmax_wait_ms = 5\n";

    fn declare(registry: &Registry, text: &str, mode: Mode) -> Result<ReloadReport, ConfigFileError> {
        let Parsed { file, problems } = parse(text, "<toml>").unwrap();
        let file = problems.finish(file).unwrap();
        registry.declare_guards(&file, mode, Problems::new(text, "<toml>"))
    }

    /// A call that names a guard after the file's checks creates it with
    /// the defaults; the declarations then give it the file's settings, and
    /// the call's guard is that one.
    #[test]
    fn a_guard_created_with_the_defaults_before_the_declarations_takes_the_files_settings() {
        let registry = Registry::new();
        let breaker = registry.breaker_or_default("b");
        let budget = registry.budget_or_default("r");
        let bulkhead = registry.bulkhead_or_default("h");
        let throttle = registry.throttle_or_default("t");
        let limit = registry.rate_limit_or_default("l");
        declare(&registry, FILE, Mode::Load).unwrap();
        assert_eq!(breaker.config().failure_threshold, 3);
        assert_eq!(budget.config(), BudgetConfig::Ratio(RatioBudget { ratio: 0.3, ..Default::default() }));
        assert_eq!(bulkhead.config().max_concurrent, 4);
        assert_eq!(throttle.config().k, 1.5);
        assert_eq!(
            limit.config(),
            RateLimitConfig { max_wait: Some(Duration::from_millis(5)), ..Default::default() }
        );
        assert!(Arc::ptr_eq(&breaker, &registry.breaker("b").unwrap()), "the guard the call holds");
        for (kind, name) in GuardKind::ALL.into_iter().zip(["b", "r", "h", "t", "l"]) {
            assert_eq!(registry.declared_names(kind), [name], "the file declared it");
        }
    }

    /// A default budget is a ratio budget, a default rate limit's quota is
    /// 10 a second: one that appeared meanwhile cannot take a token bucket
    /// or another quota, and the file is refused, with nothing applied.
    #[test]
    fn a_guard_created_meanwhile_that_cannot_take_the_files_settings_refuses_the_file() {
        let registry = Registry::new();
        registry.budget_or_default("r");
        registry.rate_limit_or_default("l");
        let text = "[breakers.b]\n[budgets.r]\ncapacity = 7\n[rate_limits.l]\nper_second = 50\n";
        let err = declare(&registry, text, Mode::Load).unwrap_err();
        let fields: Vec<_> = err.problems.iter().map(|p| (p.line, p.field.as_deref())).collect();
        assert_eq!(fields, [(2, Some("r")), (5, Some("per_second"))], "{err}");
        assert!(
            err.to_string().contains("`per_second` cannot change on a running rate limit (10 -> 50)"),
            "{err}"
        );
        assert!(registry.breaker("b").is_none(), "nothing applied");
        assert!(registry.declared_names(GuardKind::Budget).is_empty());
        assert_eq!(registry.rate_limit("l").unwrap().config(), RateLimitConfig::default());
    }

    /// A guard declared meanwhile by code is refused by a load, as one
    /// declared before its checks is; a reload changes it.
    #[test]
    fn a_guard_declared_meanwhile_is_refused_by_a_load_and_changed_by_a_reload() {
        let registry = Registry::new();
        registry.declare_breaker("b", BreakerConfig::default()).unwrap();
        let err = declare(&registry, FILE, Mode::Load).unwrap_err();
        assert_eq!(
            err.to_string(),
            "<toml>:1:11: breaker `b` already exists: loading declares, use reload to change it"
        );
        assert!(registry.bulkhead("h").is_none(), "nothing applied");
        let report = declare(&registry, FILE, Mode::Reload).unwrap();
        assert!(
            report.to_string().starts_with("breaker `b`: failure_threshold 5 -> 3\nbudget `r`: declared"),
            "{report}"
        );
    }

    /// A change the guard refuses as it is made is in the report, naming
    /// the key, not dropped as if the file had not asked for it. Here the
    /// rule of a fleet that shares the breaker (a `success_threshold` above
    /// `half_open_max_calls`), with the file's checks, which ask the
    /// breaker first and would refuse the file whole, left out.
    #[cfg(feature = "fleet")]
    #[test]
    fn a_change_the_guard_refuses_as_it_is_made_is_reported_with_its_key() {
        let registry = Registry::new();
        registry.declare_breaker("dep", BreakerConfig::default()).unwrap();
        crate::file::while_a_fleet_shares_dep(&registry, async || {
            let text = "[breakers.dep]\nsuccess_threshold = 3\nopen_for_ms = 9000\n[bulkheads.h]\n";
            let report = declare(&registry, text, Mode::Reload).unwrap();
            assert_eq!(
                report.to_string(),
                "bulkhead `h`: declared\nbreaker `dep`: refused, settings unchanged: `success_threshold` must be at most half_open_max_calls (2) while a fleet shares the breaker (the fleet's probes per round), got 3: lower it or raise half_open_max_calls"
            );
            assert!(!report.is_empty(), "a refusal is news");
            assert_eq!(registry.breaker("dep").unwrap().config(), BreakerConfig::default(), "refused whole");
        });
    }
}
