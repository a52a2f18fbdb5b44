//! The part of a call's state only some calls need, kept apart so that a
//! plain call's success path writes and drops a few words instead of all of
//! it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::backoff::JitterRng;
use crate::budget::{RetryBudget, Withdrawal};
use crate::guards::Guards;
use crate::settings::Settings;

/// The part of a call's state that a plain call's success path never
/// touches: built when the call starts if it needs any of it, else at its
/// first failure (all of it is then at its starting value, as it would
/// have been at the start).
pub(super) struct RareState<'p, S> {
    /// The override this call runs on; `None`: the policy's own settings.
    pub(super) overridden: Option<Arc<Settings>>,
    /// A scoped registry's guards (then the call has no cached ones).
    pub(super) scoped: Option<Arc<Guards>>,
    /// The call's own priority (an HTTP request's `x-priority`), over its settings'.
    pub(super) priority: Option<crate::Priority>,
    /// The call's idempotency key; while an attempt is polled in place, the
    /// key it displaced (see `context::poll_in`).
    pub(super) key: Option<Arc<str>>,
    /// `None` without a deadline, or when it is too far to arm.
    pub(super) deadline: Option<Instant>,
    pub(super) previous_wait: Option<Duration>,
    /// The backoff a plain first attempt's failure decided, until the next
    /// attempt takes it to wait out (see `Call::after_plain`).
    pub(super) backoff: Option<Duration>,
    /// When the wait before the retry decided last ends, if that retry is
    /// admitted before it to do work of its own (see `ErrorHandling::lead`):
    /// its request goes out then.
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    pub(super) due: Option<Instant>,
    pub(super) rng: Option<JitterRng>,
    /// What the budget gave the retry decided last, until it is admitted:
    /// given back if it cannot run (see `cannot_run`), or if the call is
    /// dropped first (see the `Drop` below).
    pub(super) withdrawn: Option<Withdrawn<'p>>,
    /// Whether the attempt that just failed was cut by its own timeout:
    /// its retry may cost a budget more (`TokenBucket::timeout_cost`).
    /// Set by `Call::timed_out`, read by the decision after it.
    pub(super) timed_out: bool,
    /// The call's span, when enabled.
    pub(super) span: Option<tracing::Span>,
    /// When the call started, if an `on_stop` hook will ask how long it took.
    pub(super) started_at: Option<Instant>,
    pub(super) last: S,
}

impl<S: Default> RareState<'_, S> {
    /// A plain call's starting state, built at its first failure, in its
    /// slot (returned by value, it would be copied there: a few dozen bytes).
    #[cold]
    #[inline(never)]
    pub(super) fn build_plain(slot: &mut Option<Self>) {
        #[cfg(test)]
        built::count();
        *slot = Some(RareState {
            overridden: None,
            scoped: None,
            priority: None,
            key: None,
            deadline: None,
            previous_wait: None,
            backoff: None,
            #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
            due: None,
            rng: None,
            withdrawn: None,
            timed_out: false,
            span: None,
            started_at: None,
            last: S::default(),
        });
    }
}

/// What a retry took from its budget, and which budget: the cached guards'
/// (`cached`), or else the scoped registry's guards' (`More::scoped`).
/// A reference, not a handle of its own, and no larger than the
/// withdrawal was alone (see `lease::Taken`): every plain call drops an
/// empty `RareState` slot, and a handle to release, or a larger slot, cost
/// each plain success an instruction (`attribute_defaults`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Withdrawn<'p> {
    pub(super) taken: Withdrawal,
    pub(super) cached: Option<&'p RetryBudget>,
    /// Its retry was admitted and runs (a bucket that refunds a retry that
    /// succeeds keeps it so; any other is forgotten as its retry starts):
    /// still here as the call ends, its retry succeeded, and what it took
    /// goes back (see `give_back_withdrawn`). A failure forgets it.
    pub(super) spent: bool,
}

impl<S> RareState<'_, S> {
    /// Gives back what the retry decided last took, if it was not admitted
    /// (see `RetryBudget::give_back_retry`): once, since it is taken here.
    #[cold]
    #[inline(never)]
    pub(super) fn give_back_withdrawn(&mut self) {
        let Some(Withdrawn { taken, cached, spent }) = self.withdrawn.take() else {
            return;
        };
        let scoped = || self.scoped.as_ref().and_then(|guards| guards.budget.as_deref());
        match cached.or_else(scoped) {
            // Kept past its retry's start, to the call's end: the retry succeeded.
            Some(budget) if spent => budget.retry_succeeded(taken),
            Some(budget) => budget.give_back_retry(taken),
            None => {}
        }
    }

    /// The attempt running now failed or was cut or dropped: a retry's
    /// withdrawal kept for a refund is spent for good.
    #[inline]
    pub(super) fn forget_spent(&mut self) {
        if self.withdrawn.is_some_and(|withdrawn| withdrawn.spent) {
            self.withdrawn = None;
        }
    }
}

/// A call dropped (cancelled: a caller's `timeout`, a `select!`, a dropped
/// handler) after a retry was decided and before it was admitted, during
/// its backoff or while it queued, never sends it: what the budget gave it
/// goes back, as for a retry refused after its wait.
impl<S> Drop for RareState<'_, S> {
    #[inline]
    fn drop(&mut self) {
        if self.withdrawn.is_some() {
            self.give_back_withdrawn();
        }
    }
}

/// How many times this thread built a call's optional state: the tests'
/// window on which calls need it, since a call drops it as it ends.
#[cfg(test)]
pub(super) mod built {
    use std::cell::Cell;

    thread_local! {
        static BUILT: Cell<u32> = const { Cell::new(0) };
    }

    /// One more built.
    pub(in crate::call) fn count() {
        BUILT.with(|built| built.set(built.get() + 1));
    }

    /// How many were built so far.
    pub(in crate::call) fn so_far() -> u32 {
        BUILT.with(Cell::get)
    }
}
