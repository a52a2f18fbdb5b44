//! The inner service as one call's transport, for HTTP requests and for
//! `Clone` requests.
//!
//! The types here are `pub` but unreachable from outside the crate: the
//! layer's response future names its transport (see `ResponseFuture`).

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;

use tower_service::Service;

use super::{BoxError, CloneBody, CloneRequest};
use crate::classify::{Classify, ErrorClass};
use crate::http::attempts::Attempts;
use crate::http::exchange::{Plan, Transport};
use crate::http::{drain, rules};
use crate::rejection::Rejection;

/// The inner service as one call's transport: `ready` while the service
/// `poll_ready` readied has not been called yet.
pub struct Inner<S, K> {
    service: S,
    ready: bool,
    kind: PhantomData<fn() -> K>,
}

impl<S: Clone, K> Inner<S, K> {
    /// Takes the service made ready and leaves a clone in its place, as
    /// `tower::retry` does: the clone may not be ready, the original is.
    pub(super) fn take_ready(slot: &mut S) -> Self {
        let clone = slot.clone();
        Inner { service: std::mem::replace(slot, clone), ready: true, kind: PhantomData }
    }
}

impl<S, K> Inner<S, K> {
    /// Sends `request` with the service the caller's `poll_ready` readied:
    /// a plain call's first attempt (see [`SendReady`]).
    #[inline]
    fn call_ready<Req>(&mut self, request: Req) -> IntoBoxError<S::Future>
    where
        S: Service<Req>,
    {
        self.ready = false;
        IntoBoxError { sent: self.service.call(request) }
    }

    /// Sends `request`, first waiting for the service to be ready unless
    /// the caller's `poll_ready` already made it so. Starts nothing (not
    /// even `call`, which may start work) until polled.
    async fn send<Req>(&mut self, request: Req) -> Result<S::Response, BoxError>
    where
        S: Service<Req>,
        S::Error: Into<BoxError>,
    {
        if !std::mem::replace(&mut self.ready, false) {
            std::future::poll_fn(|cx| self.service.poll_ready(cx)).await.map_err(Into::into)?;
        }
        self.service.call(request).await.map_err(Into::into)
    }
}

/// [`Inner`] for HTTP requests with a body of type `B`.
pub struct HttpTransport<B>(PhantomData<fn() -> B>);

impl<S, B, RB> Transport for Inner<S, HttpTransport<B>>
where
    S: Service<http::Request<B>, Response = http::Response<RB>> + Send,
    S::Error: Into<BoxError>,
    S::Future: Send,
    B: CloneBody + Send,
    RB: http_body::Body + Send,
{
    type Request = http::Request<B>;
    type Response = http::Response<RB>;
    type Error = BoxError;

    #[inline]
    fn plan(request: &http::Request<B>) -> Plan {
        rules::plan(request.method(), request.headers())
    }

    fn breaker_key<'r>(&'r self, request: &'r http::Request<B>) -> std::borrow::Cow<'r, str> {
        rules::request_key(request)
    }

    fn try_copy(request: &http::Request<B>) -> Option<http::Request<B>> {
        let mut copy = http::Request::new(request.body().try_clone_body()?);
        *copy.method_mut() = request.method().clone();
        *copy.uri_mut() = request.uri().clone();
        *copy.version_mut() = request.version();
        *copy.headers_mut() = request.headers().clone();
        *copy.extensions_mut() = request.extensions().clone();
        Some(copy)
    }

    #[inline]
    fn response_class(response: &http::Response<RB>) -> Option<ErrorClass> {
        rules::response_class(response.status(), response.headers())
    }

    #[inline]
    fn finish(response: &mut http::Response<RB>, attempts: Attempts) {
        response.extensions_mut().insert(attempts);
    }

    async fn discard(response: http::Response<RB>, within: Duration) -> drain::Drained {
        drain::discard(response.version(), response.into_body(), within).await
    }

    #[inline]
    fn classify(error: &BoxError) -> ErrorClass {
        error.classify()
    }

    #[inline]
    fn reject(rejection: Rejection) -> BoxError {
        Box::new(rejection)
    }

    fn send(
        &mut self,
        request: http::Request<B>,
    ) -> impl Future<Output = Result<Self::Response, BoxError>> + Send {
        Inner::send(self, request)
    }
}

/// [`Inner`] for [`CloneRequest`] requests of type `Req`.
pub struct CloneTransport<Req>(PhantomData<fn() -> Req>);

impl<S, Req> Transport for Inner<S, CloneTransport<Req>>
where
    S: Service<Req> + Send,
    S::Error: Into<BoxError>,
    S::Future: Send,
    Req: CloneRequest + Send,
{
    type Request = Req;
    type Response = S::Response;
    type Error = BoxError;

    /// The request's own: an `http::Request`'s is the HTTP rule's.
    #[inline]
    fn plan(request: &Req) -> Plan {
        request.plan()
    }

    /// The request's own: an `http::Request`'s is its `GuardKey`, else its
    /// host and port, as through `ResilientLayer::new`.
    fn breaker_key<'r>(&'r self, request: &'r Req) -> std::borrow::Cow<'r, str> {
        request.guard_key()
    }

    #[inline]
    fn try_copy(request: &Req) -> Option<Req> {
        Some(request.clone())
    }

    #[inline]
    fn response_class(_: &S::Response) -> Option<ErrorClass> {
        None
    }

    #[inline]
    fn finish(_: &mut S::Response, _: Attempts) {}

    /// Never called: no response fails. Dropped at once, not moved into
    /// the future, which need not be `Send` then.
    fn discard(response: S::Response, _: Duration) -> impl Future<Output = drain::Drained> + Send {
        drop(response);
        std::future::ready(drain::Drained::NotNeeded)
    }

    #[inline]
    fn classify(error: &BoxError) -> ErrorClass {
        error.classify()
    }

    #[inline]
    fn reject(rejection: Rejection) -> BoxError {
        Box::new(rejection)
    }

    fn send(&mut self, request: Req) -> impl Future<Output = Result<S::Response, BoxError>> + Send {
        Inner::send(self, request)
    }
}

/// A transport whose first attempt can be sent at once, as a future of a
/// type the layer's response future can name: the inner service's own,
/// its error boxed. The service was readied by the caller's `poll_ready`.
pub trait SendReady: Transport {
    /// The first attempt's future.
    type Ready: Future<Output = Result<Self::Response, Self::Error>>;
    /// Sends the first attempt.
    fn send_ready(&mut self, request: Self::Request) -> Self::Ready;
}

impl<S, K> SendReady for Inner<S, K>
where
    Self: Transport<Error = BoxError>,
    S: Service<<Self as Transport>::Request, Response = <Self as Transport>::Response>,
    S::Error: Into<BoxError>,
{
    type Ready = IntoBoxError<S::Future>;

    #[inline]
    fn send_ready(&mut self, request: <Self as Transport>::Request) -> Self::Ready {
        self.call_ready(request)
    }
}

pin_project! {
    /// The inner service's future, its error boxed.
    pub struct IntoBoxError<F> {
        #[pin]
        sent: F,
    }
}

impl<F, T, E> Future for IntoBoxError<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().sent.poll(cx).map_err(Into::into)
    }
}
