//! The flush script alone, run against a real server with hand-made
//! arguments: what a replica's flushes add to the fleet's counters, in
//! orders a busy network can produce.

use super::serial;
use super::server::Server;

const SCRIPT: &str = include_str!("../../src/fleet/flush.lua");

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
    let script = redis::Script::new(SCRIPT);
    let mut invocation = script.prepare_invoke();
    for arg in &args {
        invocation.arg(arg);
    }
    let _: Vec<i64> = invocation.invoke(con).expect("the script runs");
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
