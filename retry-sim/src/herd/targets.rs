//! The simulator's verdict on [`Strategy::Adaptive`] (issue 15): against
//! full jitter, on the same seed, in every model, no client gives up, the
//! work is at most 0.8 times full jitter's, and the p99 completion time is
//! at most full jitter's.
//!
//! The seed is the storm example's, so these are the README's rows.

use super::*;
use stormproof_runtime::Jitter;

/// The storm example's seed.
const SEED: u64 = 2015;

/// Which targets a run is held to.
#[derive(Debug, Clone, Copy)]
struct Targets {
    nobody_gives_up: bool,
    work: bool,
    p99: bool,
}

const ALL: Targets = Targets { nobody_gives_up: true, work: true, p99: true };

fn presets() -> [HerdConfig; 3] {
    [HerdConfig::contention(), HerdConfig::overload(), HerdConfig::brownout()]
}

/// Runs full jitter and adaptive on `config` and asserts `targets`.
fn check(config: &HerdConfig, targets: Targets) -> (HerdReport, HerdReport) {
    let full = simulate(config, Strategy::Backoff(Jitter::Full)).unwrap();
    let adaptive = simulate(config, Strategy::Adaptive).unwrap();
    let case = format!("{} N={}", config.model, config.clients);
    if targets.nobody_gives_up {
        assert_eq!(
            adaptive.gave_up(),
            0,
            "{case}: exhausted {}, budget {}, throttled {}, bulkhead {}, deadline {}",
            adaptive.exhausted,
            adaptive.budget_stopped,
            adaptive.throttled,
            adaptive.bulkhead_stopped,
            adaptive.deadline_stopped
        );
    }
    if targets.work {
        assert!(
            adaptive.attempts * 10 <= full.attempts * 8,
            "{case}: adaptive does {} attempts, full jitter {}",
            adaptive.attempts,
            full.attempts
        );
    }
    if targets.p99 {
        let (a, f) = (adaptive.p99(), full.p99());
        assert!(a.is_some() && a <= f, "{case}: p99 {a:?} vs full jitter's {f:?}");
    }
    (full, adaptive)
}

// One test per model, so that each fails on its own.

#[test]
fn at_100_contending_clients_adaptive_does_less_work_and_finishes_sooner_and_nobody_gives_up() {
    check(&HerdConfig { clients: 100, seed: SEED, ..HerdConfig::contention() }, ALL);
}

#[test]
fn at_100_clients_of_an_overloaded_dependency_adaptive_does_less_work_and_finishes_sooner_and_nobody_gives_up()
 {
    check(&HerdConfig { clients: 100, seed: SEED, ..HerdConfig::overload() }, ALL);
}

#[test]
fn at_100_clients_of_a_browned_out_dependency_adaptive_does_less_work_and_finishes_sooner_and_nobody_gives_up()
 {
    check(&HerdConfig { clients: 100, seed: SEED, ..HerdConfig::brownout() }, ALL);
}

#[test]
fn at_50_and_190_clients_adaptive_meets_every_target_the_model_allows() {
    for preset in presets() {
        for clients in [50, 190] {
            let config = HerdConfig { clients, seed: SEED, ..preset };
            let targets = match (preset.model, clients) {
                // Full jitter does barely more than one attempt per client
                // here (the dependency browns out only a little at 50), so
                // 0.8 times its work is less than one attempt per client:
                // no strategy can meet it. Checked below.
                (Model::Brownout { .. }, 50) => Targets { work: false, ..ALL },
                // A herd of 190 contending on one row needs about one retry
                // per client even at the best concurrency; the default
                // share-of-traffic budget (10% plus 10 per second) stops
                // some of them. The work and the p99 of the rest hold.
                (Model::Contention, 190) => Targets { nobody_gives_up: false, ..ALL },
                _ => ALL,
            };
            let (full, adaptive) = check(&config, targets);
            if !targets.work {
                assert!(
                    full.attempts * 8 < u64::from(clients) * 10,
                    "the work target is out of reach only if 0.8x full jitter's work ({}) is below one attempt per client",
                    full.attempts
                );
                assert_eq!(adaptive.attempts, u64::from(clients), "adaptive does the least work possible");
            }
        }
    }
}
