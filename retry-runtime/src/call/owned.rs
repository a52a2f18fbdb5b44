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

use super::plain::{Holding, Parts, PlainFailure};
use super::{Call, LastError, Step};
use crate::context;
use crate::error::ErrorHandling;
use crate::guard::{Answer, AttemptKind};
use crate::guards::{AnyShape, Guards, Named, Shape, ShapedPermits, Unnamed};
use crate::policy::{LoopGuards, Policy};

/// What the guards gave a plain call's first attempt, with the policy
/// whose guards gave it: handed back, counting nothing, if dropped before
/// the attempt's outcome is recorded.
pub(crate) struct FirstPermits {
    policy: Arc<Policy>,
    permits: Option<HeldPermits>,
}

/// Shapes of the loop's common sets of guards (see `LoopGuards`), seen as
/// the attribute sees them: only their own slots are looked at.
type Unguarded = (Unnamed, Unnamed, Unnamed, Unnamed, Unnamed);
type BreakerAlone = (Unnamed, Named, Unnamed, Unnamed, Unnamed);
type BudgetAlone = (Unnamed, Unnamed, Unnamed, Unnamed, Named);
type BreakerBudget = (Unnamed, Named, Unnamed, Unnamed, Named);

/// The permits, as the shape of the policy's guards holds them: as
/// `Policy::run` does, a policy with at most a breaker and a budget is
/// seen as the attribute would see it, and any other slot by slot.
enum HeldPermits {
    Unguarded(ShapedPermits<Unguarded>),
    BreakerAlone(ShapedPermits<BreakerAlone>),
    BudgetAlone(ShapedPermits<BudgetAlone>),
    BreakerBudget(ShapedPermits<BreakerBudget>),
    Other(ShapedPermits<AnyShape>),
}

/// `$body` with `$permits` the permits of `$held` and `$shape` their shape.
macro_rules! by_shape {
    ($held:expr, |$shape:ident, $permits:ident| $body:expr) => {
        match $held {
            HeldPermits::Unguarded($permits) => {
                type $shape = Unguarded;
                $body
            }
            HeldPermits::BreakerAlone($permits) => {
                type $shape = BreakerAlone;
                $body
            }
            HeldPermits::BudgetAlone($permits) => {
                type $shape = BudgetAlone;
                $body
            }
            HeldPermits::BreakerBudget($permits) => {
                type $shape = BreakerBudget;
                $body
            }
            HeldPermits::Other($permits) => {
                type $shape = AnyShape;
                $body
            }
        }
    };
}

impl FirstPermits {
    /// The first attempt of a call of `policy` made now, admitted quietly,
    /// if the call is plain (see `Call::plain_guards`; its caller knows the
    /// call has no key). Else `None`, having taken nothing.
    #[inline]
    pub(crate) fn admit(policy: &Arc<Policy>) -> Option<Self> {
        let permits = match policy.loop_guards() {
            LoopGuards::Unguarded => HeldPermits::Unguarded(admit_as::<Unguarded>(policy)?),
            LoopGuards::Breaker => HeldPermits::BreakerAlone(admit_as::<BreakerAlone>(policy)?),
            LoopGuards::Budget => HeldPermits::BudgetAlone(admit_as::<BudgetAlone>(policy)?),
            LoopGuards::BreakerBudget => HeldPermits::BreakerBudget(admit_as::<BreakerBudget>(policy)?),
            LoopGuards::Other => HeldPermits::Other(admit_as::<AnyShape>(policy)?),
        };
        Some(FirstPermits { policy: Arc::clone(policy), permits: Some(permits) })
    }

    /// The policy of the call.
    pub(crate) fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// The attempt succeeded: recorded in the guards that admitted it.
    #[inline]
    pub(crate) fn succeeded(mut self) {
        if let Some(held) = self.permits.take() {
            let policy = &*self.policy;
            by_shape!(held, |W, permits| W::held_view(W::hold(guards_again::<W>(policy)))
                .record(permits, Answer::Success));
        }
    }

    /// The attempt failed with `error`: recorded and decided on as any
    /// plain call's first attempt (see [`Call::after_plain`]), the call
    /// built into `slot` on `policy`, which must be this call's (the
    /// caller's borrow of [`policy`](Self::policy)).
    pub(crate) fn failed<'p, S, H, T, E, P>(
        mut self,
        slot: &mut Option<Call<'p, S, H>>,
        policy: &'p Policy,
        parts: P,
        error: E,
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
        let Some(held) = self.permits.take() else {
            unreachable!("a first attempt's permits taken twice");
        };
        by_shape!(held, |W, permits| {
            let holding = Holding::<W> { held: W::hold(guards_again::<W>(policy)), permits: Some(permits) };
            Call::after_plain(slot, policy, parts, PlainFailure { holding, error })
        })
    }
}

/// A plain first attempt of a call of `policy`, admitted quietly, seeing
/// its guards as shape `W` (see `Call::plain_as`).
#[inline(always)]
fn admit_as<W: Shape>(policy: &Policy) -> Option<ShapedPermits<W>> {
    let guards = Call::<'_, (), (), W>::plain_guards::<W>(policy)?;
    W::held_view(W::hold(guards)).admit_quietly(AttemptKind::First)
}

/// The guards a plain first attempt of shape `W` was admitted by, found
/// again (see `Call::global_guards_of`).
#[inline(always)]
fn guards_again<W: Shape>(policy: &Policy) -> &Guards {
    if W::NONE { Guards::none() } else { policy.global_guards_again(W::EXACT) }
}

impl Drop for FirstPermits {
    fn drop(&mut self) {
        if let Some(held) = self.permits.take() {
            let policy = &*self.policy;
            by_shape!(held, |W, permits| W::held_view(W::hold(guards_again::<W>(policy))).abandon(permits));
        }
    }
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
            let _back = this.permits.take();
            context::drop_in(&mut None, None, this.attempt);
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

impl<Fut: Future> Future for FirstAttempt<Fut> {
    type Output = (Fut::Output, FirstPermits);

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let output = std::task::ready!(context::poll_keyless(this.attempt, cx));
        match this.permits.take() {
            Some(permits) => Poll::Ready((output, permits)),
            // The attempt panics first when polled after it finished.
            None => unreachable!("a first attempt finished twice"),
        }
    }
}
