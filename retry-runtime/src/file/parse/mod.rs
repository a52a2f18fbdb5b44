//! Parsing: a file's TOML text into typed tables that keep where each
//! name, key and value is. Every section and key is checked against what
//! it may be, every value read into what its key sets, and every problem
//! placed where it is. The values of one table are read in `values`; a
//! guard's table becomes the guard's config in `tables`, checked as the
//! guard's constructor checks it; the fleet's table and `fleet` keys are
//! read in `fleet`. This module walks the file.
//!
//! What a table says on its own is parse's to judge; what it asks of the
//! rest of the file, of the registry and of the compiled functions is the
//! check step's, which reads these tables and nothing of the TOML. Only
//! text that is not TOML stops here; every other problem goes on, in
//! `Parsed`, to be reported with the check's.

pub(super) mod fleet;
mod tables;
pub(super) mod values;

use std::fmt;
use std::time::Duration;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::{ConfigFileError, Problems, Span};
use crate::backoff::Jitter;
use crate::breaker::BreakerConfig;
use crate::budget::BudgetConfig;
use crate::bulkhead::BulkheadConfig;
use crate::rate_limit::RateLimitConfig;
use crate::throttle::ThrottleConfig;
use fleet::{FleetTable, guard_flag, section as fleet_section};
use tables::{
    BREAKER_KEYS, BUDGET_KEYS, BULKHEAD_KEYS, RATE_LIMIT_KEYS, THROTTLE_KEYS, breaker, budget, bulkhead,
    rate_limit, throttle,
};
use values::{Entry, count, millis, number, unknown_key};

const SECTIONS: &[&str] =
    &["breakers", "budgets", "bulkheads", "throttles", "rate_limits", "operations", "fleet"];
const OPERATION_KEYS: &[&str] = &[
    "max_attempts",
    "base_ms",
    "cap_ms",
    "factor",
    "jitter",
    "attempt_timeout_ms",
    "deadline_ms",
    "budget",
    "breaker",
    "priority",
];

/// A file's tables as parse read them, with the positions the checks
/// point at.
#[derive(Debug, Default)]
pub(crate) struct ConfigFile {
    pub(crate) breakers: Vec<Named<BreakerConfig>>,
    pub(crate) budgets: Vec<Named<BudgetConfig>>,
    pub(crate) bulkheads: Vec<Named<BulkheadConfig>>,
    pub(crate) throttles: Vec<Named<ThrottleConfig>>,
    pub(crate) rate_limits: Vec<Named<RateLimitConfig>>,
    pub(crate) operations: Vec<Named<OperationOverride>>,
    /// The `[fleet]` table, if any and valid (feature `redis`).
    pub(crate) fleet: Option<FleetTable>,
    /// Whether the file has a `[fleet]` table, valid or not.
    #[cfg_attr(not(feature = "fleet"), allow(dead_code))]
    pub(crate) fleet_given: bool,
}

/// A table of the file: its name, where the name is, and what it says.
#[derive(Debug)]
pub(crate) struct Named<T> {
    pub(crate) name: String,
    pub(crate) span: Span,
    pub(crate) value: T,
    /// `fleet = true | false` and where, on the kinds that have the key
    /// (always `None` without feature `redis`: the key is a problem there).
    #[cfg_attr(not(feature = "fleet"), allow(dead_code))]
    pub(crate) fleet: Option<(bool, Span)>,
    /// Where the value of each key the table gives is, for checks made
    /// once the registry is known.
    pub(crate) keys: Vec<(String, Span)>,
}

impl<T> Named<T> {
    /// Where `key`'s value is, or the table's name when the key is left out.
    pub(crate) fn at(&self, key: &str) -> (Span, &'static str) {
        match self.keys.iter().find(|(k, _)| k == key) {
            Some((_, span)) => (span.clone(), ""),
            None => (self.span.clone(), " (the default)"),
        }
    }

    /// Places a guard's refusal of the table's settings at the key that
    /// set the refused field (or at the table's name, for a default),
    /// after `whose`, which says whose settings they are.
    pub(crate) fn refused(
        &self,
        whose: impl fmt::Display,
        error: crate::ConfigError,
        problems: &mut Problems<'_>,
    ) {
        let key = values::key_of(error.field);
        let (span, note) = self.at(&key);
        problems.push(&span, Some(&key), format!("{whose}`{key}`{note} {}", error.problem));
    }
}

/// The keys an `[operations."..."]` table gives, each with where it is.
#[derive(Debug, Default, Clone)]
pub(crate) struct OperationOverride {
    pub(crate) max_attempts: Option<(u32, Span)>,
    pub(crate) base: Option<(Duration, Span)>,
    pub(crate) cap: Option<(Duration, Span)>,
    /// In thousandths, read whole (its range is the check's).
    pub(crate) factor: Option<(u32, Span)>,
    pub(crate) jitter: Option<(Jitter, Span)>,
    pub(crate) attempt_timeout: Option<(Duration, Span)>,
    pub(crate) deadline: Option<(Duration, Span)>,
    /// `budget = "none"`: retries take nothing from the operation's budget.
    pub(crate) no_budget: Option<Span>,
    /// `breaker = "none"`: attempts do not ask the operation's breaker.
    pub(crate) no_breaker: Option<Span>,
    pub(crate) priority: Option<(crate::Priority, Span)>,
}

/// What parse made of a file: the tables it read, and the problems it
/// found, for the check step to add its own to and report them all in one
/// pass.
pub(crate) struct Parsed<'t> {
    /// Every table read whole: one whose values could not all be read is
    /// left out, so that no check blames a default for what the file got
    /// wrong. (A table with an unknown key is kept: the keys it knows were
    /// read.)
    pub(crate) file: ConfigFile,
    /// The problems found so far, each placed in the file's text.
    pub(crate) problems: Problems<'t>,
}

/// Reads `text` (named `file` in errors) into typed tables. Only text that
/// is not TOML is refused here: it has no tables to check.
pub(crate) fn parse<'t>(text: &'t str, file: &str) -> Result<Parsed<'t>, ConfigFileError> {
    let mut problems = Problems::new(text, file);
    let document = match DeTable::parse(text) {
        Ok(document) => document,
        Err(error) => {
            let span = error.span().unwrap_or(0..0);
            // A duplicate key's span is the key as written: name it.
            let key = (error.message() == "duplicate key").then(|| key_at(text, &span)).flatten();
            let message = match &key {
                Some(key) => format!("not valid TOML: duplicate key `{key}`: a key is given once"),
                None => format!("not valid TOML: {}", error.message()),
            };
            problems.push(&span, key.as_deref(), message);
            return Err(problems.finish(()).expect_err("the problem just pushed"));
        }
    };
    let mut parsed = ConfigFile::default();
    for (key, value) in document.get_ref().iter() {
        let section = key.get_ref().as_ref();
        if section == "fleet" {
            parsed.fleet = fleet_section(&key.span(), value, &mut problems);
            parsed.fleet_given = true;
            continue;
        }
        if !SECTIONS.contains(&section) {
            unknown_key(&mut problems, &key.span(), section, SECTIONS, "a section");
            continue;
        }
        let tables = named_tables(section, value, &mut problems);
        let p = &mut problems;
        match section {
            "breakers" => parsed.breakers = guards(tables, BREAKER_KEYS, breaker, p),
            "budgets" => parsed.budgets = guards(tables, BUDGET_KEYS, budget, p),
            "bulkheads" => parsed.bulkheads = guards(tables, BULKHEAD_KEYS, bulkhead, p),
            "throttles" => parsed.throttles = guards(tables, THROTTLE_KEYS, throttle, p),
            "rate_limits" => parsed.rate_limits = guards(tables, RATE_LIMIT_KEYS, rate_limit, p),
            _ => parsed.operations = guards(tables, OPERATION_KEYS, operation, p),
        }
    }
    Ok(Parsed { file: parsed, problems })
}

/// The key written at `span` of `text` (bare, or quoted with its escapes
/// read), if a key is there.
fn key_at(text: &str, span: &Span) -> Option<String> {
    let written = text.get(span.clone())?;
    let line = format!("{written} = 0");
    let document = DeTable::parse(&line).ok()?;
    let (key, _) = document.get_ref().iter().next()?;
    Some(key.get_ref().to_string())
}

/// The `NAME = { ... }` tables of one section (`[breakers.NAME]`).
fn named_tables<'t>(
    section: &str,
    value: &'t Spanned<DeValue<'t>>,
    problems: &mut Problems<'_>,
) -> Vec<(String, Span, &'t DeTable<'t>)> {
    let DeValue::Table(table) = value.get_ref() else {
        problems.push(
            &value.span(),
            Some(section),
            format!("`{section}` must hold tables, like `[{section}.payment]`"),
        );
        return Vec::new();
    };
    let mut tables = Vec::new();
    for (name, value) in table.iter() {
        match value.get_ref() {
            // As the attribute and `Policy::builder` refuse an empty name.
            DeValue::Table(_) if name.get_ref().trim().is_empty() => {
                let example = if section == "operations" { "\"shop::charge\"" } else { "payment" };
                problems.push(
                    &name.span(),
                    Some(section),
                    format!(
                        "`{section}` needs a name here, not an empty string, like `[{section}.{example}]`"
                    ),
                );
            }
            DeValue::Table(inner) => tables.push((name.get_ref().to_string(), name.span(), inner)),
            _ => problems.push(
                &value.span(),
                Some(name.get_ref()),
                format!(
                    "`{section}.{}` must be a table, like `[{section}.{}]`",
                    name.get_ref(),
                    name.get_ref()
                ),
            ),
        }
    }
    tables
}

/// Each named table read by `read`, its keys checked against `keys` first;
/// `fleet`, where `keys` has it, read here for every kind that has it. A
/// table whose `fleet` could not be read is left out with the others that
/// could not be read: whether the fleet shares it is unknown, and a check
/// would take it for local.
fn guards<T>(
    tables: Vec<(String, Span, &DeTable<'_>)>,
    keys: &[&str],
    read: fn(&[Entry<'_>], &Span, &mut Problems<'_>) -> Option<T>,
    problems: &mut Problems<'_>,
) -> Vec<Named<T>> {
    let mut out = Vec::new();
    for (name, span, table) in tables {
        let entries: Vec<Entry<'_>> = table.iter().collect();
        for (key, _) in &entries {
            let key_name = key.get_ref().as_ref();
            if !keys.contains(&key_name) {
                unknown_key(problems, &key.span(), key_name, keys, "a key here");
            }
        }
        let at = problems.len();
        let fleet = if keys.contains(&"fleet") { guard_flag(&entries, problems) } else { None };
        let fleet_read = problems.len() == at;
        if let Some(value) = read(&entries, &span, problems)
            && fleet_read
        {
            let keys = entries.iter().map(|(k, v)| (k.get_ref().to_string(), v.span())).collect();
            out.push(Named { name, span, value, fleet, keys });
        }
    }
    out
}

/// An operation's keys; their checks against each other and against the
/// compiled function are the check step's, which knows the function. A
/// table with a value that could not be read is left out, as a guard's
/// is: the check would take that key from the compiled function and blame
/// it for what the file got wrong.
fn operation(entries: &[Entry<'_>], _table: &Span, problems: &mut Problems<'_>) -> Option<OperationOverride> {
    let before = problems.len();
    let jitter = entries.iter().find(|(k, _)| k.get_ref().as_ref() == "jitter").and_then(|(_, value)| {
        let parsed = match value.get_ref() {
            DeValue::String(name) => name.parse::<Jitter>().ok(),
            _ => None,
        };
        if parsed.is_none() {
            let expected = Jitter::NAMES.map(|n| format!("\"{n}\"")).join(", ");
            problems.push(&value.span(), Some("jitter"), format!("`jitter` must be one of: {expected}"));
        }
        Some((parsed?, value.span()))
    });
    let priority = entries.iter().find(|(k, _)| k.get_ref().as_ref() == "priority").and_then(|(_, value)| {
        let parsed = match value.get_ref() {
            DeValue::String(name) => name.parse::<crate::Priority>().ok(),
            _ => None,
        };
        if parsed.is_none() {
            let expected = crate::Priority::NAMES.map(|n| format!("\"{n}\"")).join(", ");
            problems.push(&value.span(), Some("priority"), format!("`priority` must be one of: {expected}"));
        }
        Some((parsed?, value.span()))
    });
    let operation = OperationOverride {
        max_attempts: count(entries, "max_attempts", problems),
        base: millis(entries, "base_ms", problems),
        cap: millis(entries, "cap_ms", problems),
        factor: factor(entries, problems),
        jitter,
        attempt_timeout: millis(entries, "attempt_timeout_ms", problems),
        deadline: millis(entries, "deadline_ms", problems),
        no_budget: only_none(entries, "budget", "retries take nothing from a budget", problems),
        no_breaker: only_none(entries, "breaker", "attempts do not ask a breaker", problems),
        priority,
    };
    (problems.len() == before).then_some(operation)
}

/// `budget` or `breaker`, if given: only `"none"` (what it means: `effect`),
/// since a function's guards are named in its code. `"none"` is both
/// [`NO_BUDGET`](crate::budget::NO_BUDGET) and
/// [`NO_BREAKER`](crate::breaker::NO_BREAKER).
fn only_none(entries: &[Entry<'_>], key: &str, effect: &str, problems: &mut Problems<'_>) -> Option<Span> {
    let (_, value) = entries.iter().find(|(k, _)| k.get_ref().as_ref() == key)?;
    match value.get_ref() {
        DeValue::String(name) if name.as_ref() == crate::budget::NO_BUDGET => Some(value.span()),
        _ => {
            problems.push(
                &value.span(),
                Some(key),
                format!(
                    "`{key}` can only be \"none\" here ({effect}): a function's {key} is named in its code"
                ),
            );
            None
        }
    }
}

/// `factor`, if given: a number with at most three decimals, in thousandths.
fn factor(entries: &[Entry<'_>], problems: &mut Problems<'_>) -> Option<(u32, Span)> {
    let span = values::span_of(entries, "factor")?;
    let number = number(entries, "factor", problems)?;
    match crate::policy::factor_milli(number) {
        Ok(milli) => Some((milli, span)),
        Err(error) => {
            problems.push(&span, Some("factor"), format!("`factor` {}", error.problem));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys of the guide's schema table that follows `heading`, in order.
    fn schema_keys(guide: &str, heading: &str) -> Vec<String> {
        let at = guide.find(heading).unwrap_or_else(|| panic!("docs/configuration.md has no {heading}"));
        guide[at..]
            .lines()
            .skip_while(|line| !line.starts_with("| key |"))
            .skip(2)
            .take_while(|line| line.starts_with("| `"))
            .filter_map(|line| line.split('`').nth(1).map(str::to_owned))
            .collect()
    }

    /// The guide's full schema lists every key the parser reads, table by
    /// table, and no other: a key added to the parser without its row, or
    /// a row for a key the parser refuses, fails here.
    #[test]
    fn the_guides_schema_is_the_parsers() {
        let guide = include_str!("../../../../docs/configuration.md");
        let guide = &guide[guide.find("## The full schema").expect("the schema section")..];
        let tables: [(&str, &[&str]); 6] = [
            ("`[breakers.NAME]`", BREAKER_KEYS),
            ("`[budgets.NAME]`", BUDGET_KEYS),
            ("`[bulkheads.NAME]`", BULKHEAD_KEYS),
            ("`[throttles.NAME]`", THROTTLE_KEYS),
            ("`[rate_limits.NAME]`", RATE_LIMIT_KEYS),
            ("`[operations.\"NAME\"]`", OPERATION_KEYS),
        ];
        for (heading, keys) in tables {
            assert_eq!(schema_keys(guide, heading), keys, "{heading}");
        }
        let fleet = ["url", "prefix", "sync_every_ms", "store_timeout_ms", "lease_size"];
        assert_eq!(schema_keys(guide, "`[fleet]`"), fleet);
        #[cfg(feature = "fleet")]
        assert_eq!(fleet, fleet::with_redis::FLEET_KEYS);
        let sections: Vec<&str> = SECTIONS.to_vec();
        assert_eq!(
            sections,
            ["breakers", "budgets", "bulkheads", "throttles", "rate_limits", "operations", "fleet"]
        );
    }
}
