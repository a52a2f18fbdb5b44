//! The policy as a tower [`Layer`] (feature `tower`), for clients built on
//! tower: hyper-util's client, tonic channels, any `tower::Service`.
//!
//! Two constructors, because a service is either HTTP or not:
//!
//! - [`ResilientLayer::new`] serves `http::Request<B>` → `http::Response<RB>`.
//!   The status decides too: below 400 is a success; 408 and 5xx are
//!   transient, 429 throttled (its `Retry-After` honoured), every other 4xx
//!   permanent (returned at once), through
//!   [`ErrorClass::from_http`](crate::ErrorClass::from_http). When the
//!   attempts end with a failed response, the caller gets **the last
//!   response**, as `Ok`; when the last attempt failed with an error, that
//!   error. The attempts made are in the response's extensions
//!   ([`Attempts`](super::Attempts)).
//! - [`ResilientLayer::cloning`] serves any request that is `Clone` and
//!   says whether it may be sent again ([`CloneRequest`]: your own request
//!   types, gRPC messages behind a codec, the plain types, and
//!   `http::Request` by the HTTP rule below), clones it for each attempt,
//!   and classifies only errors: every response is a success.
//!
//! One constructor cannot serve both: `http::Request<Full<Bytes>>` is itself
//! `Clone`, so an implementation for "any `Clone` request" and one for
//! "HTTP requests" would overlap, and Rust (without specialization) allows
//! only one. Handing the service of `new` over a non-HTTP service to code
//! that needs a `Service<Req>` is a compile error that names `cloning`
//! (`tests/ui/tower_new_on_a_non_http_service.rs`); a method call on it
//! (`.oneshot(req)`) gets rustc's plain "trait bounds were not satisfied",
//! which shows no library's notes.
//!
//! **Which requests are retried** (both constructors). The rule mirrors
//! the attribute's compile-time one (`idempotent = false` needs a `key`),
//! at run time: `GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT` and `DELETE` are
//! idempotent and retried; `POST`, `PATCH` and other methods are retried
//! only when the request carries a non-empty `Idempotency-Key` header, and
//! otherwise get one attempt, whether the layer was built with `new` or an
//! `http::Request` goes through `cloning`. The header's value is the call's
//! idempotency key ([`idempotency_key()`](crate::idempotency_key) returns
//! it inside the attempt). Through `new`, a request is sent again only
//! when its body can be copied ([`CloneBody`]): buffered bodies
//! (`Full<Bytes>`, `String`, ...) can; a streaming body gets one attempt.
//!
//! **A failed response is read before its retry** (`new`): once the retry
//! is admitted, what is left of the failed response's body is read (at most
//! 64 KiB, for at most 50 ms or a quarter of the attempt timeout or of the
//! time left before the deadline, within the retry's attempt) and dropped,
//! and after a body read whole the retry's request waits 1 ms, so that the
//! HTTP/1 connection goes back to the client's pool and carries the retry:
//! hyper closes a connection whose response was dropped unread, and every
//! retry would open a new one. The drain and that pause are taken inside
//! the backoff, not added to it: the retry is admitted 2 ms (at most a
//! quarter of the attempt timeout) before its wait ends, and its request
//! goes out when the wait ends; only a body still arriving then delays it.
//! A longer, slower or broken body is dropped as it is (its connection
//! closes); an HTTP/2 response is not read. The response the caller gets,
//! the last one or one whose retry could not run, is never read. So the
//! response body must be an [`http_body::Body`], as every HTTP client's is
//! (`String` is one too).
//!
//! **Everything else is the policy's**: backoff, deadline, attempt timeout
//! (an attempt ends when the response's head arrives; reading its body is
//! yours), and the named breaker, budget and bulkhead, found in the
//! registry in effect when the call starts (a [`Registry::scope`](crate::Registry::scope)
//! included), so a layer and a `#[resilient]` function naming the same
//! breaker share it. A call made inside another resilient call's attempt
//! makes one attempt (the policy's `nested` setting), as annotated calls do.
//!
//! **Errors.** The service's error type is [`BoxError`] (tower's, by
//! another name): the inner service's errors are boxed into it and
//! classified by walking their `source()` chain (an `io::Error` by kind,
//! errors the walk does not know are transient; with feature `hyper-util`,
//! hyper-util's client's error for a failed connect, DNS included, is
//! transient, as reqwest's is). When no attempt could run
//! (an open breaker, a full bulkhead), the error is the
//! [`Rejection`](crate::rejection::Rejection), boxed:
//! `error.downcast_ref::<Rejection>()` finds it.
//!
//! **Tower's conventions**, as `tower::retry` keeps them: `poll_ready`
//! asks the inner service; `call` takes the service made ready and leaves a
//! clone in its place; every retry waits for the inner service to be ready
//! again (inside the attempt, so under its timeout). The layer and the
//! service are `Clone`; the response future is `Send` and `'static`.
//!
//! ```
//! # use stormproof_runtime as stormproof;
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use bytes::Bytes;
//! use http::{Request, Response, StatusCode};
//! use http_body_util::Full;
//! use stormproof::{http::Attempts, Policy, http::tower::ResilientLayer};
//! use tower_layer::Layer;
//! use tower_service::Service;
//!
//! // An HTTP service that answers 503 twice, then 200.
//! #[derive(Clone, Default)]
//! struct Flaky(Arc<AtomicU32>);
//! impl Service<Request<Full<Bytes>>> for Flaky {
//!     type Response = Response<String>;
//!     type Error = std::convert::Infallible;
//!     type Future = std::future::Ready<Result<Response<String>, Self::Error>>;
//!     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
//!         std::task::Poll::Ready(Ok(()))
//!     }
//!     fn call(&mut self, _: Request<Full<Bytes>>) -> Self::Future {
//!         let status = if self.0.fetch_add(1, Ordering::SeqCst) < 2 { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
//!         std::future::ready(Ok(Response::builder().status(status).body(String::new()).unwrap()))
//!     }
//! }
//!
//! let policy = Policy::builder().max_attempts(4).base(Duration::from_millis(10)).breaker("inventory").build()?;
//! let mut client = ResilientLayer::new(policy).layer(Flaky::default());
//! let request = Request::get("http://inventory/stock/A-1").body(Full::new(Bytes::new()))?;
//! // `tower::ServiceExt::oneshot(client, request)` does these two steps.
//! std::future::poll_fn(|cx| Service::<Request<_>>::poll_ready(&mut client, cx)).await?;
//! let response = client.call(request).await?;
//! assert_eq!(response.status(), StatusCode::OK);
//! assert_eq!(response.extensions().get::<Attempts>().map(|a| a.get()), Some(3));
//! # Ok(()) }
//! ```

mod body;
mod future;
mod request;
mod transport;

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

pub use body::CloneBody;
pub use future::ResponseFuture;
pub use request::CloneRequest;

use crate::policy::Policy;
use transport::{CloneTransport, HttpTransport, Inner};

/// The error type of a [`ResilientService`]: tower's `BoxError`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The mode of [`ResilientLayer::new`]: HTTP requests and responses.
#[derive(Debug, Clone, Copy, Default)]
pub struct Http;

/// The mode of [`ResilientLayer::cloning`]: any [`CloneRequest`], errors
/// classified, every response a success.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cloning;

/// A tower layer that makes every call through the services it wraps a
/// resilient call under one [`Policy`]; see the [module docs](self).
pub struct ResilientLayer<M = Http> {
    policy: Arc<Policy>,
    mode: PhantomData<fn() -> M>,
}

impl ResilientLayer<Http> {
    /// A layer for HTTP services (`http::Request<B>` → `http::Response<RB>`,
    /// `RB` an [`http_body::Body`]): responses are classified by status and
    /// `Retry-After`, requests are retried by method and `Idempotency-Key`,
    /// a request is sent again only when its body is [`CloneBody`], and a
    /// failed response's body is read before its retry (see the
    /// [module docs](self)). For other services, see
    /// [`cloning`](ResilientLayer::cloning).
    ///
    /// Takes a [`Policy`] or an `Arc<Policy>`.
    pub fn new(policy: impl Into<Arc<Policy>>) -> Self {
        ResilientLayer { policy: policy.into(), mode: PhantomData }
    }
}

impl ResilientLayer<Cloning> {
    /// A layer for services whose requests are `Clone`: each attempt sends
    /// a clone, errors are classified (their `source()` chain), and every
    /// response is a success. A request is sent again only when it may be
    /// ([`CloneRequest`]): an `http::Request` by the HTTP rule (its method
    /// or an `Idempotency-Key`), other requests always. For HTTP services,
    /// see [`new`](ResilientLayer::new), which also reads the status.
    ///
    /// Takes a [`Policy`] or an `Arc<Policy>`.
    pub fn cloning(policy: impl Into<Arc<Policy>>) -> Self {
        ResilientLayer { policy: policy.into(), mode: PhantomData }
    }
}

impl<M> ResilientLayer<M> {
    /// The policy every call follows.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
}

impl<M> Clone for ResilientLayer<M> {
    fn clone(&self) -> Self {
        ResilientLayer { policy: self.policy.clone(), mode: PhantomData }
    }
}

impl<M> fmt::Debug for ResilientLayer<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResilientLayer")
            .field("policy", &self.policy)
            .field("mode", &std::any::type_name::<M>())
            .finish()
    }
}

impl<S, M> Layer<S> for ResilientLayer<M> {
    type Service = ResilientService<S, M>;

    fn layer(&self, inner: S) -> Self::Service {
        ResilientService { inner, policy: self.policy.clone(), mode: PhantomData }
    }
}

/// A service whose calls are resilient calls under one [`Policy`]; made by
/// [`ResilientLayer`].
pub struct ResilientService<S, M = Http> {
    inner: S,
    policy: Arc<Policy>,
    mode: PhantomData<fn() -> M>,
}

impl<S, M> ResilientService<S, M> {
    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone, M> Clone for ResilientService<S, M> {
    fn clone(&self) -> Self {
        ResilientService { inner: self.inner.clone(), policy: self.policy.clone(), mode: PhantomData }
    }
}

impl<S: fmt::Debug, M> fmt::Debug for ResilientService<S, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResilientService")
            .field("inner", &self.inner)
            .field("policy", &self.policy)
            .field("mode", &std::any::type_name::<M>())
            .finish()
    }
}

/// The requests [`ResilientLayer::new`] serves: `http::Request<B>`.
/// Sealed; it exists so that the compiler can say what to use instead.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an `http::Request`: `ResilientLayer::new` serves HTTP services",
    label = "not an HTTP request",
    note = "for a service whose requests are `Clone`, use `ResilientLayer::cloning(policy)`: it retries with a clone of the request and classifies only errors",
    note = "one constructor cannot serve both: an `http::Request` with a buffered body is itself `Clone`, and Rust does not allow two overlapping implementations"
)]
pub trait HttpRequest: sealed::Sealed {
    /// The body type `B` of `http::Request<B>`.
    type Body;
    /// The request as what it is.
    fn into_request(self) -> http::Request<Self::Body>;
}

impl<B> HttpRequest for http::Request<B> {
    type Body = B;

    #[inline]
    fn into_request(self) -> http::Request<B> {
        self
    }
}

mod sealed {
    pub trait Sealed {}
    impl<B> Sealed for http::Request<B> {}
}

impl<S, Req, RB> Service<Req> for ResilientService<S, Http>
where
    Req: HttpRequest,
    Req::Body: CloneBody + Send + 'static,
    S: Service<http::Request<Req::Body>, Response = http::Response<RB>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    RB: http_body::Body + Send + 'static,
{
    type Response = http::Response<RB>;
    type Error = BoxError;
    type Future = ResponseFuture<Inner<S, HttpTransport<Req::Body>>>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let transport = Inner::<S, HttpTransport<Req::Body>>::take_ready(&mut self.inner);
        ResponseFuture::new(&self.policy, transport, request.into_request())
    }
}

impl<S, Req> Service<Req> for ResilientService<S, Cloning>
where
    Req: CloneRequest + Send + 'static,
    S: Service<Req> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<Inner<S, CloneTransport<Req>>>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let transport = Inner::<S, CloneTransport<Req>>::take_ready(&mut self.inner);
        ResponseFuture::new(&self.policy, transport, request)
    }
}
