//! A payment service on loopback that fails on a schedule.
//!
//! Each fault is a spell: it starts with a request's sequence number, so it
//! comes at the same point of the run however fast the machine is, and it
//! lasts a stretch of time, as real faults do. (A spell counted in requests
//! would last as long as the breaker's probes take to use it up, a few
//! requests per open period, and the open period grows while probes fail.)

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// When the server misbehaves: spells that start with a request's sequence
/// number and last a stretch of time.
#[derive(Debug, Clone)]
pub struct FaultPlan {
    /// 503 Service Unavailable.
    pub unavailable: Spell,
    /// 429 with `Retry-After: 1` (delta-seconds).
    pub throttled_seconds: Spell,
    /// 429 with `Retry-After` as an HTTP-date one second ahead.
    pub throttled_date: Spell,
    /// Charges (numbered among charge requests only) that are made, but
    /// answered after `slow_for`: longer than the client's attempt timeout,
    /// so the client retries a charge that already happened.
    pub slow_charges: Spell,
    /// How late a slow response is.
    pub slow_for: Duration,
    /// 500 Internal Server Error: the long spell, which opens the breaker.
    pub outage: Spell,
}

/// A spell of one fault: it starts with the request numbered `from` and
/// lasts `lasting`; the request that starts it always has the fault.
#[derive(Debug, Clone)]
pub struct Spell {
    /// The sequence number of the first request with the fault.
    pub from: u64,
    /// How long from that request on every request has it.
    pub lasting: Duration,
}

impl FaultPlan {
    /// The schedule of the main example, for a few hundred orders.
    pub fn example() -> Self {
        FaultPlan {
            unavailable: spell(40, 300),
            throttled_seconds: spell(200, 100),
            throttled_date: spell(260, 100),
            slow_charges: spell(100, 150),
            slow_for: Duration::from_millis(900),
            outage: spell(450, 2_500),
        }
    }

    /// A quicker schedule for the integration test.
    pub fn small() -> Self {
        FaultPlan {
            unavailable: spell(5, 150),
            throttled_seconds: spell(60, 50),
            throttled_date: spell(75, 50),
            slow_charges: spell(10, 100),
            slow_for: Duration::from_millis(600),
            outage: spell(100, 1_200),
        }
    }
}

fn spell(from: u64, lasting_ms: u64) -> Spell {
    Spell { from, lasting: Duration::from_millis(lasting_ms) }
}

/// When a spell started, once its first request has come.
#[derive(Default)]
struct SpellClock(Mutex<Option<Instant>>);

impl SpellClock {
    /// Whether request `n` falls in `spell`, starting the spell's clock at
    /// its first request.
    fn covers(&self, spell: &Spell, n: u64) -> bool {
        let mut started = self.0.lock().unwrap();
        if n >= spell.from && started.is_none() {
            *started = Some(Instant::now());
        }
        started.is_some_and(|start| start.elapsed() < spell.lasting)
    }
}

/// What the server observed.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Charge id per idempotency key.
    by_key: Mutex<HashMap<String, Charge>>,
    /// Charges actually made, per order (more than one would be a double charge).
    charges_per_order: Mutex<HashMap<String, u32>>,
    /// The `Idempotency-Key` of every charge request, per order, in arrival
    /// order (`None`: the request carried none).
    keys_per_order: Mutex<HashMap<String, Vec<Option<String>>>>,
    /// Requests that carried a key already seen.
    pub deduplicated: AtomicU64,
    /// Requests served, all endpoints.
    pub requests: AtomicU64,
    /// Charge requests served.
    pub charge_requests: AtomicU64,
}

impl Ledger {
    /// Real charges made.
    pub fn charges(&self) -> u64 {
        self.charges_per_order.lock().unwrap().values().map(|&n| u64::from(n)).sum()
    }

    /// How often each order was charged.
    pub fn charges_per_order(&self) -> HashMap<String, u32> {
        self.charges_per_order.lock().unwrap().clone()
    }

    /// The key each charge request of each order carried, faulted requests included.
    pub fn keys_per_order(&self) -> HashMap<String, Vec<Option<String>>> {
        self.keys_per_order.lock().unwrap().clone()
    }

    /// Orders whose charge requests did not all carry the same key, or
    /// carried none: each with the keys its requests carried.
    pub fn orders_with_inconsistent_keys(&self) -> Vec<(String, Vec<Option<String>>)> {
        let mut bad: Vec<_> = self
            .keys_per_order()
            .into_iter()
            .filter(|(_, keys)| keys.iter().any(|k| k.is_none() || *k != keys[0]))
            .collect();
        bad.sort();
        bad
    }
}

/// A charge the server made.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Charge {
    /// The server's id for the charge.
    pub id: u64,
    /// The order it paid for.
    pub order_id: String,
    /// Amount in cents.
    pub amount: u64,
}

/// A charge request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChargeRequest {
    /// The order to pay for.
    pub order_id: String,
    /// Amount in cents.
    pub amount: u64,
}

/// A price quote.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Quote {
    /// The product.
    pub sku: String,
    /// Price in cents.
    pub cents: u64,
}

#[derive(Deserialize)]
struct QuoteQuery {
    sku: String,
}

struct Server {
    plan: FaultPlan,
    ledger: Arc<Ledger>,
    next_charge: AtomicU64,
    /// When each spell of the plan started.
    outage: SpellClock,
    unavailable: SpellClock,
    throttled_seconds: SpellClock,
    throttled_date: SpellClock,
    slow_charges: SpellClock,
}

/// A running server: its address and what it saw.
pub struct Running {
    /// Where it listens (127.0.0.1, an ephemeral port).
    pub addr: SocketAddr,
    /// What it observed.
    pub ledger: Arc<Ledger>,
}

/// Starts the server on 127.0.0.1 with an ephemeral port, in the background.
pub async fn start(plan: FaultPlan) -> std::io::Result<Running> {
    let ledger = Arc::new(Ledger::default());
    let state = Arc::new(Server {
        plan,
        ledger: ledger.clone(),
        next_charge: AtomicU64::new(1),
        outage: SpellClock::default(),
        unavailable: SpellClock::default(),
        throttled_seconds: SpellClock::default(),
        throttled_date: SpellClock::default(),
        slow_charges: SpellClock::default(),
    });
    let app = Router::new().route("/quote", get(quote)).route("/charges", post(charge)).with_state(state);
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        // The server lives as long as the process; an error here ends it early.
        let _ = axum::serve(listener, app).await;
    });
    Ok(Running { addr, ledger })
}

enum Fault {
    None,
    Status(StatusCode, Option<HeaderValue>),
}

impl Server {
    fn fault(&self) -> Fault {
        let n = self.ledger.requests.fetch_add(1, Ordering::SeqCst);
        let plan = &self.plan;
        // One fault per request, the first spell that covers it; a later
        // spell's clock starts only at a request no earlier spell covers, so
        // spells never overlap and each has its first request.
        let outage = || self.outage.covers(&plan.outage, n);
        let unavailable = || self.unavailable.covers(&plan.unavailable, n);
        let throttled_seconds = || self.throttled_seconds.covers(&plan.throttled_seconds, n);
        let throttled_date = || self.throttled_date.covers(&plan.throttled_date, n);
        if outage() {
            Fault::Status(StatusCode::INTERNAL_SERVER_ERROR, None)
        } else if unavailable() {
            Fault::Status(StatusCode::SERVICE_UNAVAILABLE, None)
        } else if throttled_seconds() {
            Fault::Status(StatusCode::TOO_MANY_REQUESTS, Some(HeaderValue::from_static("1")))
        } else if throttled_date() {
            let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(1));
            Fault::Status(StatusCode::TOO_MANY_REQUESTS, HeaderValue::from_str(&date).ok())
        } else {
            Fault::None
        }
    }
}

fn failure(status: StatusCode, retry_after: Option<HeaderValue>) -> Response {
    let mut response = (status, status.canonical_reason().unwrap_or("error")).into_response();
    if let Some(value) = retry_after {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

async fn quote(State(server): State<Arc<Server>>, Query(query): Query<QuoteQuery>) -> Response {
    match server.fault() {
        Fault::Status(status, retry_after) => failure(status, retry_after),
        Fault::None => Json(Quote { cents: price(&query.sku), sku: query.sku }).into_response(),
    }
}

fn price(sku: &str) -> u64 {
    100 + sku.bytes().map(u64::from).sum::<u64>() % 900
}

async fn charge(
    State(server): State<Arc<Server>>,
    headers: HeaderMap,
    Json(request): Json<ChargeRequest>,
) -> Response {
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(str::to_owned);
    // Every request is recorded, faulted ones too: all attempts of one order
    // must carry the same key.
    server
        .ledger
        .keys_per_order
        .lock()
        .unwrap()
        .entry(request.order_id.clone())
        .or_default()
        .push(key.clone());
    if let Fault::Status(status, retry_after) = server.fault() {
        return failure(status, retry_after);
    }
    let seq = server.ledger.charge_requests.fetch_add(1, Ordering::SeqCst);
    let slow = server.slow_charges.covers(&server.plan.slow_charges, seq);
    let Some(key) = key else {
        return (StatusCode::BAD_REQUEST, "an Idempotency-Key header is required").into_response();
    };
    let charge = {
        let mut by_key = server.ledger.by_key.lock().unwrap();
        match by_key.get(&key) {
            Some(existing) => {
                server.ledger.deduplicated.fetch_add(1, Ordering::SeqCst);
                existing.clone()
            }
            None => {
                let charge = Charge {
                    id: server.next_charge.fetch_add(1, Ordering::SeqCst),
                    order_id: request.order_id.clone(),
                    amount: request.amount,
                };
                *server.ledger.charges_per_order.lock().unwrap().entry(request.order_id).or_default() += 1;
                by_key.insert(key, charge.clone());
                charge
            }
        }
    };
    // A slow response arrives after the charge was made: the client's retry
    // must not charge again.
    if slow {
        tokio::time::sleep(server.plan.slow_for).await;
    }
    (StatusCode::CREATED, Json(charge)).into_response()
}
