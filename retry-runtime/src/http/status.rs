//! `error_for_status` that keeps what the server said about when to come
//! back (feature `reqwest`).
//!
//! reqwest's own `Response::error_for_status()` turns an error status into
//! a `reqwest::Error` that keeps the status and drops the headers: a 429 or
//! a 503 carrying `Retry-After: 2` is then retried after the backoff alone
//! (100 ms by default), hammering a server that asked for two seconds.
//! [`error_for_status`] keeps the `Retry-After`, and its [`StatusError`] is
//! classified exactly as the tower layer and the reqwest middleware
//! classify a response (the same function).

use std::fmt;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::RETRY_AFTER;

use crate::classify::{Classify, ErrorClass, parse_retry_after, retry_after_lines};

/// A response whose status is an error (400 and above), as an error that
/// keeps its `Retry-After`: what [`error_for_status`] returns.
///
/// Classified as the HTTP layers classify a response: 408 and 5xx
/// transient, 429 throttled, a 503 with a `Retry-After` throttled too,
/// every other status permanent; a throttled one waits at least the
/// server's `Retry-After` (delta-seconds or an HTTP-date, two lines read as
/// one list) before the retry. Inside an `anyhow::Error`, a
/// `Box<dyn Error>` or a [`stormproof::Error`](crate::Error), the
/// classification walk finds it.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusError {
    status: StatusCode,
    // Boxed: a `Url` is 88 bytes, and the `Err` of every call's result
    // would carry them.
    url: Box<reqwest::Url>,
    retry_after: Option<Duration>,
    class: ErrorClass,
}

impl StatusError {
    /// The response's status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The URL the response came from.
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// The wait the server asked for in its `Retry-After`, if it sent one
    /// that parses (an HTTP-date is measured from the wall clock when the
    /// response was read).
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl fmt::Display for StatusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP status {} for url ({})", self.status, self.url)
    }
}

impl std::error::Error for StatusError {}

impl Classify for StatusError {
    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self)
    }

    fn classify(&self) -> ErrorClass {
        self.class
    }
}

/// The response if its status is a success (below 400), else a
/// [`StatusError`] that keeps its `Retry-After`: use it where you would
/// write `response.error_for_status()`, which loses that header.
///
/// ```no_run
/// # use stormproof_runtime as stormproof;
/// # async fn demo(client: reqwest::Client, url: &str) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use stormproof::{Policy, http};
///
/// let policy = Policy::builder().max_attempts(4).build()?;
/// // A 429 with `Retry-After: 2` is retried two seconds later, not 100 ms.
/// let quote = policy
///     .run(|| async {
///         let response = http::error_for_status(client.get(url).send().await?)?;
///         Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response.text().await?)
///     })
///     .await?;
/// # let _ = quote;
/// # Ok(()) }
/// ```
pub fn error_for_status(response: reqwest::Response) -> Result<reqwest::Response, StatusError> {
    let Some(class) = super::rules::response_class(response.status(), response.headers()) else {
        return Ok(response);
    };
    let lines = response.headers().get_all(RETRY_AFTER).into_iter().map(|value| value.to_str().ok());
    let retry_after = retry_after_lines(lines).as_deref().and_then(parse_retry_after);
    Err(StatusError { status: response.status(), url: Box::new(response.url().clone()), retry_after, class })
}
