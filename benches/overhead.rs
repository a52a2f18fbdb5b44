//! What `#[resilient]` costs on the path that matters most: a call that
//! succeeds on its first attempt. Every benchmark runs in this one criterion
//! run, so each is compared with the bare call measured next to it.
//!
//! ```sh
//! scripts/bench.sh                 # runs this, then writes BENCHMARKS.md
//! cargo bench -p stormproof-benches --bench overhead     # just the numbers
//! ```
//!
//! Async benchmarks are driven by criterion's `to_async` on one
//! current-thread tokio runtime: one `block_on` per sample, then the calls
//! are awaited back to back, so the executor adds nothing per call. Every
//! benchmark (the bare baseline and the synchronous breaker and registry
//! ones too) runs in that same loop and uses its call the same way (see
//! `used!`), so the ratios compare like with like.
//!
//! The functions measured here and in `instructions.rs` (instruction counts
//! under callgrind) are defined once, in `shared/mod.rs`.
//!
//! Groups (BENCHMARKS.md explains each line):
//! - `success/*`: one successful call through each configuration, and
//!   through backon and failsafe for comparison;
//! - `retry/*`: a call that fails once and then succeeds with zero backoff;
//!   minus `success/breaker_budget`, the cost of one retry decision;
//! - `registry/*`: looking a breaker up by name on every call versus the
//!   handle a call site keeps;
//! - `contention/*`: calls through one shared breaker and budget from one
//!   and from two threads (throughput); `contention_throttle/*`, the same
//!   with one shared adaptive throttle too.

use std::future::Future;
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use backon::Retryable;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use failsafe::futures::CircuitBreaker as _;
use stormproof::{breaker::Outcome, registry, resilient};

#[macro_use]
mod shared;
use shared::{
    BREAKER, BenchError, backon_defaults, bare, bare_small, breaker_budget, breaker_budget_out_of_line,
    breaker_budget_small_out_of_line, budget_alone, call_out_of_line_functions_once, declare, defaults,
    fails_once, floor, floor_budgeted, floor_guarded, keyed, overridden, overridden_deadline, per_tenant,
    per_tenant_in_turn, policy, runtime, timed_policy, with_bulkhead, with_deadline, with_hedge,
    with_rate_limit, with_throttle, with_timeout,
};

/// `breaker_budget` for the contention benchmark: the same function, but its
/// own, so that every benchmarked function has exactly one call site (the
/// compiler inlines a future's `poll` into a lone caller more readily, and
/// that alone moves these numbers by several nanoseconds).
#[resilient(breaker = "bench-breaker", budget = "bench-budget")]
async fn shared_breaker_budget(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

/// `with_throttle` for the contention benchmark, for the same reason: every
/// call reads the shared throttle's window as it is admitted and adds to it
/// as it is answered.
#[resilient(breaker = "bench-breaker", budget = "bench-budget", throttle = "bench-throttle")]
async fn shared_throttle(x: u64) -> Result<u64, BenchError> {
    Ok(black_box(x))
}

fn success(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut group = c.benchmark_group("success");
    group.bench_function("bare", |b| b.to_async(rt).iter(|| used!(bare(black_box(1)))));
    group.bench_function("floor", |b| b.to_async(rt).iter(|| used!(floor(black_box(1)))));
    group.bench_function("attribute_defaults", |b| b.to_async(rt).iter(|| used!(defaults(black_box(1)))));
    group.bench_function("floor_budgeted", |b| b.to_async(rt).iter(|| used!(floor_budgeted(black_box(1)))));
    group.bench_function("budget_alone", |b| b.to_async(rt).iter(|| used!(budget_alone(black_box(1)))));
    group.bench_function("floor_guarded", |b| b.to_async(rt).iter(|| used!(floor_guarded(black_box(1)))));
    group.bench_function("breaker_budget", |b| b.to_async(rt).iter(|| used!(breaker_budget(black_box(1)))));
    group.bench_function("breaker_budget_overridden", |b| {
        b.to_async(rt).iter(|| used!(overridden(black_box(1))))
    });
    group.bench_function("breaker_budget_overridden_deadline", |b| {
        b.to_async(rt).iter(|| used!(overridden_deadline(black_box(1))))
    });
    group.bench_function("breaker_budget_deadline", |b| {
        b.to_async(rt).iter(|| used!(with_deadline(black_box(1))))
    });
    group.bench_function("breaker_budget_keyed", |b| b.to_async(rt).iter(|| used!(keyed(black_box(1)))));
    group.bench_function("breaker_per_key", |b| b.to_async(rt).iter(|| used!(per_tenant(black_box(7)))));
    group.bench_function("breaker_per_key_64_tenants", |b| {
        let mut tenant = 0;
        b.to_async(rt).iter(|| {
            tenant = (tenant + 1) % shared::TENANTS;
            let tenant = black_box(tenant);
            async move { per_tenant_in_turn(tenant).await.expect("the call succeeds") }
        })
    });
    group.bench_function("breaker_budget_out_of_line", |b| {
        b.to_async(rt).iter(|| used!(breaker_budget_out_of_line(black_box(1))))
    });
    group.bench_function("bare_small_error", |b| b.to_async(rt).iter(|| used!(bare_small(black_box(1)))));
    group.bench_function("breaker_budget_small_error_out_of_line", |b| {
        b.to_async(rt).iter(|| used!(breaker_budget_small_out_of_line(black_box(1))))
    });
    group.bench_function("breaker_budget_bulkhead", |b| {
        b.to_async(rt).iter(|| used!(with_bulkhead(black_box(1))))
    });
    group.bench_function("breaker_budget_bulkhead_timeout", |b| {
        b.to_async(rt).iter(|| used!(with_timeout(black_box(1))))
    });
    group.bench_function("breaker_budget_hedge", |b| b.to_async(rt).iter(|| used!(with_hedge(black_box(1)))));
    group.bench_function("breaker_budget_throttle", |b| {
        b.to_async(rt).iter(|| used!(with_throttle(black_box(1))))
    });
    group.bench_function("breaker_budget_rate_limit", |b| {
        b.to_async(rt).iter(|| used!(with_rate_limit(black_box(1))))
    });
    let policy = policy();
    group.bench_function("policy_run", |b| b.to_async(rt).iter(|| used!(policy.run(|| bare(black_box(1))))));
    let timed = timed_policy();
    group.bench_function("policy_run_timed", |b| {
        b.to_async(rt).iter(|| used!(timed.run(|| bare(black_box(1)))))
    });
    group.bench_function("policy_run_keyed", |b| {
        b.to_async(rt).iter(|| used!(policy.run_with_key(black_box(1u64), || bare(black_box(1)))))
    });
    let backoff = backon_defaults();
    group.bench_function("backon_retry", |b| {
        b.to_async(rt).iter(|| used!((|| bare(black_box(1))).retry(backoff)))
    });
    let failsafe = failsafe::Config::new().build();
    group.bench_function("failsafe_breaker", |b| {
        b.to_async(rt).iter(|| used!(failsafe.call(bare(black_box(1)))))
    });
    let breaker = registry().breaker(BREAKER).expect("declared");
    group.bench_function("our_breaker", |b| {
        b.to_async(rt).iter(|| {
            used!(async {
                let permit = breaker.try_acquire().expect("closed");
                let result = bare(black_box(1)).await;
                permit.record(Outcome::Success);
                result
            })
        })
    });
    group.finish();
}

fn retry(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut group = c.benchmark_group("retry");
    group.bench_function("fail_once_then_succeed", |b| {
        b.to_async(rt).iter(|| used!(fails_once(black_box(1))))
    });
    group.finish();
}

fn lookup(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut group = c.benchmark_group("registry");
    group.bench_function("lookup_by_name", |b| {
        b.to_async(rt).iter(|| async {
            let breaker = registry().breaker(black_box(BREAKER)).expect("declared");
            let permit = breaker.try_acquire().expect("closed");
            permit.record(Outcome::Success);
        })
    });
    let handle = registry().breaker(BREAKER).expect("declared");
    group.bench_function("call_site_handle", |b| {
        b.to_async(rt).iter(|| async {
            let permit = black_box(&handle).try_acquire().expect("closed");
            permit.record(Outcome::Success);
        })
    });
    group.finish();
}

/// `threads` threads, each on its own current-thread runtime, each making
/// `iters` calls of `call` (through guards they share); the time from the
/// common start to the last thread's end.
fn calls_on_threads<F: Future<Output = Result<u64, BenchError>> + 'static>(
    call: fn(u64) -> F,
    threads: usize,
    iters: u64,
) -> Duration {
    let start = Arc::new(Barrier::new(threads));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let start = start.clone();
            std::thread::spawn(move || {
                let rt = runtime();
                rt.block_on(async {
                    // Warm this thread's runtime and caches before the clock starts.
                    for _ in 0..1_000 {
                        black_box(used!(call(black_box(1))).await);
                    }
                    start.wait();
                    let began = Instant::now();
                    for _ in 0..iters {
                        black_box(used!(call(black_box(1))).await);
                    }
                    (began, Instant::now())
                })
            })
        })
        .collect();
    let spans: Vec<(Instant, Instant)> = workers.into_iter().map(|w| w.join().expect("worker")).collect();
    let began = spans.iter().map(|s| s.0).min().expect("a thread");
    let ended = spans.iter().map(|s| s.1).max().expect("a thread");
    ended - began
}

fn contention(c: &mut Criterion) {
    let mut group = c.benchmark_group("contention");
    for threads in [1, 2] {
        // One element per call: criterion reports calls per second.
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_function(format!("threads_{threads}"), |b| {
            b.iter_custom(|iters| calls_on_threads(shared_breaker_budget, threads, iters))
        });
    }
    group.finish();
    let mut group = c.benchmark_group("contention_throttle");
    for threads in [1, 2] {
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_function(format!("threads_{threads}"), |b| {
            b.iter_custom(|iters| calls_on_threads(shared_throttle, threads, iters))
        });
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    declare();
    let rt = runtime();
    // The second call sites of the `_out_of_line` functions (and a check
    // that the guards are in place before anything is measured).
    rt.block_on(call_out_of_line_functions_once());
    success(c, &rt);
    retry(c, &rt);
    lookup(c, &rt);
    contention(c);
}

criterion_group! {
    name = overhead;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(overhead);
