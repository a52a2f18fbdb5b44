//! `stormproof::http::error_for_status`: the README's own path keeps what
//! the server said about when to come back. reqwest's
//! `Response::error_for_status()` drops the headers, so a 429 carrying
//! `Retry-After: 2` was retried after the backoff alone (100 ms);
//! `error_for_status` keeps it, over a real loopback server
//! (`tests/loopback`) on tokio's paused clock, with an anyhow-returning
//! annotated function as the README writes it. Its `StatusError` is
//! classified by the very rule the HTTP layers use, and the anyhow,
//! `Box<dyn Error>` and `Error<E>` walks find it.

// The shared server; this binary uses its scripts and its log, not its
// charges or connection count.
#[allow(dead_code)]
mod loopback;

use std::error::Error as StdError;
use std::time::Duration;

use loopback::{Server, status, throttled, unavailable};
use stormproof::http::{StatusError, classify_response, error_for_status};
use stormproof::{Classify, Error, ErrorClass, Rejection, resilient};

type BoxError = Box<dyn StdError + Send + Sync>;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A client with no idle-connection reaper: on the paused clock only the
/// library's timers move time.
fn client() -> reqwest::Client {
    reqwest::Client::builder().pool_idle_timeout(None).build().unwrap()
}

#[resilient(max_attempts = 3, base_ms = 100, jitter = "none")]
async fn quote(client: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let response = error_for_status(client.get(url).send().await?)?;
    Ok(response.text().await?)
}

/// The same function with reqwest's own `error_for_status()`: what the
/// README wrote before, kept to show what it cost.
#[resilient(max_attempts = 3, base_ms = 100, jitter = "none")]
async fn quote_headers_dropped(client: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    Ok(client.get(url).send().await?.error_for_status()?.text().await?)
}

#[tokio::test(start_paused = true)]
async fn a_429_with_retry_after_2_is_retried_two_seconds_later_not_after_the_backoff() {
    let server = Server::start(&[("/quote", &[throttled("2")])]).await;
    let answer = quote(&client(), &server.url("/quote")).await.unwrap();
    assert_eq!(answer, "answer 2");
    let seen = server.seen("/quote");
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].at - seen[0].at, secs(2), "the server's two seconds, not the 100 ms backoff");
}

#[tokio::test(start_paused = true)]
async fn a_503_with_retry_after_is_waited_for_too() {
    let server = Server::start(&[("/quote", &[unavailable("3")])]).await;
    assert_eq!(quote(&client(), &server.url("/quote")).await.unwrap(), "answer 2");
    let seen = server.seen("/quote");
    assert_eq!(seen[1].at - seen[0].at, secs(3));
}

#[tokio::test(start_paused = true)]
async fn reqwests_own_error_for_status_loses_the_retry_after() {
    let server = Server::start(&[("/quote", &[throttled("2")])]).await;
    assert_eq!(quote_headers_dropped(&client(), &server.url("/quote")).await.unwrap(), "answer 2");
    let seen = server.seen("/quote");
    assert_eq!(
        seen[1].at - seen[0].at,
        Duration::from_millis(100),
        "the backoff alone: why error_for_status exists"
    );
}

#[tokio::test(start_paused = true)]
async fn a_permanent_status_is_returned_at_once_with_its_status_and_url() {
    let server = Server::start(&[("/quote", &[status(404)])]).await;
    let url = server.url("/quote");
    let error = quote(&client(), &url).await.unwrap_err();
    assert_eq!(server.hits("/quote"), 1, "a 404 is not retried");
    let status = error.downcast_ref::<StatusError>().expect("the caller gets the StatusError back");
    assert_eq!((status.status().as_u16(), status.url().as_str()), (404, url.as_str()));
    assert_eq!(status.retry_after(), None);
    assert_eq!(error.to_string(), format!("HTTP status 404 Not Found for url ({url})"));
}

/// A response of this status and these `Retry-After` lines, made in
/// process (reqwest builds one from an `http::Response`).
fn response(code: u16, retry_after: &[&str]) -> reqwest::Response {
    let mut builder = http::Response::builder().status(code);
    for line in retry_after {
        builder = builder.header("retry-after", *line);
    }
    reqwest::Response::from(builder.body("").unwrap())
}

#[test]
fn a_success_is_the_response_itself() {
    for code in [200, 204, 301, 304, 399, 600, 999] {
        let ok = error_for_status(response(code, &["5"])).expect("outside 400..=599, as reqwest reads it");
        assert_eq!(ok.status().as_u16(), code);
    }
}

#[test]
fn an_error_status_is_classified_by_the_layers_own_rule() {
    let cases: &[(u16, &[&str], ErrorClass)] = &[
        (400, &[], ErrorClass::Permanent),
        (404, &["2"], ErrorClass::Permanent),
        (408, &[], ErrorClass::Transient),
        (429, &[], ErrorClass::Throttled { retry_after: None }),
        (429, &["2"], ErrorClass::Throttled { retry_after: Some(secs(2)) }),
        (429, &["7", "9"], ErrorClass::Throttled { retry_after: Some(secs(9)) }), // two lines: the longest
        (500, &[], ErrorClass::Transient),
        (502, &[], ErrorClass::Transient),
        (503, &[], ErrorClass::Transient),
        (503, &["4"], ErrorClass::Throttled { retry_after: Some(secs(4)) }),
        (429, &["soon"], ErrorClass::Throttled { retry_after: None }),
    ];
    for &(code, lines, expected) in cases {
        let error = error_for_status(response(code, lines)).unwrap_err();
        assert_eq!(error.classify(), expected, "{code} {lines:?}");
        assert_eq!(error.classify(), classify_response(&response(code, lines)), "{code} {lines:?}: one rule");
        assert_eq!(error.status().as_u16(), code);
    }
}

#[test]
fn retry_after_reads_both_forms() {
    assert_eq!(error_for_status(response(429, &["120"])).unwrap_err().retry_after(), Some(secs(120)));
    let in_a_minute = httpdate::fmt_http_date(std::time::SystemTime::now() + secs(61));
    let waited = error_for_status(response(429, &[&in_a_minute])).unwrap_err().retry_after().unwrap();
    assert!(waited > secs(55) && waited <= secs(61), "an HTTP-date a minute away: {waited:?}");
    assert_eq!(error_for_status(response(500, &["nonsense"])).unwrap_err().retry_after(), None);
}

#[test]
fn the_classification_walks_find_it_in_anyhow_a_box_and_error_of_e() {
    let throttled = || error_for_status(response(429, &["2"])).unwrap_err();
    let expected = ErrorClass::Throttled { retry_after: Some(secs(2)) };

    let plain = anyhow::Error::from(throttled());
    assert_eq!(plain.classify(), expected);
    let with_context = anyhow::Error::from(throttled()).context("fetching the quote");
    assert_eq!(with_context.classify(), expected, "under a context layer");

    let boxed: BoxError = Box::new(throttled());
    assert_eq!(boxed.classify(), expected);

    let wrapped: Error<StatusError> = Error::Inner(throttled());
    assert_eq!(wrapped.classify(), expected);
    let wrapped_in_a_box: BoxError = Box::new(Error::Inner(throttled()));
    assert_eq!(wrapped_in_a_box.classify(), expected, "Error<StatusError> inside a box");

    // A permanent status stays permanent through every walk: the walk
    // would call an unknown error transient.
    let not_found = || error_for_status(response(404, &[])).unwrap_err();
    assert_eq!(anyhow::Error::from(not_found()).classify(), ErrorClass::Permanent);
    let boxed: BoxError = Box::new(not_found());
    assert_eq!(boxed.classify(), ErrorClass::Permanent);
    let rejected: Error<StatusError> = Error::Rejected(Rejection::CircuitOpen { breaker: "quotes".into() });
    assert_eq!(rejected.classify(), ErrorClass::Permanent);
}

#[test]
fn a_status_error_is_a_thread_safe_std_error() {
    fn assert_error<T: StdError + Send + Sync + 'static>() {}
    assert_error::<StatusError>();
}
