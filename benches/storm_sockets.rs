//! The retry storm on real sockets (issue 45, item 4): a loopback HTTP
//! server of fixed capacity (8 workers, 5 ms a request, a deep queue, work
//! a client gave up on still done), calls arriving open loop at 0.7 of its
//! capacity with a 200 ms timeout per attempt, two triggers (every request
//! answered 503 for 3 s; service time 4x for 5 s; 4 s into a 21 s run), and each strategy in the
//! same run of this program, same seed, against a fresh server.
//!
//! ```text
//! scripts/bench-storm.sh            # the whole comparison, into BENCHMARKS.md and docs/
//! cargo bench -p stormproof-benches --bench storm_sockets --features storm -- --smoke
//! ```
//!
//! Prints the check that neither side is the bottleneck (no trigger, no
//! retries: goodput equals the offered load), then one Markdown row per
//! (trigger, strategy), and writes one SVG chart per trigger into
//! `target/storm/` (`--out DIR` elsewhere).

#[path = "storm/mod.rs"]
mod storm;

use std::path::PathBuf;
use std::time::Duration;

use report::Summary;
use run::{RunConfig, RunCounts};
use server::Trigger;
use storm::{chart, metrics, report, run, server, strategies};
use strategies::Strategy;

/// Calls offered per second: 0.7 of the server's nominal capacity.
fn offered_rate() -> f64 {
    0.7 * server::WORKERS as f64 / server::SERVICE_TIME.as_secs_f64()
}

const SEED: u64 = 45;

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let smoke = args.iter().any(|a| a == "--smoke");
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into())).join("storm")
        });
    std::fs::create_dir_all(&out)?;
    let s = Duration::from_secs;
    let (length, before, strategies): (Duration, Duration, &[Strategy]) = if smoke {
        (s(4), s(2), &[Strategy::NoRetries, Strategy::OursDefaults])
    } else {
        (s(21), s(4), &Strategy::ALL)
    };
    let triggers = [
        Trigger::Unavailable { from: before, lasting: if smoke { s(1) } else { s(3) } },
        Trigger::Slowdown { from: before, lasting: if smoke { s(1) } else { s(5) }, factor: 4 },
    ];
    let rate = offered_rate();

    let baseline = run::run(RunConfig {
        strategy: Strategy::NoRetries,
        trigger: Trigger::None,
        rate,
        length: if smoke { s(2) } else { s(8) },
        seed: SEED,
    })?;
    let window = (report::WARM_UP, baseline.config.length);
    let offered = metrics::sum(&baseline.offered, window.0, window.1);
    let good = metrics::sum(&baseline.goodput, window.0, window.1);
    println!(
        "bottleneck check (no trigger, no retries): {offered} calls offered after the warm-up, {good} succeeded ({:.1} %), {} failed, longest queue {}",
        100.0 * good as f64 / offered.max(1) as f64,
        metrics::sum(&baseline.failed, window.0, window.1),
        baseline.max_queued
    );
    println!();
    println!("{}", report::HEADER);
    for trigger in triggers {
        let mut runs: Vec<RunCounts> = Vec::new();
        for &strategy in strategies {
            let counts = run::run(RunConfig { strategy, trigger, rate, length, seed: SEED })?;
            println!("{}", report::row(&counts, &Summary::of(&counts)));
            runs.push(counts);
        }
        let title = match trigger {
            Trigger::Unavailable { .. } => "every request answered 503 for 3 s (shaded)",
            _ => "service time 4x for 5 s (shaded)",
        };
        chart::write(&out.join(format!("storm-sockets-{}.svg", trigger.name())), title, &runs)?;
    }
    Ok(())
}
