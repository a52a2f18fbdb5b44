//! The fleet's traces and metrics: its link to the store, and what its
//! flushes find. With the `metrics` feature, through the `metrics` crate:
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `stormproof_fleet_linked` | gauge (this process's registries following the fleet: 1 following, 0 local, with one) | `fleet` (the key prefix) |
//! | `stormproof_fleet_fallbacks_total` | counter (a link lost: not a leave, nor a store never reached) | `fleet` |
//! | `stormproof_fleet_keys_replaced_total` | counter (keys of the fleet's found holding another type than a hash, and replaced) | `fleet` |
//!
//! Its tracing target is `stormproof::fleet`, under the library's
//! `stormproof` as every other target is, so that `RUST_LOG=stormproof=debug`
//! shows it too.

/// The tracing target of the fleet's events.
const TARGET: &str = "stormproof::fleet";

/// What changed in a fleet's link to its store (see [`fleet_link`]).
#[derive(Clone, Copy)]
pub(super) enum FleetLink<'a> {
    /// Joined, not linked yet: the gauge starts at 0, nothing is said.
    Joined,
    /// The store answered: the guards follow the fleet.
    Linked,
    /// The store has not answered once since the join (a wrong address, a
    /// server down): said once, as a lost link would be, but no fallback,
    /// since the guards were never the fleet's.
    Unreachable(&'a dyn std::fmt::Display),
    /// The store stopped answering: the guards went back to local state.
    Lost(&'a dyn std::fmt::Display),
    /// The replica left the fleet on purpose: no fault, no fallback.
    Left,
}

/// A fleet's background task panicked (a bug of ours): the guards go back
/// to local state, and the fleet is left.
#[cold]
pub(super) fn fleet_task_panicked(fleet: &str) {
    tracing::error!(target: TARGET, fleet, "the fleet's background task panicked: guards on local state, fleet left");
}

/// A flush found a key of the fleet's holding another type than a hash
/// (another program's value), and replaced it: said once per key replaced,
/// a `WARN` naming it and `stormproof_fleet_keys_replaced_total` (labelled
/// by the fleet only: a key's name would make the labels unbounded).
#[cold]
pub(super) fn fleet_key_replaced(fleet: &str, key: &str) {
    tracing::warn!(target: TARGET,
        fleet,
        key,
        "a key of the fleet held another type than a hash (another program's value): replaced, and what it counted lost"
    );
    #[cfg(feature = "metrics")]
    metrics::counter!("stormproof_fleet_keys_replaced_total", "fleet" => fleet.to_owned()).increment(1);
}

/// How many of this process's registries follow each fleet (by prefix,
/// the gauge's label): the `stormproof_fleet_linked` gauge is that count, so
/// that two registries in one fleet (two replicas in one process) each
/// count in it, and one leaving or losing the store does not set the
/// other's. With one registry, 1 or 0.
#[cfg(feature = "metrics")]
static LINKED: std::sync::Mutex<std::collections::BTreeMap<String, u32>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// A fleet's link changed; said once per change, in the trace and the
/// `stormproof_fleet_linked` gauge (see `LINKED`), and a lost link
/// counted as a fallback.
pub(super) fn fleet_link(fleet: &str, change: FleetLink<'_>) {
    match change {
        FleetLink::Joined => {}
        FleetLink::Linked => {
            tracing::info!(target: TARGET, fleet, linked = true, "fleet store linked: guards follow the fleet");
        }
        FleetLink::Unreachable(reason) => {
            tracing::warn!(target: TARGET, fleet, linked = false, %reason, "fleet store unreachable since the join: guards on local state");
        }
        FleetLink::Lost(reason) => {
            tracing::warn!(target: TARGET, fleet, linked = false, %reason, "fleet store lost: guards on local state");
        }
        FleetLink::Left => {
            tracing::info!(target: TARGET, fleet, linked = false, "left the fleet: guards on local state")
        }
    }
    #[cfg(feature = "metrics")]
    {
        // A task says `Lost` or `Left` only after `Linked`, once per change.
        let mut linked = LINKED.lock().unwrap_or_else(|e| e.into_inner());
        let count = linked.entry(fleet.to_owned()).or_default();
        match change {
            FleetLink::Linked => *count = count.saturating_add(1),
            FleetLink::Lost(_) | FleetLink::Left => *count = count.saturating_sub(1),
            FleetLink::Joined | FleetLink::Unreachable(_) => {}
        }
        // Set with the count held, so that two changes set it in their order.
        metrics::gauge!("stormproof_fleet_linked", "fleet" => fleet.to_owned()).set(f64::from(*count));
        if *count == 0 {
            linked.remove(fleet);
        }
        drop(linked);
        if matches!(change, FleetLink::Lost(_)) {
            metrics::counter!("stormproof_fleet_fallbacks_total", "fleet" => fleet.to_owned()).increment(1);
        }
    }
}
