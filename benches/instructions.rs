//! Instructions per successful call, counted by callgrind (through gungraun),
//! for the same functions `overhead.rs` times with criterion. Instruction
//! counts are the same on every run of the same binary, however busy the
//! machine, so they can gate CI where wall times cannot. (Between machines
//! they can differ a little where glibc picks its `memcpy` by CPU.)
//!
//! ```sh
//! scripts/bench.sh                    # both benchmarks, then BENCHMARKS.md
//! scripts/instructions-check.sh       # the CI check against benches/instructions.baseline
//! ```
//!
//! Each row is one benchmark function run twice, once with `N` calls and
//! once with `2 * N`, each on a runtime made in the setup (not counted). The
//! difference of the two counts divided by `N` is the cost of one call:
//! everything paid once per run (entering `block_on`, the first call's lookup
//! of its guards, dropping the runtime) is in both counts and cancels.
//! `scripts/instructions.sh` reads the two counts of each row from
//! gungraun's JSON output and does the division.
//!
//! The calls are driven as in `overhead.rs`: awaited back to back inside one
//! `block_on` and used as a caller would (`used!`), with the call as the only
//! call site of its function, so the same code is inlined the same way.

use std::future::Future;
use std::hint::black_box;

use backon::Retryable;
use failsafe::futures::CircuitBreaker as _;
use gungraun::{Callgrind, LibraryBenchmarkConfig, library_benchmark, library_benchmark_group, main};
use tokio::runtime::Runtime;

#[macro_use]
mod shared;
use shared::{
    backon_defaults, bare, bare_small, breaker_budget, breaker_budget_out_of_line,
    breaker_budget_small_out_of_line, budget_alone, call_out_of_line_functions_once, declare, defaults,
    fails_once, floor, floor_budgeted, floor_guarded, keyed, overridden, overridden_deadline, per_tenant,
    per_tenant_in_turn, policy, runtime, timed_policy, with_bulkhead, with_deadline, with_hedge,
    with_rate_limit, with_throttle, with_timeout,
};

/// Calls in the shorter run; the longer one makes twice as many. A multiple
/// of 128 (tokio's cooperative budget), so forced yields, if a wrapper
/// takes part in it, amortise the same way in both runs. A plain literal:
/// `scripts/instructions.sh` reads it from here.
const N: u64 = 5_120;

/// What a benchmark starts from: the guards declared and a runtime built
/// (neither is counted), and how many calls to make.
fn fixture(calls: u64) -> (Runtime, u64) {
    declare();
    let rt = runtime();
    rt.block_on(call_out_of_line_functions_once());
    // `STORMPROOF_BENCH_FLEET=off`: the same binary without the fleet, so
    // that what the fleet costs a call is measured free of what the
    // compiler made of the larger build (scripts/instructions-check.sh).
    #[cfg(feature = "redis")]
    if std::env::var_os("STORMPROOF_BENCH_FLEET").is_none_or(|fleet| fleet != "off") {
        join_fleet(&rt);
    }
    (rt, calls)
}

/// With feature `redis`, the guards are shared by a fleet, as a replica's
/// are: what a call does must not change. The store is unreachable (a
/// closed port) and the first flush, the only one (`sync_every` is an hour),
/// happens once per run, so its cost cancels between the two runs of a row.
#[cfg(feature = "redis")]
fn join_fleet(rt: &Runtime) {
    use stormproof::fleet::{Fleet, FleetConfig};
    let _entered = rt.enter();
    let fleet = Fleet::join(
        stormproof::registry(),
        FleetConfig {
            url: "redis://127.0.0.1:1/".into(),
            sync_every: std::time::Duration::from_secs(3_600),
            breakers: vec![shared::BREAKER.into()],
            budgets: vec![shared::BUDGET.into()],
            ..Default::default()
        },
    )
    .expect("a valid fleet");
    // Shared for the whole process.
    std::mem::forget(fleet);
}

/// Makes `calls` calls back to back on the runtime, each one used.
fn drive<F: Future>((rt, calls): (Runtime, u64), mut call: impl FnMut() -> F) -> Runtime {
    rt.block_on(async {
        for _ in 0..calls {
            black_box(call().await);
        }
    });
    // Returned, so that dropping it is not counted either.
    rt
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn bare_call(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(bare(black_box(1))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn attribute_defaults(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(defaults(black_box(1))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn floor_call(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(floor(black_box(1))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn floor_budgeted_call(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(floor_budgeted(black_box(1))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn budget_call(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(budget_alone(black_box(1))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn floor_guarded_call(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(floor_guarded(black_box(1))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn breaker_budget_call(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(breaker_budget(black_box(1))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn breaker_budget_out_of_line_call(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(breaker_budget_out_of_line(black_box(1))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn bare_small_error_call(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(bare_small(black_box(1))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn breaker_budget_small_error_out_of_line_call(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(breaker_budget_small_out_of_line(black_box(1))))
}

// `breaker_budget_call` with a configuration file's override of its retries
// in force: looked up only if the first attempt fails.
#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn breaker_budget_overridden(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(overridden(black_box(1))))
}

// The same with an override that sets a deadline: the registry's settings
// are looked up as every call starts, and the deadline is armed.
#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn breaker_budget_overridden_deadline(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(overridden_deadline(black_box(1))))
}

// `breaker_budget_call` with a deadline of its own (`deadline_ms`).
#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn breaker_budget_deadline(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(with_deadline(black_box(1))))
}

// `breaker_budget_call` made non-idempotent with an idempotency key.
#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn breaker_budget_keyed(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(keyed(black_box(1))))
}

// `breaker_budget_call` with a breaker per key (`per = tenant`), the
// tenant's breaker held: the issue asks at most one hash lookup more.
#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn breaker_per_key_call(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(per_tenant(black_box(7))))
}

// The same for 64 tenants in turn, each call another tenant's than the one
// before: the lookup among as many keys as a service's tenants or hosts.
// The 64 tenants' breakers are made in both runs of the row, so they cancel.
#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn breaker_per_key_64_tenants_call(f: (Runtime, u64)) -> Runtime {
    let mut tenant = 0;
    drive(f, || {
        tenant = (tenant + 1) % shared::TENANTS;
        let tenant = black_box(tenant);
        async move { per_tenant_in_turn(tenant).await.expect("the call succeeds") }
    })
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn breaker_budget_bulkhead(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(with_bulkhead(black_box(1))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn breaker_budget_bulkhead_timeout(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(with_timeout(black_box(1))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn breaker_budget_hedge(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(with_hedge(black_box(1))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn breaker_budget_throttle(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(with_throttle(black_box(1))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn breaker_budget_rate_limit(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(with_rate_limit(black_box(1))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn policy_run(f: (Runtime, u64)) -> Runtime {
    let policy = policy();
    drive(f, || used!(policy.run(|| bare(black_box(1)))))
}

// `policy_run` with an attempt timeout and a deadline: its first attempt
// races one timer, armed only if it waits (`call::timed`).
#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn policy_run_timed(f: (Runtime, u64)) -> Runtime {
    let policy = timed_policy();
    drive(f, || used!(policy.run(|| bare(black_box(1)))))
}

// `policy_run` with an idempotency key (`Policy::run_with_key`).
#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn policy_run_keyed(f: (Runtime, u64)) -> Runtime {
    let policy = policy();
    drive(f, || used!(policy.run_with_key(black_box(1u64), || bare(black_box(1)))))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn backon_retry(f: (Runtime, u64)) -> Runtime {
    let backoff = backon_defaults();
    drive(f, || used!((|| bare(black_box(1))).retry(backoff)))
}

#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn failsafe_breaker(f: (Runtime, u64)) -> Runtime {
    let breaker = failsafe::Config::new().build();
    drive(f, || used!(breaker.call(bare(black_box(1)))))
}

// A call whose first attempt fails (transient) and whose retry succeeds at
// once (zero backoff): minus `breaker_budget_call`, one retry decision.
// (Plain comments: `#[library_benchmark]` rejects doc attributes.)
#[library_benchmark]
#[bench::n(args = (N,), setup = fixture)]
#[bench::twice_n(args = (2 * N,), setup = fixture)]
fn fail_once_then_succeed(f: (Runtime, u64)) -> Runtime {
    drive(f, || used!(fails_once(black_box(1))))
}

library_benchmark_group!(
    name = success;
    benchmarks = bare_call, floor_call, attribute_defaults, floor_budgeted_call, budget_call, floor_guarded_call, breaker_budget_call, breaker_budget_out_of_line_call, bare_small_error_call,
        breaker_budget_small_error_out_of_line_call, breaker_budget_overridden, breaker_budget_overridden_deadline, breaker_budget_deadline, breaker_budget_keyed, breaker_per_key_call, breaker_per_key_64_tenants_call, breaker_budget_bulkhead,
        breaker_budget_bulkhead_timeout, breaker_budget_hedge, breaker_budget_throttle, breaker_budget_rate_limit,
        policy_run, policy_run_timed, policy_run_keyed, backon_retry, failsafe_breaker, fail_once_then_succeed
);

// The tower layer's rows (feature `tower`: `INSTRUCTIONS_FEATURES=tower
// scripts/instructions.sh tower_bare_cloning tower_cloning ...`): one request
// made ready and called through `ResilientLayer` around a service that
// answers at once, against the bare service; the policy has the rows'
// breaker and budget (`shared::policy`).
#[cfg(feature = "tower")]
mod tower_rows {
    use super::*;

    use ::tower::{Layer, Service, ServiceExt, service_fn};
    use bytes::Bytes;
    use http::{Request, Response};
    use http_body_util::Full;
    use stormproof::http::tower::ResilientLayer;

    type Body = Full<Bytes>;

    fn cloning_inner()
    -> impl Service<u64, Response = u64, Error = std::convert::Infallible, Future: Send> + Clone + Send + 'static
    {
        service_fn(|n: u64| std::future::ready(Ok(black_box(n))))
    }

    fn http_inner()
    -> impl Service<Request<Body>, Response = Response<Body>, Error = std::convert::Infallible, Future: Send>
    + Clone
    + Send
    + 'static {
        service_fn(|request: Request<Body>| {
            black_box(&request);
            std::future::ready(Ok(Response::new(Full::new(Bytes::from_static(b"ok")))))
        })
    }

    fn get() -> Request<Body> {
        let mut request = Request::new(Full::new(Bytes::from_static(b"")));
        *request.uri_mut() = http::Uri::from_static("http://inventory.internal/stock/A-1");
        request
    }

    /// `calls` requests (made by `request`) through `service` back to
    /// back, each made ready first and its answer used, as `drive` does.
    fn drive_service<S: Service<R>, R>(
        (rt, calls): (Runtime, u64),
        mut service: S,
        request: impl Fn() -> R,
    ) -> Runtime {
        rt.block_on(async {
            for _ in 0..calls {
                let answered = match service.ready().await {
                    Ok(ready) => ready.call(request()).await.is_ok(),
                    Err(_) => false,
                };
                black_box(answered);
            }
        });
        rt
    }

    #[library_benchmark]
    #[bench::n(args = (N,), setup = fixture)]
    #[bench::twice_n(args = (2 * N,), setup = fixture)]
    fn tower_bare_cloning(f: (Runtime, u64)) -> Runtime {
        drive_service(f, cloning_inner(), || black_box(1))
    }

    #[library_benchmark]
    #[bench::n(args = (N,), setup = fixture)]
    #[bench::twice_n(args = (2 * N,), setup = fixture)]
    fn tower_cloning(f: (Runtime, u64)) -> Runtime {
        drive_service(f, ResilientLayer::cloning(policy()).layer(cloning_inner()), || black_box(1))
    }

    // The same with an attempt timeout (60 s, never reached): the first
    // attempt races a timer of the response future's own.
    #[library_benchmark]
    #[bench::n(args = (N,), setup = fixture)]
    #[bench::twice_n(args = (2 * N,), setup = fixture)]
    fn tower_cloning_timed(f: (Runtime, u64)) -> Runtime {
        let policy = stormproof::Policy::builder()
            .breaker(shared::BREAKER)
            .budget(shared::BUDGET)
            .attempt_timeout(std::time::Duration::from_secs(60))
            .build()
            .expect("a valid policy");
        drive_service(f, ResilientLayer::cloning(policy).layer(cloning_inner()), || black_box(1))
    }

    #[library_benchmark]
    #[bench::n(args = (N,), setup = fixture)]
    #[bench::twice_n(args = (2 * N,), setup = fixture)]
    fn tower_bare_http(f: (Runtime, u64)) -> Runtime {
        drive_service(f, http_inner(), get)
    }

    #[library_benchmark]
    #[bench::n(args = (N,), setup = fixture)]
    #[bench::twice_n(args = (2 * N,), setup = fixture)]
    fn tower_http(f: (Runtime, u64)) -> Runtime {
        drive_service(f, ResilientLayer::new(policy()).layer(http_inner()), get)
    }

    library_benchmark_group!(
        name = tower_layer;
        benchmarks = tower_bare_cloning, tower_cloning, tower_cloning_timed, tower_bare_http, tower_http
    );
}

#[cfg(not(feature = "tower"))]
main!(
    // Only instructions are needed: no cache simulation, which would make
    // every run several times slower.
    config = LibraryBenchmarkConfig::default()
        .tool(Callgrind::with_args(["--cache-sim=no"]))
        .pass_through_env("STORMPROOF_BENCH_FLEET");
    library_benchmark_groups = success
);

#[cfg(feature = "tower")]
use tower_rows::tower_layer;

#[cfg(feature = "tower")]
main!(
    config = LibraryBenchmarkConfig::default()
        .tool(Callgrind::with_args(["--cache-sim=no"]))
        .pass_through_env("STORMPROOF_BENCH_FLEET");
    library_benchmark_groups = success, tower_layer
);
