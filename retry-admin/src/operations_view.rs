//! The operations in a snapshot: each annotated function's settings in
//! effect in the router's registry, and where each came from.

use serde::{Deserialize, Serialize};
use stormproof_runtime::OperationInfo;
use stormproof_runtime::policy::SettingSource;

use crate::clock::millis;

/// One `#[resilient]` function and the settings its calls run on in the
/// router's registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct OperationView {
    /// Its operation name.
    pub name: String,
    /// Each setting in effect, in the attribute's order: `max_attempts`,
    /// `base_ms`, `cap_ms`, `factor`, `jitter`, `attempt_timeout_ms`, `deadline_ms`.
    pub settings: Vec<SettingView>,
}

/// One setting of an operation in effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SettingView {
    /// Its key, as the attribute and the file name it (`base_ms`).
    pub key: String,
    /// Its value (`"none"` for a timeout or deadline that is not set).
    pub value: String,
    /// Where it came from: `"compiled"`, or the file and the key's line
    /// (`"stormproof.toml:12"`).
    pub source: String,
}

impl OperationView {
    pub(crate) fn of(info: &OperationInfo) -> Self {
        let (settings, sources) = (&info.effective, &info.sources);
        let optional =
            |ms: Option<std::time::Duration>| ms.map_or_else(|| "none".to_owned(), |d| millis(d).to_string());
        let row = |key: &str, value: String, source: &SettingSource| SettingView {
            key: key.to_owned(),
            value,
            source: source.to_string(),
        };
        OperationView {
            name: info.name.clone(),
            settings: vec![
                row("max_attempts", settings.max_attempts.to_string(), &sources.max_attempts),
                row("base_ms", millis(settings.backoff.base).to_string(), &sources.base),
                row("cap_ms", millis(settings.backoff.cap).to_string(), &sources.cap),
                row("factor", settings.backoff.factor().to_string(), &sources.factor),
                row("jitter", settings.backoff.jitter.name().to_owned(), &sources.jitter),
                row("attempt_timeout_ms", optional(settings.attempt_timeout), &sources.attempt_timeout),
                row("deadline_ms", optional(settings.deadline), &sources.deadline),
                row("budget", if settings.budget { "on" } else { "none" }.to_owned(), &sources.budget),
                row("breaker", if settings.breaker { "on" } else { "none" }.to_owned(), &sources.breaker),
                row("priority", settings.priority.to_string(), &sources.priority),
            ],
        }
    }
}
