//! Classification of the HTTP client errors users actually have (feature `reqwest`).

use crate::classify::{Classify, ErrorClass};

/// Connect errors, timeouts and broken requests or bodies are transient
/// (the next attempt may reach a healthy server); an error status is
/// classified by [`ErrorClass::from_http`]; decode, builder and redirect
/// errors are permanent (the same request would fail the same way).
impl Classify for reqwest::Error {
    fn classify(&self) -> ErrorClass {
        if let Some(status) = self.status() {
            return ErrorClass::from_http(status.as_u16(), None);
        }
        if self.is_decode() || self.is_builder() || self.is_redirect() {
            ErrorClass::Permanent
        } else if self.is_connect() || self.is_timeout() || self.is_request() || self.is_body() {
            ErrorClass::Transient
        } else {
            ErrorClass::Permanent
        }
    }
}

/// The class of a response: its status plus its `Retry-After` header.
/// A success status classifies as permanent (there is nothing to retry).
///
/// ```no_run
/// # async fn demo(client: reqwest::Client) -> Result<(), reqwest::Error> {
/// let response = client.get("http://127.0.0.1:8080/quote").send().await?;
/// if !response.status().is_success() {
///     let class = retry_runtime::http::classify_response(&response);
///     println!("{class:?}");
/// }
/// # Ok(()) }
/// ```
pub fn classify_response(response: &reqwest::Response) -> ErrorClass {
    let retry_after = response.headers().get(reqwest::header::RETRY_AFTER).and_then(|v| v.to_str().ok());
    ErrorClass::from_http(response.status().as_u16(), retry_after)
}
