//! `ResilientLayer` around hyper-util's client, against a real loopback
//! server (`tests/loopback`): retries through 503s, the last response when
//! every attempt fails, `Retry-After`, idempotency by method and key, a
//! streaming body's single attempt, a breaker shared with an annotated
//! function, the attempts in the response's extensions; and, around
//! in-process services, tower's readiness conventions, timeouts, guards
//! and `ResilientLayer::cloning`.
//!
//! Real sockets run on the real clock, with backoff waits of 1-4 ms, except
//! where a wait is the point: the `Retry-After` test runs on tokio's paused
//! clock (no timer but the library's own is armed, so the clock only jumps
//! over its wait), and the in-process tests too.

mod loopback;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use loopback::{Payload, Server, status, throttled, unavailable};
use stormproof::http::tower::{BoxError, ResilientLayer};
use stormproof::{
    Jitter, Policy, PolicyBuilder, Registry, Rejection,
    breaker::{BreakerConfig, BreakerState},
    budget::{RetryThrottling, TokenBucket},
    bulkhead::{AdaptiveLimit, BulkheadConfig, LimitCore},
    http::Attempts,
    rate_limit::RateLimitConfig,
    resilient,
};
use tower::{Layer, Service, ServiceBuilder, ServiceExt, service_fn};

type Body = Full<Bytes>;
type HttpClient = Client<HttpConnector, Body>;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Waits of 1, 2, 4, 4... ms: real sockets, real clock, short tests.
// Named after each caller's line (`#[track_caller]`), so that the tests
// running at once in this process do not share its own breaker and budget.
#[track_caller]
fn policy(max_attempts: u32) -> PolicyBuilder {
    Policy::builder().max_attempts(max_attempts).base(ms(1)).cap(ms(4)).jitter(Jitter::None)
}

fn request(method: Method, url: &str, key: Option<&str>, body: &'static str) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(url);
    if let Some(key) = key {
        builder = builder.header("Idempotency-Key", key);
    }
    builder.body(Full::new(Bytes::from_static(body.as_bytes()))).unwrap()
}

fn get(url: &str) -> Request<Body> {
    request(Method::GET, url, None, "")
}

fn attempts<B>(response: &Response<B>) -> u32 {
    response.extensions().get::<Attempts>().expect("the layer records the attempts").get()
}

async fn text<B: http_body::Body>(response: Response<B>) -> String
where
    B::Error: std::fmt::Debug,
{
    String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
}

#[tokio::test]
async fn a_get_is_retried_through_503s_until_a_200() {
    let server = Server::start(&[("/stock", &[status(503), status(503)])]).await;
    let service = ResilientLayer::new(policy(4).build().unwrap()).layer(client());
    let response = service.oneshot(get(&server.url("/stock"))).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(attempts(&response), 3);
    assert_eq!(response.extensions().get::<Attempts>().unwrap().resends(), 2, "http.request.resend_count");
    assert_eq!(text(response).await, "answer 3");
    assert_eq!(server.hits("/stock"), 3);
}

#[tokio::test]
async fn when_every_attempt_fails_the_caller_gets_the_last_response() {
    let server = Server::start(&[("/down", &[status(503), status(502), status(500), status(503)])]).await;
    let service = ResilientLayer::new(policy(3).build().unwrap()).layer(client());
    let response =
        service.oneshot(get(&server.url("/down"))).await.expect("a failed response is not an error");
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR, "the third answer, not the first");
    assert_eq!(attempts(&response), 3);
    assert_eq!(text(response).await, "answer 3");
    assert_eq!(server.hits("/down"), 3);
}

/// The failed response before a retry is read to its end first, so that
/// hyper-util's pool gets its connection back and the retry goes on it;
/// a multi-threaded runtime, where the pool gets it back from another
/// thread, as in most services.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_reuses_the_connection_of_the_failed_response_before_it() {
    for payload in [Payload::Chunked(4096), Payload::Sized(32 * 1024)] {
        let failed = status(503).with(payload);
        let server = Server::start(&[("/stock", &[failed, failed])]).await;
        let service = ResilientLayer::new(policy(4).build().unwrap()).layer(client());
        let response = service.oneshot(get(&server.url("/stock"))).await.unwrap();
        assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 3), "{payload:?}");
        assert_eq!(text(response).await, "answer 3");
        assert_eq!(server.connections(), 1, "{payload:?}: three attempts on one connection");
    }
}

/// The wait between attempts is the policy's, exactly: the failed
/// response's body is read, and the pause that lets its connection go back
/// to the pool is taken, inside the wait, not after it. On the paused
/// clock, with a 10 ms backoff and no jitter, the server sees the attempts
/// at 0, 10 and 20 ms (it saw them at 0, 11 and 22: the 1 ms pause was
/// added to each wait), and the drained connection still carries them all.
#[tokio::test(start_paused = true)]
async fn the_attempts_go_out_when_the_backoff_says_with_the_pause_for_the_pool_inside_it() {
    let server = Server::start(&[("/stock", &[status(503), status(503)])]).await;
    let policy = Policy::builder().max_attempts(3).base(ms(10)).cap(ms(10)).jitter(Jitter::None);
    let service = ResilientLayer::new(policy.build().unwrap()).layer(client());
    let response = service.oneshot(get(&server.url("/stock"))).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 3));
    let seen = server.seen("/stock");
    let sent: Vec<_> = seen.iter().map(|seen_| seen_.at - seen[0].at).collect();
    assert_eq!(sent, [ms(0), ms(10), ms(20)]);
    assert_eq!(server.connections(), 1, "each drained connection carried the retry after it");
}

#[tokio::test]
async fn a_permanent_status_is_returned_at_once() {
    let server = Server::start(&[("/missing", &[status(404), status(404)])]).await;
    let service = ResilientLayer::new(policy(4).build().unwrap()).layer(client());
    let response = service.oneshot(get(&server.url("/missing"))).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::NOT_FOUND, 1));
    assert_eq!(server.hits("/missing"), 1);
}

/// A name that does not resolve fails in hyper-util's connector: a connect
/// error, transient as through reqwest (whose `is_connect()` asks this same
/// client), so each attempt looks the name up again. By its cause alone it
/// would be permanent: std reports a failed lookup as an `io::Error` of no
/// known kind. The resolver fails as the system's does for a `.invalid`
/// name (RFC 6761), without asking one: no network is needed.
#[cfg(feature = "hyper-util")]
#[tokio::test]
async fn a_name_that_does_not_resolve_is_a_transient_connect_error() {
    use hyper_util::client::legacy::connect::dns::Name;
    use stormproof::{Classify, ErrorClass};

    let lookups = Arc::new(AtomicU32::new(0));
    let counter = lookups.clone();
    let resolver = service_fn(move |name: Name| {
        counter.fetch_add(1, Ordering::SeqCst);
        let failed = std::io::Error::other(format!("failed to lookup address information: {name}"));
        std::future::ready(Err::<std::iter::Empty<std::net::SocketAddr>, _>(failed))
    });
    let client: Client<_, Body> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new_with_resolver(resolver));
    let service = ResilientLayer::new(policy(3).build().unwrap()).layer(client);
    let error = service.oneshot(get("http://inventory.invalid/stock")).await.unwrap_err();
    let failed =
        error.downcast_ref::<hyper_util::client::legacy::Error>().expect("the client's error, boxed");
    assert!(failed.is_connect(), "{failed:?}");
    assert_eq!(error.classify(), ErrorClass::Transient);
    assert_eq!(lookups.load(Ordering::SeqCst), 3, "every attempt was made");
}

/// On the paused clock the only timer is the library's wait, so the
/// server sees the retry exactly `Retry-After` later (the backoff alone
/// would wait 1 ms).
#[tokio::test(start_paused = true)]
async fn a_429_is_retried_after_its_retry_after() {
    let server = Server::start(&[("/limited", &[throttled("1")])]).await;
    let service = ResilientLayer::new(policy(3).build().unwrap()).layer(client());
    let response = service.oneshot(get(&server.url("/limited"))).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2));
    let seen = server.seen("/limited");
    let waited = seen[1].at - seen[0].at;
    assert!(waited >= Duration::from_secs(1), "waited {waited:?}, less than Retry-After: 1");
    assert!(waited < Duration::from_secs(1) + ms(10), "waited {waited:?}: the backoff adds 1 ms at most");
}

/// A `Retry-After` a proxy merged (`1, 1`), or sent as two lines, is one
/// list of waits: the call waits the longest. (Before, the merged value
/// did not parse, and the retry came after the 1 ms backoff; of two lines
/// only the first was read.)
#[tokio::test(start_paused = true)]
async fn a_retry_after_merged_by_a_proxy_or_sent_twice_is_waited_for() {
    let server = Server::start(&[
        ("/merged", &[throttled("1, 1")]),
        ("/twice", &[throttled("1\n2")]),
        ("/spoilt", &[throttled("2\nsoon")]),
    ])
    .await;
    let service = ResilientLayer::new(policy(3).build().unwrap()).layer(client());
    for (path, wait) in
        [("/merged", Duration::from_secs(1)), ("/twice", Duration::from_secs(2)), ("/spoilt", ms(1))]
    {
        let response = service.clone().oneshot(get(&server.url(path))).await.unwrap();
        assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2), "{path}");
        let seen = server.seen(path);
        let waited = seen[1].at - seen[0].at;
        assert!(waited >= wait && waited < wait + ms(10), "{path}: waited {waited:?}, not {wait:?}");
    }
}

/// A 503 that says when to come back is waited for as a 429 is (RFC 9110
/// gives `Retry-After` that meaning there too); a 503 without one is
/// retried after the backoff alone.
#[tokio::test(start_paused = true)]
async fn a_503_is_retried_after_its_retry_after() {
    let server = Server::start(&[("/maintenance", &[unavailable("2")]), ("/down", &[status(503)])]).await;
    let service = ResilientLayer::new(policy(3).build().unwrap()).layer(client());
    let response = service.clone().oneshot(get(&server.url("/maintenance"))).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2));
    let seen = server.seen("/maintenance");
    let waited = seen[1].at - seen[0].at;
    assert!(waited >= Duration::from_secs(2), "waited {waited:?}, less than Retry-After: 2");
    assert!(waited < Duration::from_secs(2) + ms(10), "waited {waited:?}: the backoff adds 1 ms at most");
    let response = service.oneshot(get(&server.url("/down"))).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2));
    let seen = server.seen("/down");
    assert!(seen[1].at - seen[0].at < ms(10), "the backoff alone");
}

/// Real clock, and nothing that depends on it: a `Retry-After` the
/// deadline cannot accommodate ends the call at once with the 429 (had the
/// header been ignored, the retry after 1 ms would have got the 200); an
/// unparseable one is ignored and the 429 retried.
#[tokio::test]
async fn a_retry_after_past_the_deadline_ends_the_call_at_once_with_the_429() {
    let server = Server::start(&[
        ("/later", &[throttled("60")]),
        ("/hostile", &[throttled("99999999999999999999999")]),
        ("/garbled", &[throttled("soon")]),
    ])
    .await;
    let service =
        ResilientLayer::new(policy(3).deadline(Duration::from_secs(10)).build().unwrap()).layer(client());
    for path in ["/later", "/hostile"] {
        let response = service.clone().oneshot(get(&server.url(path))).await.unwrap();
        assert_eq!((response.status(), attempts(&response)), (StatusCode::TOO_MANY_REQUESTS, 1), "{path}");
        assert_eq!(server.hits(path), 1, "{path}");
    }
    let response = service.oneshot(get(&server.url("/garbled"))).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2), "an unparseable Retry-After");
}

#[tokio::test]
async fn a_post_without_an_idempotency_key_is_attempted_once() {
    let server = Server::start(&[("/charges", &[status(503), status(503)])]).await;
    let service = ResilientLayer::new(policy(4).build().unwrap()).layer(client());
    let response =
        service.oneshot(request(Method::POST, &server.url("/charges"), None, "17 EUR")).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 1));
    assert_eq!(server.hits("/charges"), 1);
    assert_eq!(server.charges_made(), 1, "a retry would have charged twice");
}

#[tokio::test]
async fn a_post_with_an_idempotency_key_is_retried_and_the_server_charges_once() {
    // The first charge is made, but its answer is a 503: only the key
    // keeps the retry from charging again.
    let server = Server::start(&[("/charges", &[status(503)])]).await;
    let keys_in_attempts = Arc::new(Mutex::new(Vec::new()));
    let keys = keys_in_attempts.clone();
    let service = ServiceBuilder::new()
        .layer(ResilientLayer::new(policy(4).build().unwrap()))
        .map_request(move |request: Request<Body>| {
            keys.lock().unwrap().push(stormproof::idempotency_key());
            request
        })
        .service(client());
    let charge = request(Method::POST, &server.url("/charges"), Some("order-17"), "17 EUR");
    let response = service.oneshot(charge).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2));
    assert_eq!(text(response).await, "charge 1");
    assert_eq!((server.hits("/charges"), server.charges_made(), server.deduplicated()), (2, 1, 1));
    let sent: Vec<_> = server.seen("/charges").into_iter().map(|seen| seen.key).collect();
    assert_eq!(sent, [Some("order-17".to_owned()), Some("order-17".to_owned())]);
    let seen_inside: Vec<_> =
        keys_in_attempts.lock().unwrap().iter().map(|k| k.as_deref().map(str::to_owned)).collect();
    assert_eq!(seen_inside, [Some("order-17".to_owned()), Some("order-17".to_owned())], "idempotency_key()");
}

/// Every way of building the layer, for the idempotency rule's table.
#[derive(Debug, Clone, Copy)]
enum Built {
    /// `ResilientLayer::new`: a failed status is a failure.
    New,
    /// `ResilientLayer::cloning`, over a stack that makes a 5xx an error,
    /// as services that send HTTP through `cloning` do: only errors fail.
    Cloning,
}

impl Built {
    /// Sends `request` through a layer built this way around hyper-util's
    /// client, with three attempts; what comes back does not matter.
    async fn send(self, request: Request<Body>) {
        let policy = policy(3).build().unwrap();
        match self {
            Built::New => drop(ResilientLayer::new(policy).layer(client()).oneshot(request).await),
            Built::Cloning => {
                let service = ServiceBuilder::new()
                    .layer(ResilientLayer::cloning(policy))
                    .map_result(|result: Result<Response<_>, _>| match result {
                        Ok(response) if response.status().is_server_error() => {
                            Err(BoxError::from(format!("the server answered {}", response.status())))
                        }
                        other => other.map_err(BoxError::from),
                    })
                    .service(client());
                drop(service.oneshot(request).await);
            }
        }
    }
}

/// The rule holds whichever constructor built the layer: `POST` and
/// `PATCH` are sent once without an `Idempotency-Key` and retried with
/// one, `GET` is retried. (`cloning` retried every `http::Request` it was
/// given, a `POST` without a key three times.)
#[tokio::test]
async fn every_constructor_retries_a_post_or_patch_only_with_an_idempotency_key() {
    let cases = [
        (Method::POST, None, 1),
        (Method::PATCH, None, 1),
        (Method::POST, Some("order-17"), 3),
        (Method::PATCH, Some("order-18"), 3),
        (Method::GET, None, 3),
    ];
    let built = [Built::New, Built::Cloning];
    let paths: Vec<String> =
        built.iter().flat_map(|built| (0..cases.len()).map(move |n| format!("/{built:?}/{n}"))).collect();
    let failing = [status(503), status(503)];
    let scripts: Vec<(&str, &[loopback::Reply])> =
        paths.iter().map(|path| (path.as_str(), &failing[..])).collect();
    let server = Server::start(&scripts).await;
    for built in built {
        for (n, (method, key, sent)) in cases.iter().enumerate() {
            let path = format!("/{built:?}/{n}");
            built.send(request(method.clone(), &server.url(&path), *key, "17 EUR")).await;
            assert_eq!(server.hits(&path), *sent, "{built:?}: {method} with key {key:?}");
            let keys: Vec<_> = server.seen(&path).into_iter().map(|seen| seen.key).collect();
            assert!(keys.iter().all(|seen| seen.as_deref() == *key), "{built:?}: {method}: {keys:?}");
        }
    }
}

type Chunks = futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>;

#[tokio::test]
async fn a_streaming_body_is_attempted_once_even_for_an_idempotent_method() {
    let server = Server::start(&[("/upload", &[status(503), status(503)])]).await;
    let streaming: Client<HttpConnector, StreamBody<Chunks>> =
        Client::builder(TokioExecutor::new()).build_http();
    let service = ResilientLayer::new(policy(4).build().unwrap()).layer(streaming);
    let chunks = vec![
        Ok(Frame::data(Bytes::from_static(b"part 1, "))),
        Ok(Frame::data(Bytes::from_static(b"part 2"))),
    ];
    let upload = Request::put(server.url("/upload"))
        .body(StreamBody::new(futures_util::stream::iter(chunks)))
        .unwrap();
    let response = service.oneshot(upload).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 1));
    assert_eq!(server.hits("/upload"), 1);
    assert_eq!(server.seen("/upload")[0].body, "part 1, part 2", "the stream was sent, once");

    // The same PUT with a buffered body is retried.
    let buffered = ResilientLayer::new(policy(4).build().unwrap()).layer(client());
    let response = buffered.oneshot(request(Method::PUT, &server.url("/upload"), None, "all")).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2));
}

/// One attempt per call, through the bare client: a 5xx is an error.
#[resilient(max_attempts = 1, breaker = "payments")]
async fn quote_directly(client: &HttpClient, url: &str) -> Result<String, BoxError> {
    let response = client.request(get(url)).await?;
    if response.status().is_server_error() {
        return Err(format!("the server answered {}", response.status()).into());
    }
    Ok(text(response).await)
}

#[tokio::test]
async fn the_breaker_is_shared_with_an_annotated_function_and_opens_for_both() {
    let server = Server::start(&[("/down", &[status(503); 10])]).await;
    let registry = Registry::new();
    let config =
        BreakerConfig { failure_threshold: 3, open_for: Duration::from_secs(60), ..Default::default() };
    registry.declare_breaker("payments", config).unwrap();
    let url = server.url("/down");
    let bare = client();
    let service = ResilientLayer::new(policy(4).breaker("payments").build().unwrap()).layer(client());
    registry
        .scope(async {
            for _ in 0..2 {
                assert!(quote_directly(&bare, &url).await.is_err());
            }
            assert_eq!(registry.breaker("payments").unwrap().state(), BreakerState::Closed);
            // The layer's first failure is the breaker's third: it opens, and
            // the call ends with that response rather than wait for a
            // breaker that stays open for a minute.
            let response = service.clone().oneshot(get(&url)).await.unwrap();
            assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 1));
            assert_eq!(registry.breaker("payments").unwrap().state(), BreakerState::Open);
            assert_eq!(server.hits("/down"), 3);

            let open = Rejection::CircuitOpen { breaker: "payments".into() };
            let direct = quote_directly(&bare, &url).await.unwrap_err();
            assert_eq!(direct.downcast_ref::<Rejection>(), Some(&open), "the annotated function fails fast");
            let layered = service.oneshot(get(&url)).await.unwrap_err();
            assert_eq!(layered.downcast_ref::<Rejection>(), Some(&open), "and so does the layer");
            assert_eq!(server.hits("/down"), 3, "neither reached the server");
        })
        .await;
    assert!(stormproof::registry().breaker("payments").is_none(), "the scoped registry held the breaker");
}

#[resilient(max_attempts = 4, base_ms = 1)]
async fn outer(
    service: &stormproof::http::tower::ResilientService<HttpClient>,
    url: &str,
) -> Result<u32, BoxError> {
    let response = service.clone().oneshot(get(url)).await?;
    Ok(attempts(&response))
}

#[tokio::test]
async fn a_layered_call_inside_an_annotated_attempt_makes_one_attempt() {
    let server = Server::start(&[("/inner", &[status(503), status(503)])]).await;
    let service = ResilientLayer::new(policy(4).build().unwrap()).layer(client());
    assert_eq!(outer(&service, &server.url("/inner")).await.unwrap(), 1, "retries are not multiplied");
    assert_eq!(server.hits("/inner"), 1);
}

#[tokio::test]
async fn the_response_future_is_send_and_static() {
    let server = Server::start(&[("/spawned", &[status(503)])]).await;
    let mut service = ResilientLayer::new(policy(2).build().unwrap()).layer(client());
    std::future::poll_fn(|cx| Service::<Request<Body>>::poll_ready(&mut service, cx)).await.unwrap();
    let future = service.call(get(&server.url("/spawned")));
    drop(service);
    // `spawn` takes only `Send + 'static` futures; the service is gone.
    let response = tokio::spawn(future).await.unwrap().unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2));
}

/// An adaptive bulkhead learns the dependency's latency from each attempt:
/// from the request sent to the response's head in hand. The failed
/// response's body, read before the retry (here 4 KiB trickled over 40
/// ms, on a connection kept alive) and the pause after it for the pool
/// are the client's own time, not the dependency's: the retry's sample
/// leaves them out, and the limit moves exactly as the dependency's
/// latencies (none, on the paused clock) say. Taken from the retry's
/// admission instead, the sample read 41 ms against a usual latency of
/// none, and took the limit down to 7.
#[tokio::test(start_paused = true)]
async fn an_adaptive_bulkhead_does_not_count_the_drain_before_a_retry_as_latency() {
    let server = Server::start(&[("/search", &[status(503).with(Payload::Trickled(4, 10))])]).await;
    let registry = Registry::new();
    let adaptive = AdaptiveLimit::gradient(1).tolerance(1.0).smoothing(1.0);
    let config = BulkheadConfig { max_concurrent: 16, adaptive: Some(adaptive), ..Default::default() };
    registry.declare_bulkhead("search", config).unwrap();
    let layer = ResilientLayer::new(policy(2).bulkhead("search").build().unwrap());
    // One client: the 503 comes on the connection kept alive after the
    // warm-up call, and the retry goes on it once the body is drained.
    let client = client();
    let (warm, search) = (layer.layer(client.clone()), layer.layer(client));
    let started = tokio::time::Instant::now();
    let (first, second) = registry
        .scope(async {
            let first = warm.oneshot(get(&server.url("/warm"))).await.unwrap();
            (first, search.oneshot(get(&server.url("/search"))).await.unwrap())
        })
        .await;
    assert_eq!((first.status(), attempts(&first)), (StatusCode::OK, 1));
    assert_eq!((second.status(), attempts(&second)), (StatusCode::OK, 2));
    let seen = server.seen("/search");
    assert_eq!(
        seen[1].at - seen[0].at,
        ms(40) + ms(1),
        "the body drained whole as it came (the backoff inside it), the pause"
    );
    assert_eq!(started.elapsed(), ms(41), "every answer's head came at once");
    assert_eq!(server.connections(), 1, "the drained connection, kept alive, carried the retry");
    // What the dependency's latencies alone make of the limit: a success,
    // an overload signal (the 503), a success, each at once.
    let mut expected = LimitCore::new(adaptive, 16);
    for overload in [false, true, false] {
        expected.sample(Duration::ZERO, overload, 1);
    }
    assert_eq!(expected.limit(), 8, "the 503 halved it; nothing else moved it");
    assert_eq!(
        registry.bulkhead("search").unwrap().limit(),
        expected.limit(),
        "the retry's sample is its request's latency alone, not the drain and pause before it"
    );
}

// ---------------------------------------------------------------------------
// In-process services: tower's conventions, the rest of the policy, `cloning`.

/// A response body of 1 KiB chunks that counts the bytes read of it; a
/// stalled one never ends.
struct Tracked {
    chunks: VecDeque<Bytes>,
    stalls: bool,
    read: Arc<AtomicUsize>,
}

impl Tracked {
    /// `kib` KiB, then the end (or nothing, when it `stalls`), and the count
    /// of bytes read.
    fn new(kib: usize, stalls: bool) -> (Tracked, Arc<AtomicUsize>) {
        let read = Arc::new(AtomicUsize::new(0));
        let chunks = (0..kib).map(|_| Bytes::from_static(&[b'x'; 1024])).collect();
        (Tracked { chunks, stalls, read: read.clone() }, read)
    }
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.chunks.pop_front() {
            Some(chunk) => {
                self.read.fetch_add(chunk.len(), Ordering::SeqCst);
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
            None if self.stalls => Poll::Pending,
            None => Poll::Ready(None),
        }
    }
}

/// A service whose first `failures` answers are 503s with bodies of
/// `kib` KiB (stalling ones if `stalls`), then 200s; it keeps each body's
/// count of bytes read and, at each call, what had been read of each
/// earlier body, and when each call came.
#[derive(Clone, Default)]
struct Failing {
    failures: usize,
    kib: usize,
    stalls: bool,
    bodies: Arc<Mutex<Vec<Arc<AtomicUsize>>>>,
    read_before_call: Arc<Mutex<Vec<Vec<usize>>>>,
    calls: Arc<Mutex<Vec<tokio::time::Instant>>>,
}

impl Failing {
    fn new(failures: usize, kib: usize, stalls: bool) -> Failing {
        Failing { failures, kib, stalls, ..Default::default() }
    }

    fn read(&self) -> Vec<usize> {
        self.bodies.lock().unwrap().iter().map(|read| read.load(Ordering::SeqCst)).collect()
    }
}

impl Service<Request<Body>> for Failing {
    type Response = Response<Tracked>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Tracked>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Body>) -> Self::Future {
        self.calls.lock().unwrap().push(tokio::time::Instant::now());
        self.read_before_call.lock().unwrap().push(self.read());
        let mut bodies = self.bodies.lock().unwrap();
        let failed = bodies.len() < self.failures;
        let (body, read) = if failed { Tracked::new(self.kib, self.stalls) } else { Tracked::new(0, false) };
        bodies.push(read);
        let status = if failed { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
        std::future::ready(Ok(Response::builder().status(status).body(body).unwrap()))
    }
}

// Fails on a layer that drops the failed response unread.
#[tokio::test(start_paused = true)]
async fn the_failed_response_before_a_retry_is_read_to_its_end_before_the_retry_is_sent() {
    let failing = Failing::new(2, 4, false);
    let service = ResilientLayer::new(policy(4).build().unwrap()).layer(failing.clone());
    let response = service.oneshot(get("http://in-process/")).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 3));
    assert_eq!(*failing.read_before_call.lock().unwrap(), [vec![], vec![4096], vec![4096, 4096]]);
    assert_eq!(failing.read(), [4096, 4096, 0], "the 200's body is the caller's");
}

/// The response the caller gets is not read: the last one, and one whose
/// retry was refused (here by a breaker opened during the backoff).
#[tokio::test(start_paused = true)]
async fn a_failed_response_the_caller_gets_keeps_its_body_unread() {
    let failing = Failing::new(2, 4, false);
    let service = ResilientLayer::new(policy(2).build().unwrap()).layer(failing.clone());
    let response = service.oneshot(get("http://in-process/")).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 2));
    assert_eq!(failing.read(), [4096, 0], "the first read before the retry, the last not");
    assert_eq!(text(response).await.len(), 4096);

    let registry = Registry::new();
    let config = BreakerConfig { failure_threshold: 5, ..Default::default() };
    registry.declare_breaker("inventory", config).unwrap();
    let failing = Failing::new(2, 4, false);
    let policy = policy(3)
        .base(Duration::from_secs(1))
        .cap(Duration::from_secs(1))
        .breaker("inventory")
        .build()
        .unwrap();
    let service = ResilientLayer::new(policy).layer(failing.clone());
    let (response, ()) = registry
        .scope(async {
            tokio::join!(service.oneshot(get("http://in-process/")), async {
                tokio::time::sleep(ms(500)).await;
                registry.breaker("inventory").unwrap().force_open();
            })
        })
        .await;
    let response = response.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 1));
    assert_eq!(failing.read(), [0], "the retry did not run: its response is the caller's, whole");
    assert_eq!(text(response).await.len(), 4096);
}

/// A failed body that stalls delays the retry by at most 50 ms, or a
/// quarter of the attempt timeout when that is shorter, so that the retry
/// keeps most of its time. The drain starts as the retry is admitted, 1 ms
/// before its 1 ms backoff ends: the backoff runs inside the drain.
#[tokio::test(start_paused = true)]
async fn a_stalled_failed_body_delays_the_retry_by_50_ms_or_a_quarter_of_the_attempt_timeout() {
    for (attempt_timeout, drain) in [(None, ms(50)), (Some(ms(40)), ms(10)), (Some(ms(1000)), ms(50))] {
        let failing = Failing::new(1, 1, true);
        let mut policy = policy(2);
        if let Some(timeout) = attempt_timeout {
            policy = policy.attempt_timeout(timeout);
        }
        let service = ResilientLayer::new(policy.build().unwrap()).layer(failing.clone());
        let response = service.oneshot(get("http://in-process/")).await.unwrap();
        assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2), "{attempt_timeout:?}");
        let calls = failing.calls.lock().unwrap().clone();
        assert_eq!(calls[1] - calls[0], drain, "{attempt_timeout:?}: the drain given up, the backoff in it");
        assert_eq!(failing.read(), [1024, 0], "{attempt_timeout:?}: what arrived was read");
    }
}

/// Under a short attempt timeout the retry is admitted less early (a
/// quarter of the timeout, in whole milliseconds, rather than 2 ms), so
/// that the attempt keeps most of its time for its request: from 4 ms, the
/// lead still holds the pause for the pool, and the retry goes out when its
/// wait ends, having read the failed body in hand (it went out 1 ms late).
/// Under 4 ms no lead is taken, and the pause, a quarter of the timeout,
/// follows the wait as before.
#[tokio::test(start_paused = true)]
async fn under_a_short_attempt_timeout_the_retry_still_goes_out_when_its_wait_ends() {
    for timeout in [ms(4), ms(6), ms(2)] {
        let failing = Failing::new(1, 4, false);
        let policy = policy(2).base(ms(10)).cap(ms(10)).attempt_timeout(timeout).build().unwrap();
        let service = ResilientLayer::new(policy).layer(failing.clone());
        let response = service.oneshot(get("http://in-process/")).await.unwrap();
        assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2), "{timeout:?}");
        let calls = failing.calls.lock().unwrap().clone();
        let waited = calls[1] - calls[0];
        if timeout >= ms(4) {
            assert_eq!(waited, ms(10), "{timeout:?}");
        } else {
            assert!(waited > ms(10) && waited <= ms(11), "{timeout:?}: {waited:?}");
        }
        let read = failing.read_before_call.lock().unwrap().clone();
        assert_eq!(read, [vec![], vec![4096]], "{timeout:?}: read before the retry");
    }
}

/// A stalled failed body near the deadline: the drain takes a quarter of
/// what is left, so the retry is still sent and answers the call (the drain
/// bounded by the attempt timeout alone spent the deadline, and the caller
/// got `DeadlineExceeded` instead of the retry's 200).
#[tokio::test(start_paused = true)]
async fn a_stalled_failed_body_does_not_spend_the_deadline_the_retry_needs() {
    let failing = Failing::new(1, 1, true);
    let service = ResilientLayer::new(policy(2).deadline(ms(20)).build().unwrap()).layer(failing.clone());
    let response = service.oneshot(get("http://in-process/")).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2));
    let calls = failing.calls.lock().unwrap().clone();
    // The 1 ms backoff, then a quarter of the 19 ms left.
    assert!(calls[1] - calls[0] <= ms(1) + ms(19) / 4 + ms(1), "{:?}", calls[1] - calls[0]);
}

fn reply(status: u16) -> Response<String> {
    Response::builder().status(status).body(String::new()).unwrap()
}

/// Records, for every call, whether `poll_ready` readied this very
/// instance; a clone is not ready, as with tower's buffers and limits.
struct Picky {
    ready: bool,
    polls: Arc<AtomicU32>,
    calls_on_ready: Arc<Mutex<Vec<bool>>>,
}

impl Clone for Picky {
    fn clone(&self) -> Self {
        Picky { ready: false, polls: self.polls.clone(), calls_on_ready: self.calls_on_ready.clone() }
    }
}

impl Service<Request<Body>> for Picky {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        self.ready = true;
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Body>) -> Self::Future {
        let mut calls = self.calls_on_ready.lock().unwrap();
        calls.push(std::mem::replace(&mut self.ready, false));
        std::future::ready(Ok(reply(if calls.len() < 3 { 503 } else { 200 })))
    }
}

#[tokio::test(start_paused = true)]
async fn every_attempt_calls_a_service_made_ready() {
    let picky = Picky { ready: false, polls: Arc::default(), calls_on_ready: Arc::default() };
    let (polls, calls) = (picky.polls.clone(), picky.calls_on_ready.clone());
    let service = ResilientLayer::new(policy(4).build().unwrap()).layer(picky);
    let response = service.oneshot(get("http://in-process/")).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 3));
    assert_eq!(*calls.lock().unwrap(), [true, true, true], "the readied service, not the clone left behind");
    assert_eq!(polls.load(Ordering::SeqCst), 3, "the caller's poll_ready, then one per retry");
}

#[tokio::test(start_paused = true)]
async fn a_transport_error_on_the_last_attempt_is_returned_as_the_error() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let inner = service_fn(move |_: Request<Body>| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            match n {
                0 => Ok(reply(503)),
                _ => Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
            }
        }
    });
    let service = ResilientLayer::new(policy(2).build().unwrap()).layer(inner);
    let error = service.oneshot(get("http://in-process/")).await.unwrap_err();
    let io = error.downcast_ref::<std::io::Error>().expect("the inner error, boxed");
    assert_eq!(io.kind(), std::io::ErrorKind::ConnectionReset);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn the_attempt_timeout_and_the_deadline_apply() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    // The first attempt hangs; the second answers.
    let inner = service_fn(move |_: Request<Body>| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            if n == 0 {
                std::future::pending::<()>().await;
            }
            Ok::<_, Infallible>(reply(200))
        }
    });
    let service =
        ResilientLayer::new(policy(3).attempt_timeout(Duration::from_secs(2)).build().unwrap()).layer(inner);
    let started = tokio::time::Instant::now();
    let response = service.oneshot(get("http://in-process/")).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2));
    assert!(started.elapsed() >= Duration::from_secs(2), "the hanging attempt ran until its timeout");

    let hanging =
        service_fn(|_: Request<Body>| std::future::pending::<Result<Response<String>, Infallible>>());
    let service =
        ResilientLayer::new(policy(3).deadline(Duration::from_secs(5)).build().unwrap()).layer(hanging);
    let error = service.oneshot(get("http://in-process/")).await.unwrap_err();
    assert_eq!(
        error.downcast_ref::<Rejection>(),
        Some(&Rejection::DeadlineExceeded { after: Duration::from_secs(5) })
    );
}

/// A plain call's first attempt that times out (the response future races
/// it with a timer of its own) is an attempt timeout as any other attempt's
/// is: a failure for the breaker, charged the budget's cost of a retry after
/// a timeout, its bulkhead place given back (the retry takes the one place),
/// and, when every attempt timed out, the attempt timeout's rejection for
/// the caller; dropped unanswered, it gives its place back too. In the
/// global registry, where a call's first attempt is plain; the guards named
/// for this test alone.
#[tokio::test(start_paused = true)]
async fn a_first_attempt_that_times_out_is_an_attempt_timeout() {
    let (breaker, budget, bulkhead) =
        ("tower::first_timeout", "tower::first_timeout", "tower::first_timeout");
    let registry = stormproof::registry();
    let one_place = BulkheadConfig { max_concurrent: 1, max_wait: None, ..Default::default() };
    registry.declare_bulkhead(bulkhead, one_place).unwrap();
    let place = || registry.bulkhead(bulkhead).unwrap().in_use();
    let opens_at_two = BreakerConfig { failure_threshold: 2, ..Default::default() };
    registry.declare_breaker(breaker, opens_at_two).unwrap();
    let bucket = TokenBucket { capacity: 10, retry_cost: 1, timeout_cost: Some(5), ..Default::default() };
    registry.declare_budget(budget, bucket).unwrap();
    let hanging =
        service_fn(|_: Request<Body>| std::future::pending::<Result<Response<String>, Infallible>>());
    let policy = policy(2).attempt_timeout(Duration::from_secs(1)).breaker(breaker).budget(budget);
    let mut service = ResilientLayer::new(policy.bulkhead(bulkhead).build().unwrap()).layer(hanging);
    std::future::poll_fn(|cx| Service::<Request<Body>>::poll_ready(&mut service, cx)).await.unwrap();
    dropped_while_its_attempt_runs(service.call(get("http://in-process/")), &place).await;
    let started = tokio::time::Instant::now();
    let error = service.oneshot(get("http://in-process/")).await.unwrap_err();
    assert_eq!(
        error.downcast_ref::<Rejection>(),
        Some(&Rejection::AttemptTimeout { after: Duration::from_secs(1) })
    );
    assert_eq!(started.elapsed(), Duration::from_secs(2) + ms(1), "two timeouts and the wait between");
    assert_eq!(registry.breaker(breaker).unwrap().state(), BreakerState::Open, "two failures");
    assert_eq!(registry.budget(budget).unwrap().available(), 5, "the retry after a timeout cost 5");
    assert_eq!(place(), 0);
}

/// The attempt timeout counts from the response future's first wait (its
/// first poll that answers nothing), as a plain first attempt's does
/// through every entry point without a deadline, not from
/// `Service::call`: a future polled late still gives its attempt the whole
/// timeout. And the future stays `Unpin`
/// when the inner service's is, an attempt timeout or not (checked when
/// this compiles).
#[tokio::test(start_paused = true)]
async fn a_first_attempts_timeout_counts_from_its_first_poll() {
    fn unpin<S: Service<u64, Future: Unpin>>(service: S) -> S {
        service
    }
    let answers_in_half_a_second = service_fn(|n: u64| async move {
        tokio::time::sleep(ms(500)).await;
        Ok::<_, Infallible>(n)
    });
    // Named: the helper's policies share one name, and with it the operation's own
    // breaker and budget, which this paused-clock test would start for the others.
    let timed = || {
        policy(2)
            .name("tower::timeout_from_first_poll")
            .attempt_timeout(Duration::from_secs(1))
            .build()
            .unwrap()
    };
    let mut service = unpin(
        ResilientLayer::cloning(timed())
            .layer(service_fn(|n: u64| std::future::ready(Ok::<_, Infallible>(n)))),
    );
    std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
    drop(service.call(1));
    let mut service = ResilientLayer::cloning(timed()).layer(answers_in_half_a_second);
    std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
    let late = service.call(7);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = tokio::time::Instant::now();
    assert_eq!(late.await.unwrap(), 7);
    assert_eq!(started.elapsed(), ms(500), "one attempt, answered within its timeout");
}

/// A response future made outside any scoped registry (as a `Buffer`'s
/// worker makes it) and polled inside one: its first attempt was admitted
/// by the global registry's guards, and after it fails the call goes on
/// with them, its backoff kept. (It went on with the scope's guards, at
/// once, having lost its wait, and its deadline, last error and guards
/// with it.)
#[tokio::test(start_paused = true)]
async fn a_call_admitted_outside_a_scope_goes_on_as_admitted_when_polled_inside_one() {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let fails_once = service_fn(move |n: u64| {
        let call = counted.fetch_add(1, Ordering::SeqCst);
        async move { if call == 0 { Err(BoxError::from("down")) } else { Ok::<_, BoxError>(n) } }
    });
    let name = "tower::admitted_outside_a_scope";
    let policy = policy(3).name(name).base(ms(100)).cap(ms(100)).deadline(Duration::from_secs(10));
    let mut service = ResilientLayer::cloning(policy.build().unwrap()).layer(fails_once);
    std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
    let admitted = service.call(7);
    let start = tokio::time::Instant::now();
    assert_eq!(Registry::new().scope(admitted).await.unwrap(), 7);
    assert_eq!((calls.load(Ordering::SeqCst), start.elapsed()), (2, ms(100)), "the retry after its wait");
    let totals = stormproof::registry().breaker(name).expect("the operation's own").totals();
    assert_eq!(
        (totals.calls, totals.failures),
        (2, 1),
        "both attempts in the guards that admitted the first"
    );
}

#[tokio::test(start_paused = true)]
async fn the_named_budget_and_bulkhead_apply() {
    let registry = Registry::new();
    registry
        .declare_budget(
            "payments",
            TokenBucket { capacity: 1, retry_cost: 1, refill_per_success: 1, ..Default::default() },
        )
        .unwrap();
    registry
        .declare_bulkhead(
            "payments",
            BulkheadConfig { max_concurrent: 1, max_wait: Some(ms(10)), ..Default::default() },
        )
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let failing = service_fn(move |_: Request<Body>| {
        counter.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok::<_, Infallible>(reply(503)))
    });
    let budgeted = ResilientLayer::new(policy(4).budget("payments").build().unwrap()).layer(failing);
    let response = registry.scope(budgeted.oneshot(get("http://in-process/"))).await.unwrap();
    assert_eq!(attempts(&response), 2, "the budget paid for one retry");
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let released = Arc::new(tokio::sync::Mutex::new(Some(released)));
    let holding = service_fn(move |_: Request<Body>| {
        let released = released.clone();
        async move {
            if let Some(released) = released.lock().await.take() {
                let _ = released.await;
            }
            Ok::<_, Infallible>(reply(200))
        }
    });
    let bulkheaded = ResilientLayer::new(policy(1).bulkhead("payments").build().unwrap()).layer(holding);
    registry
        .scope(async {
            let first = tokio::spawn(
                Registry::current().scope(bulkheaded.clone().oneshot(get("http://in-process/"))),
            );
            tokio::task::yield_now().await;
            let second = bulkheaded.oneshot(get("http://in-process/")).await.unwrap_err();
            assert_eq!(
                second.downcast_ref::<Rejection>(),
                Some(&Rejection::BulkheadFull { bulkhead: "payments".into() })
            );
            release.send(()).unwrap();
            assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
        })
        .await;
}

/// A request's `x-priority` header sets its call's priority (issue 44,
/// item 6): with the bulkhead full, a `sheddable` request is refused at
/// once, a request without the header waits its `max_wait`, and a
/// `critical` one gets the place that comes free before an earlier
/// request of the default priority.
#[tokio::test(start_paused = true)]
async fn a_requests_x_priority_header_sets_its_priority() {
    let registry = Registry::new();
    registry
        .declare_bulkhead(
            "search",
            BulkheadConfig { max_concurrent: 1, max_wait: Some(ms(500)), ..Default::default() },
        )
        .unwrap();
    let served = Arc::new(Mutex::new(Vec::new()));
    let log = served.clone();
    let slow = service_fn(move |request: Request<Body>| {
        let tag = request.headers().get("x-tag").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        log.lock().unwrap().push(tag);
        async move {
            tokio::time::sleep(ms(100)).await;
            Ok::<_, Infallible>(reply(200))
        }
    });
    let layered = ResilientLayer::new(policy(1).bulkhead("search").build().unwrap()).layer(slow);
    let tagged = |tag: &str, priority: Option<&str>| {
        let mut request = get("http://in-process/");
        request.headers_mut().insert("x-tag", tag.parse().unwrap());
        if let Some(priority) = priority {
            request.headers_mut().insert("x-priority", priority.parse().unwrap());
        }
        request
    };
    registry
        .scope(async {
            let send = |request| tokio::spawn(Registry::current().scope(layered.clone().oneshot(request)));
            let holder = send(tagged("holder", None));
            tokio::task::yield_now().await;
            let start = tokio::time::Instant::now();
            let shed = layered.clone().oneshot(tagged("shed", Some("sheddable"))).await.unwrap_err();
            assert!(
                matches!(shed.downcast_ref::<Rejection>(), Some(Rejection::BulkheadFull { .. })),
                "{shed}"
            );
            assert_eq!(start.elapsed(), Duration::ZERO, "refused at once");
            let earlier = send(tagged("default", None));
            tokio::task::yield_now().await;
            let critical = send(tagged("critical", Some("Critical")));
            tokio::task::yield_now().await;
            for call in [holder, critical, earlier] {
                assert_eq!(call.await.unwrap().unwrap().status(), StatusCode::OK);
            }
        })
        .await;
    assert_eq!(*served.lock().unwrap(), ["holder", "critical", "default"], "the critical request first");
}

/// In the global registry, where a request's first attempt may be plain:
/// one with an `x-priority` header keeps its priority for its retries. A
/// sheddable request answered 503 finds the bulkhead taken by another when
/// its retry is due, and is refused at once (its 503 returned), where a
/// request of the default priority would wait the bulkhead's `max_wait`.
#[tokio::test(start_paused = true)]
async fn a_requests_priority_holds_for_its_retries_too() {
    stormproof::registry()
        .declare_bulkhead(
            "tower_retry_priority",
            BulkheadConfig { max_concurrent: 1, max_wait: Some(ms(500)), ..Default::default() },
        )
        .unwrap();
    let service = service_fn(|request: Request<Body>| async move {
        if request.headers().contains_key("x-priority") {
            return Ok::<_, Infallible>(reply(503));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(reply(200))
    });
    // A name of its own: `policy`'s builders share one (its line), and with
    // it the operation's own breaker and budget in the global registry,
    // which this test's paused clock would then start for the others.
    let policy = policy(2).name("tower::retry_priority").base(ms(100)).cap(ms(100));
    let policy = policy.bulkhead("tower_retry_priority").build().unwrap();
    let layered = ResilientLayer::new(policy).layer(service);
    let mut sheddable = get("http://in-process/");
    sheddable.headers_mut().insert("x-priority", "sheddable".parse().unwrap());
    let start = tokio::time::Instant::now();
    let shed = tokio::spawn(layered.clone().oneshot(sheddable));
    // During its backoff, another request takes the only place for a second.
    tokio::time::sleep(ms(50)).await;
    let holder = tokio::spawn(layered.oneshot(get("http://in-process/")));
    let response = shed.await.unwrap().unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    // Its retry is admitted a moment before the 100 ms wait ends (to drain
    // the 503 first), and refused there: not after waiting 500 ms more.
    assert!(start.elapsed() <= ms(100), "refused at once, after {:?}", start.elapsed());
    assert_eq!(holder.await.unwrap().unwrap().status(), StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn cloning_serves_any_clone_request_and_classifies_only_errors() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let lookup = service_fn(move |sku: String| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            match (sku.as_str(), n) {
                ("missing", _) => Err(std::io::Error::from(std::io::ErrorKind::NotFound)),
                (_, 0 | 1) => Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
                (sku, _) => Ok(format!("{sku}: 7 in stock")),
            }
        }
    });
    let service = ResilientLayer::cloning(policy(4).build().unwrap()).layer(lookup);
    assert_eq!(service.clone().oneshot("A-1".to_owned()).await.unwrap(), "A-1: 7 in stock");
    assert_eq!(calls.load(Ordering::SeqCst), 3, "two transient errors retried");
    let error = service.oneshot("missing".to_owned()).await.unwrap_err();
    assert_eq!(error.downcast_ref::<std::io::Error>().unwrap().kind(), std::io::ErrorKind::NotFound);
    assert_eq!(calls.load(Ordering::SeqCst), 4, "a permanent error is not retried");
}

/// A request that counts its copies.
#[derive(Debug)]
struct Counted(Arc<AtomicU32>);

impl stormproof::http::tower::CloneRequest for Counted {}

impl Clone for Counted {
    fn clone(&self) -> Self {
        self.0.fetch_add(1, Ordering::SeqCst);
        Counted(self.0.clone())
    }
}

// Kills `Execution::next_is_last -> false` (every attempt would send a copy).
#[tokio::test(start_paused = true)]
async fn the_last_attempt_sends_the_callers_request_and_only_earlier_ones_send_copies() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let flaky = service_fn(move |_: Counted| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move { if n < 3 { Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset)) } else { Ok(()) } }
    });
    let copies = Arc::new(AtomicU32::new(0));
    let service = ResilientLayer::cloning(policy(4).build().unwrap()).layer(flaky);
    service.oneshot(Counted(copies.clone())).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(copies.load(Ordering::SeqCst), 3, "a copy for each attempt but the last");
}

/// The layers do not hedge (README): a hedging policy still sends one
/// request per attempt, however long its answer takes.
#[tokio::test(start_paused = true)]
async fn a_hedging_policy_sends_one_request_per_attempt_through_the_layer() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let slow = service_fn(move |_: Request<Body>| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok::<_, Infallible>(reply(200))
        }
    });
    let service = ResilientLayer::new(policy(3).hedge(ms(10), 2).build().unwrap()).layer(slow);
    let response = service.oneshot(get("http://in-process/")).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 1));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "no hedge at 10 ms or 20 ms: one request");
}

/// A service whose every answer is `status`, counting its calls; with
/// `hold`, its answers never come.
fn answering(
    status: u16,
    hold: bool,
    calls: Arc<AtomicU32>,
) -> impl Service<Request<Body>, Response = Response<String>, Error = Infallible, Future: Send>
+ Clone
+ Send
+ 'static {
    service_fn(move |_: Request<Body>| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move {
            if hold {
                std::future::pending::<()>().await;
            }
            Ok::<_, Infallible>(reply(status))
        }
    })
}

/// A plain call (the global registry, no timeout or deadline) runs its
/// first attempt in the response future itself (issue 42): the guards'
/// permits are handed back when it answers and when it is dropped
/// unanswered, and its failure reaches the breaker as any attempt's does.
#[tokio::test(start_paused = true)]
async fn a_plain_first_attempt_gives_its_bulkhead_place_back_answered_or_dropped() {
    let bulkhead = "tower-plain-bulkhead";
    stormproof::registry()
        .declare_bulkhead(
            bulkhead,
            BulkheadConfig { max_concurrent: 1, max_wait: None, ..Default::default() },
        )
        .unwrap();
    let place = || stormproof::registry().bulkhead(bulkhead).unwrap().in_use();
    let calls = Arc::new(AtomicU32::new(0));
    let layer = ResilientLayer::new(policy(4).bulkhead(bulkhead).build().unwrap());
    let answered = layer.layer(answering(200, false, calls.clone()));
    for _ in 0..3 {
        let response = answered.clone().oneshot(get("http://in-process/")).await.unwrap();
        assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 1));
        assert_eq!(place(), 0, "given back as the attempt answered");
    }

    let mut held = layer.layer(answering(200, true, calls.clone()));
    std::future::poll_fn(|cx| Service::<Request<Body>>::poll_ready(&mut held, cx)).await.unwrap();
    dropped_while_its_attempt_runs(held.call(get("http://in-process/")), &place).await;
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[tokio::test(start_paused = true)]
async fn a_plain_first_attempts_failure_reaches_the_breaker() {
    let breaker = "tower-plain-breaker";
    stormproof::registry()
        .declare_breaker(
            breaker,
            BreakerConfig { failure_threshold: 3, open_for: ms(60_000), ..Default::default() },
        )
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let service = ResilientLayer::new(policy(2).breaker(breaker).budget("none").build().unwrap())
        .layer(answering(503, false, calls.clone()));
    // The first call's two attempts fail; the second call's first attempt,
    // plain, is the third failure: the breaker opens and refuses its retry.
    for expected in [2, 1] {
        let response = service.clone().oneshot(get("http://in-process/")).await.unwrap();
        assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, expected));
    }
    assert_eq!(stormproof::registry().breaker(breaker).unwrap().state(), BreakerState::Open);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// Polls `future` once.
async fn futures_poll_once<F: Future>(mut future: Pin<&mut F>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await
}

/// Polls `unanswered` once, while its attempt runs (the bulkhead's place,
/// which `place` counts, held), then drops it (the place given back).
async fn dropped_while_its_attempt_runs<F: Future>(unanswered: F, place: &impl Fn() -> usize) {
    let mut unanswered = Box::pin(unanswered);
    assert!(futures_poll_once(unanswered.as_mut()).await.is_pending());
    assert_eq!(place(), 1, "held while the attempt runs");
    drop(unanswered);
    assert_eq!(place(), 0, "given back as the unanswered attempt was dropped");
}

/// Answers with the statuses in order, then 200s.
fn answering_in_turn(
    statuses: &[u16],
) -> impl Service<Request<Body>, Response = Response<String>, Error = Infallible, Future: Send>
+ Clone
+ Send
+ 'static {
    let statuses = Arc::new(Mutex::new(statuses.iter().copied().collect::<VecDeque<_>>()));
    service_fn(move |_: Request<Body>| {
        let status = statuses.lock().unwrap().pop_front().unwrap_or(200);
        std::future::ready(Ok::<_, Infallible>(reply(status)))
    })
}

#[tokio::test(start_paused = true)]
async fn a_plain_first_attempts_success_refills_the_budget() {
    let budget = "tower-plain-budget";
    stormproof::registry()
        .declare_budget(
            budget,
            TokenBucket { capacity: 2, retry_cost: 2, refill_per_success: 1, ..Default::default() },
        )
        .unwrap();
    let service = ResilientLayer::new(policy(2).budget(budget).breaker("none").build().unwrap())
        .layer(answering_in_turn(&[503, 503, 200, 200, 503, 503]));
    let mut seen = Vec::new();
    for _ in 0..4 {
        let response = service.clone().oneshot(get("http://in-process/")).await.unwrap();
        seen.push((response.status().as_u16(), attempts(&response)));
    }
    // The first call's retry spends both tokens; the two plain successes
    // after it give them back, so the last call may retry again.
    assert_eq!(seen, [(503, 2), (200, 1), (200, 1), (503, 2)]);
}

/// A breaker judging slow calls (issue 44, item 1) times an attempt from
/// when its request went out: the 50 ms the retry spends reading the
/// stalled failed response before it is the client's, not the
/// dependency's, and the retry answered at once is not slow.
#[tokio::test(start_paused = true)]
async fn a_breaker_judging_slow_calls_times_a_retry_from_when_its_request_went_out() {
    let registry = Registry::new();
    let judging = BreakerConfig {
        failure_rate_percent: Some(50),
        window_calls: Some(10),
        minimum_calls: 10,
        slow_call_duration: Some(ms(20)),
        slow_call_rate_percent: Some(50),
        ..Default::default()
    };
    registry.declare_breaker("timed", judging).unwrap();
    let failing = Failing::new(1, 1, true);
    let service = ResilientLayer::new(policy(2).breaker("timed").budget("none").build().unwrap())
        .layer(failing.clone());
    let response = registry.scope(service.oneshot(get("http://in-process/"))).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2));
    let calls = failing.calls.lock().unwrap().clone();
    assert_eq!(calls[1] - calls[0], ms(50), "the retry read the stalled body for 50 ms before it went out");
    let totals = registry.breaker("timed").unwrap().totals();
    assert_eq!((totals.calls, totals.failures, totals.slow_calls), (2, 1, 0));
}

/// A service in front of two hosts, `down.example` answering 503 and any
/// other 200, which logs each request's host into `sent`.
fn two_hosts(
    sent: &Arc<Mutex<Vec<String>>>,
) -> impl tower::Service<
    Request<Body>,
    Response = Response<String>,
    Error = Infallible,
    Future = std::future::Ready<Result<Response<String>, Infallible>>,
> + Clone
+ use<> {
    let log = sent.clone();
    service_fn(move |request: Request<Body>| {
        let host = request.uri().host().unwrap_or_default().to_owned();
        log.lock().unwrap().push(host.clone());
        std::future::ready(Ok::<_, Infallible>(reply(if host == "down.example" { 503 } else { 200 })))
    })
}

/// The same through the global registry (the test below uses a scoped
/// one): the host that is down is cut off after its two failures, its
/// failed first attempt and its retry in its own breaker, and the other
/// host's calls go out and are counted in theirs. (A policy with a breaker
/// per key is never plain in the tower layer: its calls are boxed.)
#[tokio::test(start_paused = true)]
async fn a_breaker_per_host_holds_through_the_global_registry_too() {
    let set = "tower::plain_hosts";
    let registry = stormproof::registry();
    registry.declare_breaker(set, BreakerConfig { failure_threshold: 2, ..Default::default() }).unwrap();
    let sent = Arc::new(Mutex::new(Vec::new()));
    let hosts = two_hosts(&sent);
    let policy = policy(2).name("tower::plain_hosts").breaker_per(set).budget("none").build().unwrap();
    let layered = ResilientLayer::new(policy).layer(hosts);
    let response = layered.clone().oneshot(get("http://down.example/")).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 2));
    let down = registry.breaker_for(set, "down.example");
    assert_eq!((down.state(), down.totals().calls, down.totals().failures), (BreakerState::Open, 2, 2));
    let refused = layered.clone().oneshot(get("http://down.example/")).await.unwrap_err();
    let name = format!("{set}[down.example]");
    assert!(
        matches!(refused.downcast_ref::<Rejection>(), Some(Rejection::CircuitOpen { breaker }) if *breaker == name),
        "{refused:?}"
    );
    for _ in 0..3 {
        let response = layered.clone().oneshot(get("http://up.example/")).await.unwrap();
        assert_eq!(
            (response.status(), attempts(&response)),
            (StatusCode::OK, 1),
            "another host's calls go out"
        );
    }
    let up = registry.breaker_for(set, "up.example");
    assert_eq!((up.state(), up.totals().calls, up.totals().failures), (BreakerState::Closed, 3, 0));
    assert_eq!(
        *sent.lock().unwrap(),
        ["down.example", "down.example", "up.example", "up.example", "up.example"]
    );
}

/// A policy with a breaker per key, in the tower layer: each host has its
/// own breaker (issue 44, item 3), so a host that is down is cut off and
/// the others are not.
#[tokio::test(start_paused = true)]
async fn a_breaker_per_key_is_a_breaker_per_host() {
    let registry = Registry::new();
    registry.declare_breaker("hosts", BreakerConfig { failure_threshold: 2, ..Default::default() }).unwrap();
    let sent = Arc::new(Mutex::new(Vec::new()));
    let hosts = two_hosts(&sent);
    let policy = policy(2).breaker_per("hosts").budget("none").build().unwrap();
    let layered = ResilientLayer::new(policy).layer(hosts);
    let response = registry.scope(layered.clone().oneshot(get("http://down.example/"))).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 2));
    assert_eq!(registry.breaker_for("hosts", "down.example").state(), BreakerState::Open);
    let refused = registry.scope(layered.clone().oneshot(get("http://down.example/"))).await.unwrap_err();
    assert!(
        matches!(refused.downcast_ref::<Rejection>(), Some(Rejection::CircuitOpen { breaker }) if breaker == "hosts[down.example]"),
        "{refused:?}"
    );
    let response = registry.scope(layered.clone().oneshot(get("http://up.example/"))).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "another host's calls go out");
    // A request in origin form names its host in `Host`, in any case: the same breaker.
    let origin_form =
        Request::get("/").header(http::header::HOST, "DOWN.Example").body(Body::default()).unwrap();
    let refused = registry.scope(layered.clone().oneshot(origin_form)).await.unwrap_err();
    assert!(
        matches!(refused.downcast_ref::<Rejection>(), Some(Rejection::CircuitOpen { breaker }) if breaker == "hosts[down.example]"),
        "{refused:?}"
    );
    // Another port is another service: its own breaker.
    let response = registry.scope(layered.oneshot(get("http://down.example:8080/"))).await.unwrap();
    assert_eq!(attempts(&response), 2, "sent, not refused");
    assert_eq!(
        *sent.lock().unwrap(),
        ["down.example", "down.example", "up.example", "down.example", "down.example"]
    );
}

/// A service that logs when each request reaches it and answers 503 the
/// first `failures` times, then 200.
fn timed_failures(
    failures: usize,
    at: &Arc<Mutex<Vec<tokio::time::Instant>>>,
) -> impl Service<Request<Body>, Response = Response<String>, Error = Infallible, Future: Send>
+ Clone
+ Send
+ 'static {
    let log = at.clone();
    service_fn(move |_: Request<Body>| {
        let mut at = log.lock().unwrap();
        at.push(tokio::time::Instant::now());
        let status = if at.len() <= failures { 503 } else { 200 };
        std::future::ready(Ok::<_, Infallible>(reply(status)))
    })
}

/// The backoff's factor (issue 44, item 7) through the layer: with a base
/// of 10 ms, a factor of 1.5 and no jitter, the attempts reach the service
/// at 0, 10 and 25 ms.
#[tokio::test(start_paused = true)]
async fn the_waits_grow_by_the_policys_factor() {
    let at = Arc::new(Mutex::new(Vec::new()));
    let policy = Policy::builder().max_attempts(3).base(ms(10)).cap(ms(100)).factor(1.5).jitter(Jitter::None);
    let layered = ResilientLayer::new(policy.build().unwrap()).layer(timed_failures(2, &at));
    let response = layered.oneshot(get("http://in-process/")).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 3));
    let at = at.lock().unwrap();
    let sent: Vec<_> = at.iter().map(|at_| *at_ - at[0]).collect();
    assert_eq!(sent, [ms(0), ms(10), ms(25)]);
}

/// gRPC's retry throttling (issue 44, item 5) as the layer's budget: 10
/// tokens, each failure takes one, and retries go only while more than half
/// are left, so a service that always fails gets 5 attempts, not 10.
#[tokio::test]
async fn retry_throttling_stops_retries_at_half_its_tokens() {
    let registry = Registry::new();
    registry.declare_budget("grpc", RetryThrottling { max_tokens: 10, token_ratio: 0.1 }).unwrap();
    let at = Arc::new(Mutex::new(Vec::new()));
    let policy = policy(10).budget("grpc").breaker("none").build().unwrap();
    let layered = ResilientLayer::new(policy).layer(timed_failures(usize::MAX, &at));
    let response = registry.scope(layered.oneshot(get("http://in-process/"))).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 5));
    assert_eq!(at.lock().unwrap().len(), 5);
}

/// A rate limit per key (issue 44, item 3) through the layer is one per
/// host: a host that spent its turn is refused, another host's request goes.
#[tokio::test(start_paused = true)]
async fn a_rate_limit_per_key_is_one_per_host() {
    let registry = Registry::new();
    let one_a_second = RateLimitConfig { per_second: 1, burst: 1, ..Default::default() };
    registry.declare_rate_limit("hosts", one_a_second).unwrap();
    let sent = Arc::new(Mutex::new(Vec::new()));
    let policy = policy(1).rate_limit_per("hosts").budget("none").build().unwrap();
    let layered = ResilientLayer::new(policy).layer(two_hosts(&sent));
    let send = |url: &str| registry.scope(layered.clone().oneshot(get(url)));
    assert_eq!(send("http://up.example/").await.unwrap().status(), StatusCode::OK);
    let refused = send("http://up.example/").await.unwrap_err();
    assert_eq!(
        refused.downcast_ref::<Rejection>(),
        Some(&Rejection::RateLimited { limiter: "hosts[up.example]".into() })
    );
    assert_eq!(send("http://other.example/").await.unwrap().status(), StatusCode::OK, "its own quota");
    assert_eq!(*sent.lock().unwrap(), ["up.example", "other.example"]);
}

/// A bulkhead per key (issue 44, item 3) through the layer is one per
/// host: a host whose one place is held refuses a second request after its
/// 10 ms `max_wait`, and another host's request goes at once.
#[tokio::test(start_paused = true)]
async fn a_bulkhead_per_key_is_one_per_host() {
    let registry = Registry::new();
    let one_place = BulkheadConfig { max_concurrent: 1, max_wait: Some(ms(10)), ..Default::default() };
    registry.declare_bulkhead("hosts", one_place).unwrap();
    let release = Arc::new(tokio::sync::Notify::new());
    let held = release.clone();
    let service = service_fn(move |request: Request<Body>| {
        let held = held.clone();
        async move {
            if request.uri().host() == Some("slow.example") {
                held.notified().await;
            }
            Ok::<_, Infallible>(reply(200))
        }
    });
    let policy = policy(1).bulkhead_per("hosts").budget("none").build().unwrap();
    let layered = ResilientLayer::new(policy).layer(service);
    registry
        .scope(async {
            let holder =
                tokio::spawn(Registry::current().scope(layered.clone().oneshot(get("http://slow.example/"))));
            tokio::task::yield_now().await;
            let refused = layered.clone().oneshot(get("http://slow.example/")).await.unwrap_err();
            assert_eq!(
                refused.downcast_ref::<Rejection>(),
                Some(&Rejection::BulkheadFull { bulkhead: "hosts[slow.example]".into() })
            );
            let other = layered.clone().oneshot(get("http://other.example/")).await.unwrap();
            assert_eq!(other.status(), StatusCode::OK, "another host's places");
            release.notify_waiters();
            assert_eq!(holder.await.unwrap().unwrap().status(), StatusCode::OK);
        })
        .await;
}

/// A `GuardKey` in a request's extensions keys its guards per key instead
/// of its host: two tenants calling the host that is down have a breaker
/// each, so a tenant whose calls are not failing is not cut off by another's.
#[tokio::test(start_paused = true)]
async fn a_guard_key_in_the_extensions_keys_the_guards_instead_of_the_host() {
    let registry = Registry::new();
    registry.declare_breaker("search", BreakerConfig { failure_threshold: 2, ..Default::default() }).unwrap();
    let sent = Arc::new(Mutex::new(Vec::new()));
    let policy = policy(2).breaker_per("search").budget("none").build().unwrap();
    let layered = ResilientLayer::new(policy).layer(two_hosts(&sent));
    let as_tenant = |url: &str, tenant: &str| {
        let mut request = get(url);
        request.extensions_mut().insert(stormproof::http::GuardKey::new(tenant));
        registry.scope(layered.clone().oneshot(request))
    };
    let response = as_tenant("http://down.example/", "tenant-a").await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 2));
    let refused = as_tenant("http://up.example/", "tenant-a").await.unwrap_err();
    assert_eq!(
        refused.downcast_ref::<Rejection>(),
        Some(&Rejection::CircuitOpen { breaker: "search[tenant-a]".into() }),
        "the tenant's breaker, whatever host it calls"
    );
    let response = as_tenant("http://up.example/", "tenant-b").await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(registry.keyed_breakers("search").unwrap().peek("down.example").is_none(), "none per host");
}

/// Through `ResilientLayer::cloning` too, an `http::Request`'s guards per
/// key are its `GuardKey`'s, else its host's (they were one guard for every
/// request, the empty key's): the tenant whose calls fail is cut off, and
/// another tenant, or a request to another host, is not.
#[tokio::test(start_paused = true)]
async fn through_cloning_an_http_requests_guards_per_key_are_its_guard_keys_else_its_hosts() {
    let registry = Registry::new();
    registry.declare_breaker("search", BreakerConfig { failure_threshold: 2, ..Default::default() }).unwrap();
    let sent = Arc::new(Mutex::new(Vec::new()));
    let policy = policy(2).breaker_per("search").budget("none").build().unwrap();
    // A 5xx made an error, as services that send HTTP through `cloning` do.
    let service = ServiceBuilder::new()
        .layer(ResilientLayer::cloning(policy))
        .map_result(|result: Result<Response<String>, Infallible>| match result {
            Ok(response) if response.status().is_server_error() => Err(BoxError::from("a 5xx")),
            Ok(response) => Ok(response),
        })
        .service(two_hosts(&sent));
    let send = |url: &str, tenant: Option<&str>| {
        let mut request = get(url);
        if let Some(tenant) = tenant {
            request.extensions_mut().insert(stormproof::http::GuardKey::new(tenant));
        }
        registry.scope(service.clone().oneshot(request))
    };
    assert!(send("http://down.example/", Some("tenant-a")).await.is_err());
    let refused = send("http://up.example/", Some("tenant-a")).await.unwrap_err();
    assert_eq!(
        refused.downcast_ref::<Rejection>(),
        Some(&Rejection::CircuitOpen { breaker: "search[tenant-a]".into() })
    );
    assert!(send("http://up.example/", Some("tenant-b")).await.is_ok(), "another tenant's breaker");
    assert!(send("http://up.example/", None).await.is_ok(), "a request without a key: its host's breaker");
    assert_eq!(registry.breaker_for("search", "up.example").totals().calls, 1);
}
