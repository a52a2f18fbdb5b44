//! The fleet the registry is in (feature `fleet`), as the snapshot shows it.

use serde::{Deserialize, Serialize};

use stormproof_runtime::Registry;

/// The fleet the registry shares its guards with (joined with
/// `stormproof::fleet::Fleet::join`), as its background task last reported
/// ([`Registry::fleet_sync`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FleetView {
    /// The fleet's key prefix in Redis.
    pub prefix: String,
    /// Whether the last flush got through, so that the guards follow the
    /// fleet (else they run on their local state).
    pub linked: bool,
    /// Flushes that got through.
    pub flushes: u64,
    /// Flushes that failed or timed out.
    pub failed_flushes: u64,
    /// Keys of the fleet's found holding another type than a hash (another
    /// program's value), each replaced by the flush that found it.
    pub replaced_keys: u64,
    /// The last of those keys; `null` while there is none.
    pub last_replaced_key: Option<String>,
}

impl FleetView {
    /// The fleet `registry` is in now; `None` when it is in none.
    #[cfg(feature = "fleet")]
    pub(crate) fn of(registry: &Registry) -> Option<Self> {
        let report = registry.fleet_sync()?;
        Some(FleetView {
            prefix: report.prefix,
            linked: report.linked,
            flushes: report.flushes,
            failed_flushes: report.failed_flushes,
            replaced_keys: report.replaced_keys,
            last_replaced_key: report.last_replaced_key,
        })
    }

    /// Without feature `fleet` a registry is in no fleet.
    #[cfg(not(feature = "fleet"))]
    pub(crate) fn of(_: &Registry) -> Option<Self> {
        None
    }
}
