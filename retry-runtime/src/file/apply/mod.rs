//! Applying: a checked file's changes made, all or nothing, keeping every
//! guard's state. The guards first (`declare`: each declared, or
//! reconfigured where it exists), as the last step that can refuse the
//! file; then the operations' overrides replaced in one swap; then what
//! changed reported. The check step found the file's problems; what can
//! still fail here is only a guard a call or code made since (they do not
//! wait for a file), and it refuses the file with nothing applied.

mod declare;
mod report;

pub use report::{Change, Refusal, ReloadReport};

use std::collections::HashMap;

use super::check::{Checked, compiled};
use super::{ConfigFileError, Mode, Problems};
use crate::config::ConfigError;
use crate::operations;
use crate::policy::Policy;
use crate::registry::Registry;
use crate::settings::{SettingSources, Settings};
use report::settings_diff;

/// Applies a checked file to `registry` for a `mode`; `problems` places
/// what the guards' step still finds. The caller holds
/// `registry.applying()` since the file was checked.
pub(super) fn apply(
    registry: &Registry,
    checked: Checked,
    mode: Mode,
    problems: Problems<'_>,
) -> Result<ReloadReport, ConfigFileError> {
    let Checked { file, operations: mut overrides } = checked;
    // The guards, then the overrides: the guards' step is the last
    // that can refuse the file (see `declare`).
    let mut report = registry.declare_guards(&file, mode, problems)?;
    let before: HashMap<String, (Settings, SettingSources)> = registry
        .overridden_operations()
        .into_iter()
        .filter_map(|name| Some((name.clone(), registry.operation_override_with_sources(&name)?)))
        .collect();
    for (name, (settings, _)) in &overrides {
        let compiled =
            before.get(name).map(|(settings, _)| *settings).or_else(|| compiled(name).map(Policy::settings));
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
        .map(|(name, (settings, sources))| {
            let policies =
                operations::named(&name).map(|policy| (policy.overrides(), policy.settings())).collect();
            (name, (settings, sources, policies))
        })
        .collect();
    registry.replace_overrides(counted);
    Ok(report)
}

/// Applies `new` through `apply` when it differs from `old`: what changed
/// between `old` and what the guard keeps once it is applied (`kept`), or
/// the guard's refusal (one the file's checks did not foresee: they ask
/// the guards first), to be reported rather than taken for no change. A guard may
/// keep a setting otherwise than the file gives it: a `max_wait` longer
/// than u64::MAX nanoseconds (about 584 years) is kept as that, so a file
/// that says more is no change once it is in force, and reloading it
/// unchanged must say so.
fn reconfigure<C: PartialEq + Copy>(
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
}
