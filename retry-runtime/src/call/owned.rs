//! A plain call's first attempt for an entry point that owns its policy
//! (the tower layer): the same quiet admission, run and record as
//! [`PlainAttempt`](super::PlainAttempt), without borrowing the policy.
//!
//! A tower service's response future is a type of its own (its
//! `Service::Future`), made from an `Arc<Policy>`; it cannot hold a borrow
//! of that policy beside the policy itself, as the attribute's future and
//! `Policy::run`'s do. Boxing the whole call made the borrow possible, at
//! one allocation per request. So the first attempt of a plain call keeps
//! the permits alone, with the policy's `Arc`, and finds the guards they
//! came from again in the same policy to record the outcome (the global
//! registry's guards are resolved once per policy, so they are the same
//! ones). Only if the attempt fails is the rest of the call built (boxed
//! by the layer: the rare state), by [`FirstPermits::failed`], as any
//! plain call's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::parts::Parts;
use super::plain::{Failed, Holding, PlainFailure};
use super::{Call, LastError, Step};
use crate::context;
use crate::error::ErrorHandling;
use crate::guard::{Answer, AttemptKind};
use crate::guards::{AnyShape, Shape, ShapedPermits};
use crate::policy::Policy;

/// What the guards gave a plain call's first attempt, with the policy
/// whose guards gave it: handed back, counting nothing, if dropped before
/// the attempt's outcome is recorded.
///
/// The guards are seen slot by slot (`AnyShape`), not by the shape of the
/// policy's guards as `Policy::run` sees them: measured, the shapes saved
/// 9 instructions of a layered request's 372 (`tower_cloning`), for a
/// dispatch on five shapes at every admission, record and drop.
pub(crate) struct FirstPermits {
    policy: Arc<Policy>,
    permits: Option<ShapedPermits<AnyShape>>,
}

impl FirstPermits {
    /// The first attempt of a call of `policy` made now, admitted quietly,
    /// if the call is plain (see `Call::plain_guards`; its caller knows the
    /// call has no key). Else `None`, having taken nothing.
    #[inline]
    pub(crate) fn admit(policy: &Arc<Policy>) -> Option<Self> {
        let guards = Call::<'_, (), (), AnyShape>::plain_guards::<AnyShape>(policy)?;
        Self::admitted(policy, guards)
    }

    /// [`admit`](Self::admit) for a call of a policy with an attempt
    /// timeout or a deadline (see `Call::plain_guards_timed`), which the
    /// entry point races the attempt with (reading them from the policy).
    #[inline(never)]
    pub(crate) fn admit_timed(policy: &Arc<Policy>) -> Option<Self> {
        let (guards, _) = Call::<'_, (), (), AnyShape>::plain_guards_timed::<AnyShape>(policy)?;
        Self::admitted(policy, guards)
    }

    /// The first attempt admitted quietly by `guards`, `policy`'s.
    #[inline(always)]
    fn admitted(policy: &Arc<Policy>, guards: &crate::guards::Guards) -> Option<Self> {
        let permits = AnyShape::held_view(guards).admit_quietly(AttemptKind::First)?;
        Some(FirstPermits { policy: Arc::clone(policy), permits: Some(permits) })
    }

    /// The policy of the call.
    pub(crate) fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// The attempt succeeded: recorded in the guards that admitted it
    /// (in place: what is left, the policy's `Arc`, goes with `self`).
    #[inline]
    fn succeeded(&mut self) {
        if let Some(permits) = self.permits.take() {
            AnyShape::held_view(self.policy.global_guards_again()).record(permits, Answer::Success);
        }
    }

    /// The attempt failed (with its error, its timeout, or the call's
    /// `deadline`, if it has one, which it carries on; it `started` then,
    /// if it was timed and waited): recorded and
    /// decided on as any plain call's first attempt (see
    /// [`Call::after_plain`]), the call built into `slot` on `policy`,
    /// which must be this call's (the caller's borrow of
    /// [`policy`](Self::policy)).
    pub(crate) fn failed<'p, S, H, T, E, P>(
        mut self,
        slot: &mut Option<Call<'p, S, H>>,
        policy: &'p Policy,
        parts: P,
        failed: Failed<E>,
        deadline: Option<tokio::time::Instant>,
        started: Option<tokio::time::Instant>,
    ) -> Step<T, E>
    where
        P: Parts<S, H>,
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        debug_assert!(
            std::ptr::eq(policy, &*self.policy),
            "a first attempt's failure handed to another policy"
        );
        let holding =
            Holding::<AnyShape> { held: policy.global_guards_again(), permits: self.permits.take() };
        Call::after_plain(slot, policy, parts, PlainFailure { holding, failed, deadline, started })
    }
}

impl Drop for FirstPermits {
    #[inline]
    fn drop(&mut self) {
        if let Some(permits) = self.permits.take() {
            abandon(&self.policy, permits);
        }
    }
}

/// Permits of `policy`'s guards handed back unused: out of line, as a
/// recorded attempt's permits are already gone when they are dropped.
#[cold]
#[inline(never)]
fn abandon(policy: &Policy, permits: ShapedPermits<AnyShape>) {
    AnyShape::held_view(policy.global_guards_again()).abandon(permits);
}

impl std::fmt::Debug for FirstPermits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FirstPermits").field("operation", &self.policy.operation()).finish_non_exhaustive()
    }
}

pin_project! {
    /// A plain call's first attempt as it runs, for an entry point that owns
    /// its policy: polled in the attempt's context (the nesting mark), its
    /// output the attempt's, with the permits to record it by.
    pub(crate) struct FirstAttempt<Fut> {
        // Taken as the attempt finishes.
        permits: Option<FirstPermits>,
        // `None` once finished: dropped as soon as it is done, in its context.
        #[pin]
        attempt: Option<Fut>,
    }

    impl<Fut> PinnedDrop for FirstAttempt<Fut> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            // Dropped unfinished: dropped in its context, then what it
            // held handed back (the permits' own drop), counting nothing.
            // Finished or given up (the common case), the attempt is
            // gone already, and the permits are recorded or taken.
            if this.attempt.is_some() {
                let _back = this.permits.take();
                context::drop_in(&mut None, None, this.attempt);
            }
        }
    }
}

impl<Fut> FirstAttempt<Fut> {
    /// `attempt`, run as the first attempt `permits` admitted.
    #[inline]
    pub(crate) fn new(permits: FirstPermits, attempt: Fut) -> Self {
        FirstAttempt { permits: Some(permits), attempt: Some(attempt) }
    }
}

impl<Fut> FirstAttempt<Fut> {
    /// The policy of the call, while the attempt runs.
    pub(crate) fn policy(&self) -> &Policy {
        match &self.permits {
            Some(permits) => permits.policy(),
            None => unreachable!("a first attempt asked for its policy after it finished"),
        }
    }

    /// The attempt, unfinished, given up (a limit passed): dropped in its
    /// context, and the permits it held, to record that with.
    pub(crate) fn give_up(self: Pin<&mut Self>) -> FirstPermits {
        let this = self.project();
        let permits = this.permits.take();
        context::drop_in(&mut None, None, this.attempt);
        match permits {
            Some(permits) => permits,
            None => unreachable!("a first attempt given up after it finished"),
        }
    }
}

impl<Fut> FirstAttempt<Fut> {
    /// The attempt, finished, succeeded: recorded in the guards that
    /// admitted it, in place (moving the permits out measured dearer).
    #[inline]
    pub(crate) fn succeeded(self: Pin<&mut Self>) {
        if let Some(permits) = self.project().permits.as_mut() {
            permits.succeeded();
        }
    }

    /// The attempt, finished, failed: the permits it held, to record that with.
    pub(crate) fn failed(self: Pin<&mut Self>) -> FirstPermits {
        match self.project().permits.take() {
            Some(permits) => permits,
            None => unreachable!("a first attempt's outcome taken twice"),
        }
    }
}

/// The attempt's output, when it finishes; its outcome is then recorded
/// through [`succeeded`](FirstAttempt::succeeded) or
/// [`failed`](FirstAttempt::failed), once.
impl<Fut: Future> Future for FirstAttempt<Fut> {
    type Output = Fut::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        context::poll_keyless(self.project().attempt, None::<fn() -> _>, cx)
    }
}
