//! An `[operations."..."]` table checked the way the attribute checks its
//! arguments, and against the promises the function was compiled with.

use std::collections::HashMap;

use crate::file::parse::{Named, OperationOverride};
use crate::file::{Problems, Span};
use crate::operations;
use crate::policy::{MAX_ATTEMPTS_LIMIT, Policy};
use crate::settings::{SettingSources, Settings};

/// The first annotated function with this operation name.
pub(crate) fn compiled(name: &str) -> Option<&'static Policy> {
    operations::named(name).next()
}

/// Each operation's settings with its overrides applied, checked as the
/// attribute checks its arguments, and against every compile-time promise
/// of the functions of that name; with where each setting comes from.
///
/// The settings kept are the first function's (what reports and the
/// dashboard show of the name); each function of the name runs on its own
/// settings with the table's keys laid over them (`Settings::overlaid`),
/// and each of those is checked: two functions of one name may be
/// compiled differently, and a table valid over one may not be over the
/// other (a `cap_ms` below the other's `base_ms`).
pub(crate) fn merged_operations(
    operations: &[Named<OperationOverride>],
    problems: &mut Problems<'_>,
) -> HashMap<String, (Settings, SettingSources)> {
    let mut merged = HashMap::new();
    for Named { name, span, value, .. } in operations {
        let policies: Vec<&'static Policy> = operations::named(name).collect();
        let compiled: Vec<Settings> = match policies.is_empty() {
            // No function of that name linked: the defaults, as a
            // `Policy::builder()` of that name would have them.
            true => Policy::builder().build().map(|p| p.settings()).into_iter().collect(),
            false => policies.iter().map(|p| p.settings()).collect(),
        };
        let Some(first) = compiled.first() else { continue };
        // What each function runs on is what is checked: its own settings
        // with the table's keys laid over them, as the registry lays them.
        let (file, sources) = (laid_over(*first, value), sources(value, problems));
        let before = problems.len();
        // One function's problems are enough: its twins' would repeat them.
        for settings in &compiled {
            check(&settings.overlaid(&file, &sources), value, span, problems);
            if problems.len() != before {
                break;
            }
        }
        for policy in &policies {
            if policy.settings().overlaid(&file, &sources).max_attempts <= 1 {
                continue;
            }
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
                let given = value.max_attempts.as_ref().map(|(_, s)| s.clone());
                problems.push(&given.unwrap_or_else(|| span.clone()), Some("max_attempts"), message);
                break;
            }
        }
        if problems.len() == before {
            merged.insert(name.clone(), (file, sources));
        }
    }
    merged
}

/// `settings` with the table's keys laid over them.
fn laid_over(mut settings: Settings, value: &OperationOverride) -> Settings {
    if let Some((n, _)) = &value.max_attempts {
        settings.max_attempts = *n;
    }
    if let Some((d, _)) = &value.base {
        settings.backoff.base = *d;
    }
    if let Some((d, _)) = &value.cap {
        settings.backoff.cap = *d;
    }
    if let Some((f, _)) = &value.factor {
        settings.backoff.factor_milli = *f;
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
    if value.no_budget.is_some() {
        settings.budget = false;
    }
    if value.no_breaker.is_some() {
        settings.breaker = false;
    }
    if let Some((priority, _)) = &value.priority {
        settings.priority = *priority;
    }
    settings
}

/// The attribute's checks of one function's `settings` with the table
/// laid over them, each problem at the key that gave it (else the table).
fn check(settings: &Settings, value: &OperationOverride, span: &Span, problems: &mut Problems<'_>) {
    let at = |key: Option<Span>| key.unwrap_or_else(|| span.clone());
    if let (Err(error), Some((_, given))) =
        (crate::backoff::Backoff::validate_factor(settings.backoff.factor_milli), &value.factor)
    {
        problems.push(given, Some("factor"), format!("`factor` {}", error.problem));
    }
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
    for (key, given) in [("attempt_timeout_ms", &value.attempt_timeout), ("deadline_ms", &value.deadline)] {
        if let Some((_, span)) = given.as_ref().filter(|(d, _)| d.is_zero()) {
            problems.push(span, Some(key), format!("`{key}` must be greater than 0"));
        }
    }
    if let (Some(timeout), Some(deadline)) = (settings.attempt_timeout, settings.deadline)
        && timeout >= deadline
        && !deadline.is_zero()
    {
        let message = format!(
            "`attempt_timeout_ms` must be less than `deadline_ms`: a {} ms attempt timeout could never fire, the {} ms deadline ends the call first",
            timeout.as_millis(),
            deadline.as_millis()
        );
        let given = value.attempt_timeout.as_ref().or(value.deadline.as_ref()).map(|(_, s)| s.clone());
        problems.push(&at(given), Some("attempt_timeout_ms"), message);
    }
}

/// Where each setting of an overridden operation comes from: the table's
/// key, or what the function was compiled with.
fn sources(value: &OperationOverride, problems: &Problems<'_>) -> SettingSources {
    let source = |given: Option<&Span>| match given {
        Some(span) => problems.source_of(span),
        None => crate::settings::SettingSource::Compiled,
    };
    SettingSources {
        max_attempts: source(value.max_attempts.as_ref().map(|(_, s)| s)),
        base: source(value.base.as_ref().map(|(_, s)| s)),
        cap: source(value.cap.as_ref().map(|(_, s)| s)),
        factor: source(value.factor.as_ref().map(|(_, s)| s)),
        jitter: source(value.jitter.as_ref().map(|(_, s)| s)),
        attempt_timeout: source(value.attempt_timeout.as_ref().map(|(_, s)| s)),
        deadline: source(value.deadline.as_ref().map(|(_, s)| s)),
        budget: source(value.no_budget.as_ref()),
        breaker: source(value.no_breaker.as_ref()),
        priority: source(value.priority.as_ref().map(|(_, s)| s)),
    }
}
