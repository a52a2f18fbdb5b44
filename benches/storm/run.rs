//! One run: a fresh server and a fresh caller on a runtime of their own,
//! calls arriving open loop (a Poisson process, seeded) for the run's
//! length, counted per 100 ms as they are offered, as the server receives
//! their attempts, and as they succeed or fail.

use std::sync::Arc;
use std::time::Duration;

use rand::{RngExt, SeedableRng, rngs::SmallRng};
use tokio::time::Instant;

use super::metrics::Buckets;
use super::server::{self, Trigger};
use super::strategies::{Caller, Strategy};

/// What one run is.
#[derive(Debug, Clone, Copy)]
pub struct RunConfig {
    pub strategy: Strategy,
    pub trigger: Trigger,
    /// Calls offered per second, on average.
    pub rate: f64,
    pub length: Duration,
    pub seed: u64,
}

/// What one run counted, per 100 ms bucket from its start.
#[derive(Debug, Clone)]
pub struct RunCounts {
    pub config: RunConfig,
    /// Calls started.
    pub offered: Vec<u64>,
    /// Attempts the server received.
    pub received: Vec<u64>,
    /// Calls that succeeded, when they did.
    pub goodput: Vec<u64>,
    /// Calls that failed, when they did.
    pub failed: Vec<u64>,
    /// The longest the server's queue was.
    pub max_queued: u64,
}

/// Runs `config` on a runtime of its own (two worker threads, as the
/// machine's two cores), which is shut down with whatever is still in
/// flight when the run's length has passed.
pub fn run(config: RunConfig) -> Result<RunCounts, Box<dyn std::error::Error + Send + Sync>> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let counts = runtime.block_on(drive(config));
    runtime.shutdown_background();
    counts
}

async fn drive(config: RunConfig) -> Result<RunCounts, Box<dyn std::error::Error + Send + Sync>> {
    let start = Instant::now();
    let [offered, received, goodput, failed] = [(); 4].map(|()| Arc::new(Buckets::new(config.length)));
    let server = server::start(config.trigger, start, received.clone()).await?;
    let caller = Caller::new(config.strategy, &format!("http://{}/", server.addr))?;
    let mut arrivals = SmallRng::seed_from_u64(config.seed);
    let mut next = Duration::ZERO;
    loop {
        // Exponential gaps: a Poisson process of `rate` calls a second.
        let uniform: f64 = arrivals.random();
        next += Duration::from_secs_f64(-(1.0 - uniform).ln() / config.rate);
        if next >= config.length {
            break;
        }
        tokio::time::sleep_until(start + next).await;
        offered.add(start.elapsed(), 1);
        let (caller, goodput, failed) = (caller.clone(), goodput.clone(), failed.clone());
        tokio::spawn(async move {
            let ok = caller.call().await;
            let counts = if ok { &goodput } else { &failed };
            counts.add(start.elapsed(), 1);
        });
    }
    tokio::time::sleep_until(start + config.length).await;
    Ok(RunCounts {
        config,
        offered: offered.snapshot(),
        received: received.snapshot(),
        goodput: goodput.snapshot(),
        failed: failed.snapshot(),
        max_queued: server.max_queued(),
    })
}
