//! The layer's response future: a plain call's first attempt in it as it
//! is (raced with a timer for its attempt timeout and the call's deadline,
//! if the policy sets them), anything else boxed.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use super::transport::SendReady;
use crate::call::FirstAttempt;
use crate::http::exchange::Transport;
use crate::http::exchange::{self, first};
use crate::policy::Policy;

pin_project! {
    /// What a [`ResilientService`](super::ResilientService) returns: `Send` and `'static`.
    ///
    /// A plain call's first attempt (no key or hedging, guards that admit
    /// at once, DEBUG off, not nested in another call's attempt: see the
    /// [module docs](super)) runs in it as it is, the inner service's own
    /// future beside the guards' permits and the timer of the attempt
    /// timeout and the deadline, if any, so that a call answered in time
    /// allocates nothing. What follows a
    /// failed first attempt, and every attempt of a call that is not plain,
    /// runs boxed: the rare state.
    ///
    /// `T` is the inner service as the call's transport, a type of this
    /// crate's that other crates cannot name; the service's `Future` type
    /// names it for you.
    pub struct ResponseFuture<T: SendReady> {
        #[pin]
        state: State<T>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<T: SendReady> {
        // A plain call's first attempt, with what the rest of the call
        // needs if it fails: the transport and the request itself.
        First {
            #[pin]
            attempt: FirstAttempt<T::Ready>,
            // Its attempt timeout and the call's deadline, polled after the attempt.
            timing: Timing,
            rest: Option<(T, T::Request)>,
        },
        // Everything else.
        Boxed {
            future: BoxedCall<T>,
        },
    }
}

impl<T> ResponseFuture<T>
where
    T: SendReady + Send + 'static,
    T::Request: Send + 'static,
    T::Response: Send + 'static,
    T::Error: Send + 'static,
{
    /// A call of `request` under `policy` through `transport`: a plain
    /// call's first attempt sent now (the service is ready), any other
    /// call boxed, to run when polled.
    #[inline(always)]
    pub(super) fn new(policy: &Arc<Policy>, mut transport: T, request: T::Request) -> Self {
        let state = match first::first_of_plain::<T>(policy, &request) {
            Some((copy, permits, timed)) => {
                let sent = transport.send_ready(copy);
                State::First {
                    attempt: FirstAttempt::new(permits, sent),
                    timing: Timing::of(timed, policy),
                    rest: Some((transport, request)),
                }
            }
            None => State::Boxed { future: boxed_call(policy, transport, request) },
        };
        ResponseFuture { state }
    }
}

/// A call run boxed: the rare state.
type BoxedCall<T> =
    Pin<Box<dyn Future<Output = Result<<T as Transport>::Response, <T as Transport>::Error>> + Send>>;

/// A call that is not plain, run boxed: out of line, so that the plain
/// call's construction keeps a small stack frame (the boxed future is
/// built on the stack before it moves to the heap).
#[cold]
#[inline(never)]
fn boxed_call<T>(policy: &Arc<Policy>, mut transport: T, request: T::Request) -> BoxedCall<T>
where
    T: SendReady + Send + 'static,
    T::Request: Send + 'static,
    T::Response: Send + 'static,
    T::Error: Send + 'static,
{
    let policy = Arc::clone(policy);
    Box::pin(async move { exchange::run(&policy, &mut transport, request).await })
}

impl<T> Future for ResponseFuture<T>
where
    T: SendReady + Send + 'static,
    T::Request: Send + 'static,
    T::Response: Send + 'static,
    T::Error: Send + 'static,
{
    type Output = Result<T::Response, T::Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::First { mut attempt, timing, rest } => {
                    // With a deadline, read as the first poll starts (kept
                    // only if the attempt waits: in its timer's box).
                    let polled_at = timing.first_poll();
                    let answer = match attempt.as_mut().poll(cx) {
                        Poll::Ready(answered) => answered,
                        Poll::Pending if timing.expired(cx, attempt.policy(), polled_at) => {
                            // A limit reached: the rest of the call from
                            // then on, boxed, and polled now.
                            let Some(started) = timing.started(polled_at) else {
                                unreachable!("a timer runs from a start")
                            };
                            let permits = attempt.give_up();
                            let Some((transport, original)) = rest.take() else {
                                unreachable!("a first attempt answered twice")
                            };
                            let reached = first::FirstFailed::limit_reached(permits, started);
                            let future = Box::pin(first::after_first(reached, transport, original));
                            state.set(State::Boxed { future });
                            continue;
                        }
                        Poll::Pending => return Poll::Pending,
                    };
                    let failed = match first::first_answered::<T, _>(answer, attempt) {
                        Ok(response) => return Poll::Ready(Ok(response)),
                        Err(failed) => failed.started_at(timing.started(polled_at)),
                    };
                    let Some((transport, original)) = rest.take() else {
                        unreachable!("a first attempt answered twice")
                    };
                    // The rest of the call, from the failure on: boxed, and
                    // polled now.
                    let future = Box::pin(first::after_first(failed, transport, original));
                    state.set(State::Boxed { future });
                }
                StateProj::Boxed { future } => return future.as_mut().poll(cx),
            }
        }
    }
}

/// The limits of a plain first attempt (its attempt timeout and the
/// call's deadline, read from the policy), from its start to its timer:
/// counted from the first poll with a deadline (a deadline is the whole
/// call's), else from when the attempt first answered nothing, so that
/// one answered at once reads no clock (see `call::FirstLimits`). No
/// variant holds an `Instant`: one that did made every request's future
/// slower to move (measured, 5.5 ns a request through the stack benchmark).
enum Timing {
    /// No limit, or none before the horizon (it never ends).
    Untimed,
    /// An attempt timeout alone, not waited for yet: started when it
    /// first waits.
    Unstarted,
    /// A deadline, not polled yet: started as its first poll starts.
    Undated,
    /// Waiting: the timer, armed on its first wait (one answered at once
    /// makes none) and boxed with the attempt's start, so that every
    /// response future stays small and `Unpin` (tokio's `Sleep` is
    /// neither). Small matters: a response future 8 bytes larger than
    /// today's is moved by a `memcpy` call, measured at 58 instructions a
    /// request more.
    Armed(Pin<Box<Armed>>),
}

pin_project! {
    /// A first attempt's timer, and when the attempt started.
    struct Armed {
        started: Instant,
        #[pin]
        timer: Sleep,
    }
}

impl Timing {
    /// The timing of a first attempt of `policy`, `timed` or not.
    #[inline(always)]
    fn of(timed: bool, policy: &Policy) -> Self {
        if !timed {
            Timing::Untimed
        } else if policy.compiled_settings().deadline.is_none() {
            Timing::Unstarted
        } else {
            Timing::Undated
        }
    }

    /// As a poll starts: the time, on the first poll of an attempt with a
    /// deadline (its start).
    #[inline(always)]
    fn first_poll(&self) -> Option<Instant> {
        match self {
            Timing::Undated => Some(Instant::now()),
            Timing::Untimed | Timing::Unstarted | Timing::Armed(_) => None,
        }
    }

    /// When the attempt started, if it has limits, in a poll that read
    /// `polled_at` as it started (see `first_poll`): as its first poll
    /// started with a deadline, else when it first waited, or, answered at
    /// its first poll, now.
    #[inline]
    fn started(&self, polled_at: Option<Instant>) -> Option<Instant> {
        match self {
            Timing::Armed(armed) => Some(armed.started),
            Timing::Unstarted | Timing::Undated => Some(polled_at.unwrap_or_else(Instant::now)),
            Timing::Untimed => None,
        }
    }

    /// After the attempt answered nothing in a poll that read `polled_at`
    /// as it started: whether a limit of `policy`'s is reached (the timer
    /// armed on its first wait, and polled).
    #[inline]
    fn expired(&mut self, cx: &mut Context<'_>, policy: &Policy, polled_at: Option<Instant>) -> bool {
        let started = match *self {
            Timing::Unstarted | Timing::Undated => Some(polled_at.unwrap_or_else(Instant::now)),
            Timing::Untimed | Timing::Armed(_) => None,
        };
        if let Some(started) = started {
            *self = match crate::call::FirstLimits::of(policy.compiled_settings()).due(started) {
                Some((due, _)) => {
                    Timing::Armed(Box::pin(Armed { started, timer: tokio::time::sleep_until(due) }))
                }
                None => Timing::Untimed,
            };
        }
        match self {
            Timing::Armed(armed) => armed.as_mut().project().timer.poll(cx).is_ready(),
            Timing::Untimed | Timing::Unstarted | Timing::Undated => false,
        }
    }
}

impl<T: SendReady> fmt::Debug for ResponseFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::First { .. } => "first attempt",
            State::Boxed { .. } => "boxed",
        };
        f.debug_struct("ResponseFuture").field("state", &state).finish_non_exhaustive()
    }
}
