//! Reading one value of a table: each checked against what it must be, each
//! problem placed at the value (or, for a default, at the table's name).

use std::time::Duration;

use toml::Spanned;
use toml::de::DeValue;

use crate::config::ConfigError;
use crate::file::{Problems, Span};
use crate::suggest::closest;

/// One `key = value` of a table, both with their positions.
pub(crate) type Entry<'t> = (&'t Spanned<std::borrow::Cow<'t, str>>, &'t Spanned<DeValue<'t>>);

/// The value of `key`, if the table gives it.
pub(crate) fn given<'a, 't>(entries: &'a [Entry<'t>], key: &str) -> Option<&'a Spanned<DeValue<'t>>> {
    entries.iter().find(|(k, _)| k.get_ref().as_ref() == key).map(|(_, value)| *value)
}

/// The span of `key`'s value, if given.
pub(crate) fn span_of(entries: &[Entry<'_>], key: &str) -> Option<Span> {
    given(entries, key).map(Spanned::span)
}

pub(crate) fn unknown_key(problems: &mut Problems<'_>, span: &Span, key: &str, known: &[&str], what: &str) {
    let listed = known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
    let message = match closest(key, known.iter().copied()) {
        Some(close) => format!("`{key}` is not {what}; did you mean `{close}`? (expected one of: {listed})"),
        None => format!("`{key}` is not {what}; expected one of: {listed}"),
    };
    problems.push(span, Some(key), message);
}

/// The value of `key`, if given, as a non-negative integer up to `max`.
pub(crate) fn integer(
    entries: &[Entry<'_>],
    key: &str,
    max: u64,
    problems: &mut Problems<'_>,
) -> Option<(u64, Span)> {
    let value = given(entries, key)?;
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

pub(crate) fn count(entries: &[Entry<'_>], key: &str, problems: &mut Problems<'_>) -> Option<(u32, Span)> {
    integer(entries, key, u64::from(u32::MAX), problems).map(|(n, span)| (n as u32, span))
}

pub(crate) fn millis(
    entries: &[Entry<'_>],
    key: &str,
    problems: &mut Problems<'_>,
) -> Option<(Duration, Span)> {
    integer(entries, key, u64::MAX, problems).map(|(n, span)| (Duration::from_millis(n), span))
}

/// The value of `key`, if given, as a number (an integer or a float).
pub(crate) fn number(entries: &[Entry<'_>], key: &str, problems: &mut Problems<'_>) -> Option<f64> {
    let value = given(entries, key)?;
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

/// The value of `key`, if given, as `true` or `false`.
pub(crate) fn flag(entries: &[Entry<'_>], key: &str, problems: &mut Problems<'_>) -> Option<(bool, Span)> {
    let value = given(entries, key)?;
    match value.get_ref() {
        DeValue::Boolean(b) => Some((*b, value.span())),
        _ => {
            problems.push(&value.span(), Some(key), format!("`{key}` must be `true` or `false`"));
            None
        }
    }
}

/// The value of `key`, if given, as a string.
pub(crate) fn text(entries: &[Entry<'_>], key: &str, problems: &mut Problems<'_>) -> Option<(String, Span)> {
    let value = given(entries, key)?;
    match value.get_ref() {
        DeValue::String(s) => Some((s.to_string(), value.span())),
        _ => {
            problems.push(
                &value.span(),
                Some(key),
                format!("`{key}` must be a string, like `{key} = \"...\"`"),
            );
            None
        }
    }
}

/// The file's key for a config struct's field: the struct's duration
/// fields drop the keys' `_ms`.
pub(crate) fn key_of(field: &str) -> String {
    match field {
        "window" | "open_for" | "max_open_for" | "max_wait" | "sync_every" | "store_timeout" => {
            format!("{field}_ms")
        }
        "slow_call_duration" => "slow_call_ms".to_owned(),
        field => field.to_owned(),
    }
}

/// Places a config's validation error at the key that set the field, or
/// at the table's name.
pub(crate) fn invalid(error: ConfigError, entries: &[Entry<'_>], table: &Span, problems: &mut Problems<'_>) {
    let key = key_of(error.field);
    let (span, note) = match span_of(entries, &key) {
        Some(span) => (span, ""),
        None => (table.clone(), " (the default)"),
    };
    problems.push(&span, Some(&key), format!("`{key}`{note} {}", error.problem));
}

/// The checked config, or its validation error placed at its key. A table
/// whose values already failed to read (`before` problems became more) is
/// not validated: its defaults would be blamed for what the file got wrong.
pub(crate) fn finish<T>(
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
