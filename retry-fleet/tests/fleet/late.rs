//! A flush whose answer came after `store_timeout`, which ran on the server
//! all the same: what it was granted is the replica's still.

use std::time::Duration;

use stormproof_fleet::{Fleet, FleetConfig};
use stormproof_runtime::{
    Registry,
    breaker::{BreakerConfig, Outcome},
};
use tokio::time::{Instant, sleep};

use super::SYNC_MS;
use super::faults::{STORE_TIMEOUT, open, serially, until};
use super::server::Server;

const OPEN_FOR: Duration = Duration::from_secs(2);
const PROBES: u32 = 2;

/// A replica whose breaker one failure opens for `OPEN_FOR`, `PROBES`
/// probes a round, on the default sync period and store timeout.
fn replica(server: &Server) -> (Registry, Fleet) {
    let registry = Registry::new();
    let config = BreakerConfig {
        failure_threshold: 1,
        open_for: OPEN_FOR,
        half_open_max_calls: PROBES,
        success_threshold: PROBES,
        ..Default::default()
    };
    registry.declare_breaker("dep", config).unwrap();
    let fleet = Fleet::join(
        &registry,
        FleetConfig {
            url: server.url(),
            prefix: "late".into(),
            sync_every: Duration::from_millis(SYNC_MS),
            store_timeout: STORE_TIMEOUT,
            breakers: vec!["dep".into()],
            ..Default::default()
        },
    )
    .unwrap();
    (registry, fleet)
}

/// The fleet breaker's open-until instant, on this process's clock.
fn open_until(server: &Server) -> Instant {
    let mut con = server.connection().expect("connected");
    let until: u64 = redis::cmd("HGET").arg("late:breaker:dep").arg("until").query(&mut con).unwrap();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut con).expect("TIME");
    Instant::now() + Duration::from_millis(until.saturating_sub(secs * 1_000 + micros / 1_000))
}

#[test]
fn probe_slots_granted_by_a_flush_that_timed_out_but_ran_are_the_replicas_still() {
    serially(slots_of_a_late_flush());
}

/// Two replicas held open by the fleet, their callers refused. The store
/// freezes from before the open period ends until a flush of each has
/// timed out: the flushes asking for probe slots run on the thaw, the
/// fleet half-open by then, and one of them is granted the round's slots,
/// its answer dropped. Its replica sends the request again at its next
/// flush and must get those slots: probing within the README's bound (the
/// first flush after the open period timed out, so the next one, a period
/// later), not an `open_for` later once the round is given up; and the
/// fleet, `PROBES` probes in all, not granted the slots twice.
async fn slots_of_a_late_flush() {
    let Some(server) = Server::start("probe_slots_granted_by_a_flush_that_timed_out_...") else { return };
    let ((a, fleet_a), (b, fleet_b)) = (replica(&server), replica(&server));
    until("both linked", Duration::from_secs(5), || fleet_a.is_linked() && fleet_b.is_linked()).await;
    a.breaker("dep").unwrap().try_acquire().unwrap().record(Outcome::Failure);
    until("b opened on a's failure", Duration::from_millis(4 * SYNC_MS), || open(&b)).await;
    let (flushes_a, flushes_b) = (fleet_a.flushes(), fleet_b.flushes());
    until("both heard it", Duration::from_secs(2), || {
        fleet_a.flushes() >= flushes_a + 2 && fleet_b.flushes() >= flushes_b + 2
    })
    .await;

    // Callers all along, on both replicas; probes are held, never finished,
    // so that the round lasts until it is given up.
    let breakers = [a.breaker("dep").unwrap(), b.breaker("dep").unwrap()];
    let mut probes: Vec<(Instant, _)> = Vec::new();
    let call = |probes: &mut Vec<_>| {
        for breaker in &breakers {
            probes.extend(breaker.try_acquire().map(|probe| (Instant::now(), probe)));
        }
    };
    let over = open_until(&server);
    while Instant::now() + Duration::from_millis(80) < over {
        call(&mut probes);
        sleep(Duration::from_millis(2)).await;
    }
    assert!(probes.is_empty(), "no probe while the fleet is open");
    let failed = (fleet_a.failed_flushes(), fleet_b.failed_flushes());
    server.pause();
    let timed_out = || fleet_a.failed_flushes() > failed.0 && fleet_b.failed_flushes() > failed.1;
    while !(timed_out() && Instant::now() > over + Duration::from_millis(10)) {
        assert!(Instant::now() < over + Duration::from_secs(1), "a flush of each timed out");
        call(&mut probes);
        sleep(Duration::from_millis(2)).await;
    }
    server.resume();
    // Well within the round: it is given up `OPEN_FOR` after its slots were granted.
    while Instant::now() < over + OPEN_FOR / 2 {
        call(&mut probes);
        sleep(Duration::from_millis(2)).await;
    }
    assert!(fleet_a.is_linked() && fleet_b.is_linked(), "linked again");
    let (sync, timeout) = (Duration::from_millis(SYNC_MS), STORE_TIMEOUT);
    // The request's first flush timed out, its next one a period later got
    // through; room for a busy machine besides.
    let bound = over + 2 * sync + timeout + Duration::from_millis(100);
    let first = probes.first().map(|(at, _)| at.saturating_duration_since(over));
    eprintln!("{} probes, the first {first:?} after the open period", probes.len());
    assert!(
        probes.first().is_some_and(|(at, _)| *at <= bound),
        "the first probe came {first:?} after the open period, not within {:?}",
        bound - over
    );
    assert!(probes.len() <= PROBES as usize, "{} probes, the fleet's round is {PROBES}", probes.len());
    drop(probes);
    fleet_a.leave().await;
    fleet_b.leave().await;
}
