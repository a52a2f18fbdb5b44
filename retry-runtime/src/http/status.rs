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

use reqwest::header::RETRY_AFTER;

use crate::classify::{parse_retry_after, retry_after_lines};
pub use crate::errors::StatusError;

/// The response if its status is not an error (outside 400..=599, as
/// reqwest's own `error_for_status` reads it), else a
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
    // reqwest's range: a status outside 400..=599 (a non-standard 999, say)
    // is not an error there, nor here.
    if !(400..600).contains(&response.status().as_u16()) {
        return Ok(response);
    }
    let Some(class) = super::rules::response_class(response.status(), response.headers()) else {
        return Ok(response);
    };
    let lines = response.headers().get_all(RETRY_AFTER).into_iter().map(|value| value.to_str().ok());
    let retry_after = retry_after_lines(lines).as_deref().and_then(parse_retry_after);
    Err(StatusError::new(response.status(), response.url().clone(), retry_after, class))
}
