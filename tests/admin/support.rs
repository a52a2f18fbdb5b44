//! What the admin tests share: guards, calls through them, a loopback
//! server, and clients for its routes.

use std::net::SocketAddr;
use std::time::Duration;

use serde::de::DeserializeOwned;
use stormproof::admin::{Counts, Snapshot};
use stormproof::{
    Classify, ErrorClass, Policy, Registry, Rejection,
    breaker::BreakerConfig,
    budget::TokenBucket,
    bulkhead::{AdaptiveLimit, BulkheadConfig},
    rate_limit::RateLimitConfig,
    throttle::ThrottleConfig,
};

/// The token of the routers that accept manual control.
pub const TOKEN: &str = "t0k3n-0f-th3-4dm1n-r0ut3r";

/// Longest wait for anything the server should send within a second or two:
/// only a hang reaches it.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// What the attempts return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flaky {
    /// The dependency is down: transient, counted by the breaker.
    Down,
    /// A guard said no.
    Rejected(Rejection),
}

impl Classify for Flaky {
    fn classify(&self) -> ErrorClass {
        match self {
            Flaky::Down => ErrorClass::Transient,
            Flaky::Rejected(r) => r.classify(),
        }
    }
}

impl From<Rejection> for Flaky {
    fn from(r: Rejection) -> Self {
        Flaky::Rejected(r)
    }
}

/// Breakers `alpha` (opens at 5 failures, for a minute) and `beta`; a
/// token-bucket budget, a bulkhead of 4, a throttle and a rate limit, all
/// `alpha`; an adaptive bulkhead `beta` (AIMD between 2 and 8).
pub fn guards() -> Registry {
    let registry = Registry::with_seed(17);
    let alpha =
        BreakerConfig { failure_threshold: 5, open_for: Duration::from_secs(60), ..Default::default() };
    registry.declare_breaker("alpha", alpha).unwrap();
    registry.declare_breaker("beta", BreakerConfig::default()).unwrap();
    registry.declare_budget("alpha", TokenBucket { capacity: 20, ..Default::default() }).unwrap();
    registry.declare_bulkhead("alpha", BulkheadConfig { max_concurrent: 4, ..Default::default() }).unwrap();
    let adaptive =
        BulkheadConfig { max_concurrent: 8, adaptive: Some(AdaptiveLimit::aimd(2)), ..Default::default() };
    registry.declare_bulkhead("beta", adaptive).unwrap();
    registry.declare_throttle("alpha", ThrottleConfig { k: 1.5, ..Default::default() }).unwrap();
    let rate = RateLimitConfig {
        per_second: 50,
        burst: 5,
        max_wait: Some(Duration::from_millis(20)),
        ..Default::default()
    };
    registry.declare_rate_limit("alpha", rate).unwrap();
    registry
}

/// One call of one attempt through `breaker`, budget and bulkhead `alpha`.
pub async fn call_with(
    registry: &Registry,
    breaker: &str,
    attempt: impl Fn() -> Result<(), Flaky>,
) -> Result<(), Flaky> {
    let policy = Policy::builder()
        .max_attempts(1)
        .breaker(breaker.to_owned())
        .budget("alpha")
        .bulkhead("alpha")
        .build()
        .unwrap();
    registry.scope(policy.run(|| std::future::ready(attempt()))).await
}

/// Sheddable calls through rate limit `alpha` (a sheddable call never
/// waits for a turn) until it has refused one: how many it refused.
pub async fn shed_over_the_rate(registry: &Registry) -> u64 {
    let policy = Policy::builder()
        .max_attempts(1)
        .rate_limit("alpha")
        .priority(stormproof::Priority::Sheddable)
        .build()
        .unwrap();
    let limit = registry.rate_limit("alpha").unwrap();
    while limit.refusals().total() == 0 {
        let _ = registry.scope(policy.run(|| std::future::ready(Ok::<(), Flaky>(())))).await;
    }
    limit.refusals().of(stormproof::Priority::Sheddable)
}

/// [`call_with`] an attempt that returns `outcome`.
pub async fn call(registry: &Registry, breaker: &str, outcome: Result<(), Flaky>) -> Result<(), Flaky> {
    call_with(registry, breaker, move || outcome.clone()).await
}

/// What the registry counts for `breaker`.
pub fn totals(registry: &Registry, breaker: &str) -> Counts {
    let totals = registry.breaker(breaker).unwrap().totals();
    Counts {
        calls: totals.calls,
        failures: totals.failures,
        rejections: totals.rejections,
        slow_calls: totals.slow_calls,
    }
}

/// Serves `router` on 127.0.0.1, on a port the system picks.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// `GET /snapshot`.
pub async fn snapshot(addr: SocketAddr) -> Snapshot {
    let response = reqwest::get(format!("http://{addr}/snapshot")).await.unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// `POST /breakers/{name}/{action}`, with `authorization` as the header's
/// value if given: the status and the body.
pub async fn post(addr: SocketAddr, name: &str, action: &str, authorization: Option<&str>) -> (u16, String) {
    let mut request = reqwest::Client::new().post(format!("http://{addr}/breakers/{name}/{action}"));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    if status == 401 {
        assert_eq!(response.headers()["www-authenticate"], "Bearer", "a 401 names the scheme it wants");
    }
    (status, response.text().await.unwrap())
}

/// A client of `GET /events`.
pub struct Events {
    response: reqwest::Response,
    /// Received and not yet parsed.
    buffer: String,
}

impl Events {
    pub async fn connect(addr: SocketAddr) -> Self {
        let response = reqwest::get(format!("http://{addr}/events")).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Events { response, buffer: String::new() }
    }

    /// The next event, as its name and data; `None` once the stream ended.
    pub async fn next(&mut self) -> Option<(String, String)> {
        tokio::time::timeout(PATIENCE, self.read()).await.expect("no event within the test's patience")
    }

    /// The data of the next event named `name` (skipping others), parsed.
    pub async fn next_named<T: DeserializeOwned>(&mut self, name: &str) -> T {
        // The patience covers the whole search: ticks come every second, so
        // a wait per event would never run out.
        let search = async {
            loop {
                match self.read().await {
                    Some((event, data)) if event == name => return data,
                    Some(_) => {}
                    None => panic!("the stream ended before a `{name}`"),
                }
            }
        };
        let data = tokio::time::timeout(PATIENCE, search)
            .await
            .unwrap_or_else(|_| panic!("no `{name}` event within {PATIENCE:?}"));
        serde_json::from_str(&data).unwrap_or_else(|e| panic!("`{name}` data: {e}: {data}"))
    }

    async fn read(&mut self) -> Option<(String, String)> {
        loop {
            // An event is lines up to a blank line (the server writes `\n`).
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let field = |name: &str| {
                    block.lines().filter_map(|line| line.strip_prefix(name)).collect::<Vec<_>>().join("\n")
                };
                return Some((field("event: "), field("data: ")));
            }
            let chunk = self.response.chunk().await.unwrap()?;
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}
