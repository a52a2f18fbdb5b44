//! What `ResilientLayer` costs per request on the success path: the same
//! in-process `tower::service_fn` that answers at once (no network), called
//! bare and through the layer, in one criterion run.
//!
//! ```sh
//! scripts/bench-tower.sh                      # runs this, prints the ratios
//! cargo bench -p stormproof-benches --bench tower --features tower  # just the numbers
//! ```
//!
//! Every benchmark makes one request the same way: build it, wait for the
//! service to be ready, call it, drop the response; one current-thread
//! tokio runtime drives the loop (criterion's `to_async`). Benchmarks:
//! - `tower/bare`: the inner service alone, the baseline;
//! - `tower/layer_get`: a GET through `ResilientLayer::new` (4 attempts,
//!   the operation's own breaker and budget): a copy of the request kept
//!   for a retry, the first attempt run in the response future itself, the
//!   `Attempts` extension;
//! - `tower/layer_get_breaker_budget`: the same with a named breaker and
//!   budget (global registry);
//! - `tower/layer_post_no_key`: a POST without a key: one attempt, so no
//!   copy, and not a plain call (its future is boxed);
//! - `tower/cloning`: `ResilientLayer::cloning` around a service of `u64`
//!   requests, against `tower/bare_cloning`.

use std::convert::Infallible;
use std::hint::black_box;
use std::time::Instant;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Method, Request, Response, Uri};
use http_body_util::Full;
use stormproof::http::tower::ResilientLayer;
use stormproof::{Policy, breaker::BreakerConfig, budget::BudgetConfig, registry};
use tower::{Layer, Service, ServiceExt, service_fn};

type Body = Full<Bytes>;

fn request(method: &Method) -> Request<Body> {
    let mut request = Request::new(Full::new(Bytes::from_static(b"{}")));
    *request.method_mut() = method.clone();
    *request.uri_mut() = Uri::from_static("http://inventory.internal/stock/A-1");
    request
}

/// The dependency: answers 200 at once.
fn inner() -> impl Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future: Send>
+ Clone
+ Send
+ 'static {
    service_fn(|request: Request<Body>| {
        black_box(&request);
        std::future::ready(Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok")))))
    })
}

fn policy() -> stormproof::PolicyBuilder {
    Policy::builder().max_attempts(4)
}

/// `iters` requests through one instance of `service`, back to back, in
/// one future: the same service is made ready and called each time, as a
/// client that keeps its stack does.
fn bench<S, Req, F>(c: &mut Criterion, rt: &tokio::runtime::Runtime, name: &str, service: &S, request: F)
where
    S: Service<Req> + Clone,
    S::Error: std::fmt::Debug,
    F: Fn() -> Req + Copy,
{
    c.bench_function(name, |b| {
        b.to_async(rt).iter_custom(|iters| {
            let mut service = service.clone();
            async move {
                let started = Instant::now();
                for _ in 0..iters {
                    let response = service.ready().await.unwrap().call(request()).await.unwrap();
                    black_box(response);
                }
                started.elapsed()
            }
        })
    });
}

fn tower(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    registry()
        .declare_breaker("bench-tower", BreakerConfig { failure_threshold: 1_000_000, ..Default::default() })
        .unwrap();
    registry().declare_budget("bench-tower", BudgetConfig::default()).unwrap();
    let get = || request(&Method::GET);
    let post = || request(&Method::POST);

    bench(c, &rt, "tower/bare", &inner(), get);
    let layer = ResilientLayer::new(policy().build().unwrap());
    bench(c, &rt, "tower/layer_get", &layer.layer(inner()), get);
    let guarded = ResilientLayer::new(policy().breaker("bench-tower").budget("bench-tower").build().unwrap());
    bench(c, &rt, "tower/layer_get_breaker_budget", &guarded.layer(inner()), get);
    bench(c, &rt, "tower/layer_post_no_key", &layer.layer(inner()), post);

    let echo = service_fn(|n: u64| std::future::ready(Ok::<_, Infallible>(black_box(n))));
    bench(c, &rt, "tower/bare_cloning", &echo, || black_box(7_u64));
    let cloning = ResilientLayer::cloning(policy().build().unwrap());
    bench(c, &rt, "tower/cloning", &cloning.layer(echo), || black_box(7_u64));
}

criterion_group!(benches, tower);
criterion_main!(benches);
