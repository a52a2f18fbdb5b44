//! `ResilientMiddleware` in a reqwest-middleware client, against the same
//! loopback server as the tower tests (`tests/loopback`), with the same
//! rules: retries through 503s, the last response when every attempt
//! fails, `Retry-After`, idempotency by method and key, a streaming body's
//! single attempt, a breaker shared with an annotated function, and the
//! attempts in the response's extensions.
//!
//! Real sockets on the real clock, with backoff waits of 1-4 ms, except the
//! `Retry-After` wait, measured on tokio's paused clock.

mod loopback;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering as AtomicOrdering};
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use http_body_util::StreamBody;
use loopback::{Payload, Server, status, throttled, unavailable};
use reqwest::StatusCode;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Next};
use stormproof::http::GuardKey;
use stormproof::http::reqwest_middleware::ResilientMiddleware;
use stormproof::{
    Classify, ErrorClass, Jitter, Policy, PolicyBuilder, Registry, Rejection,
    breaker::{BreakerConfig, BreakerState},
    budget::{RetryThrottling, TokenBucket},
    bulkhead::BulkheadConfig,
    http::Attempts,
    rate_limit::RateLimitConfig,
    resilient,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Waits of 1, 2, 4, 4... ms: real sockets, real clock, short tests.
// Named after each caller's line (`#[track_caller]`), so that the tests
// running at once in this process do not share its own breaker and budget.
#[track_caller]
fn policy(max_attempts: u32) -> PolicyBuilder {
    Policy::builder().max_attempts(max_attempts).base(ms(1)).cap(ms(4)).jitter(Jitter::None)
}

fn client(policy: PolicyBuilder) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest::Client::new()).with(ResilientMiddleware::new(policy.build().unwrap())).build()
}

fn attempts(response: &reqwest::Response) -> u32 {
    response.extensions().get::<Attempts>().expect("the middleware records the attempts").get()
}

#[tokio::test]
async fn a_get_is_retried_through_503s_until_a_200() {
    let server = Server::start(&[("/stock", &[status(503), status(503)])]).await;
    let response = client(policy(4)).get(server.url("/stock")).send().await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 3));
    assert_eq!(response.text().await.unwrap(), "answer 3");
    assert_eq!(server.hits("/stock"), 3);
}

#[tokio::test]
async fn when_every_attempt_fails_the_caller_gets_the_last_response() {
    let server = Server::start(&[("/down", &[status(503), status(502), status(500), status(503)])]).await;
    let response =
        client(policy(3)).get(server.url("/down")).send().await.expect("a failed response is not an error");
    assert_eq!((response.status(), attempts(&response)), (StatusCode::INTERNAL_SERVER_ERROR, 3));
    assert_eq!(response.text().await.unwrap(), "answer 3", "the third answer, not the first");
    assert_eq!(server.hits("/down"), 3);
}

/// The failed response before a retry is read to its end first, so that
/// its connection goes back to the client's pool and carries the retry:
/// without that, hyper closes it and each retry opens a new one. A body of
/// a few chunks and one with a length of 32 KiB both fit the drain's bound.
/// A multi-threaded runtime, where the pool gets the connection back from
/// another thread, as in most services.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_reuses_the_connection_of_the_failed_response_before_it() {
    for payload in [Payload::Chunked(4096), Payload::Sized(32 * 1024)] {
        let failed = status(503).with(payload);
        let server = Server::start(&[("/stock", &[failed, failed])]).await;
        let response = client(policy(4)).get(server.url("/stock")).send().await.unwrap();
        assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 3), "{payload:?}");
        assert_eq!(response.text().await.unwrap(), "answer 3");
        assert_eq!(server.connections(), 1, "{payload:?}: three attempts on one connection");
    }
}

/// The response the caller gets is not drained, however long its body.
#[tokio::test]
async fn the_last_response_keeps_its_whole_body() {
    let long = status(503).with(Payload::Sized(1 << 20));
    let server = Server::start(&[("/down", &[long, long])]).await;
    let response = client(policy(2)).get(server.url("/down")).send().await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 2));
    assert_eq!(response.bytes().await.unwrap().len(), 1 << 20);
}

/// A failed body longer than the drain's bound (64 KiB: declared, or read
/// from an endless stream) or slower than its time bound (50 ms) is
/// dropped, its connection with it, and the retry goes at once after that:
/// on the paused clock, the 1 ms backoff and at most the 50 ms drain.
#[tokio::test(start_paused = true)]
async fn a_failed_body_too_long_or_too_slow_to_drain_is_dropped_and_the_retry_goes_promptly() {
    let server = Server::start(&[
        ("/declared", &[status(503).with(Payload::Sized(1 << 20))]),
        ("/endless", &[status(503).with(Payload::Endless)]),
        ("/stalled", &[status(503).with(Payload::Stalled(1024))]),
    ])
    .await;
    // No idle-connection reaper: only the library's timers move the clock.
    let reqwest = reqwest::Client::builder().pool_idle_timeout(None).build().unwrap();
    let client =
        ClientBuilder::new(reqwest).with(ResilientMiddleware::new(policy(3).build().unwrap())).build();
    for (path, at_most) in [("/declared", ms(1)), ("/endless", ms(1)), ("/stalled", ms(51))] {
        let response = client.get(server.url(path)).send().await.unwrap();
        assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2), "{path}");
        let seen = server.seen(path);
        let waited = seen[1].at - seen[0].at;
        assert!(waited <= at_most, "{path}: the retry came {waited:?} later, not within {at_most:?}");
    }
    assert_eq!(server.connections(), 4, "each failed body's connection closed; each 200's was reused");
}

/// A failed body that trickles in (4 KiB over 40 ms) on a connection kept
/// alive from an earlier call is read as it arrives and drained whole
/// within the 50 ms bound, and that connection carries the retry: on the
/// paused clock, the retry goes as the body ends (the 1 ms backoff runs
/// while it trickles), after the 1 ms pause for the pool.
#[tokio::test(start_paused = true)]
async fn a_trickled_body_on_a_kept_alive_connection_is_drained_and_the_connection_carries_the_retry() {
    let server = Server::start(&[("/slow", &[status(503).with(Payload::Trickled(4, 10))])]).await;
    // No idle-connection reaper: only the library's and the server's timers
    // move the clock.
    let reqwest = reqwest::Client::builder().pool_idle_timeout(None).build().unwrap();
    let client =
        ClientBuilder::new(reqwest).with(ResilientMiddleware::new(policy(2).build().unwrap())).build();
    let warm = client.get(server.url("/warm")).send().await.unwrap();
    assert_eq!(warm.text().await.unwrap(), "answer 1");
    let response = client.get(server.url("/slow")).send().await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2));
    let seen = server.seen("/slow");
    assert_eq!(seen[1].at - seen[0].at, ms(40) + ms(1), "the body drained whole as it came, the pause");
    assert_eq!(server.connections(), 1, "the kept-alive connection carried the 503 and the retry");
}

/// The wait between attempts is the policy's, exactly: the failed
/// response's body is read, and the pause that lets its connection go back
/// to reqwest's pool is taken, inside the wait, not after it. On the paused
/// clock (no idle-connection reaper: only the library's timers move it),
/// with a 10 ms backoff and no jitter, the server sees the attempts at 0,
/// 10 and 20 ms (it saw them at 0, 11 and 22: the 1 ms pause was added to
/// each wait), and the drained connection still carries them all.
#[tokio::test(start_paused = true)]
async fn the_attempts_go_out_when_the_backoff_says_with_the_pause_for_the_pool_inside_it() {
    let server = Server::start(&[("/stock", &[status(503), status(503)])]).await;
    let reqwest = reqwest::Client::builder().pool_idle_timeout(None).build().unwrap();
    let policy = Policy::builder().max_attempts(3).base(ms(10)).cap(ms(10)).jitter(Jitter::None);
    let client = ClientBuilder::new(reqwest).with(ResilientMiddleware::new(policy.build().unwrap())).build();
    let response = client.get(server.url("/stock")).send().await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 3));
    let seen = server.seen("/stock");
    let sent: Vec<_> = seen.iter().map(|seen_| seen_.at - seen[0].at).collect();
    assert_eq!(sent, [ms(0), ms(10), ms(20)]);
    assert_eq!(server.connections(), 1, "each drained connection carried the retry after it");
}

#[tokio::test]
async fn a_permanent_status_is_returned_at_once() {
    let server = Server::start(&[("/missing", &[status(404), status(404)])]).await;
    let response = client(policy(4)).get(server.url("/missing")).send().await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::NOT_FOUND, 1));
    assert_eq!(server.hits("/missing"), 1);
}

/// On the paused clock the server sees the retry exactly `Retry-After`
/// later (the backoff alone would wait 1 ms), after a 429 as after a 503
/// (RFC 9110 gives the header that meaning on both). The client's
/// idle-connection reaper is off, so that no timer but the library's own is
/// armed and the clock only jumps over its wait.
#[tokio::test(start_paused = true)]
async fn a_429_or_a_503_is_retried_after_its_retry_after() {
    let server =
        Server::start(&[("/limited", &[throttled("1")]), ("/maintenance", &[unavailable("1")])]).await;
    let reqwest = reqwest::Client::builder().pool_idle_timeout(None).build().unwrap();
    let client =
        ClientBuilder::new(reqwest).with(ResilientMiddleware::new(policy(3).build().unwrap())).build();
    for path in ["/limited", "/maintenance"] {
        let response = client.get(server.url(path)).send().await.unwrap();
        assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2), "{path}");
        let seen = server.seen(path);
        let waited = seen[1].at - seen[0].at;
        assert!(waited >= Duration::from_secs(1), "{path}: waited {waited:?}, less than Retry-After: 1");
        assert!(
            waited < Duration::from_secs(1) + ms(10),
            "{path}: waited {waited:?}: the backoff adds 1 ms at most"
        );
    }
}

/// `stormproof::http::classify_response` (for code calling reqwest itself)
/// reads a `Retry-After` a proxy merged, or sent as two lines, as one list:
/// the longest wait, or none when a member does not parse.
#[tokio::test]
async fn classify_response_reads_a_merged_or_repeated_retry_after_as_one_list() {
    let server = Server::start(&[
        ("/merged", &[throttled("120, 120")]),
        ("/twice", &[throttled("5\n120")]),
        ("/spoilt", &[throttled("120\nsoon")]),
    ])
    .await;
    let client = reqwest::Client::new();
    let after = |secs| ErrorClass::Throttled { retry_after: Some(Duration::from_secs(secs)) };
    for (path, class) in [
        ("/merged", after(120)),
        ("/twice", after(120)),
        ("/spoilt", ErrorClass::Throttled { retry_after: None }),
    ] {
        let response = client.get(server.url(path)).send().await.unwrap();
        assert_eq!(stormproof::http::classify_response(&response), class, "{path}");
    }
}

/// `classify_response` classifies a response as the layers do, by the same
/// rule, except that a success (below 400, which the layers do not retry)
/// is permanent: there is nothing to retry.
#[tokio::test]
async fn classify_response_is_the_layers_rule_with_a_success_permanent() {
    let server = Server::start(&[
        ("/unavailable", &[status(503)]),
        ("/teapot", &[status(418)]),
        ("/created", &[status(201)]),
    ])
    .await;
    let client = reqwest::Client::new();
    for (path, class) in [
        ("/unavailable", ErrorClass::Transient),
        ("/teapot", ErrorClass::Permanent),
        ("/created", ErrorClass::Permanent),
        // Past the scripted replies the server answers 200.
        ("/unavailable", ErrorClass::Permanent),
    ] {
        let response = client.get(server.url(path)).send().await.unwrap();
        assert_eq!(stormproof::http::classify_response(&response), class, "{path}");
    }
}

/// A `Retry-After` the deadline cannot accommodate ends the call at once
/// with the 429 (had the header been ignored, the retry after 1 ms would
/// have got the 200); one of zero seconds, or an unparseable one, lets the
/// 429 be retried.
#[tokio::test]
async fn a_retry_after_past_the_deadline_ends_the_call_at_once_with_the_429() {
    let server = Server::start(&[
        ("/later", &[throttled("60")]),
        ("/hostile", &[throttled("99999999999999999999999")]),
        ("/now", &[throttled("0")]),
        ("/garbled", &[throttled("soon")]),
    ])
    .await;
    let client = client(policy(3).deadline(Duration::from_secs(10)));
    for path in ["/later", "/hostile"] {
        let response = client.get(server.url(path)).send().await.unwrap();
        assert_eq!((response.status(), attempts(&response)), (StatusCode::TOO_MANY_REQUESTS, 1), "{path}");
        assert_eq!(server.hits(path), 1, "{path}");
    }
    for path in ["/now", "/garbled"] {
        let response = client.get(server.url(path)).send().await.unwrap();
        assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2), "{path}");
    }
}

#[tokio::test]
async fn a_post_without_an_idempotency_key_is_attempted_once() {
    let server = Server::start(&[("/charges", &[status(503), status(503)])]).await;
    let response = client(policy(4)).post(server.url("/charges")).body("17 EUR").send().await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 1));
    assert_eq!((server.hits("/charges"), server.charges_made()), (1, 1));
}

/// The middleware's one constructor follows the rule `ResilientLayer`'s
/// constructors follow (tests/tower.rs): `POST` and `PATCH` are sent once
/// without an `Idempotency-Key` and retried with one, `GET` is retried.
#[tokio::test]
async fn a_post_or_patch_is_retried_only_with_an_idempotency_key_and_a_get_always() {
    let cases = [
        (reqwest::Method::POST, None, 1),
        (reqwest::Method::PATCH, None, 1),
        (reqwest::Method::POST, Some("order-17"), 3),
        (reqwest::Method::PATCH, Some("order-18"), 3),
        (reqwest::Method::GET, None, 3),
    ];
    let paths: Vec<String> = (0..cases.len()).map(|n| format!("/case/{n}")).collect();
    let failing = [status(503), status(503)];
    let scripts: Vec<(&str, &[loopback::Reply])> =
        paths.iter().map(|path| (path.as_str(), &failing[..])).collect();
    let server = Server::start(&scripts).await;
    let client = client(policy(3));
    for ((method, key, sent), path) in cases.into_iter().zip(&paths) {
        let mut request = client.request(method.clone(), server.url(path)).body("17 EUR");
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        let response = request.send().await.unwrap();
        assert_eq!(
            (server.hits(path), attempts(&response) as usize),
            (sent, sent),
            "{method} with key {key:?}"
        );
        let keys: Vec<_> = server.seen(path).into_iter().map(|seen| seen.key).collect();
        assert!(keys.iter().all(|seen| seen.as_deref() == key), "{method}: {keys:?}");
    }
}

/// The keys `stormproof::idempotency_key()` returned to the middleware
/// after ours, one per attempt (only one test uses it).
static KEYS_IN_ATTEMPTS: Mutex<Vec<Option<String>>> = Mutex::new(Vec::new());

fn record_key<'a>(
    request: reqwest::Request,
    extensions: &'a mut http::Extensions,
    next: Next<'a>,
) -> Pin<Box<dyn Future<Output = reqwest_middleware::Result<reqwest::Response>> + Send + 'a>> {
    Box::pin(async move {
        KEYS_IN_ATTEMPTS.lock().unwrap().push(stormproof::idempotency_key().as_deref().map(str::to_owned));
        next.run(request, extensions).await
    })
}

#[tokio::test]
async fn a_post_with_an_idempotency_key_is_retried_and_the_server_charges_once() {
    // The first charge is made, but its answer is a 503.
    let server = Server::start(&[("/charges", &[status(503)])]).await;
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(ResilientMiddleware::new(policy(4).build().unwrap()))
        .with(record_key)
        .build();
    let response = client
        .post(server.url("/charges"))
        .header("Idempotency-Key", "order-17")
        .body("17 EUR")
        .send()
        .await
        .unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2));
    assert_eq!(response.text().await.unwrap(), "charge 1");
    assert_eq!((server.hits("/charges"), server.charges_made(), server.deduplicated()), (2, 1, 1));
    let order = Some("order-17".to_owned());
    let sent: Vec<_> = server.seen("/charges").into_iter().map(|seen| seen.key).collect();
    assert_eq!(sent, [order.clone(), order.clone()]);
    assert_eq!(
        *KEYS_IN_ATTEMPTS.lock().unwrap(),
        [order.clone(), order],
        "idempotency_key() in every attempt"
    );
}

#[tokio::test]
async fn a_streaming_body_is_attempted_once_even_for_an_idempotent_method() {
    let server = Server::start(&[("/upload", &[status(503), status(503)])]).await;
    let chunks: Vec<Result<_, Infallible>> = vec![
        Ok(Frame::data(Bytes::from_static(b"part 1, "))),
        Ok(Frame::data(Bytes::from_static(b"part 2"))),
    ];
    let body = reqwest::Body::wrap(StreamBody::new(futures_util::stream::iter(chunks)));
    let client = client(policy(4));
    let response = client.put(server.url("/upload")).body(body).send().await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 1));
    assert_eq!(server.seen("/upload")[0].body, "part 1, part 2", "the stream was sent, once");

    let response = client.put(server.url("/upload")).body("all").send().await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 2), "a buffered body is retried");
}

/// One attempt per call, through the bare client: a 5xx is an error.
#[resilient(max_attempts = 1, breaker = "payments")]
async fn quote_directly(
    client: &reqwest::Client,
    url: &str,
) -> Result<String, stormproof::Error<reqwest::Error>> {
    Ok(client.get(url).send().await?.error_for_status()?.text().await?)
}

#[tokio::test]
async fn the_breaker_is_shared_with_an_annotated_function_and_opens_for_both() {
    let server = Server::start(&[("/down", &[status(503); 10])]).await;
    let registry = Registry::new();
    let config =
        BreakerConfig { failure_threshold: 3, open_for: Duration::from_secs(60), ..Default::default() };
    registry.declare_breaker("payments", config).unwrap();
    let url = server.url("/down");
    let bare = reqwest::Client::new();
    let client = client(policy(4).breaker("payments"));
    registry
        .scope(async {
            for _ in 0..2 {
                assert!(quote_directly(&bare, &url).await.is_err());
            }
            assert_eq!(registry.breaker("payments").unwrap().state(), BreakerState::Closed);
            let response = client.get(&url).send().await.unwrap();
            assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 1));
            assert_eq!(registry.breaker("payments").unwrap().state(), BreakerState::Open);
            assert_eq!(server.hits("/down"), 3);

            let open = Rejection::CircuitOpen { breaker: "payments".into() };
            let direct = quote_directly(&bare, &url).await.unwrap_err();
            assert!(matches!(direct, stormproof::Error::Rejected(ref r) if *r == open), "{direct:?}");
            let Err(reqwest_middleware::Error::Middleware(layered)) = client.get(&url).send().await else {
                panic!("an open breaker is a middleware error");
            };
            assert_eq!(layered.downcast_ref::<Rejection>(), Some(&open));
            assert_eq!(server.hits("/down"), 3, "neither reached the server");
        })
        .await;
    assert!(stormproof::registry().breaker("payments").is_none(), "the scoped registry held the breaker");
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A function that retries calls through a middleware client, passing its
/// error up in a box, as services do with `?`; it counts its attempts.
#[resilient(max_attempts = 3, base_ms = 1)]
async fn fetch_through(
    client: &ClientWithMiddleware,
    url: &str,
    tries: &AtomicU32,
) -> Result<String, BoxError> {
    tries.fetch_add(1, AtomicOrdering::SeqCst);
    Ok(client.get(url).send().await?.text().await?)
}

/// The middleware's own error, `reqwest_middleware::Error`, forwards
/// `source()` past what it holds (it is `#[error(transparent)]`), so a walk
/// of its chain never met the `Rejection` or the `reqwest::Error` inside
/// and took it for an unknown error: transient. A function around the
/// client then retried an open breaker's refusal and a URL that cannot be
/// built; both are permanent.
#[tokio::test(start_paused = true)]
async fn the_middlewares_error_passed_up_in_a_box_keeps_its_class() {
    let registry = Registry::new();
    registry.declare_breaker("open", BreakerConfig::default()).unwrap();
    let client = client(policy(4).breaker("open"));
    registry
        .scope(async {
            registry.breaker("open").unwrap().force_open();
            let tries = AtomicU32::new(0);
            let error = fetch_through(&client, "http://127.0.0.1:9/", &tries).await.unwrap_err();
            assert_eq!(error.classify(), ErrorClass::Permanent, "{error:?}");
            assert_eq!(tries.load(AtomicOrdering::SeqCst), 1, "an open breaker's refusal is not retried");

            let tries = AtomicU32::new(0);
            let error = fetch_through(&client, "http://[::1", &tries).await.unwrap_err();
            assert_eq!(error.classify(), ErrorClass::Permanent, "{error:?}");
            assert_eq!(tries.load(AtomicOrdering::SeqCst), 1, "a URL that cannot be built is not retried");
        })
        .await;
}

/// A policy with a breaker per key, in the middleware: each host and port
/// has its own breaker (issue 44, item 3), so a server that fails is cut
/// off and another is not.
#[tokio::test]
async fn a_breaker_per_key_is_a_breaker_per_host_and_port() {
    let failing = Server::start(&[("/stock", &[status(503), status(503), status(503)])]).await;
    let healthy = Server::start(&[]).await;
    let registry = Registry::new();
    registry.declare_breaker("hosts", BreakerConfig { failure_threshold: 2, ..Default::default() }).unwrap();
    let client = client(policy(2).breaker_per("hosts").budget("none"));
    let response = registry.scope(client.get(failing.url("/stock")).send()).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 2));
    let failing_key = format!("127.0.0.1:{}", failing.addr.port());
    let set = registry.keyed_breakers("hosts").unwrap();
    assert_eq!(set.peek(&failing_key).unwrap().state(), BreakerState::Open);
    let refused = registry.scope(client.get(failing.url("/stock")).send()).await.unwrap_err();
    assert!(refused.to_string().contains(&format!("hosts[{failing_key}]")), "{refused}");
    assert_eq!(failing.hits("/stock"), 2, "the open breaker sent nothing");
    let response = registry.scope(client.get(healthy.url("/stock")).send()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "another server's calls go out");
}

// Issue 44's guards through the middleware: each is asked by the same call
// as through the attribute; these show the middleware hands them what they
// need (the request's host, its `x-priority`, when its request went out).

/// A reqwest client with no idle-connection reaper, so that on the paused
/// clock only the library's and the server's timers move it.
fn paused_client(policy: PolicyBuilder) -> ClientWithMiddleware {
    let reqwest = reqwest::Client::builder().pool_idle_timeout(None).build().unwrap();
    ClientBuilder::new(reqwest).with(ResilientMiddleware::new(policy.build().unwrap())).build()
}

/// Yields until the server has seen a request to `path` (a request sent
/// by a task spawned on this runtime): a bounded number of times, so that a
/// request that never arrives fails the test instead of hanging it.
async fn until_seen(server: &Server, path: &str) {
    for _ in 0..10_000 {
        if server.hits(path) > 0 {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{path} was never requested");
}

/// The `Rejection` inside the middleware's error, if that is what it is.
fn rejection(error: &reqwest_middleware::Error) -> Option<&Rejection> {
    match error {
        reqwest_middleware::Error::Middleware(error) => error.downcast_ref::<Rejection>(),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}

/// Slow calls open the breaker (item 1): a server that answers 200 in
/// 30 ms, against a breaker judging a call slow from 20 ms at a rate of
/// half of the last four, is down for its callers: after four slow
/// successes the fifth request is refused without reaching it.
#[tokio::test(start_paused = true)]
async fn slow_successes_open_a_breaker_judging_slow_calls() {
    let slow = status(200).after(30);
    let server = Server::start(&[("/slow", &[slow, slow, slow, slow, slow])]).await;
    let registry = Registry::new();
    let judging = BreakerConfig {
        failure_rate_percent: Some(50),
        window_calls: Some(4),
        minimum_calls: 4,
        slow_call_duration: Some(ms(20)),
        slow_call_rate_percent: Some(50),
        ..Default::default()
    };
    registry.declare_breaker("judged", judging).unwrap();
    let client = paused_client(policy(1).breaker("judged").budget("none"));
    for _ in 0..4 {
        let response = registry.scope(client.get(server.url("/slow")).send()).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "a slow call is a success to its caller");
    }
    assert_eq!(registry.breaker("judged").unwrap().state(), BreakerState::Open);
    let refused = registry.scope(client.get(server.url("/slow")).send()).await.unwrap_err();
    assert!(matches!(rejection(&refused), Some(Rejection::CircuitOpen { .. })), "{refused:?}");
    assert_eq!(server.hits("/slow"), 4);
}

/// The backoff's factor (item 7): with a base of 10 ms, a factor of 1.5
/// and no jitter, the server sees the attempts at 0, 10 and 25 ms.
#[tokio::test(start_paused = true)]
async fn the_waits_grow_by_the_policys_factor() {
    let server = Server::start(&[("/stock", &[status(503), status(503)])]).await;
    let policy = Policy::builder().max_attempts(3).base(ms(10)).cap(ms(100)).factor(1.5).jitter(Jitter::None);
    let response = paused_client(policy).get(server.url("/stock")).send().await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::OK, 3));
    let seen = server.seen("/stock");
    let sent: Vec<_> = seen.iter().map(|seen_| seen_.at - seen[0].at).collect();
    assert_eq!(sent, [ms(0), ms(10), ms(25)]);
}

/// A rate limit per key (item 3) is one per host and port: a host that
/// spent its turn is refused, another host's request goes.
#[tokio::test(start_paused = true)]
async fn a_rate_limit_per_key_is_one_per_host_and_port() {
    let (first, second) = (Server::start(&[]).await, Server::start(&[]).await);
    let registry = Registry::new();
    let one_a_second = RateLimitConfig { per_second: 1, burst: 1, ..Default::default() };
    registry.declare_rate_limit("hosts", one_a_second).unwrap();
    let client = paused_client(policy(1).rate_limit_per("hosts").budget("none"));
    let send = |url: String| registry.scope(client.get(url).send());
    assert_eq!(send(first.url("/a")).await.unwrap().status(), StatusCode::OK);
    let refused = send(first.url("/a")).await.unwrap_err();
    let key = format!("127.0.0.1:{}", first.addr.port());
    assert_eq!(rejection(&refused), Some(&Rejection::RateLimited { limiter: format!("hosts[{key}]") }));
    assert_eq!(send(second.url("/a")).await.unwrap().status(), StatusCode::OK, "another host's quota");
    assert_eq!(first.hits("/a"), 1, "the refused request never went out");
}

/// A bulkhead per key (item 3) is one per host and port: a host whose one
/// place is taken by a slow request refuses a second after its 10 ms
/// `max_wait`, and another host's request goes at once.
#[tokio::test(start_paused = true)]
async fn a_bulkhead_per_key_is_one_per_host_and_port() {
    let slow = Server::start(&[("/slow", &[status(200).after(1_000)])]).await;
    let other = Server::start(&[]).await;
    let registry = Registry::new();
    let one_place = BulkheadConfig { max_concurrent: 1, max_wait: Some(ms(10)), ..Default::default() };
    registry.declare_bulkhead("hosts", one_place).unwrap();
    let client = paused_client(policy(1).bulkhead_per("hosts").budget("none"));
    registry
        .scope(async {
            let holder = tokio::spawn(Registry::current().scope(client.get(slow.url("/slow")).send()));
            until_seen(&slow, "/slow").await;
            let refused = client.get(slow.url("/slow")).send().await.unwrap_err();
            let key = format!("127.0.0.1:{}", slow.addr.port());
            assert_eq!(
                rejection(&refused),
                Some(&Rejection::BulkheadFull { bulkhead: format!("hosts[{key}]") })
            );
            assert_eq!(client.get(other.url("/a")).send().await.unwrap().status(), StatusCode::OK);
            assert_eq!(holder.await.unwrap().unwrap().status(), StatusCode::OK);
        })
        .await;
}

/// A request's `x-priority` header (item 6): with the bulkhead's one place
/// taken, a `sheddable` request is refused at once where one of the
/// default priority waits for the place (its `max_wait`) and gets it.
#[tokio::test(start_paused = true)]
async fn a_requests_x_priority_header_sets_its_priority() {
    let server = Server::start(&[("/slow", &[status(200).after(100)])]).await;
    let registry = Registry::new();
    let one_place = BulkheadConfig { max_concurrent: 1, max_wait: Some(ms(500)), ..Default::default() };
    registry.declare_bulkhead("search", one_place).unwrap();
    let client = paused_client(policy(1).bulkhead("search").budget("none"));
    registry
        .scope(async {
            let holder = tokio::spawn(Registry::current().scope(client.get(server.url("/slow")).send()));
            until_seen(&server, "/slow").await;
            let start = tokio::time::Instant::now();
            let shed =
                client.get(server.url("/a")).header("x-priority", "sheddable").send().await.unwrap_err();
            assert_eq!(rejection(&shed), Some(&Rejection::BulkheadFull { bulkhead: "search".into() }));
            assert_eq!(start.elapsed(), Duration::ZERO, "refused at once");
            let waited = client.get(server.url("/a")).send().await.unwrap();
            assert_eq!(waited.status(), StatusCode::OK, "the default priority waits for the place");
            assert!(start.elapsed() >= ms(100), "it waited for the slow request: {:?}", start.elapsed());
            assert_eq!(holder.await.unwrap().unwrap().status(), StatusCode::OK);
        })
        .await;
    assert_eq!(server.hits("/a"), 1, "the sheddable request never went out");
}

/// Retry cost by class (item 4): a token bucket of 2 tokens whose retries
/// cost 2, or 1 after a throttle, pays one retry after 503s and two after
/// 429s (`Retry-After: 0`); each call's bucket is fresh.
#[tokio::test]
async fn a_retry_after_a_throttle_costs_the_buckets_throttled_cost() {
    let server = Server::start(&[
        ("/unavailable", &[status(503), status(503)]),
        ("/throttled", &[throttled("0"), throttled("0")]),
    ])
    .await;
    for (path, attempts_made) in [("/unavailable", 2), ("/throttled", 3)] {
        let registry = Registry::new();
        let bucket =
            TokenBucket { capacity: 2, retry_cost: 2, throttled_cost: Some(1), ..Default::default() };
        registry.declare_budget("costs", bucket).unwrap();
        let client = client(policy(3).budget("costs").breaker("none"));
        let response = registry.scope(client.get(server.url(path)).send()).await.unwrap();
        assert_eq!(attempts(&response), attempts_made, "{path}");
    }
}

/// gRPC's retry throttling (item 5) as an HTTP client's budget: 10 tokens,
/// each failure takes one, and retries go only while more than half are
/// left, so a host that always fails is sent 5 attempts, not the policy's 10.
#[tokio::test]
async fn retry_throttling_stops_retries_at_half_its_tokens() {
    let failing = [status(503); 10];
    let server = Server::start(&[("/down", &failing)]).await;
    let registry = Registry::new();
    registry.declare_budget("grpc", RetryThrottling { max_tokens: 10, token_ratio: 0.1 }).unwrap();
    let client = client(policy(10).budget("grpc").breaker("none"));
    let response = registry.scope(client.get(server.url("/down")).send()).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 5));
    assert_eq!(server.hits("/down"), 5);
}

/// A `GuardKey` in a request's extensions keys its guards per key instead
/// of its host: two tenants calling one host have a breaker each, and the
/// one whose calls fail is cut off alone.
#[tokio::test]
async fn a_guard_key_in_the_extensions_keys_the_guards_instead_of_the_host() {
    let server = Server::start(&[("/search", &[status(503), status(503)])]).await;
    let registry = Registry::new();
    registry.declare_breaker("search", BreakerConfig { failure_threshold: 2, ..Default::default() }).unwrap();
    let client = client(policy(2).breaker_per("search").budget("none"));
    let as_tenant =
        |tenant: &'static str| client.get(server.url("/search")).with_extension(GuardKey::new(tenant)).send();
    let response = registry.scope(as_tenant("tenant-a")).await.unwrap();
    assert_eq!((response.status(), attempts(&response)), (StatusCode::SERVICE_UNAVAILABLE, 2));
    assert_eq!(registry.breaker_for("search", "tenant-a").state(), BreakerState::Open);
    let refused = registry.scope(as_tenant("tenant-a")).await.unwrap_err();
    assert_eq!(rejection(&refused), Some(&Rejection::CircuitOpen { breaker: "search[tenant-a]".into() }));
    let response = registry.scope(as_tenant("tenant-b")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "the other tenant's breaker is closed");
    let host = format!("127.0.0.1:{}", server.addr.port());
    assert!(registry.keyed_breakers("search").unwrap().peek(&host).is_none(), "no breaker for the host");
}
