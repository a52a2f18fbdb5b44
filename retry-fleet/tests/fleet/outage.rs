//! What a replica counted while it could not reach the store, as the store
//! comes back: counts older than the window are not the window's now.

use std::time::Duration;

use stormproof_fleet::{Fleet, FleetConfig};
use stormproof_runtime::{
    Registry,
    breaker::{BreakerConfig, Outcome},
    budget::RatioBudget,
};
use tokio::time::{Instant, sleep};

use super::SYNC_MS;
use super::faults::{STORE_TIMEOUT, fleet_state, notice, open, serially, until};
use super::server::Server;

/// A breaker that 3 failures in 1 s open, and a budget of a tenth of the
/// first attempts in 1 s (no floor), leased 1,000 tokens at a time so that
/// a lease is all the fleet allows.
fn replica(server: &Server) -> (Registry, Fleet) {
    let window = Duration::from_secs(1);
    let registry = Registry::new();
    let breaker = BreakerConfig { failure_threshold: 3, window, ..Default::default() };
    registry.declare_breaker("dep", breaker).unwrap();
    registry.declare_budget("dep", RatioBudget { ratio: 0.1, window, min_per_sec: 0 }).unwrap();
    let fleet = Fleet::join(
        &registry,
        FleetConfig {
            url: server.url(),
            prefix: "faults".into(),
            sync_every: Duration::from_millis(SYNC_MS),
            store_timeout: STORE_TIMEOUT,
            breakers: vec!["dep".into()],
            budgets: vec!["dep".into()],
            lease_size: 1_000,
        },
    )
    .unwrap();
    (registry, fleet)
}

#[test]
fn counts_made_while_the_store_was_frozen_longer_ago_than_the_window_are_dropped() {
    serially(frozen_longer_than_the_window());
}

/// Replica a fails 3 times and counts 100 first attempts while the store
/// is frozen, then the store stays frozen for more than the window. What
/// it sends on the thaw happened before the fleet's window: the fleet's
/// breaker must not open on it (b would follow), nor its budget lease a
/// share of it.
async fn frozen_longer_than_the_window() {
    let Some(server) = Server::start("counts_made_while_the_store_was_frozen_...") else { return };
    let (a, fleet_a) = replica(&server);
    let (b, fleet_b) = replica(&server);
    until("both linked", Duration::from_secs(5), || fleet_a.is_linked() && fleet_b.is_linked()).await;

    server.pause();
    let counted = Instant::now();
    for _ in 0..3 {
        a.breaker("dep").unwrap().try_acquire().unwrap().record(Outcome::Failure);
    }
    let budget = a.budget("dep").unwrap();
    (0..100).for_each(|_| budget.on_first_attempt());
    until("a on local state", notice(), || !fleet_a.is_linked()).await;
    // The window and a bucket, and room for the flush that sampled them.
    sleep(Duration::from_millis(1_500).saturating_sub(counted.elapsed())).await;

    server.resume();
    until("both linked again", Duration::from_secs(3), || fleet_a.is_linked() && fleet_b.is_linked()).await;
    sleep(Duration::from_millis(3 * SYNC_MS)).await;
    assert_ne!(fleet_state(&server), Some(1), "the fleet opened on failures older than its window");
    assert!(!open(&b), "b followed a fleet opened on failures older than its window");
    assert_eq!(
        server.sum_field("faults:budget:dep:*", "first"),
        0,
        "first attempts older than the window are in the fleet's buckets"
    );
    assert_eq!(budget.leased(), Some(0), "a lease granted on first attempts older than the window");
    for fleet in [fleet_a, fleet_b] {
        fleet.leave().await;
    }
}

#[test]
fn tokens_held_when_the_store_froze_are_handed_back_when_it_thaws() {
    serially(tokens_handed_back_on_the_thaw());
}

/// The fleet allows 20 retries per window (the floor, no traffic), all
/// leased to replica a. The store freezes; a's lease ends, its 20 tokens
/// unused. When the store thaws, within the window, the fleet still counts
/// them leased: unless a hands them back, it leases a nothing for the rest
/// of the window.
async fn tokens_handed_back_on_the_thaw() {
    let Some(server) = Server::start("tokens_held_when_the_store_froze_...") else { return };
    let registry = Registry::new();
    let budget = RatioBudget { ratio: 0.1, window: Duration::from_secs(10), min_per_sec: 2 };
    registry.declare_budget("dep", budget).unwrap();
    let fleet = Fleet::join(
        &registry,
        FleetConfig {
            url: server.url(),
            prefix: "thaw".into(),
            sync_every: Duration::from_millis(SYNC_MS),
            store_timeout: STORE_TIMEOUT,
            budgets: vec!["dep".into()],
            lease_size: 20,
            ..Default::default()
        },
    )
    .unwrap();
    let budget = registry.budget("dep").unwrap();
    until("the first lease", Duration::from_secs(5), || budget.leased() == Some(20)).await;

    server.pause();
    until("on local state", notice(), || !fleet.is_linked()).await;
    assert_eq!(budget.leased(), None, "the lease ended with the link");
    server.resume();
    until("linked again", Duration::from_secs(3), || fleet.is_linked()).await;
    sleep(Duration::from_millis(3 * SYNC_MS)).await;
    assert_eq!(budget.leased(), Some(20), "the tokens handed back are leased again");
    assert_eq!(server.sum_field("thaw:budget:dep:*", "leased"), 20, "the fleet's count of leased tokens");
    fleet.leave().await;
}
