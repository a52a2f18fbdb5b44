//! The store going away, freezing, coming back empty and being flushed,
//! with replicas as registries of this process (each its own fleet task).

use std::time::Duration;

use stormproof_fleet::{Fleet, FleetConfig};
use stormproof_runtime::{
    Policy, Registry,
    breaker::{BreakerConfig, BreakerState, Outcome},
    budget::RatioBudget,
};
use tokio::time::{Instant, sleep};

use super::server::Server;
use super::{SYNC_MS, serial};

pub(super) const STORE_TIMEOUT: Duration = Duration::from_millis(50);

fn replica(server: &Server) -> (Registry, Fleet) {
    replica_open_for(server, Duration::from_secs(20))
}

/// A replica whose breaker opens for `open_for` on 3 failures.
fn replica_open_for(server: &Server, open_for: Duration) -> (Registry, Fleet) {
    let registry = Registry::new();
    let breaker = BreakerConfig { failure_threshold: 3, open_for, ..Default::default() };
    registry.declare_breaker("dep", breaker).unwrap();
    registry.declare_budget("dep", RatioBudget::default()).unwrap();
    let fleet = Fleet::join(
        &registry,
        FleetConfig {
            url: server.url(),
            prefix: "faults".into(),
            sync_every: Duration::from_millis(SYNC_MS),
            store_timeout: STORE_TIMEOUT,
            breakers: vec!["dep".into()],
            budgets: vec!["dep".into()],
            ..Default::default()
        },
    )
    .unwrap();
    (registry, fleet)
}

/// Waits (in real time) until `done`, at most `within`; how long it took.
pub(super) async fn until(what: &str, within: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        sleep(Duration::from_millis(2)).await;
    }
    start.elapsed()
}

/// Makes calls through the registry's budget for `period`; the slowest one.
async fn slowest_call(registry: &Registry, period: Duration) -> Duration {
    let policy = Policy::builder().budget("dep").max_attempts(1).build().unwrap();
    let (start, mut slowest) = (Instant::now(), Duration::ZERO);
    while start.elapsed() < period {
        let call = Instant::now();
        registry.scope(policy.run(|| async { Ok::<_, std::io::Error>(()) })).await.unwrap();
        slowest = slowest.max(call.elapsed());
        sleep(Duration::from_millis(1)).await;
    }
    slowest
}

pub(super) fn open(registry: &Registry) -> bool {
    registry.breaker("dep").unwrap().state() == BreakerState::Open
}

/// How long a replica may take to notice the store is gone: the flush in
/// progress times out (store_timeout) at most a period after it went.
pub(super) fn notice() -> Duration {
    Duration::from_millis(SYNC_MS) + STORE_TIMEOUT + Duration::from_millis(SYNC_MS)
}

/// Runs `test` on a runtime of its own, one fleet test at a time.
pub(super) fn serially(test: impl std::future::Future<Output = ()>) {
    let _serial = serial();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(test);
}

#[test]
fn a_stopped_store_leaves_calls_on_local_state_and_a_restarted_or_flushed_one_is_rebuilt() {
    serially(stopped_restarted_flushed());
}

async fn stopped_restarted_flushed() {
    let Some(mut server) = Server::start("a_stopped_store_...") else { return };
    let (a, fleet_a) = replica(&server);
    let (b, fleet_b) = replica(&server);
    until("both linked", Duration::from_secs(5), || fleet_a.is_linked() && fleet_b.is_linked()).await;
    assert!(a.budget("dep").unwrap().leased().is_some(), "a linked budget holds a lease");

    for _ in 0..3 {
        a.breaker("dep").unwrap().try_acquire().unwrap().record(Outcome::Failure);
    }
    let heard = until("b opened on a's failures", Duration::from_millis(4 * SYNC_MS), || open(&b)).await;
    eprintln!("b opened {heard:?} after a's third failure");

    server.stop();
    let noticed =
        until("both on local state", notice(), || !fleet_a.is_linked() && !fleet_b.is_linked()).await;
    eprintln!("store stopped: local state after {noticed:?}");
    assert_eq!(a.budget("dep").unwrap().leased(), None, "the budget is local again");
    assert!(open(&a) && open(&b), "the fleet's verdict stands until it runs out");
    let slowest = slowest_call(&a, Duration::from_millis(300)).await;
    eprintln!("slowest call while the store was down: {slowest:?}");
    assert!(slowest < STORE_TIMEOUT, "a call waited {slowest:?}");

    // Back with no state: the replicas that were held open rebuild it, and
    // a replica that joins now finds the breaker open without a failure.
    server.restart();
    let resync =
        until("both linked again", Duration::from_secs(3), || fleet_a.is_linked() && fleet_b.is_linked())
            .await;
    eprintln!("store restarted: linked again after {resync:?}");
    let (c, fleet_c) = replica(&server);
    until("c opened from the rebuilt state", Duration::from_secs(2), || open(&c)).await;
    assert_eq!(c.breaker("dep").unwrap().totals().failures, 0);

    server.command(&["FLUSHALL"]);
    let (d, fleet_d) = replica(&server);
    until("d opened from the state rebuilt after FLUSHALL", Duration::from_secs(2), || open(&d)).await;
    assert!(fleet_a.is_linked() && fleet_b.is_linked() && fleet_c.is_linked() && fleet_d.is_linked());
    for fleet in [fleet_a, fleet_b, fleet_c, fleet_d] {
        assert!(fleet.leave().await, "the last flush got through");
    }
}

#[test]
fn a_fleet_half_open_when_its_state_is_lost_is_rebuilt_half_open_not_closed() {
    serially(half_open_flushed());
}

/// The fleet's open period is over and no replica's callers were refused,
/// so no probe was asked for: the fleet is half-open, every replica held
/// back. Losing the store's state then must not close them all at once,
/// unprobed, as if the dependency were known to be back.
async fn half_open_flushed() {
    let Some(server) = Server::start("a_fleet_half_open_when_...") else { return };
    let open_for = Duration::from_millis(300);
    let (a, fleet_a) = replica_open_for(&server, open_for);
    let (b, fleet_b) = replica_open_for(&server, open_for);
    until("both linked", Duration::from_secs(5), || fleet_a.is_linked() && fleet_b.is_linked()).await;
    for _ in 0..3 {
        a.breaker("dep").unwrap().try_acquire().unwrap().record(Outcome::Failure);
    }
    until("b opened on a's failures", Duration::from_millis(4 * SYNC_MS), || open(&b)).await;
    // Both replicas hear the half-open verdict (a flush each) before the loss.
    sleep(open_for + Duration::from_millis(3 * SYNC_MS)).await;
    assert_eq!(fleet_state(&server), Some(2), "the fleet is half-open");
    assert!(open(&a) && open(&b), "both held back, waiting for probes");

    server.command(&["FLUSHALL"]);
    sleep(Duration::from_millis(5 * SYNC_MS)).await;
    assert!(fleet_a.is_linked() && fleet_b.is_linked());
    assert_eq!(fleet_state(&server), Some(2), "rebuilt half-open");
    assert!(open(&a) && open(&b), "still held back: only probes may close the fleet");
    for fleet in [fleet_a, fleet_b] {
        fleet.leave().await;
    }
}

/// The fleet breaker's state in the store, by the script's code: 0 closed,
/// 1 open, 2 half-open; `None` without one.
pub(super) fn fleet_state(server: &Server) -> Option<u8> {
    let mut con = server.connection().expect("connected");
    let until: Option<u64> =
        redis::cmd("HGET").arg("faults:breaker:dep").arg("until").query(&mut con).ok()?;
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut con).expect("TIME");
    let now = secs * 1_000 + micros / 1_000;
    until.map(|until| match until {
        0 => 0,
        until if now < until => 1,
        _ => 2,
    })
}

#[test]
fn a_frozen_store_delays_no_call_beyond_store_timeout_and_thawed_it_resyncs() {
    serially(frozen_and_thawed());
}

async fn frozen_and_thawed() {
    let Some(server) = Server::start("a_frozen_store_...") else { return };
    let (a, fleet) = replica(&server);
    until("linked", Duration::from_secs(5), || fleet.is_linked()).await;

    server.pause();
    let slowest = slowest_call(&a, notice() + Duration::from_millis(100)).await;
    assert!(!fleet.is_linked(), "a store that does not answer within store_timeout is left");
    eprintln!("slowest call while the store was frozen: {slowest:?}");
    assert!(slowest < STORE_TIMEOUT, "a call waited {slowest:?}");
    assert_eq!(a.budget("dep").unwrap().leased(), None);

    server.resume();
    let resync = until("linked again", Duration::from_secs(3), || fleet.is_linked()).await;
    eprintln!("store thawed: linked again after {resync:?}");
    until("leasing again", Duration::from_secs(1), || a.budget("dep").unwrap().leased().is_some()).await;
    fleet.leave().await;
}

#[test]
fn a_sync_period_near_duration_max_does_not_kill_the_task() {
    serially(huge_sync_period());
}

async fn huge_sync_period() {
    let Some(server) = Server::start("a_sync_period_near_duration_max_...") else { return };
    let registry = Registry::new();
    registry.declare_breaker("dep", BreakerConfig::default()).unwrap();
    let config = FleetConfig {
        url: server.url(),
        prefix: "huge".into(),
        // Valid (at least 1 ms): one flush at once, and then only on leaving.
        sync_every: Duration::MAX,
        store_timeout: Duration::from_secs(2),
        breakers: vec!["dep".into()],
        ..Default::default()
    };
    let fleet = Fleet::join(&registry, config.clone()).unwrap();
    until("the first flush", Duration::from_secs(5), || fleet.flushes() >= 1).await;
    sleep(Duration::from_millis(50)).await;
    assert!(fleet.leave().await, "the task lived to make its last flush");
    let again = Fleet::join(&registry, config).expect("the registry left the fleet and may join again");
    again.leave().await;
}

#[test]
fn a_breaker_whose_window_and_open_for_reach_duration_max_is_shared_all_the_same() {
    serially(huge_window_and_open_for());
}

/// Both are valid (greater than zero), and the script gets them in ms: a
/// window past 1e17 ms made its TTLs (`2 * window + state_ttl`, written by
/// Lua as `2e+17`) no integer to PEXPIRE, so every flush failed; an open
/// time past 2^63 ms came back from Lua as i64::MIN, no count, and every
/// flush after the trip failed.
async fn huge_window_and_open_for() {
    let Some(server) = Server::start("a_breaker_whose_window_and_open_for_...") else { return };
    let replica = || {
        let registry = Registry::new();
        let breaker = BreakerConfig {
            failure_threshold: 3,
            window: Duration::MAX,
            open_for: Duration::MAX,
            ..Default::default()
        };
        registry.declare_breaker("dep", breaker).unwrap();
        let config = FleetConfig {
            url: server.url(),
            prefix: "huge-window".into(),
            sync_every: Duration::from_millis(SYNC_MS),
            store_timeout: Duration::from_secs(2),
            breakers: vec!["dep".into()],
            ..Default::default()
        };
        let fleet = Fleet::join(&registry, config).unwrap();
        (registry, fleet)
    };
    let ((a, fleet_a), (b, fleet_b)) = (replica(), replica());
    until("both linked", Duration::from_secs(5), || fleet_a.is_linked() && fleet_b.is_linked()).await;
    for _ in 0..3 {
        a.breaker("dep").unwrap().try_acquire().unwrap().record(Outcome::Failure);
    }
    until("b opened on a's failures", Duration::from_secs(5), || open(&b)).await;
    let flushes = fleet_b.flushes();
    until("b flushing while open", Duration::from_secs(5), || fleet_b.flushes() >= flushes + 3).await;
    assert!(fleet_a.is_linked() && fleet_b.is_linked(), "the flushes of an open fleet get through");
    assert_eq!(fleet_a.failed_flushes() + fleet_b.failed_flushes(), 0);
    fleet_a.leave().await;
    fleet_b.leave().await;
}

#[test]
fn a_replica_leaving_asks_for_no_tokens_and_hands_back_those_it_did_not_use() {
    serially(leaving_asks_for_nothing());
}

/// The last flush reports what the replica counted, but a lease granted
/// then would be dropped at once, lost to the fleet until the window ends;
/// and so would the tokens the replica holds, unless handed back.
async fn leaving_asks_for_nothing() {
    let Some(server) = Server::start("a_replica_leaving_asks_...") else { return };
    let registry = Registry::new();
    registry.declare_budget("dep", RatioBudget::default()).unwrap();
    let fleet = Fleet::join(
        &registry,
        FleetConfig {
            url: server.url(),
            prefix: "leaving".into(),
            // One flush at once, and then only the last one.
            sync_every: Duration::from_secs(3_600),
            store_timeout: Duration::from_secs(2),
            budgets: vec!["dep".into()],
            lease_size: 20,
            ..Default::default()
        },
    )
    .unwrap();
    let budget = registry.budget("dep").unwrap();
    until("the first lease", Duration::from_secs(5), || budget.leased().is_some()).await;
    let leased = server.sum_field("leaving:budget:dep:*", "leased");
    assert_eq!(leased, 20, "the first flush leased a batch");
    // Below half a lease: a flush that asks would ask for more.
    while budget.leased().unwrap() >= 10 {
        assert!(budget.try_withdraw());
    }
    let left = u64::from(budget.leased().unwrap());
    assert!(fleet.leave().await, "the last flush got through");
    assert_eq!(
        server.sum_field("leaving:budget:dep:*", "leased"),
        leased - left,
        "nothing leased on leaving, and the {left} tokens left handed back"
    );
}
