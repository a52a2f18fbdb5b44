//! Reading the file: every key checked against the keys it may be, every
//! value against what it must be, every problem placed where it is.

use std::time::Duration;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::{ConfigFile, ConfigFileError, Named, OperationOverride, Problems, Span};
use crate::backoff::Jitter;
use crate::breaker::BreakerConfig;
use crate::budget::{BudgetConfig, RatioBudget, TokenBucket};
use crate::bulkhead::BulkheadConfig;
use crate::config::ConfigError;
use crate::suggest::closest;

const SECTIONS: &[&str] = &["breakers", "budgets", "bulkheads", "operations"];
const BREAKER_KEYS: &[&str] = &[
    "failure_threshold",
    "window_ms",
    "open_for_ms",
    "success_threshold",
    "half_open_max_calls",
    "failure_rate_percent",
    "minimum_calls",
];
const BUDGET_KEYS: &[&str] =
    &["ratio", "window_ms", "min_per_sec", "capacity", "retry_cost", "refill_per_success"];
/// A budget's keys by form: a table gives the keys of one form.
const RATIO_KEYS: &[&str] = &["ratio", "window_ms", "min_per_sec"];
const BUCKET_KEYS: &[&str] = &["capacity", "retry_cost", "refill_per_success"];
const BULKHEAD_KEYS: &[&str] = &["max_concurrent", "max_wait_ms"];
const OPERATION_KEYS: &[&str] =
    &["max_attempts", "base_ms", "cap_ms", "jitter", "attempt_timeout_ms", "deadline_ms"];

type Entry<'t> = (&'t Spanned<std::borrow::Cow<'t, str>>, &'t Spanned<DeValue<'t>>);

/// Reads `text` (named `file` in errors) into a checked [`ConfigFile`].
pub(crate) fn parse(text: &str, file: &str) -> Result<ConfigFile, ConfigFileError> {
    let mut problems = Problems::new(text, file);
    let document = match DeTable::parse(text) {
        Ok(document) => document,
        Err(error) => {
            problems.push(
                &error.span().unwrap_or(0..0),
                None,
                format!("not valid TOML: {}", error.message()),
            );
            return problems.finish(ConfigFile::default());
        }
    };
    let mut parsed = ConfigFile::default();
    for (key, value) in document.get_ref().iter() {
        let section = key.get_ref().as_ref();
        let tables = named_tables(section, value, &mut problems);
        match section {
            "breakers" => parsed.breakers = guards(tables, BREAKER_KEYS, breaker, &mut problems),
            "budgets" => parsed.budgets = guards(tables, BUDGET_KEYS, budget, &mut problems),
            "bulkheads" => parsed.bulkheads = guards(tables, BULKHEAD_KEYS, bulkhead, &mut problems),
            "operations" => parsed.operations = guards(tables, OPERATION_KEYS, operation, &mut problems),
            other => unknown_key(&mut problems, &key.span(), other, SECTIONS, "a section"),
        }
    }
    problems.finish(parsed)
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

/// Each named table read by `read`, its keys checked against `keys` first.
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
        if let Some(value) = read(&entries, &span, problems) {
            out.push(Named { name, span, value });
        }
    }
    out
}

fn unknown_key(problems: &mut Problems<'_>, span: &Span, key: &str, known: &[&str], what: &str) {
    let listed = known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
    let message = match closest(key, known.iter().copied()) {
        Some(close) => format!("`{key}` is not {what}; did you mean `{close}`? (expected one of: {listed})"),
        None => format!("`{key}` is not {what}; expected one of: {listed}"),
    };
    problems.push(span, Some(key), message);
}

/// The value of `key`, if given, as a non-negative integer up to `max`.
fn integer(entries: &[Entry<'_>], key: &str, max: u64, problems: &mut Problems<'_>) -> Option<(u64, Span)> {
    let (_, value) = entries.iter().find(|(k, _)| k.get_ref().as_ref() == key)?;
    let span = value.span();
    let DeValue::Integer(integer) = value.get_ref() else {
        problems.push(&span, Some(key), format!("`{key}` must be an integer, like `{key} = 100`"));
        return None;
    };
    match i128::from_str_radix(integer.as_str(), integer.radix()) {
        Ok(n) if n < 0 => problems.push(&span, Some(key), format!("`{key}` must not be negative, got {n}")),
        Ok(n) if n > i128::from(max) => {
            problems.push(&span, Some(key), format!("`{key}` must be at most {max}, got {n}"))
        }
        Ok(n) => return u64::try_from(n).ok().map(|n| (n, span)),
        Err(_) => problems.push(&span, Some(key), format!("`{key}` is too large")),
    }
    None
}

fn count(entries: &[Entry<'_>], key: &str, problems: &mut Problems<'_>) -> Option<(u32, Span)> {
    integer(entries, key, u64::from(u32::MAX), problems).map(|(n, span)| (n as u32, span))
}

fn millis(entries: &[Entry<'_>], key: &str, problems: &mut Problems<'_>) -> Option<(Duration, Span)> {
    integer(entries, key, u64::MAX, problems).map(|(n, span)| (Duration::from_millis(n), span))
}

/// Places a guard config's validation error at the key that set the field
/// (the struct's field names drop the keys' `_ms`), or at the table's name.
fn invalid(error: ConfigError, entries: &[Entry<'_>], table: &Span, problems: &mut Problems<'_>) {
    let key = match error.field {
        "window" | "open_for" | "max_wait" => format!("{}_ms", error.field),
        field => field.to_owned(),
    };
    let given = entries.iter().find(|(k, _)| k.get_ref().as_ref() == key).map(|(_, v)| v.span());
    let (span, note) = match given {
        Some(span) => (span, ""),
        None => (table.clone(), " (the default)"),
    };
    problems.push(&span, Some(&key), format!("`{key}`{note} {}", error.problem));
}

fn breaker(entries: &[Entry<'_>], table: &Span, problems: &mut Problems<'_>) -> Option<BreakerConfig> {
    let mut config = BreakerConfig::default();
    let before = problems_count(problems);
    if let Some((n, _)) = count(entries, "failure_threshold", problems) {
        config.failure_threshold = n;
    }
    if let Some((d, _)) = millis(entries, "window_ms", problems) {
        config.window = d;
    }
    if let Some((d, _)) = millis(entries, "open_for_ms", problems) {
        config.open_for = d;
    }
    if let Some((n, _)) = count(entries, "success_threshold", problems) {
        config.success_threshold = n;
    }
    if let Some((n, _)) = count(entries, "half_open_max_calls", problems) {
        config.half_open_max_calls = n;
    }
    if let Some((n, _)) = integer(entries, "failure_rate_percent", 100, problems) {
        config.failure_rate_percent = Some(n as u8);
    }
    if let Some((n, _)) = count(entries, "minimum_calls", problems) {
        config.minimum_calls = n;
    }
    finish(config.validate().map(|()| config), before, entries, table, problems)
}

/// A budget: a ratio budget (the default form) unless its table gives a
/// token bucket's keys; one table cannot mix the two.
fn budget(entries: &[Entry<'_>], table: &Span, problems: &mut Problems<'_>) -> Option<BudgetConfig> {
    let before = problems_count(problems);
    let given =
        |keys: &[&str]| entries.iter().find(|(k, _)| keys.contains(&k.get_ref().as_ref())).map(|(k, _)| k);
    if let (Some(_), Some(bucket_key)) = (given(RATIO_KEYS), given(BUCKET_KEYS)) {
        let key = bucket_key.get_ref().as_ref();
        problems.push(
            &bucket_key.span(),
            Some(key),
            format!("`{key}` is a token bucket's key, but this budget also has a ratio budget's keys (`ratio`, `window_ms`, `min_per_sec`): give one form's keys"),
        );
        return None;
    }
    let config = if given(BUCKET_KEYS).is_some() {
        let mut bucket = TokenBucket::default();
        if let Some((n, _)) = count(entries, "capacity", problems) {
            bucket.capacity = n;
        }
        if let Some((n, _)) = count(entries, "retry_cost", problems) {
            bucket.retry_cost = n;
        }
        if let Some((n, _)) = count(entries, "refill_per_success", problems) {
            bucket.refill_per_success = n;
        }
        BudgetConfig::TokenBucket(bucket)
    } else {
        let mut ratio = RatioBudget::default();
        if let Some(value) = number(entries, "ratio", problems) {
            ratio.ratio = value;
        }
        if let Some((d, _)) = millis(entries, "window_ms", problems) {
            ratio.window = d;
        }
        if let Some((n, _)) = count(entries, "min_per_sec", problems) {
            ratio.min_per_sec = n;
        }
        BudgetConfig::Ratio(ratio)
    };
    finish(config.validate().map(|()| config), before, entries, table, problems)
}

/// The value of `key`, if given, as a number (an integer or a float).
fn number(entries: &[Entry<'_>], key: &str, problems: &mut Problems<'_>) -> Option<f64> {
    let (_, value) = entries.iter().find(|(k, _)| k.get_ref().as_ref() == key)?;
    let parsed = match value.get_ref() {
        DeValue::Float(float) => float.as_str().replace('_', "").parse::<f64>().ok(),
        DeValue::Integer(integer) => {
            i64::from_str_radix(integer.as_str(), integer.radix()).ok().map(|n| n as f64)
        }
        _ => None,
    };
    if parsed.is_none() {
        problems.push(&value.span(), Some(key), format!("`{key}` must be a number, like `{key} = 0.1`"));
    }
    parsed
}

fn bulkhead(entries: &[Entry<'_>], table: &Span, problems: &mut Problems<'_>) -> Option<BulkheadConfig> {
    let mut config = BulkheadConfig::default();
    let before = problems_count(problems);
    if let Some((n, _)) = count(entries, "max_concurrent", problems) {
        config.max_concurrent = n;
    }
    if let Some((d, _)) = millis(entries, "max_wait_ms", problems) {
        config.max_wait = Some(d);
    }
    finish(config.validate().map(|()| config), before, entries, table, problems)
}

/// An operation's keys; their checks against each other and against the
/// compiled function happen where the function is known (the registry).
fn operation(entries: &[Entry<'_>], _table: &Span, problems: &mut Problems<'_>) -> Option<OperationOverride> {
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
    Some(OperationOverride {
        max_attempts: count(entries, "max_attempts", problems),
        base: millis(entries, "base_ms", problems),
        cap: millis(entries, "cap_ms", problems),
        jitter,
        attempt_timeout: millis(entries, "attempt_timeout_ms", problems),
        deadline: millis(entries, "deadline_ms", problems),
    })
}

fn problems_count(problems: &Problems<'_>) -> usize {
    problems.len()
}

/// The checked config, or its validation error placed at its key. A table
/// whose values already failed to read (`before` problems became more) is
/// not validated: its defaults would be blamed for what the file got wrong.
fn finish<T>(
    validated: Result<T, ConfigError>,
    before: usize,
    entries: &[Entry<'_>],
    table: &Span,
    problems: &mut Problems<'_>,
) -> Option<T> {
    if problems.len() > before {
        return None;
    }
    match validated {
        Ok(config) => Some(config),
        Err(error) => {
            invalid(error, entries, table, problems);
            None
        }
    }
}
