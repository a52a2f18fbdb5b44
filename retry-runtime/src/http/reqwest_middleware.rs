//! The policy as [reqwest-middleware](https://docs.rs/reqwest-middleware)
//! middleware (feature `reqwest-middleware`, for reqwest 0.13), with the
//! same rules as the tower layer's `ResilientLayer::new` (feature `tower`),
//! from the same code:
//!
//! - **Which requests are retried**: `GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT`
//!   and `DELETE`; `POST`, `PATCH` and other methods only with a non-empty
//!   `Idempotency-Key` header (its value is the call's
//!   [`idempotency_key()`](crate::idempotency_key)), else one attempt, which
//!   mirrors the attribute's compile-time rule. A request whose body is a
//!   stream (`Request::try_clone` gives `None`) gets one attempt.
//! - **Responses**: below 400 a success; else classified by status and
//!   `Retry-After` ([`ErrorClass::from_http`](crate::ErrorClass::from_http)):
//!   408 and 5xx transient, 429 throttled, other 4xx permanent. When the
//!   attempts end with a failed response, the caller gets the last
//!   response, as `Ok`; when the last attempt failed with an error, that
//!   error. The attempts made are in the response's extensions
//!   ([`Attempts`]).
//! - **A failed response is read before its retry**: once the retry is
//!   admitted, what is left of its body is read (at most 64 KiB, for at
//!   most 50 ms or a quarter of the attempt timeout, within the retry's
//!   attempt) and dropped, and after a body read whole the retry's request
//!   waits 1 ms, so that the HTTP/1 connection goes back to reqwest's pool
//!   and carries the retry: reqwest closes a connection whose response was
//!   dropped unread, and every retry would open a new one. The drain and
//!   that pause are taken inside the backoff, not added to it: the retry is
//!   admitted 2 ms (at most a quarter of the attempt timeout) before its
//!   wait ends, and its request goes out when the wait ends; only a body
//!   still arriving then delays it. A longer, slower or broken body is
//!   dropped as it is (its connection closes); an HTTP/2 response is not
//!   read. The response the caller gets, the last one or one whose retry
//!   could not run, is never read.
//! - **Errors**: a `reqwest::Error` is classified by kind (connect and
//!   timeout errors transient); an error of another middleware by its
//!   `source()` chain. When no attempt could run (an open breaker), the
//!   error is `reqwest_middleware::Error::Middleware` holding the
//!   [`Rejection`]: `anyhow_error.downcast_ref::<Rejection>()`.
//! - The policy's backoff, deadline, attempt timeout and named breaker,
//!   budget and bulkhead (from the registry in effect) all apply. Each
//!   retry runs the rest of the middleware chain again.
//!
//! ```no_run
//! # use stormproof_runtime as stormproof;
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use stormproof::{http::Attempts, Policy, http::reqwest_middleware::ResilientMiddleware};
//!
//! let policy = Policy::builder().max_attempts(4).base(Duration::from_millis(50)).breaker("inventory").build()?;
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(ResilientMiddleware::new(policy))
//!     .build();
//! let response = client.get("http://127.0.0.1:8080/stock/A-1").send().await?;
//! let attempts = response.extensions().get::<Attempts>().map_or(0, |a| a.get());
//! println!("{} after {attempts} attempts", response.status());
//! # Ok(()) }
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ::reqwest_middleware::{Error, Middleware, Next};
use http::Extensions;

use super::attempts::Attempts;
use super::exchange::{self, Plan, Transport};
use super::{drain, rules};
use crate::classify::{Classify, ErrorClass};
use crate::errors::classify_chain;
use crate::policy::Policy;
use crate::rejection::Rejection;

/// Middleware that makes every request through the client a resilient call
/// under one [`Policy`]; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct ResilientMiddleware {
    policy: Arc<Policy>,
}

impl ResilientMiddleware {
    /// Middleware following `policy` (a [`Policy`] or an `Arc<Policy>`).
    pub fn new(policy: impl Into<Arc<Policy>>) -> Self {
        ResilientMiddleware { policy: policy.into() }
    }

    /// The policy every call follows.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
}

#[async_trait::async_trait]
impl Middleware for ResilientMiddleware {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> Result<reqwest::Response, Error> {
        exchange::run(&self.policy, &mut Chain { next, extensions }, request).await
    }
}

/// A `reqwest::Error` by its kind (see its `Classify`), an error of a
/// middleware by its `source()` chain (the [`Rejection`] of an open
/// breaker is permanent).
///
/// A boxed or `anyhow` error is classified by this too when it holds one:
/// `reqwest_middleware::Error` is transparent (its `source()` is its
/// content's), so a walk of the chain would otherwise pass over the error
/// it holds.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{Classify, ErrorClass, Rejection};
/// let open = reqwest_middleware::Error::middleware(Rejection::CircuitOpen { breaker: "db".into() });
/// assert_eq!(open.classify(), ErrorClass::Permanent);
/// let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(open);
/// assert_eq!(boxed.classify(), ErrorClass::Permanent);
/// ```
impl Classify for Error {
    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self)
    }

    fn classify(&self) -> ErrorClass {
        match self {
            Error::Reqwest(error) => error.classify(),
            Error::Middleware(error) => classify_chain(&**error),
        }
    }
}

/// The rest of the middleware chain, as one call's transport.
struct Chain<'n, 'e> {
    next: Next<'n>,
    extensions: &'e mut Extensions,
}

impl Transport for Chain<'_, '_> {
    type Request = reqwest::Request;
    type Response = reqwest::Response;
    type Error = Error;

    #[inline]
    fn plan(request: &reqwest::Request) -> Plan {
        rules::plan(request.method(), request.headers())
    }

    fn breaker_key<'r>(&'r self, request: &'r reqwest::Request) -> std::borrow::Cow<'r, str> {
        if let Some(key) = self.extensions.get::<crate::http::GuardKey>() {
            return key.as_str().into();
        }
        let url = request.url();
        match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => {
                rules::breaker_key(Some(&format!("{host}:{port}"))).into_owned().into()
            }
            (host, None) => rules::breaker_key(host),
            (None, Some(_)) => "".into(),
        }
    }

    #[inline]
    fn try_copy(request: &reqwest::Request) -> Option<reqwest::Request> {
        request.try_clone()
    }

    #[inline]
    fn response_class(response: &reqwest::Response) -> Option<ErrorClass> {
        rules::response_class(response.status(), response.headers())
    }

    #[inline]
    fn finish(response: &mut reqwest::Response, attempts: Attempts) {
        response.extensions_mut().insert(attempts);
    }

    async fn discard(response: reqwest::Response, within: Duration) -> drain::Drained {
        // Its body as an `http_body::Body` (reqwest's `Body` is one).
        let version = response.version();
        let body = http::Response::<reqwest::Body>::from(response).into_body();
        drain::discard(version, body, within).await
    }

    #[inline]
    fn classify(error: &Error) -> ErrorClass {
        error.classify()
    }

    fn reject(rejection: Rejection) -> Error {
        Error::middleware(rejection)
    }

    fn send(
        &mut self,
        request: reqwest::Request,
    ) -> impl Future<Output = Result<reqwest::Response, Error>> + Send {
        // Lazily: a middleware further down may start work in `handle`.
        let (next, extensions) = (self.next.clone(), &mut *self.extensions);
        async move { next.run(request, extensions).await }
    }
}
