//! One HTTP call driven through the retry loop ([`run`]), for the tower
//! layer and the reqwest middleware alike.
//!
//! The call is driven the way `Policy::run` drives a closure: every
//! decision (guards, what a class means, backoff, deadline, budget) is the
//! loop's. A [`Transport`] only says what an attempt sends, whether a
//! request may be sent twice, what a response means, and how a failed
//! response is discarded.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use super::attempts::Attempts;
use super::drain;

#[cfg(feature = "tower")]
pub(crate) mod first;
use crate::call::{Call, Kept, KeyedGuards, Step, Target};
use crate::classify::ErrorClass;
use crate::error::ErrorHandling;
use crate::policy::Policy;
use crate::rejection::Rejection;

/// What a request allows: retries or one attempt, and the call's key.
///
/// `pub` but unreachable from outside the crate: the return type of
/// `tower::CloneRequest`'s hidden method, which no other crate can then
/// override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Whether the request may be sent more than once.
    pub(crate) retry: bool,
    /// The call's idempotency key, for `idempotency_key()` inside attempts.
    pub(crate) key: Option<Arc<str>>,
    /// The request's priority (its `x-priority` header), over the operation's.
    pub(crate) priority: Option<crate::Priority>,
}

/// A client stack the shared call can drive: its request, response and
/// error types, how to send one request, and what requests and responses
/// mean for retrying.
///
/// `pub` but unreachable from outside the crate: the bound of the tower
/// layer's response future, whose type names its transport.
pub trait Transport {
    /// A request.
    type Request;
    /// A response.
    type Response;
    /// What sending can fail with.
    type Error;

    /// Whether the request may be sent more than once, and the call's key.
    fn plan(request: &Self::Request) -> Plan;
    /// The key of the guards per key
    /// ([`PolicyBuilder::breaker_per`](crate::PolicyBuilder::breaker_per))
    /// for the request: the [`GuardKey`](crate::http::GuardKey) in its
    /// extensions (the middleware's, for reqwest), else its host and port,
    /// for an HTTP request (see `rules::breaker_key`); none (the empty key)
    /// for another.
    fn breaker_key<'r>(&'r self, _request: &'r Self::Request) -> std::borrow::Cow<'r, str> {
        std::borrow::Cow::Borrowed("")
    }
    /// A copy of the request for another attempt, or `None` when it cannot
    /// be copied (a streaming body).
    fn try_copy(request: &Self::Request) -> Option<Self::Request>;
    /// `None` when the response is a success, else its class.
    fn response_class(response: &Self::Response) -> Option<ErrorClass>;
    /// Records the attempts made in the response returned to the caller.
    fn finish(response: &mut Self::Response, attempts: Attempts);
    /// Reads what is left of a failed response's body, for at most
    /// `within` (see [`drain`]), and drops it: called before a retry, so
    /// that the connection the response came on can carry the retry.
    fn discard(response: Self::Response, within: Duration) -> impl Future<Output = drain::Drained> + Send;
    /// The class of an error.
    fn classify(error: &Self::Error) -> ErrorClass;
    /// A rejection as an error.
    fn reject(rejection: Rejection) -> Self::Error;

    /// Sends one attempt. The future must do nothing until polled: it is
    /// made before the guards admit the attempt, and polled inside it.
    fn send(
        &mut self,
        request: Self::Request,
    ) -> impl Future<Output = Result<Self::Response, Self::Error>> + Send;
}

/// How an attempt failed: with a response that says so (of this class; the
/// response itself is kept by [`run`]), or an error.
///
/// The loop keeps the last failure across the wait for the next attempt,
/// where its state is borrowed shared, so a response kept there would have
/// to be `Sync`; and the retry must discard the response, which the loop
/// would drop unread. So the loop keeps only the class, and `run` the
/// response.
enum Failure<E> {
    Response(ErrorClass),
    Error(E),
}

/// Classifies a [`Failure`] and makes rejections into the transport's errors.
struct ByTransport<T>(PhantomData<fn() -> T>);

impl<T: Transport> ErrorHandling<Failure<T::Error>> for ByTransport<T> {
    #[inline]
    fn class(&self, failure: &Failure<T::Error>) -> ErrorClass {
        match failure {
            Failure::Response(class) => *class,
            Failure::Error(error) => T::classify(error),
        }
    }

    #[inline]
    fn reject(&self, rejection: Rejection) -> Failure<T::Error> {
        Failure::Error(T::reject(rejection))
    }

    /// A retry after a failed response is admitted before its wait ends,
    /// so that the response is discarded and the pool given its moment
    /// inside the wait (see `run`); one after an error has nothing to do.
    #[inline]
    fn lead(&self, failure: &Failure<T::Error>, attempt_timeout: Option<Duration>) -> Duration {
        match failure {
            Failure::Response(_) => drain::lead(attempt_timeout),
            Failure::Error(_) => Duration::ZERO,
        }
    }
}

/// Sends `request` under `policy`: the first success, else the last
/// response an attempt got (as `Ok`), else the last error (a rejection when
/// no attempt could run); the attempts made are recorded in the response
/// returned.
///
/// A request the transport's plan does not allow to retry, or that cannot
/// be copied, gets one attempt. The last attempt sends the request itself,
/// never a copy.
///
/// A retry, once admitted, first discards the failed response before it
/// (reading what is left of its body, within bounds), so that the
/// connection it came on goes back to the client's pool and carries the
/// retry. A response the caller may still get is never read: the last
/// one, and one whose retry could not run (an open breaker, a full
/// bulkhead), which the loop returns as the call's result. The discard runs
/// inside the retry's attempt (its timeout and the deadline cover it), but
/// an adaptive bulkhead's latency sample starts only as the retry's
/// request goes out: the drain is the client's time, not the dependency's.
///
/// The wait before a retry is the policy's, whole: the drain and the pause
/// for the pool after it are taken inside it, not added to it. The retry
/// is admitted a moment before its wait ends (`drain::lead`, asked through
/// `ErrorHandling::lead`), and its request goes out when the wait ends
/// (`drain::until_due`); only a body slower than that moment delays it.
pub(crate) async fn run<T: Transport>(
    policy: &Policy,
    transport: &mut T,
    request: T::Request,
) -> Result<T::Response, T::Error> {
    let plan = T::plan(&request);
    // Guards per key: the request's host's (see `Transport::breaker_key`),
    // its text made only for a policy that has them.
    let keyed = match policy.per_key() {
        true => KeyedGuards::of_display(policy, &transport.breaker_key(&request)),
        false => None,
    };
    let mut call = Call::new(policy, plan.key, Kept::default(), ByTransport::<T>(PhantomData))
        .with_target(Target::per_key(policy, &keyed));
    if let Some(priority) = plan.priority {
        call.set_priority(priority);
    }
    if !plan.retry {
        tracing::debug!(
            target: crate::observe::target::HTTP,
            operation = %policy.operation(),
            "one attempt: the request is not idempotent and has no Idempotency-Key"
        );
        call.allow_no_retry();
    }
    drive(&mut call, transport, request, None).await
}

/// The attempts of `call` from the next one on: `original` is the
/// request, `failed` the failed response of the attempt before, if any.
async fn drive<T: Transport>(
    call: &mut Call<'_, Kept<Failure<T::Error>>, ByTransport<T>>,
    transport: &mut T,
    original: T::Request,
    mut failed: Option<T::Response>,
) -> Result<T::Response, T::Error> {
    let mut original = Some(original);
    loop {
        let Some(request) = next_request::<T, _, _>(&mut original, call) else {
            // The attempt that took the original was made the last one, so
            // the loop never asks for another.
            unreachable!("the retry loop asked for an attempt after the last one");
        };
        // `send` starts nothing until polled, so the attempt can be made
        // before the guards admit it (and take the loop's direct path).
        let sent = transport.send(request);
        let step = if failed.is_none() {
            call.attempt(answer::<T>(sent, &mut failed)).await
        } else {
            // When the request went out, after the drain: an adaptive
            // bulkhead's latency sample starts then (the drain and the
            // pause after it are the client's time, not the dependency's).
            let sent_at = OnceLock::new();
            let (timeout, deadline) = (call.attempt_timeout(), call.deadline());
            // When the wait before this retry ends: it was admitted earlier.
            let due = call.take_retry_due();
            let (last_failed, sent_at_ref) = (&mut failed, &sent_at);
            call.attempt_sent_at(&sent_at, async move {
                // Polled: admitted, so the failed response before this
                // attempt will not be the call's. Discarded before the
                // request is sent, which takes a connection from the pool,
                // and the request held until its wait ends.
                if let Some(response) = last_failed.take() {
                    let within = drain::time_before(timeout, deadline);
                    let drained = T::discard(response, within).await;
                    drain::until_due(drained, within, due).await;
                }
                let _ = sent_at_ref.set(Instant::now());
                answer::<T>(sent, last_failed).await
            })
            .await
        };
        if let Step::Done(result) = step {
            return ended::<T>(result, failed, Attempts::new(call.attempts()));
        }
    }
}

/// What the caller gets when the call ended with `result` after `attempts`:
/// the success, else the last failed response (kept in `failed`), else the
/// error.
fn ended<T: Transport>(
    result: Result<T::Response, Failure<T::Error>>,
    failed: Option<T::Response>,
    attempts: Attempts,
) -> Result<T::Response, T::Error> {
    match result {
        Ok(response) => Ok(finish::<T>(response, attempts)),
        Err(Failure::Response(_)) => match failed {
            Some(response) => Ok(finish::<T>(response, attempts)),
            // A `Failure::Response` is made only beside the response.
            None => unreachable!("a failed response ended the call, but none was kept"),
        },
        Err(Failure::Error(error)) => Err(error),
    }
}

/// One attempt's answer: the response `sent` gets, a failed one kept in
/// `failed` (the attempt's error is then its class).
async fn answer<T: Transport>(
    sent: impl Future<Output = Result<T::Response, T::Error>>,
    failed: &mut Option<T::Response>,
) -> Result<T::Response, Failure<T::Error>> {
    let response = sent.await.map_err(Failure::Error)?;
    match T::response_class(&response) {
        None => Ok(response),
        Some(class) => {
            *failed = Some(response);
            Err(Failure::Response(class))
        }
    }
}

fn finish<T: Transport>(mut response: T::Response, attempts: Attempts) -> T::Response {
    T::finish(&mut response, attempts);
    response
}

/// The request for the next attempt: a copy while more attempts may
/// follow, the original for the last one. A request that cannot be copied
/// is sent as it is, and that attempt becomes the last.
fn next_request<T: Transport, S: Default, H>(
    original: &mut Option<T::Request>,
    execution: &mut Call<'_, S, H>,
) -> Option<T::Request> {
    if !execution.next_is_last() {
        if let Some(copy) = original.as_ref().and_then(T::try_copy) {
            return Some(copy);
        }
        tracing::debug!(target: crate::observe::target::HTTP, "one attempt: the request's body cannot be copied");
        execution.allow_no_retry();
    }
    original.take()
}
