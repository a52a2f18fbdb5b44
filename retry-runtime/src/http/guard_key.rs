//! The key a request's guards per key are found by, when it is not its host.

use std::sync::Arc;

/// The key of a request's guards per key, in place of its host and port.
///
/// Through the HTTP layers, a policy with guards per key
/// ([`PolicyBuilder::breaker_per`](crate::PolicyBuilder::breaker_per),
/// `bulkhead_per`, `rate_limit_per`) finds them by the request's host and
/// port. To find them by a tenant, a shard or a region instead, as
/// `#[resilient(breaker = "search", per = tenant)]` does, put a `GuardKey`
/// in the request's extensions: `request.extensions_mut().insert(..)`
/// through the tower layer, `.with_extension(..)` on a reqwest-middleware
/// request. A request without one keeps its host's.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::http::GuardKey;
/// let mut request = http::Request::get("http://search.internal/q").body(())?;
/// request.extensions_mut().insert(GuardKey::new("tenant-a"));
/// // Through `ResilientLayer::new(policy)` with `.breaker_per("search")`,
/// // this request's breaker is `search[tenant-a]`, not `search[search.internal]`.
/// assert_eq!(request.extensions().get::<GuardKey>().map(GuardKey::as_str), Some("tenant-a"));
/// # Ok::<(), http::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GuardKey(Arc<str>);

impl GuardKey {
    /// The key `key`.
    pub fn new(key: impl Into<Arc<str>>) -> Self {
        GuardKey(key.into())
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for GuardKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
