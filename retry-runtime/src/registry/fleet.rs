//! What a registry knows of the fleet it is in (feature `fleet`): the
//! settings it joined with (a reload of the configuration file checks
//! against them) and how the fleet's background task fares (its `Fleet`
//! handle and the admin dashboard read it); and the one membership a
//! registry has, claimed and given back by the store that shares its
//! guards (the `stormproof-fleet` crate), through the public API below.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::Registry;
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
/// `Fleet` handle, [`Registry::fleet_sync`] and the admin snapshot.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::sync::atomic::Ordering;
/// let status = stormproof::fleet::FleetStatus::default();
/// status.flushes.fetch_add(1, Ordering::Relaxed);
/// status.key_replaced("shop:breaker:payment");
/// assert_eq!((status.replaced_keys(), status.last_replaced_key().as_deref()), (1, Some("shop:breaker:payment")));
/// ```
#[derive(Debug, Default)]
pub struct FleetStatus {
    /// Whether the last flush got through (the guards follow the fleet).
    pub linked: AtomicBool,
    /// Flushes that got through.
    pub flushes: AtomicU64,
    /// Flushes that failed or timed out.
    pub failed_flushes: AtomicU64,
    /// Keys of the fleet's found holding another type than a hash (another
    /// program's value), and replaced by the flush that found them.
    replaced_keys: AtomicU64,
    /// The last of those keys.
    last_replaced_key: Mutex<Option<String>>,
}

impl FleetStatus {
    /// A flush replaced `key`, which held another type than a hash.
    pub fn key_replaced(&self, key: &str) {
        *self.last_replaced_key.lock().unwrap_or_else(|e| e.into_inner()) = Some(key.to_owned());
        // Release: whoever reads the count reads the key that made it.
        self.replaced_keys.fetch_add(1, Ordering::Release);
    }

    /// Keys replaced so far.
    pub fn replaced_keys(&self) -> u64 {
        self.replaced_keys.load(Ordering::Acquire)
    }

    /// The last key replaced, if any.
    pub fn last_replaced_key(&self) -> Option<String> {
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

/// A registry's one fleet membership, claimed and not yet joined: see
/// [`Registry::claim_fleet`]. While it lives no configuration file is
/// checked or applied, so that the breakers the store shares now
/// ([`CircuitBreaker::share`](crate::breaker::CircuitBreaker::share)) are
/// not reconfigured between a file's checks and its changes. Dropped
/// without [`join`](Self::join), the membership is given back.
#[must_use = "dropped, the membership is given back at once"]
#[derive(Debug)]
pub struct FleetClaim<'r> {
    registry: &'r Registry,
    joined: bool,
    _applying: MutexGuard<'r, ()>,
}

impl FleetClaim<'_> {
    /// The registry is in the fleet `config` describes, its store's
    /// background task reporting how it fares in `status` (read by
    /// [`Registry::fleet_sync`] and checked against by a reload): the
    /// membership lasts as long as what this returns.
    pub fn join(mut self, config: FleetConfig, status: Arc<FleetStatus>) -> FleetMembership {
        self.joined = true;
        self.registry.set_joined_fleet(Some(JoinedFleet { config, status }));
        FleetMembership { registry: self.registry.clone() }
    }
}

impl Drop for FleetClaim<'_> {
    fn drop(&mut self) {
        if !self.joined {
            self.registry.leave_fleet();
        }
    }
}

/// A registry's membership of a fleet, as the store's background task
/// holds it: dropped (the task ended), the registry is in no fleet and may
/// join one again.
#[derive(Debug)]
pub struct FleetMembership {
    registry: Registry,
}

impl FleetMembership {
    /// The registry whose membership this is.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

impl Drop for FleetMembership {
    fn drop(&mut self) {
        self.registry.leave_fleet();
    }
}

impl Registry {
    /// Claims the registry's one fleet membership, for a store that shares
    /// its guards with other processes (the Redis fleet of the
    /// `stormproof-fleet` crate is one); `None` while another holds it.
    /// Waits for a configuration file being checked and applied, and holds
    /// the next one off until the claim is joined or dropped.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::sync::Arc;
    /// use stormproof::fleet::{FleetConfig, FleetStatus};
    /// let registry = stormproof::Registry::new();
    /// let claim = registry.claim_fleet().expect("in no fleet yet");
    /// assert!(registry.claim_fleet().is_none(), "one at a time");
    /// let membership = claim.join(FleetConfig::default(), Arc::new(FleetStatus::default()));
    /// assert_eq!(registry.fleet_sync().unwrap().prefix, "stormproof");
    /// drop(membership);
    /// assert_eq!(registry.fleet_sync(), None);
    /// assert!(registry.claim_fleet().is_some(), "given back");
    /// ```
    pub fn claim_fleet(&self) -> Option<FleetClaim<'_>> {
        // Claimed before the file lock is taken: a second claim while the
        // first is held (on this thread too) is `None`, not a wait on the
        // first's lock. A file reads only what the join sets, under it.
        if self.inner.in_fleet.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(FleetClaim { registry: self, joined: false, _applying: self.applying() })
    }

    /// Gives the fleet membership back (its task ended).
    fn leave_fleet(&self) {
        self.set_joined_fleet(None);
        self.inner.in_fleet.store(false, Ordering::Release);
    }

    /// What the fleet this registry is in was joined with, if it is in one
    /// (read by a reload of the configuration file).
    #[cfg(feature = "config")]
    pub(crate) fn joined_fleet(&self) -> Option<FleetConfig> {
        self.lock_joined_fleet().as_ref().map(|joined| joined.config.clone())
    }

    /// How the fleet this registry is in fares (feature `fleet`), as its
    /// background task last reported; `None` while it is in none. The
    /// dashboard shows it.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// let registry = stormproof::Registry::new();
    /// assert_eq!(registry.fleet_sync(), None);
    /// ```
    pub fn fleet_sync(&self) -> Option<FleetSync> {
        self.lock_joined_fleet().as_ref().map(JoinedFleet::report)
    }

    fn set_joined_fleet(&self, joined: Option<JoinedFleet>) {
        *self.lock_joined_fleet() = joined;
    }

    fn lock_joined_fleet(&self) -> MutexGuard<'_, Option<JoinedFleet>> {
        self.inner.joined_fleet.lock().unwrap_or_else(|e| e.into_inner())
    }
}
