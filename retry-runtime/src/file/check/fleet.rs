//! The fleet in the file checked (feature `redis`): a `[fleet]` table
//! says where Redis is and how the replicas sync; `fleet = true` on a
//! breaker's or a budget's table shares that guard with the fleet. Both are
//! read by parse (`parse::fleet`); here, what they ask of the rest of the
//! file (a `[fleet]` table for a shared guard, a guard the fleet can share)
//! and, on a reload, of the fleet the registry joined.
//!
//! Loading the file declares the guards; joining is a separate step
//! ([`FleetConfig::from_file`] then `Fleet::join` of `stormproof::fleet`), because it
//! needs a tokio runtime and returns the handle that keeps the fleet. A
//! reload cannot join, leave or change a fleet: the background task runs
//! on the settings it was started with, so a file that differs from them is
//! refused at the key that differs rather than half applied.

#[cfg(feature = "fleet")]
pub(crate) use with_redis::{cross_check, fleet_config, reload_check};

#[cfg(not(feature = "fleet"))]
pub(crate) use without_redis::cross_check;

#[cfg(not(feature = "fleet"))]
mod without_redis {
    use crate::file::Problems;
    use crate::file::parse::ConfigFile;

    pub(crate) fn cross_check(_file: &ConfigFile, _problems: &mut Problems<'_>) {}
}

#[cfg(feature = "fleet")]
mod with_redis {
    use crate::budget::BudgetConfig;
    use crate::file::parse::{ConfigFile, Named};
    use crate::file::{Problems, Span};
    use crate::fleet::FleetConfig;

    fn shared<T>(tables: &[Named<T>]) -> impl Iterator<Item = (&Named<T>, &Span)> {
        tables
            .iter()
            .filter_map(|t| t.fleet.as_ref().filter(|(shared, _)| *shared).map(|(_, span)| (t, span)))
    }

    /// What `fleet = true` asks of the file and of the guard: a `[fleet]`
    /// table, and a guard the fleet can share (as `Fleet::join` checks).
    pub(crate) fn cross_check(file: &ConfigFile, problems: &mut Problems<'_>) {
        let no_table =
            "`fleet = true` needs a `[fleet]` table saying where Redis is (`url = \"redis://...\"`)";
        // A `[fleet]` table with problems of its own has said them; the
        // guards need not say that it is missing.
        for (table, span) in shared(&file.breakers) {
            if !file.fleet_given {
                problems.push(span, Some("fleet"), no_table);
            }
            let c = &table.value;
            if c.success_threshold > c.half_open_max_calls {
                problems.push(span, Some("fleet"), format!(
                    "breaker `{}` cannot be shared: its success_threshold ({}) is above its half_open_max_calls ({}), the fleet's probes per round: lower the one or raise the other",
                    table.name, c.success_threshold, c.half_open_max_calls
                ));
            }
        }
        for (table, span) in shared(&file.budgets) {
            if !file.fleet_given {
                problems.push(span, Some("fleet"), no_table);
            }
            if !matches!(table.value, BudgetConfig::Ratio(_)) {
                let form = table.value.form().replace('_', " ");
                problems.push(span, Some("fleet"), format!(
                    "budget `{}` cannot be shared: it is a {form}; a fleet shares ratio budgets (a share of the fleet's traffic)",
                    table.name
                ));
            }
        }
    }

    /// The fleet the file declares: its `[fleet]` settings and the guards
    /// with `fleet = true`.
    pub(crate) fn fleet_config(file: &ConfigFile) -> Option<FleetConfig> {
        let table = file.fleet.as_ref()?;
        Some(FleetConfig {
            breakers: shared(&file.breakers).map(|(t, _)| t.name.clone()).collect(),
            budgets: shared(&file.budgets).map(|(t, _)| t.name.clone()).collect(),
            ..table.config.clone()
        })
    }

    const NOT_JOINED: &str = "this registry is in no fleet, and a reload cannot join one (join with `FleetConfig::from_file` and `Fleet::join`)";
    const REJOIN: &str = "a reload cannot change the fleet a registry joined (leave with `Fleet::leave().await` and join again, or restart)";

    /// A reload's problems with the fleet: the file must say what the
    /// registry joined with (`joined`), for every guard it gives and for
    /// every key of a `[fleet]` table it has.
    pub(crate) fn reload_check(joined: Option<&FleetConfig>, file: &ConfigFile, problems: &mut Problems<'_>) {
        sharing("breaker", &file.breakers, joined.map(|j| &j.breakers[..]), problems);
        sharing("budget", &file.budgets, joined.map(|j| &j.budgets[..]), problems);
        let Some(table) = &file.fleet else { return };
        let Some(joined) = joined else {
            problems.push(&table.span, Some("fleet"), format!("`[fleet]`: {NOT_JOINED}"));
            return;
        };
        let (old, new) = (joined, &table.config);
        let ms = |d: std::time::Duration| d.as_millis().to_string();
        for (key, was, is) in [
            ("url", old.url.clone(), new.url.clone()),
            ("prefix", old.prefix.clone(), new.prefix.clone()),
            ("sync_every_ms", ms(old.sync_every), ms(new.sync_every)),
            ("store_timeout_ms", ms(old.store_timeout), ms(new.store_timeout)),
            ("lease_size", old.lease_size.to_string(), new.lease_size.to_string()),
        ] {
            if was != is {
                let given = table.keys.iter().find(|(k, _)| k == key).map(|(_, span)| span.clone());
                let (span, note) = match given {
                    Some(span) => (span, ""),
                    None => (table.span.clone(), " (the default)"),
                };
                let message = format!("`{key}`{note} is {is}, but the fleet was joined with {was}: {REJOIN}");
                problems.push(&span, Some(key), message);
            }
        }
    }

    /// Each guard's `fleet` against whether the joined fleet shares it.
    fn sharing<T>(kind: &str, tables: &[Named<T>], joined: Option<&[String]>, problems: &mut Problems<'_>) {
        for table in tables {
            let wants = table.fleet.as_ref().is_some_and(|(shared, _)| *shared);
            let is = joined.is_some_and(|names| names.contains(&table.name));
            if wants == is {
                continue;
            }
            let span = table.fleet.as_ref().map_or_else(|| table.span.clone(), |(_, span)| span.clone());
            let name = &table.name;
            let message = match (joined, wants) {
                (None, _) => format!("{kind} `{name}` has `fleet = true`, but {NOT_JOINED}"),
                (Some(_), true) => {
                    format!("{kind} `{name}` is not shared by the fleet this registry joined: {REJOIN}")
                }
                (Some(_), false) => format!(
                    "{kind} `{name}` is shared by the fleet this registry joined, and this file makes it local (no `fleet = true`): {REJOIN}"
                ),
            };
            problems.push(&span, Some("fleet"), message);
        }
    }
}
