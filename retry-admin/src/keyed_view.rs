//! Sets of bulkheads and rate limits per key (`per = tenant`), as the
//! snapshot shows them: how many keys each holds against its bound, and
//! the keys that refused the most attempts.

use serde::{Deserialize, Serialize};

use stormproof_runtime::bulkhead::KeyedBulkheads;
use stormproof_runtime::rate_limit::KeyedRateLimits;

use super::clock::millis;

/// How many keys a set's view lists at most (open or half-open breakers,
/// the keys that refused the most).
pub const KEYS_LISTED: usize = 20;

/// One set of bulkheads or rate limits per key: how many keys it holds,
/// its bounds, and the keys whose guard refused attempts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct KeyedSetView {
    /// Its name in the registry (its settings are the guard's of that name).
    pub name: String,
    /// Keys it holds now.
    pub keys: u64,
    /// The most keys it holds at once.
    pub max_keys: u32,
    /// How long an unused key is kept.
    pub idle_for_ms: u64,
    /// The keys whose guard refused attempts, the most refusals first (at
    /// most [`KEYS_LISTED`]).
    pub refusing: Vec<KeyRefused>,
}

/// A key and how many attempts its guard refused, whatever their priority.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct KeyRefused {
    /// The key.
    pub key: String,
    /// Attempts its guard refused.
    pub refused: u64,
}

impl KeyedSetView {
    pub(crate) fn of_bulkheads(name: String, set: &KeyedBulkheads) -> Self {
        let config = set.config();
        let guards = set.guards();
        let refused = guards.iter().map(|bulkhead| (bulkhead.key(), bulkhead.refusals().total()));
        Self::of(name, guards.len(), config.max_keys, millis(config.idle_for), refused)
    }

    pub(crate) fn of_rate_limits(name: String, set: &KeyedRateLimits) -> Self {
        let config = set.config();
        let guards = set.guards();
        let refused = guards.iter().map(|limit| (limit.key(), limit.refusals().total()));
        Self::of(name, guards.len(), config.max_keys, millis(config.idle_for), refused)
    }

    fn of<'a>(
        name: String,
        keys: usize,
        max_keys: u32,
        idle_for_ms: u64,
        refused: impl Iterator<Item = (Option<&'a str>, u64)>,
    ) -> Self {
        let mut refusing: Vec<KeyRefused> = refused
            .filter(|&(_, refused)| refused > 0)
            .filter_map(|(key, refused)| Some(KeyRefused { key: key?.to_owned(), refused }))
            .collect();
        // The most refused first; among equals, the most recently used
        // first (the order the set keeps them in), which a stable sort keeps.
        refusing.sort_by_key(|key| std::cmp::Reverse(key.refused));
        refusing.truncate(KEYS_LISTED);
        KeyedSetView { name, keys: u64::try_from(keys).unwrap_or(u64::MAX), max_keys, idle_for_ms, refusing }
    }
}
