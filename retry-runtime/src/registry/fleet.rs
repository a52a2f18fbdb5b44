//! What a registry knows of the fleet it is in (feature `redis`): the
//! settings it joined with (a reload of the configuration file checks
//! against them) and how the fleet's background task fares (its `Fleet`
//! handle and the admin dashboard read it).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::config::fleet::FleetConfig;

/// The fleet a registry joined.
#[derive(Debug)]
pub(crate) struct JoinedFleet {
    /// Read by a reload (feature `config`) and the fleet's report.
    pub(crate) config: FleetConfig,
    /// Read by the fleet's report.
    pub(crate) status: Arc<FleetStatus>,
}

/// How a fleet's background task fares: written by the task, read by its
/// `Fleet` handle and the admin snapshot.
#[derive(Debug, Default)]
pub(crate) struct FleetStatus {
    /// Whether the last flush got through (the guards follow the fleet).
    pub(crate) linked: AtomicBool,
    /// Flushes that got through.
    pub(crate) flushes: AtomicU64,
    /// Flushes that failed or timed out.
    pub(crate) failed_flushes: AtomicU64,
    /// Keys of the fleet's found holding another type than a hash (another
    /// program's value), and replaced by the flush that found them.
    replaced_keys: AtomicU64,
    /// The last of those keys.
    last_replaced_key: Mutex<Option<String>>,
}

impl FleetStatus {
    /// A flush replaced `key`, which held another type than a hash.
    pub(crate) fn key_replaced(&self, key: &str) {
        *self.last_replaced_key.lock().unwrap_or_else(|e| e.into_inner()) = Some(key.to_owned());
        // Release: whoever reads the count reads the key that made it.
        self.replaced_keys.fetch_add(1, Ordering::Release);
    }

    /// Keys replaced so far.
    pub(crate) fn replaced_keys(&self) -> u64 {
        self.replaced_keys.load(Ordering::Acquire)
    }

    /// The last key replaced, if any.
    pub(crate) fn last_replaced_key(&self) -> Option<String> {
        self.last_replaced_key.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// How the fleet a registry is in keeps in sync, as its background task last
/// reported: see [`Registry::fleet_sync`](crate::Registry::fleet_sync).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetSync {
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
    /// The last of those keys, if any.
    pub last_replaced_key: Option<String>,
}

impl JoinedFleet {
    /// What the fleet's task last reported.
    pub(crate) fn report(&self) -> FleetSync {
        FleetSync {
            prefix: self.config.prefix.clone(),
            linked: self.status.linked.load(Ordering::Acquire),
            flushes: self.status.flushes.load(Ordering::Relaxed),
            failed_flushes: self.status.failed_flushes.load(Ordering::Relaxed),
            replaced_keys: self.status.replaced_keys(),
            last_replaced_key: self.status.last_replaced_key(),
        }
    }
}
