//! The storm benchmark's harness works (issue 45, item 4): a few seconds of
//! it, in the test suite. It asserts what the harness must count, never a
//! time or a rate: those are the benchmark's (scripts/bench-storm.sh).

#[path = "storm/mod.rs"]
#[allow(dead_code)] // the smoke run uses part of it
mod storm;

use std::time::Duration;

use run::run;
use server::Trigger;
use storm::{
    metrics, report,
    run::{self, RunConfig},
    server, strategies,
};
use strategies::Strategy;

const LENGTH: Duration = Duration::from_secs(3);
const TRIGGER: Trigger =
    Trigger::Unavailable { from: Duration::from_secs(1), lasting: Duration::from_secs(1) };

fn config(strategy: Strategy, trigger: Trigger) -> RunConfig {
    RunConfig { strategy, trigger, rate: 300.0, length: LENGTH, seed: 45 }
}

#[test]
fn calls_are_offered_received_and_answered() {
    let counts = run(config(Strategy::NoRetries, Trigger::None)).unwrap();
    let total = |c: &[u64]| c.iter().sum::<u64>();
    let offered = total(&counts.offered);
    assert!(offered > 0, "calls were offered");
    assert!(total(&counts.goodput) > 0, "and some succeeded");
    assert!(total(&counts.goodput) + total(&counts.failed) <= offered, "each call ends once, at most");
    assert!(total(&counts.received) <= offered, "no retries: one attempt a call at most");
    assert_eq!(total(&counts.failed), 0, "nothing failed without a trigger");
}

#[test]
fn retries_reach_the_server_during_the_trigger_and_are_counted() {
    for strategy in Strategy::ALL {
        let counts = run(config(strategy, TRIGGER)).unwrap();
        let (from, to) = TRIGGER.stretch().unwrap();
        let offered = metrics::sum(&counts.offered, from, to);
        let received = metrics::sum(&counts.received, from, to);
        assert!(offered > 0, "{strategy:?}: calls were offered during the trigger");
        match strategy {
            // Over the whole run: an attempt sent just before the trigger
            // may arrive in it, more so on a busy machine.
            Strategy::NoRetries => {
                let total = |c: &[u64]| c.iter().sum::<u64>();
                assert!(
                    total(&counts.received) <= total(&counts.offered),
                    "{strategy:?}: one attempt a call"
                );
            }
            // The guarded strategies (the defaults too: each operation has
            // its own breaker) may spare the server even first attempts.
            Strategy::OursDefaults | Strategy::OursGuarded | Strategy::OursAdaptive => {}
            _ => assert!(
                received > offered,
                "{strategy:?}: its retries reached the server ({received} for {offered})"
            ),
        }
        assert!(counts.failed.iter().sum::<u64>() > 0, "{strategy:?}: the 503s failed calls");
        let summary = report::Summary::of(&counts);
        let row = report::row(&counts, &summary);
        assert_eq!(
            row.matches('|').count(),
            report::HEADER.lines().next().unwrap().matches('|').count(),
            "{row}"
        );
    }
}

#[test]
fn a_slowdown_queues_work_the_server_still_does() {
    // 300 calls a second against 8 workers at 8 x 5 ms: 200 a second.
    let slowdown =
        Trigger::Slowdown { from: Duration::from_secs(1), lasting: Duration::from_secs(1), factor: 8 };
    let counts = run(config(Strategy::NoRetries, slowdown)).unwrap();
    assert!(counts.max_queued > 0, "the queue grew while the server was slow");
    let (from, to) = slowdown.stretch().unwrap();
    assert!(metrics::sum(&counts.received, from, to) > 0, "requests still arrived");
}
