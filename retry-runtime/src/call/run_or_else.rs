//! The future `Policy::run_or_else` returns: the call, then the fallback
//! with its final error, if any. Named, as [`Run`] is, so that an error
//! type that does not fit is one compile error, at the call.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

use super::run_loop::{NoKey, Run};
use super::traits_of::TraitsOf;
use crate::policy::Policy;

pin_project! {
    /// Where a [`RunOrElse`] is.
    #[project = StateProj]
    enum State<'p, F, Fut: Future, E, G, GFut> {
        /// The call runs.
        Calling {
            #[pin]
            run: Run<'p, &'p Policy, NoKey, TraitsOf<E>, F, Fut, E>,
            policy: &'p Policy,
            // Taken once, as the call fails.
            fallback: Option<G>,
        },
        /// The call failed: the fallback runs.
        Falling { #[pin] fallback: GFut },
    }
}

pin_project! {
    /// The future [`Policy::run_or_else`] returns: the call's first
    /// success, or what the fallback makes of its final error.
    #[must_use = "futures do nothing unless `.await`ed or polled"]
    pub struct RunOrElse<'p, F, Fut: Future, E, G, GFut> {
        #[pin]
        state: State<'p, F, Fut, E, G, GFut>,
    }
}

impl<'p, F, Fut: Future, E, G, GFut> RunOrElse<'p, F, Fut, E, G, GFut> {
    /// `run`, a call of `policy`, then `fallback` if it fails.
    #[inline(always)]
    pub(super) fn new(
        policy: &'p Policy,
        run: Run<'p, &'p Policy, NoKey, TraitsOf<E>, F, Fut, E>,
        fallback: G,
    ) -> Self {
        RunOrElse { state: State::Calling { run, policy, fallback: Some(fallback) } }
    }
}

impl<F, Fut: Future, E, G, GFut> std::fmt::Debug for RunOrElse<'_, F, Fut, E, G, GFut> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state {
            State::Calling { .. } => "calling",
            State::Falling { .. } => "falling back",
        };
        f.debug_struct("RunOrElse").field("state", &state).finish_non_exhaustive()
    }
}

impl<'p, T, E, F, Fut, G, GFut> Future for RunOrElse<'p, F, Fut, E, G, GFut>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    G: FnOnce(E) -> GFut,
    GFut: Future<Output = Result<T, E>>,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, E>> {
        let mut state = self.project().state;
        let next = match state.as_mut().project() {
            StateProj::Calling { run, policy, fallback } => {
                let error = match ready!(run.poll(cx)) {
                    Ok(value) => return Poll::Ready(Ok(value)),
                    Err(error) => error,
                };
                let Some(fallback) = fallback.take() else { panic!("`RunOrElse` polled after it finished") };
                crate::observe::fallback(policy.operation());
                fallback(error)
            }
            StateProj::Falling { fallback } => return fallback.poll(cx),
        };
        state.set(State::Falling { fallback: next });
        match state.project() {
            StateProj::Falling { fallback } => fallback.poll(cx),
            StateProj::Calling { .. } => unreachable!("the fallback was just set"),
        }
    }
}
