//! What the dashboard costs the calls it watches: nothing on the success
//! path. Its per-second counts are the breaker's monotonic totals (a success
//! is one plain increment of a per-thread slot, paid with or without a
//! dashboard), read once a second by the admin router's sampler; its
//! transitions come from a hook that runs only on a transition.
//!
//! ```sh
//! scripts/bench-dashboard.sh        # runs this, then writes the README's figures
//! cargo bench -p stormproof-benches --features admin --bench dashboard
//! ```
//!
//! The same annotated call, breaker and budget, is timed twice in one run:
//! first with no admin router, then with one over the same registry, its
//! sampler running on a thread of its own. The function has both call sites,
//! so it is compiled the same way for both lines.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use stormproof::{
    Classify, ErrorClass, Rejection, admin, breaker::BreakerConfig, budget::RatioBudget, registry, resilient,
};

#[derive(Debug)]
enum BenchError {
    #[allow(dead_code)]
    Rejected(Rejection),
}

impl Classify for BenchError {
    fn classify(&self) -> ErrorClass {
        match self {
            BenchError::Rejected(r) => r.classify(),
        }
    }
}

impl From<Rejection> for BenchError {
    fn from(r: Rejection) -> Self {
        BenchError::Rejected(r)
    }
}

#[resilient(breaker = "dashboard-breaker", budget = "dashboard-budget")]
async fn watched(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a tokio runtime")
}

/// Builds an admin router over the global registry on a thread of its own,
/// where its sampler reads the totals once a second for the rest of the run.
fn start_dashboard() {
    let (built, ready) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = runtime();
        rt.block_on(async {
            let router = admin::router(registry()).into_router();
            built.send(()).expect("the benchmark waits for the router");
            // Kept alive (and its sampler with it) until the process ends.
            std::future::pending::<()>().await;
            drop(router);
        });
    });
    ready.recv().expect("the dashboard thread builds its router");
}

fn benches(c: &mut Criterion) {
    registry().declare_breaker("dashboard-breaker", BreakerConfig::default()).expect("declared once");
    let budget = RatioBudget { min_per_sec: 1_000_000, ..Default::default() };
    registry().declare_budget("dashboard-budget", budget).expect("declared once");
    let rt = runtime();
    let mut group = c.benchmark_group("dashboard");
    group.bench_function("breaker_budget", |b| {
        b.to_async(&rt).iter(|| async { watched(black_box(1)).await.expect("the call succeeds") })
    });
    start_dashboard();
    group.bench_function("breaker_budget_watched", |b| {
        b.to_async(&rt).iter(|| async { watched(black_box(1)).await.expect("the call succeeds") })
    });
    group.finish();
    let seen = registry().breaker("dashboard-breaker").expect("declared").totals().calls;
    assert!(seen > 0, "the calls were counted, so the sampler had something to read");
}

criterion_group! {
    name = dashboard;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(dashboard);
