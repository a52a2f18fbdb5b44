//! The flush script alone, run against a real server with hand-made
//! arguments: what a replica's flushes add to the fleet's counters, in
//! orders a busy network can produce.

use super::serial;
use super::server::Server;

const SCRIPT: &str = include_str!("../../src/fleet/flush.lua");

fn run(con: &mut redis::Connection, args: &[String]) -> Vec<i64> {
    let script = redis::Script::new(SCRIPT);
    let mut invocation = script.prepare_invoke();
    for arg in args {
        invocation.arg(arg);
    }
    invocation.invoke(con).expect("the script runs")
}

/// One flush of replica `00..01` reporting one budget (`dep`, 10 s window)
/// with `first` first attempts in all, `acked` of them acknowledged.
fn flush_budget(con: &mut redis::Connection, first: u64, acked: u64) {
    let args = [
        "script".to_owned(),
        "0000000000000001".into(),
        "0".into(),
        "1".into(),
        "3600000".into(),
        "dep".into(),
        "10000".into(),
        "1000".into(),
        "0.1".into(),
        "20".into(),
        first.to_string(),
        acked.to_string(),
        "0".into(),
        "0".into(),
    ];
    run(con, &args);
}

/// What a flush answers of one breaker: the fleet's epoch, its state (0
/// closed, 1 open, 2 half-open), the open time left, the probes granted.
type Verdict = [i64; 4];

/// One flush of replica `replica` reporting breaker `dep` (3 failures in
/// 10 s open it for 20 s), as a replica that last saw fleet epoch `seen`
/// in the state `view` (-1 closed, 0 half-open, else the ms it had left
/// open), with `failures` failed calls (none acknowledged yet).
fn flush_breaker(con: &mut redis::Connection, replica: u64, seen: u64, view: i64, failures: u64) -> Verdict {
    let mut args: Vec<String> = vec!["script".into(), format!("{replica:016x}"), "1".into(), "0".into()];
    args.extend(["3600000", "dep", "10000", "1000", "3", "0", "10", "20000", "2", "2"].map(String::from));
    args.extend([seen.to_string(), "0".into(), view.to_string()]);
    args.extend([failures, failures, 0, 0, 0, 0, 0, 0].map(|n| n.to_string()));
    let reply = run(con, &args);
    reply[1..].try_into().expect("one breaker's verdict")
}

#[test]
fn a_stale_flush_that_runs_late_does_not_make_later_ones_count_twice() {
    let _serial = serial();
    let Some(server) = Server::start("a_stale_flush_...") else { return };
    let mut con = server.connection().expect("connected");
    // Flush 1 (total 5) timed out on the replica's side while the server
    // was frozen, the replica remade its connection, and flush 2 (total
    // 10) ran first on the new one; flush 1 ran when the server thawed.
    flush_budget(&mut con, 10, 0);
    flush_budget(&mut con, 5, 0);
    // Flush 3: total 12, 10 acknowledged (flush 2's answer came back).
    flush_budget(&mut con, 12, 10);
    assert_eq!(server.sum_field("script:budget:dep:*", "first"), 12, "each first attempt counted once");
}

/// The store lost the fleet's state (FLUSHALL, a restart without
/// persistence). Replica 1 had seen the fleet closed in epoch 4; replica 2
/// joined since (it saw nothing) and its failures open the fleet afresh, in
/// the store's new numbering. Replica 1's view, though of a higher epoch,
/// is older news: it must not close what was just opened.
#[test]
fn a_trip_after_the_state_was_lost_is_not_undone_by_an_older_closed_view() {
    let _serial = serial();
    let Some(server) = Server::start("a_trip_after_the_state_was_lost_...") else { return };
    let mut con = server.connection().expect("connected");
    let tripped = flush_breaker(&mut con, 2, 0, -1, 3);
    assert_eq!(tripped[1], 1, "replica 2's failures open the fleet: {tripped:?}");
    let heard = flush_breaker(&mut con, 1, 4, -1, 0);
    assert_eq!(heard[1], 1, "replica 1 hears the fleet open: {heard:?}");
    assert!(heard[0] > 4, "in an epoch past the one it saw, so that it follows it: {heard:?}");
    let again = flush_breaker(&mut con, 2, tripped[0] as u64, -1, 3);
    assert_eq!((again[0], again[1]), (heard[0], 1), "one fleet state for both");
}
