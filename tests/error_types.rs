//! The error types services already return work as they are, with the
//! attribute and with `Policy::run`: retried when transient, returned at
//! once when permanent, and an open breaker's rejection recoverable from
//! what the caller gets. Plus `stormproof::Error<E>` for foreign types,
//! `classify = path`, and `ErrorClass::Conflict`.

use std::error::Error as StdError;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use stormproof::{
    Classify, Error, ErrorClass, Policy, Registry, Rejection,
    breaker::{BreakerConfig, BreakerState},
    budget::TokenBucket,
    resilient,
};

type BoxError = Box<dyn StdError + Send + Sync>;

/// A registry whose breaker `dep` is already open.
fn with_open_breaker() -> Registry {
    let registry = Registry::new();
    registry.declare_breaker("dep", BreakerConfig { failure_threshold: 1, ..Default::default() }).unwrap();
    registry.breaker("dep").unwrap().try_acquire().unwrap().record(stormproof::breaker::Outcome::Failure);
    registry
}

fn circuit_open() -> Rejection {
    Rejection::CircuitOpen { breaker: "dep".into() }
}

// ---------------------------------------------------------------------------
// Box<dyn Error + Send + Sync>

#[resilient(max_attempts = 3, base_ms = 1, breaker = "dep")]
async fn boxed(calls: &AtomicU32, fail_with: fn() -> BoxError) -> Result<u32, BoxError> {
    if calls.fetch_add(1, Ordering::SeqCst) < 2 { Err(fail_with()) } else { Ok(7) }
}

#[tokio::test(start_paused = true)]
async fn a_boxed_error_is_retried_when_transient_and_returned_when_permanent() {
    let registry = Registry::new();
    let calls = AtomicU32::new(0);
    let unknown = registry.scope(boxed(&calls, || "who knows".into())).await;
    assert_eq!((unknown.unwrap(), calls.load(Ordering::SeqCst)), (7, 3), "unknown errors are transient");
    let calls = AtomicU32::new(0);
    let not_found =
        registry.scope(boxed(&calls, || Box::new(std::io::Error::from(std::io::ErrorKind::NotFound)))).await;
    assert_eq!(
        not_found.unwrap_err().to_string(),
        std::io::Error::from(std::io::ErrorKind::NotFound).to_string()
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1, "a permanent io::Error in the box is not retried");
}

#[tokio::test(start_paused = true)]
async fn a_boxed_error_carries_an_open_breakers_rejection() {
    let calls = AtomicU32::new(0);
    let error = with_open_breaker().scope(boxed(&calls, || "down".into())).await.unwrap_err();
    assert_eq!(error.downcast_ref::<Rejection>(), Some(&circuit_open()));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

// ---------------------------------------------------------------------------
// anyhow::Error

#[resilient(max_attempts = 3, base_ms = 1, breaker = "dep")]
async fn anyhow_call(calls: &AtomicU32, permanent: bool) -> anyhow::Result<u32> {
    if calls.fetch_add(1, Ordering::SeqCst) < 2 {
        let io = std::io::Error::from(if permanent {
            std::io::ErrorKind::InvalidData
        } else {
            std::io::ErrorKind::TimedOut
        });
        return Err(anyhow::Error::from(io).context("reading the ledger"));
    }
    Ok(9)
}

#[tokio::test(start_paused = true)]
async fn anyhow_errors_are_classified_by_their_chain() {
    let registry = Registry::new();
    let calls = AtomicU32::new(0);
    assert_eq!(registry.scope(anyhow_call(&calls, false)).await.unwrap(), 9);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let calls = AtomicU32::new(0);
    let error = registry.scope(anyhow_call(&calls, true)).await.unwrap_err();
    assert_eq!(error.to_string(), "reading the ledger");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let calls = AtomicU32::new(0);
    let open = with_open_breaker().scope(anyhow_call(&calls, false)).await.unwrap_err();
    assert_eq!(open.downcast_ref::<Rejection>(), Some(&circuit_open()));
}

#[tokio::test(start_paused = true)]
async fn policy_run_takes_anyhow_errors_as_they_are() {
    let policy = Policy::builder().base(Duration::from_millis(1)).build().unwrap();
    let mut calls = 0;
    let result: anyhow::Result<u32> = policy
        .run(|| {
            calls += 1;
            let call = calls;
            async move { if call < 3 { Err(anyhow::anyhow!("flaky")) } else { Ok(call) } }
        })
        .await;
    assert_eq!(result.unwrap(), 3);
}

// ---------------------------------------------------------------------------
// std::io::Error

#[resilient(max_attempts = 3, base_ms = 1, breaker = "dep", attempt_timeout_ms = 10)]
async fn io_call(calls: &AtomicU32, kind: std::io::ErrorKind) -> std::io::Result<u32> {
    if calls.fetch_add(1, Ordering::SeqCst) < 2 { Err(kind.into()) } else { Ok(5) }
}

#[tokio::test(start_paused = true)]
async fn io_errors_work_and_carry_a_rejection_that_keeps_its_class() {
    let registry = Registry::new();
    let calls = AtomicU32::new(0);
    assert_eq!(registry.scope(io_call(&calls, std::io::ErrorKind::ConnectionReset)).await.unwrap(), 5);
    let calls = AtomicU32::new(0);
    let denied = registry.scope(io_call(&calls, std::io::ErrorKind::PermissionDenied)).await.unwrap_err();
    assert_eq!((denied.kind(), calls.load(Ordering::SeqCst)), (std::io::ErrorKind::PermissionDenied, 1));
    let open =
        with_open_breaker().scope(io_call(&AtomicU32::new(0), std::io::ErrorKind::ConnectionReset)).await;
    let open = open.unwrap_err();
    assert_eq!(open.get_ref().and_then(|e| e.downcast_ref::<Rejection>()), Some(&circuit_open()));
    assert_eq!(open.classify(), ErrorClass::Permanent, "the rejection's class, not the kind's");
}

// ---------------------------------------------------------------------------
// tonic::Status

#[resilient(max_attempts = 3, base_ms = 1, breaker = "dep")]
async fn grpc_call(calls: &AtomicU32, failure: fn() -> tonic::Status) -> Result<u32, tonic::Status> {
    if calls.fetch_add(1, Ordering::SeqCst) < 2 { Err(failure()) } else { Ok(3) }
}

#[tokio::test(start_paused = true)]
async fn tonic_statuses_are_classified_by_code_and_pushback() {
    let registry = Registry::new();
    let calls = AtomicU32::new(0);
    assert_eq!(registry.scope(grpc_call(&calls, || tonic::Status::unavailable("down"))).await.unwrap(), 3);
    let calls = AtomicU32::new(0);
    let missing = registry.scope(grpc_call(&calls, || tonic::Status::not_found("no"))).await.unwrap_err();
    assert_eq!((missing.code(), calls.load(Ordering::SeqCst)), (tonic::Code::NotFound, 1));
    // A pushback of 2 s makes the retry wait 2 s, past our 1 ms base.
    let calls = AtomicU32::new(0);
    let start = tokio::time::Instant::now();
    let pushed_back = || {
        let mut status = tonic::Status::resource_exhausted("busy");
        status.metadata_mut().insert("grpc-retry-pushback-ms", "2000".parse().unwrap());
        status
    };
    assert_eq!(registry.scope(grpc_call(&calls, pushed_back)).await.unwrap(), 3);
    assert!(start.elapsed() >= Duration::from_secs(4), "two waits of at least 2 s: {:?}", start.elapsed());
    let calls = AtomicU32::new(0);
    let refused = || {
        let mut status = tonic::Status::resource_exhausted("go away");
        status.metadata_mut().insert("grpc-retry-pushback-ms", "-1".parse().unwrap());
        status
    };
    registry.scope(grpc_call(&calls, refused)).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1, "a negative pushback means: do not retry");
    let open =
        with_open_breaker().scope(grpc_call(&AtomicU32::new(0), || tonic::Status::unavailable(""))).await;
    let open = open.unwrap_err();
    assert_eq!(open.code(), tonic::Code::Unavailable);
    assert_eq!(open.source().and_then(|e| e.downcast_ref::<Rejection>()), Some(&circuit_open()));
}

// ---------------------------------------------------------------------------
// stormproof::Error<reqwest::Error>

/// A loopback port nothing listens on: connecting is refused at once.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[resilient(max_attempts = 3, base_ms = 1, breaker = "dep")]
async fn http_call(url: String, calls: &AtomicU32) -> Result<String, Error<reqwest::Error>> {
    calls.fetch_add(1, Ordering::SeqCst);
    let body = reqwest::get(&url).await?.text().await?;
    Ok(body)
}

#[tokio::test]
async fn a_foreign_error_type_works_through_resilient_error() {
    let registry = Registry::new();
    let calls = AtomicU32::new(0);
    let refused = registry.scope(http_call(format!("http://127.0.0.1:{}/", closed_port()), &calls)).await;
    let Err(Error::Inner(error)) = refused else { panic!("{refused:?}") };
    assert!(error.is_connect());
    assert_eq!(calls.load(Ordering::SeqCst), 3, "a refused connection is transient");
    let calls = AtomicU32::new(0);
    let bad_url = registry.scope(http_call("http://[::1".to_owned(), &calls)).await;
    assert!(matches!(bad_url, Err(Error::Inner(ref e)) if e.is_builder()), "{bad_url:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "a malformed request is permanent");
    let open =
        with_open_breaker().scope(http_call("http://127.0.0.1:1/".to_owned(), &AtomicU32::new(0))).await;
    assert_eq!(open.unwrap_err().rejection(), Some(&circuit_open()));
}

/// A server on 127.0.0.1 whose first `broken` answers promise 100 bytes of
/// body, send 10 and close the connection; later answers are whole: `7`
/// (or `seven` when `not_json`). It counts the requests it reads.
async fn cut_body_server(broken: u32, not_json: bool) -> (String, std::sync::Arc<AtomicU32>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let served = std::sync::Arc::new(AtomicU32::new(0));
    let count = served.clone();
    tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            let count = count.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    if socket.readable().await.is_err() {
                        return;
                    }
                    match socket.try_read(&mut buf) {
                        Ok(0) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => return,
                    }
                }
                let reply: &[u8] = if count.fetch_add(1, Ordering::SeqCst) < broken {
                    b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\nconnection: close\r\n\r\n0123456789"
                } else if not_json {
                    b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nseven"
                } else {
                    b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\nconnection: close\r\n\r\n7"
                };
                let mut reply = reply;
                while !reply.is_empty() {
                    if socket.writable().await.is_err() {
                        return;
                    }
                    match socket.try_write(reply) {
                        Ok(n) => reply = &reply[n..],
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => return,
                    }
                }
                // Dropped: the connection closes, mid-body for a broken answer.
            });
        }
    });
    (url, served)
}

#[resilient(max_attempts = 3, base_ms = 1)]
async fn http_json(url: String) -> Result<u32, Error<reqwest::Error>> {
    Ok(reqwest::get(&url).await?.json().await?)
}

/// reqwest reports a body that broke off in transit as a decode error
/// around a body error, as it does a body that is not JSON: the first is
/// a network failure the next attempt may not meet, the second is not.
#[tokio::test]
async fn a_response_body_cut_off_in_transit_is_transient_and_one_that_does_not_parse_is_permanent() {
    let (url, served) = cut_body_server(2, false).await;
    let cut = reqwest::get(&url).await.unwrap().text().await.unwrap_err();
    assert!(cut.is_decode(), "reqwest's kind for a failed body read: {cut:?}");
    assert_eq!(cut.classify(), ErrorClass::Transient, "{cut:?}");
    assert_eq!(http_json(url).await.unwrap(), 7, "the whole answer, on the retry");
    assert_eq!(served.load(Ordering::SeqCst), 3);

    let (url, served) = cut_body_server(0, true).await;
    let Err(Error::Inner(not_json)) = http_json(url).await else { panic!("`seven` is not a u32") };
    assert!(not_json.is_decode(), "{not_json:?}");
    assert_eq!(not_json.classify(), ErrorClass::Permanent);
    assert_eq!(served.load(Ordering::SeqCst), 1, "a body that does not parse is not retried");
}

// ---------------------------------------------------------------------------
// classify = path

/// An error of someone else's, with no `Classify` and no `From<Rejection>`.
#[derive(Debug, PartialEq)]
struct Foreign {
    code: u16,
}

fn classify_foreign(error: &Error<Foreign>) -> ErrorClass {
    match error {
        // `Stopped` holds an attempt's error too (the loop marks one only as a call ends).
        Error::Inner(foreign) | Error::Stopped(foreign, _) => ErrorClass::from_http(foreign.code, None),
        Error::Rejected(rejection) => rejection.classify(),
    }
}

#[resilient(max_attempts = 3, base_ms = 1, classify = classify_foreign)]
async fn foreign_call(calls: &AtomicU32, code: u16) -> Result<u32, Error<Foreign>> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Foreign { code })?
}

/// An error enum that carries rejections but leaves classification to a function.
#[derive(Debug, PartialEq)]
enum Store {
    Busy,
    Gone,
    Rejected(Rejection),
}

impl From<Rejection> for Store {
    fn from(rejection: Rejection) -> Self {
        Store::Rejected(rejection)
    }
}

fn classify_store(error: &Store) -> ErrorClass {
    match error {
        Store::Busy => ErrorClass::Transient,
        Store::Gone => ErrorClass::Permanent,
        Store::Rejected(rejection) => rejection.classify(),
    }
}

#[resilient(max_attempts = 4, base_ms = 1, classify = classify_store, breaker = "dep")]
async fn store_call(calls: &AtomicU32, error: fn() -> Store) -> Result<u32, Store> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(error())
}

#[tokio::test(start_paused = true)]
async fn classify_names_a_function_for_types_without_classify() {
    let registry = Registry::new();
    let calls = AtomicU32::new(0);
    assert_eq!(registry.scope(foreign_call(&calls, 503)).await, Err(Error::Inner(Foreign { code: 503 })));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let calls = AtomicU32::new(0);
    assert_eq!(registry.scope(foreign_call(&calls, 404)).await, Err(Error::Inner(Foreign { code: 404 })));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let calls = AtomicU32::new(0);
    assert_eq!(registry.scope(store_call(&calls, || Store::Busy)).await, Err(Store::Busy));
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    let calls = AtomicU32::new(0);
    assert_eq!(registry.scope(store_call(&calls, || Store::Gone)).await, Err(Store::Gone));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let open = with_open_breaker().scope(store_call(&AtomicU32::new(0), || Store::Busy)).await;
    assert_eq!(open, Err(Store::Rejected(circuit_open())));
}

#[tokio::test(start_paused = true)]
async fn the_policy_takes_a_classification_function_too() {
    let policy = Policy::builder().base(Duration::from_millis(1)).build().unwrap();
    let mut calls = 0;
    let result = policy
        .classify(classify_store)
        .run(|| {
            calls += 1;
            async { Err::<(), _>(Store::Busy) }
        })
        .await;
    assert_eq!((result, calls), (Err(Store::Busy), 4));
    let mut calls = 0;
    let foreign = policy
        .classify_inner(|foreign: &Foreign| ErrorClass::from_http(foreign.code, None))
        .run(|| {
            calls += 1;
            async { Err::<(), Error<Foreign>>(Foreign { code: 400 }.into()) }
        })
        .await;
    assert_eq!((foreign, calls), (Err(Error::Inner(Foreign { code: 400 })), 1));
}

// ---------------------------------------------------------------------------
// Conflict

#[derive(Debug, PartialEq)]
enum Write {
    Stale,
    Rejected(Rejection),
}

impl Classify for Write {
    fn classify(&self) -> ErrorClass {
        match self {
            Write::Stale => ErrorClass::Conflict,
            Write::Rejected(rejection) => rejection.classify(),
        }
    }
}

impl From<Rejection> for Write {
    fn from(rejection: Rejection) -> Self {
        Write::Rejected(rejection)
    }
}

#[resilient(max_attempts = 5, base_ms = 1, breaker = "row", budget = "row")]
async fn write_row(calls: &AtomicU32) -> Result<(), Write> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Write::Stale)
}

#[tokio::test(start_paused = true)]
async fn a_conflict_is_retried_charged_to_the_budget_and_never_opens_the_breaker() {
    let registry = Registry::new();
    registry.declare_breaker("row", BreakerConfig { failure_threshold: 1, ..Default::default() }).unwrap();
    registry.declare_budget("row", TokenBucket { capacity: 10, ..Default::default() }).unwrap();
    let calls = AtomicU32::new(0);
    assert_eq!(registry.scope(write_row(&calls)).await, Err(Write::Stale));
    assert_eq!(calls.load(Ordering::SeqCst), 5, "retried up to max_attempts");
    assert_eq!(registry.breaker("row").unwrap().state(), BreakerState::Closed, "threshold 1, yet closed");
    assert_eq!(registry.budget("row").unwrap().available(), 6, "four retries, four tokens");
}
