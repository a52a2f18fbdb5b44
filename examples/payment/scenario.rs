//! The client side of the payment example: two `#[resilient]` functions,
//! the guards they share, and a run of concurrent orders with a tally of
//! what the library did.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stormproof::{Classify, ErrorClass, Registry, Rejection, resilient};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer};

use super::server::{Charge, ChargeRequest, Quote};

/// Everything a call to the payment service can fail with.
#[derive(Debug)]
pub enum ApiError {
    /// The server answered with an error status.
    Status { code: u16, class: ErrorClass },
    /// The request did not complete (connect, reset, body).
    Http(reqwest::Error),
    /// The library stopped the call (open breaker, timeout, full bulkhead).
    Rejected(Rejection),
    /// A charge ran without an idempotency key: a bug in the wiring, never
    /// papered over with a key of our own making.
    MissingIdempotencyKey,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Status { code, .. } => write!(f, "the server answered {code}"),
            ApiError::Http(e) => write!(f, "request failed: {e}"),
            ApiError::Rejected(r) => r.fmt(f),
            ApiError::MissingIdempotencyKey => {
                f.write_str("the library handed the charge no idempotency key; refusing to charge")
            }
        }
    }
}

impl std::error::Error for ApiError {}

impl Classify for ApiError {
    fn classify(&self) -> ErrorClass {
        match self {
            ApiError::Status { class, .. } => *class,
            ApiError::Http(e) => e.classify(),
            ApiError::Rejected(r) => r.classify(),
            ApiError::MissingIdempotencyKey => ErrorClass::Permanent,
        }
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> Self {
        ApiError::Rejected(r)
    }
}

impl From<reqwest::Error> for ApiError {
    fn from(e: reqwest::Error) -> Self {
        ApiError::Http(e)
    }
}

/// The payment service's client: one per process, shared by every order.
pub struct Api {
    client: reqwest::Client,
    base: String,
    /// Attempts that reached the wire, per endpoint.
    pub quote_attempts: AtomicU64,
    /// Attempts that reached the wire, per endpoint.
    pub charge_attempts: AtomicU64,
}

impl Api {
    /// A client of the service at `addr`.
    pub fn new(addr: std::net::SocketAddr) -> Self {
        Api {
            client: reqwest::Client::new(),
            base: format!("http://{addr}"),
            quote_attempts: AtomicU64::new(0),
            charge_attempts: AtomicU64::new(0),
        }
    }
}

/// Turns an error status into an `ApiError`, classified with its `Retry-After`.
fn check(response: reqwest::Response) -> Result<reqwest::Response, ApiError> {
    if response.status().is_success() {
        return Ok(response);
    }
    // Status plus Retry-After (seconds or HTTP-date), classified by the `reqwest` feature.
    let class = stormproof::http::classify_response(&response);
    Err(ApiError::Status { code: response.status().as_u16(), class })
}

/// Reads a price: idempotent, so it is simply retried.
#[resilient(
    max_attempts = 4,
    base_ms = 50,
    cap_ms = 2_000,
    attempt_timeout_ms = 300,
    breaker = "payments",
    budget = "payments",
    bulkhead = "payments"
)]
pub async fn quote(api: &Api, sku: &str) -> Result<Quote, ApiError> {
    api.quote_attempts.fetch_add(1, Ordering::Relaxed);
    // SKUs are plain ASCII tokens, so they need no URL encoding.
    let response = api.client.get(format!("{}/quote?sku={sku}", api.base)).send().await?;
    Ok(check(response)?.json().await?)
}

/// Charges an order: not idempotent, so the compiler insists on a key, and
/// every attempt sends the same `Idempotency-Key`.
#[resilient(idempotent = false, key = order_id, max_attempts = 5, base_ms = 50, cap_ms = 2_000, attempt_timeout_ms = 300, breaker = "payments", budget = "payments", bulkhead = "payments")]
pub async fn charge(api: &Api, order_id: &str, amount: u64) -> Result<Charge, ApiError> {
    api.charge_attempts.fetch_add(1, Ordering::Relaxed);
    // The key comes from the library (`key = order_id`), the same on every
    // attempt; without it a retry could charge twice, so no charge is sent.
    let key = stormproof::idempotency_key().ok_or(ApiError::MissingIdempotencyKey)?;
    let request = ChargeRequest { order_id: order_id.to_owned(), amount };
    let response = api
        .client
        .post(format!("{}/charges", api.base))
        .header("Idempotency-Key", &*key)
        .json(&request)
        .send()
        .await?;
    Ok(check(response)?.json().await?)
}

/// The guards' file: declared once, by name; every call above finds them by name.
pub const GUARDS_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/payment/stormproof.toml");

/// Declares the guards from [`GUARDS_FILE`], then checks that every guard
/// name the functions above use is declared (a typo would otherwise get a
/// breaker of its own, with the defaults).
pub fn declare_guards(registry: &Registry) -> Result<(), String> {
    registry.load_file(GUARDS_FILE).map_err(|e| e.to_string())?;
    let report = registry.check();
    if report.is_clean() { Ok(()) } else { Err(report.to_string()) }
}

/// How one order ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderOutcome {
    /// Paid.
    Charged,
    /// Not paid before the scenario's time limit.
    Lost,
    /// Stopped by an error that resubmitting cannot fix (a missing key, a
    /// request the server refuses): the message says which.
    Failed(String),
}

/// Runs one order to the end: quote, then charge. A call that fails after
/// all its retries is resubmitted a little later with the same order id (so
/// the same idempotency key), the way a job queue would; an error that a
/// resubmission would only repeat ends the order at once.
pub async fn place_order(api: &Api, order_id: String, sku: String, give_up_after: Duration) -> OrderOutcome {
    let deadline = tokio::time::Instant::now() + give_up_after;
    while tokio::time::Instant::now() < deadline {
        let paid = match quote(api, &sku).await {
            Ok(quote) => charge(api, &order_id, quote.cents).await.map(drop),
            Err(e) => Err(e),
        };
        match paid {
            Ok(()) => return OrderOutcome::Charged,
            Err(
                e @ (ApiError::MissingIdempotencyKey | ApiError::Status { class: ErrorClass::Permanent, .. }),
            ) => {
                return OrderOutcome::Failed(format!("{order_id}: {e}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    OrderOutcome::Lost
}

/// Counts what the library reported through `tracing`: retries by error
/// class and the reason of every call that gave up.
#[derive(Clone, Default)]
pub struct Tally {
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl Tally {
    /// A snapshot, keyed like `retry/transient` or `stop/budget_exhausted`.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.counts.lock().unwrap().clone()
    }

    /// One count, zero when absent.
    pub fn get(&self, key: &str) -> u64 {
        self.counts.lock().unwrap().get(key).copied().unwrap_or(0)
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    class: Option<String>,
    reason: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "class" => self.class = Some(value.to_owned()),
            "reason" => self.reason = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Tally {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != "stormproof::call" {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let key = match (fields.message.as_str(), fields.class, fields.reason) {
            ("retrying", Some(class), _) => format!("retry/{class}"),
            ("giving up", _, Some(reason)) => format!("stop/{reason}"),
            _ => return,
        };
        *self.counts.lock().unwrap().entry(key).or_default() += 1;
    }
}
