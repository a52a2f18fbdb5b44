//! A hyper client inside a tower stack, made resilient by one layer: the
//! same policy machinery and the same named breaker (`payments`, as in the
//! payment example) as `#[resilient]` functions. A loopback axum server
//! misbehaves on purpose (503s, a 429 with `Retry-After`, a charge whose
//! answer is lost, an outage); the client prints what each request took.
//!
//! ```sh
//! cargo run --example tower --features tower
//! ```

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use stormproof::http::tower::{BoxError, ResilientLayer};
use stormproof::{Policy, Rejection, breaker::BreakerConfig, http::Attempts, registry};
use tower::{ServiceBuilder, ServiceExt};

/// What the server counts.
#[derive(Default)]
struct Faults {
    quotes: AtomicU32,
    rates: AtomicU32,
    /// Charge id per `Idempotency-Key`.
    charges: Mutex<HashMap<String, u32>>,
    charges_made: AtomicU32,
    deduplicated: AtomicU32,
}

/// 503 twice, then the price.
async fn quote(State(f): State<Arc<Faults>>, Path(sku): Path<String>) -> (StatusCode, String) {
    match f.quotes.fetch_add(1, Ordering::SeqCst) {
        0 | 1 => (StatusCode::SERVICE_UNAVAILABLE, "busy".into()),
        _ => (StatusCode::OK, format!("{sku}: 1700 cents")),
    }
}

/// 429 with `Retry-After: 1` once, then the rates.
async fn rates(State(f): State<Arc<Faults>>) -> (StatusCode, HeaderMap, &'static str) {
    let mut headers = HeaderMap::new();
    if f.rates.fetch_add(1, Ordering::SeqCst) == 0 {
        headers.insert("retry-after", "1".parse().unwrap());
        return (StatusCode::TOO_MANY_REQUESTS, headers, "slow down");
    }
    (StatusCode::OK, headers, "EUR/USD 1.08")
}

/// Charges once per `Idempotency-Key`; the answer to a key's first charge
/// is lost (a 503 after the charge is made). Without a key, every request
/// charges, and fails the same way.
async fn charge(State(f): State<Arc<Faults>>, headers: HeaderMap) -> (StatusCode, String) {
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let Some(key) = key else {
        f.charges_made.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::SERVICE_UNAVAILABLE, "charged, but the answer was lost".into());
    };
    let mut charges = f.charges.lock().unwrap();
    if let Some(id) = charges.get(&key) {
        f.deduplicated.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::OK, format!("charge {id} (already made)"));
    }
    let id = f.charges_made.fetch_add(1, Ordering::SeqCst) + 1;
    charges.insert(key, id);
    (StatusCode::SERVICE_UNAVAILABLE, "charged, but the answer was lost".into())
}

/// Always down.
async fn outage() -> StatusCode {
    StatusCode::INTERNAL_SERVER_ERROR
}

fn request(method: Method, url: String, key: Option<&str>) -> Request<Full<Bytes>> {
    let mut builder = Request::builder().method(method).uri(url);
    if let Some(key) = key {
        builder = builder.header("Idempotency-Key", key);
    }
    builder.body(Full::new(Bytes::from_static(b"{\"amount\":1700}"))).unwrap()
}

/// One line per request: what came back, after how many attempts, how long.
fn report<B>(
    what: &str,
    result: &Result<Response<B>, BoxError>,
    took: Duration,
) -> Option<(StatusCode, u32)> {
    match result {
        Ok(response) => {
            let attempts = response.extensions().get::<Attempts>().map_or(0, |a| a.get());
            println!("{what:<36} {:>6} {attempts:>8} {:>7} ms", response.status().as_u16(), took.as_millis());
            Some((response.status(), attempts))
        }
        Err(error) => {
            match error.downcast_ref::<Rejection>() {
                Some(rejection) => println!("{what:<36} rejected: {rejection}"),
                None => println!("{what:<36} error: {error}"),
            }
            None
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<ExitCode, BoxError> {
    let faults = Arc::new(Faults::default());
    let app = axum::Router::new()
        .route("/quote/{sku}", get(quote))
        .route("/rates", get(rates))
        .route("/charges", post(charge))
        .route("/outage", get(outage))
        .with_state(faults.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    println!("loopback service on {base}\n");

    // The breaker of the payment example, by name: a service using both
    // the attribute and this layer shares one breaker per dependency.
    let breaker =
        BreakerConfig { failure_threshold: 5, open_for: Duration::from_secs(30), ..Default::default() };
    registry().declare_breaker("payments", breaker)?;
    let policy = Policy::builder()
        .max_attempts(4)
        .base(Duration::from_millis(50))
        .cap(Duration::from_secs(2))
        .attempt_timeout(Duration::from_millis(500))
        .breaker("payments")
        .build()?;
    let client = ServiceBuilder::new()
        .layer(ResilientLayer::new(policy))
        .service(Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>());

    let mut checks = Vec::new();
    let send = async |what: &str, request: Request<Full<Bytes>>| {
        let started = Instant::now();
        let result = client.clone().oneshot(request).await;
        let line = report(what, &result, started.elapsed());
        if let Ok(response) = result {
            let _ = response.into_body().collect().await;
        }
        line
    };

    println!("{:<36} {:>6} {:>8} {:>10}", "request", "status", "attempts", "time");
    let quoted =
        send("GET /quote/A-1 (503, 503, 200)", request(Method::GET, format!("{base}/quote/A-1"), None)).await;
    checks.push(("the GET was retried through two 503s", quoted == Some((StatusCode::OK, 3))));
    let rated =
        send("GET /rates (429 Retry-After: 1)", request(Method::GET, format!("{base}/rates"), None)).await;
    checks.push(("the 429 was retried after its Retry-After", rated == Some((StatusCode::OK, 2))));
    let keyless =
        send("POST /charges without a key", request(Method::POST, format!("{base}/charges"), None)).await;
    checks.push((
        "a POST without a key got one attempt",
        keyless == Some((StatusCode::SERVICE_UNAVAILABLE, 1)),
    ));
    let keyed = send(
        "POST /charges Idempotency-Key: o-17",
        request(Method::POST, format!("{base}/charges"), Some("o-17")),
    )
    .await;
    checks.push(("the keyed POST was retried", keyed == Some((StatusCode::OK, 2))));
    for _ in 0..3 {
        send("GET /outage (500s)", request(Method::GET, format!("{base}/outage"), None)).await;
    }
    let state = registry().breaker("payments").map(|b| b.state());
    if let Some(state) = state {
        println!("breaker `payments` is now {state}");
    }
    checks.push(("the outage opened the breaker", state == Some(stormproof::breaker::BreakerState::Open)));
    let after =
        send("GET /quote/A-2 (breaker open)", request(Method::GET, format!("{base}/quote/A-2"), None)).await;
    checks.push(("the open breaker turned the next call away", after.is_none()));
    println!(
        "\nserver: {} charges made, {} retried charge answered from the ledger",
        faults.charges_made.load(Ordering::SeqCst),
        faults.deduplicated.load(Ordering::SeqCst),
    );
    checks.push(("the keyed charge was made once", faults.deduplicated.load(Ordering::SeqCst) == 1));

    let failed: Vec<_> = checks.iter().filter(|(_, ok)| !ok).map(|(what, _)| *what).collect();
    if failed.is_empty() {
        println!("\nverdict: every rule held");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("\nverdict: FAILED: {}", failed.join("; "));
        Ok(ExitCode::FAILURE)
    }
}
