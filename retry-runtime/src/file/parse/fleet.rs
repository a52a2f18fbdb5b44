//! The fleet's keys read (feature `redis`): the `[fleet]` table, which
//! says where Redis is and how the replicas sync, and `fleet = true |
//! false` on a breaker's or a budget's table, which shares that guard with
//! the fleet. What they ask of the rest of the file and of the registry is
//! checked by the check step (`check::fleet`).
//!
//! Without feature `redis`, a `[fleet]` table or a `fleet` key is a
//! problem: a guard the file says is fleet-wide must not silently stay
//! local to one process.

use toml::Spanned;
use toml::de::DeValue;

use super::values::{Entry, flag};
use crate::file::{Problems, Span};

#[cfg(feature = "fleet")]
pub(crate) use with_redis::FleetTable;

#[cfg(not(feature = "fleet"))]
pub(crate) use without_redis::FleetTable;

const NEEDS_REDIS: &str = "needs feature `redis`: built without it, no guard is shared, and a guard the file calls fleet-wide would stay local to this process";

/// `fleet = true | false` on a guard's table.
pub(crate) fn guard_flag(entries: &[Entry<'_>], problems: &mut Problems<'_>) -> Option<(bool, Span)> {
    let (shared, span) = flag(entries, "fleet", problems)?;
    if cfg!(not(feature = "fleet")) {
        problems.push(&span, Some("fleet"), format!("`fleet` {NEEDS_REDIS}"));
        return None;
    }
    Some((shared, span))
}

/// The `[fleet]` table.
pub(crate) fn section(
    span: &Span,
    value: &Spanned<DeValue<'_>>,
    problems: &mut Problems<'_>,
) -> Option<FleetTable> {
    #[cfg(feature = "fleet")]
    return with_redis::section(span, value, problems);
    #[cfg(not(feature = "fleet"))]
    {
        let _ = value;
        problems.push(span, Some("fleet"), format!("`[fleet]` {NEEDS_REDIS}"));
        None
    }
}

#[cfg(not(feature = "fleet"))]
mod without_redis {
    /// Never made: without feature `redis` a `[fleet]` table is a problem.
    #[derive(Debug)]
    pub(crate) enum FleetTable {}
}

#[cfg(feature = "fleet")]
pub(super) mod with_redis {
    use toml::Spanned;
    use toml::de::DeValue;

    use crate::file::parse::values::{Entry, count, invalid, key_of, millis, text, unknown_key};
    use crate::file::{Problems, Span};
    use crate::fleet::FleetConfig;

    pub(in crate::file::parse) const FLEET_KEYS: &[&str] =
        &["url", "prefix", "sync_every_ms", "store_timeout_ms", "lease_size"];

    /// The `[fleet]` table, read and checked.
    #[derive(Debug)]
    pub(crate) struct FleetTable {
        /// Where `[fleet]` is.
        pub(crate) span: Span,
        /// Its settings; the guards are the tables with `fleet = true`.
        pub(crate) config: FleetConfig,
        /// Where each key it gives is.
        pub(crate) keys: Vec<(String, Span)>,
    }

    pub(crate) fn section(
        span: &Span,
        value: &Spanned<DeValue<'_>>,
        problems: &mut Problems<'_>,
    ) -> Option<FleetTable> {
        let DeValue::Table(table) = value.get_ref() else {
            problems.push(
                &value.span(),
                Some("fleet"),
                "`fleet` must be a table, like `[fleet]` with `url = \"redis://127.0.0.1:6379/\"`",
            );
            return None;
        };
        let entries: Vec<Entry<'_>> = table.iter().collect();
        for (key, _) in &entries {
            let key_name = key.get_ref().as_ref();
            if !FLEET_KEYS.contains(&key_name) {
                unknown_key(problems, &key.span(), key_name, FLEET_KEYS, "a key of `[fleet]`");
            }
        }
        let before = problems.len();
        let mut config = FleetConfig::default();
        // The keys whose value could not be read (a problem said so): the
        // default left in their place is not checked, nor blamed.
        let mut unread = Vec::new();
        let mut read = |key: &'static str, problems: &mut Problems<'_>, at: usize| {
            if problems.len() > at {
                unread.push(key);
            }
        };
        let at = problems.len();
        if let Some((url, _)) = text(&entries, "url", problems) {
            config.url = url;
        }
        read("url", problems, at);
        let at = problems.len();
        if let Some((prefix, _)) = text(&entries, "prefix", problems) {
            config.prefix = prefix;
        }
        read("prefix", problems, at);
        let at = problems.len();
        if let Some((d, _)) = millis(&entries, "sync_every_ms", problems) {
            config.sync_every = d;
        }
        read("sync_every_ms", problems, at);
        let at = problems.len();
        if let Some((d, _)) = millis(&entries, "store_timeout_ms", problems) {
            config.store_timeout = d;
        }
        read("store_timeout_ms", problems, at);
        let at = problems.len();
        if let Some((n, _)) = count(&entries, "lease_size", problems) {
            config.lease_size = n;
        }
        read("lease_size", problems, at);
        // Every setting's problem at once, as for every other table's keys.
        for error in config.problems() {
            if !unread.contains(&key_of(error.field).as_str()) {
                invalid(error, &entries, span, problems);
            }
        }
        if problems.len() > before {
            return None;
        }
        let keys = entries.iter().map(|(k, v)| (k.get_ref().to_string(), v.span())).collect();
        Some(FleetTable { span: span.clone(), config, keys })
    }
}
