//! [`StatusError`]: an HTTP response whose status is an error, kept with
//! its `Retry-After` (feature `reqwest`). Made by
//! [`http::error_for_status`](crate::http::error_for_status); here, beside
//! the other error types the classification walk knows, so that the walk
//! needs nothing of the HTTP module.

use std::fmt;
use std::time::Duration;

use reqwest::StatusCode;

use crate::classify::{Classify, ErrorClass};

/// A response whose status is an error (400 and above), as an error that
/// keeps its `Retry-After`: what [`error_for_status`](crate::http::error_for_status) returns.
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
    /// The error of a response with this status, from this URL, whose
    /// `Retry-After` asked for this wait, of this class.
    pub(crate) fn new(
        status: StatusCode,
        url: reqwest::Url,
        retry_after: Option<Duration>,
        class: ErrorClass,
    ) -> Self {
        StatusError { status, url: Box::new(url), retry_after, class }
    }

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
