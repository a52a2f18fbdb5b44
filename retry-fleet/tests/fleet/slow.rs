//! A store slower than the sync period, but answering within
//! `store_timeout`: the replica stays linked, and the fleet's rules hold.

use std::time::Duration;

use stormproof_fleet::{Fleet, FleetConfig};
use stormproof_runtime::{
    Registry,
    breaker::{BreakerConfig, Outcome},
};
use tokio::time::{Instant, sleep};

use super::SYNC_MS;
use super::faults::{serially, until};
use super::server::Server;

/// The fleet breaker's open-until instant and the server's clock, in ms.
fn open_until(server: &Server) -> (u64, u64) {
    let mut con = server.connection().expect("connected");
    let until: Option<u64> = redis::cmd("HGET").arg("slow:breaker:dep").arg("until").query(&mut con).unwrap();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut con).expect("TIME");
    (until.unwrap_or(0), secs * 1_000 + micros / 1_000)
}

#[test]
fn a_store_slower_than_the_sync_period_lets_no_replica_probe_without_a_slot() {
    serially(slow_store_probes());
}

/// The fleet opens, and the store freezes from just before its open period
/// ends until 500 ms after it: the flush that asks for a probe slot waits
/// in the store's queue, well within `store_timeout` (2 s, so the replica
/// is linked all along). The replica must wait for its slot: its breaker,
/// held open on the fleet's word only until 2 x `sync_every` past the open
/// period, went half-open on its own at 200 ms and sent a probe of its
/// own, then a second one with the slot (half_open_max_calls = 1).
async fn slow_store_probes() {
    let Some(server) = Server::start("a_store_slower_than_the_sync_period_...") else { return };
    let open_for = Duration::from_secs(2);
    let registry = Registry::new();
    let config = BreakerConfig {
        failure_threshold: 1,
        open_for,
        half_open_max_calls: 1,
        success_threshold: 1,
        ..Default::default()
    };
    registry.declare_breaker("dep", config).unwrap();
    let fleet = Fleet::join(
        &registry,
        FleetConfig {
            url: server.url(),
            prefix: "slow".into(),
            sync_every: Duration::from_millis(SYNC_MS),
            store_timeout: Duration::from_secs(2),
            breakers: vec!["dep".into()],
            ..Default::default()
        },
    )
    .unwrap();
    until("linked", Duration::from_secs(5), || fleet.is_linked()).await;
    let breaker = registry.breaker("dep").unwrap();
    breaker.try_acquire().unwrap().record(Outcome::Failure);
    until("the fleet opened", Duration::from_secs(2), || open_until(&server).0 > 0).await;
    let flushes = fleet.flushes();
    until("the replica heard it", Duration::from_secs(2), || fleet.flushes() >= flushes + 2).await;

    // Callers all along: the replica's flushes ask for a slot once the
    // fleet is half-open. Probes are held, never finished.
    let mut probes = Vec::new();
    let call = |probes: &mut Vec<_>| probes.extend(breaker.try_acquire());
    let (until_ms, now_ms) = open_until(&server);
    let frozen_at = Instant::now()
        + Duration::from_millis(until_ms.saturating_sub(now_ms)).saturating_sub(Duration::from_millis(100));
    while Instant::now() < frozen_at {
        call(&mut probes);
        sleep(Duration::from_millis(2)).await;
    }
    assert!(probes.is_empty(), "no probe while the fleet is open");
    server.pause();
    let thaw = Instant::now() + Duration::from_millis(600);
    while Instant::now() < thaw {
        call(&mut probes);
        sleep(Duration::from_millis(2)).await;
    }
    server.resume();
    let end = Instant::now() + Duration::from_millis(700);
    while Instant::now() < end {
        call(&mut probes);
        sleep(Duration::from_millis(2)).await;
    }
    assert!(fleet.is_linked() && fleet.failed_flushes() == 0, "the slow store never unlinked the replica");
    assert_eq!(probes.len(), 1, "probes sent, with half_open_max_calls = 1 for the fleet");
    drop(probes);
    fleet.leave().await;
}
