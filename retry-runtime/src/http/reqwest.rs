//! Classification of the HTTP client errors users actually have (feature `reqwest`).

use crate::classify::{Classify, ErrorClass};

/// Connect errors, timeouts and broken requests or bodies are transient
/// (the next attempt may reach a healthy server); an error status is
/// classified by [`ErrorClass::from_http`]; decode, builder and redirect
/// errors are permanent (the same request would fail the same way).
///
/// reqwest reports a response body that failed to arrive (the connection
/// reset or closed mid-body, the timeout elapsed while reading it) as a
/// decode error too, from `text()`, `json()` and `bytes()`: such a decode
/// error is a broken body, classified by its cause, and only a body that
/// arrived whole but did not decode is permanent.
impl Classify for reqwest::Error {
    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self)
    }

    fn classify(&self) -> ErrorClass {
        if let Some(status) = self.status() {
            return ErrorClass::from_http(status.as_u16(), None);
        }
        if self.is_builder() || self.is_redirect() {
            ErrorClass::Permanent
        } else if self.is_decode() {
            body_read_failure(self).unwrap_or(ErrorClass::Permanent)
        } else if self.is_connect() || self.is_timeout() || self.is_request() || self.is_body() {
            ErrorClass::Transient
        } else {
            ErrorClass::Permanent
        }
    }
}

/// The class of a decode error that is a failed read of the response body:
/// a timeout or a body error is transient, an I/O error (hyper's, for a
/// connection reset or a body cut short) is classified by its kind. `None`
/// when nothing in its chain failed in transit: the body did not decode.
fn body_read_failure(error: &reqwest::Error) -> Option<ErrorClass> {
    if error.is_timeout() {
        return Some(ErrorClass::Transient);
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return Some(io.classify());
        }
        if cause.downcast_ref::<reqwest::Error>().is_some_and(reqwest::Error::is_body) {
            return Some(ErrorClass::Transient);
        }
        source = cause.source();
    }
    None
}

/// The class of a response: its status plus its `Retry-After` header (two
/// lines of it read as one list, as a proxy merges them: see
/// [`parse_retry_after`](crate::classify::parse_retry_after)). A success status
/// classifies as permanent (there is nothing to retry).
///
/// ```no_run
/// # async fn demo(client: reqwest::Client) -> Result<(), reqwest::Error> {
/// let response = client.get("http://127.0.0.1:8080/quote").send().await?;
/// if !response.status().is_success() {
///     let class = stormproof_runtime::http::classify_response(&response);
///     println!("{class:?}");
/// }
/// # Ok(()) }
/// ```
pub fn classify_response(response: &reqwest::Response) -> ErrorClass {
    // The layers' rule, whose success (below 400) is permanent here.
    super::rules::response_class(response.status(), response.headers()).unwrap_or(ErrorClass::Permanent)
}
