//! One call: the retry loop, one attempt at a time, the same for every
//! entry point (the attribute, `Policy::run`, the HTTP layers, a hedged
//! function).
//!
//! A [`Call`] holds what lasts across attempts (the policy, the guards, the
//! attempts made, the backoff's state, the last error); each attempt is one
//! [`Attempt`](attempt::Attempt) future, which runs these steps, in this order:
//!
//! 1. **Admission** (the guard set's one admission function, see
//!    `guard::set`): the throttle, the breaker, the bulkhead, the rate
//!    limit, the budget. Refused, the call ends; told to wait (for a
//!    bulkhead place or a rate-limit turn), the attempt waits holding no
//!    half-open probe slot, at most the guard's `max_wait` and never past
//!    the deadline (see `admit`).
//! 2. **Run** the attempt, polled where the caller made it, in its context
//!    (the key, the nesting mark, the call's span), under the earlier of
//!    its timeout and the deadline: a timer beside a running attempt is
//!    looked at only after the attempt has been polled, so one that
//!    finishes as the timer fires has finished. With hedging, the round
//!    runs more attempts beside a slow one (see `hedge`).
//! 3. **Record** the outcome in every guard (the guard set's one recording
//!    function): the breaker hears a success, a failure or neither, the
//!    throttle an accept or not, an adaptive bulkhead a latency sample.
//! 4. On a failure, **decide** (see [`decision`](crate::decision), which
//!    the simulator calls too): retry after which wait, or stop and why.
//!    The budget pays only for retries that will happen.
//! 5. **Back off**, holding nothing but the error (see `last_error`).
//!
//! Why this order: the breaker sits *inside* the loop, so it sees every
//! attempt, and its counts are easy to reason about (N failing attempts are
//! N failures, whether they came from one call or N). The budget sits
//! *after* the breaker and only pays for retries: first attempts are free,
//! so the budget limits amplification without ever refusing fresh traffic.
//!
//! The caller gets the first success, or the last error an attempt
//! produced (an attempt that timed out produced `AttemptTimeout`), or a
//! [`Rejection`](crate::Rejection) when no attempt could run (`CircuitOpen`,
//! `BulkheadFull`, `DeadlineExceeded` while queued, ...) or the deadline cut
//! one short (`DeadlineExceeded`). Once an attempt has produced an error, a
//! retry that cannot run ends the call with that error, marked with why
//! when a guard or the deadline stopped it (the handling's `stopped`: see
//! [`Stopped`](crate::Stopped)); the `on_stop` hook, the trace and the
//! metrics hear why every call gave up (see [`hooks`](crate::hooks)).
//!
//! **The success path stays small.** What only some calls need (an
//! override's settings, a scoped registry's guards, a key once an attempt
//! failed, a deadline, an enabled span, the backoff's state) is kept apart (`rare`), built only
//! when a call needs it: a plain call's success path writes, and drops, a
//! few words. What only some attempts need (a wait for a place or a turn,
//! a hedging round) lives behind a box (`Rare`), built only then.

mod admit;
mod after_plain;
mod answers;
mod attempt;
mod for_key;
mod hedge;
mod key;
mod last_error;
mod made_on_poll;
#[cfg(feature = "tower")]
mod owned;
mod parts;
mod per_key;
mod phase;
mod plain;
mod polled;
mod racing;
mod rare_state;
mod run;
mod run_loop;
mod run_or_else;
mod running;
mod settle;
mod start;
#[cfg(test)]
mod tests;
mod timed;
mod traits_of;

use std::sync::Arc;

use tokio::time::Instant;

pub use for_key::ForKey;
pub use key::{KeyFromDisplay, KeyFromInteger, KeyFromText, KeyProbe};
pub use last_error::{ErrorProbe, ForgetOtherError, KeepSendError, Kept, LastError};
pub use made_on_poll::MadeOnPoll;
#[cfg(feature = "tower")]
pub(crate) use owned::{FirstAttempt, FirstPermits};
#[cfg(feature = "tower")]
pub(crate) use parts::Unkeyed;
pub use per_key::{CallTarget, KeyedGuards};
// What the HTTP layers' calls run (`http::exchange`): a call of a policy
// with the guards its request's host found.
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub(crate) use per_key::Target;
#[cfg(feature = "tower")]
pub(crate) use plain::Failed;
pub use run::{Classified, ClassifyInner};
pub use run_loop::Run;
pub use run_or_else::RunOrElse;
#[cfg(feature = "tower")]
pub(crate) use timed::FirstLimits;

use rare_state::RareState;

use crate::clock;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;

use crate::guards::{AnyShape, Guards, GuardsRef, Shape};
use crate::policy::Policy;
use crate::settings::Settings;

/// What to do after one attempt.
#[derive(Debug)]
#[must_use = "a `Done` step carries the call's result"]
pub enum Step<T, E> {
    /// The call is over: return this.
    Done(Result<T, E>),
    /// The backoff wait is over: make the next attempt.
    Retry,
}

/// One call's retry loop: made with [`new`](Self::new), driven with
/// [`attempt`](Self::attempt) until it says [`Step::Done`].
///
/// The attribute drives it in a loop inlined into your `async fn`, so that
/// each attempt's `async` block can borrow what the body borrows (`&mut
/// self` included); `Policy::run` and the HTTP layers drive it the same
/// way. `S` keeps the last error across the wait for the next attempt (see
/// `LastError`); `H` classifies errors and makes rejections into them.
pub struct Call<'p, S, H, V = AnyShape> {
    policy: &'p Policy,
    /// The global registry's guards, cached in the policy; `None` before
    /// the call starts, or inside a scoped registry (its guards are in `rare`).
    cached: Option<&'p Guards>,
    /// The attempts this call may make; 0 until it starts (at its first attempt).
    max_attempts: u32,
    /// How it started (see `start`).
    started: Started,
    /// Attempts that ran (were admitted) so far.
    attempts: u32,
    /// The call's idempotency key: a plain call's while it is plain (its
    /// attempts polled with it), else until the call starts or its rare
    /// state is built, which takes it. While an attempt is polled, the
    /// outer key it pushed aside (as `rare.key` holds it).
    // Dropped when the call ends (`Call::end`), if it never started: as
    // with `rare`, a call without drop glue keeps its caller's drop small.
    key: ManuallyDrop<Option<Arc<str>>>,
    /// `None` until the call needs any of it (see the module docs).
    // Dropped when the call ends (`Call::end`), behind one inline test: as
    // a plain field its drop would be a call on every call's success path.
    rare: ManuallyDrop<Option<RareState<'p, S>>>,
    /// How this call classifies errors and makes rejections into them.
    handling: H,
    /// Which guards its function names (see `guards::Shape`).
    shape: PhantomData<fn() -> V>,
}

impl<S, H, V: Shape> std::fmt::Debug for Call<'_, S, H, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("operation", &self.policy.operation())
            .field("attempts", &self.attempts)
            .field("max_attempts", &self.max_attempts)
            .field("deadline", &self.deadline())
            .finish_non_exhaustive()
    }
}

impl<'p, S, H> Call<'p, S, H, AnyShape> {
    /// A call of `policy` with `key`, whose attempts' errors `handling`
    /// classifies; `last` only selects the error slot's type (see
    /// [`LastError`]). Nothing is looked up until its first attempt.
    #[inline(always)]
    pub fn new(policy: &'p Policy, key: Option<Arc<str>>, last: S, handling: H) -> Self {
        Call::shaped(policy, key, last, handling)
    }
}

impl<'p, S, H, V: Shape> Call<'p, S, H, V> {
    /// [`new`](Call::new) for a function known to name only the guards `V`
    /// says (see `guards::Shape`): the attribute's, which knows.
    #[inline(always)]
    pub fn shaped(policy: &'p Policy, key: Option<Arc<str>>, last: S, handling: H) -> Self {
        drop(last);
        Call {
            policy,
            cached: None,
            max_attempts: 0,
            started: Started::No,
            attempts: 0,
            key: ManuallyDrop::new(key),
            rare: ManuallyDrop::new(None),
            handling,
            shape: PhantomData,
        }
    }

    /// This call, made with the guards its key found, if any (see
    /// `per_key`), which its start then takes as they are.
    #[inline]
    pub(crate) fn with_target(mut self, target: impl per_key::CallTarget<'p>) -> Self {
        self.cached = per_key::preset(target);
        self
    }

    /// The guards this call uses, borrowed: the policy's cached ones, a
    /// scoped registry's, or none before it starts.
    #[inline(always)]
    fn guards_ref(&self) -> &Guards {
        match (self.cached, &*self.rare) {
            (Some(guards), _) => guards,
            (None, Some(RareState { scoped: Some(scoped), .. })) => scoped,
            _ => Guards::none(),
        }
    }

    /// The settings this call runs on (the policy's, or an override).
    #[inline]
    fn settings(&self) -> &Settings {
        match self.rare.as_ref().and_then(|rare| rare.overridden.as_deref()) {
            Some(settings) => settings,
            None => self.policy.compiled_settings(),
        }
    }

    /// The guards this call uses, as a handle of its own, so that what
    /// borrows it does not borrow the call.
    #[inline]
    fn guards(&self) -> GuardsRef<'p> {
        match (self.cached, self.rare.as_ref().and_then(|rare| rare.scoped.as_ref())) {
            (Some(guards), _) => GuardsRef::Cached(guards),
            (None, Some(scoped)) => GuardsRef::Scoped(Arc::clone(scoped)),
            (None, None) => GuardsRef::Cached(Guards::none()),
        }
    }

    /// The call's deadline, if it has one that can be armed.
    #[inline]
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.rare.as_ref().and_then(|rare| rare.deadline)
    }

    /// The state only some calls need, built now if it was not.
    #[inline]
    fn rare(&mut self) -> &mut RareState<'p, S>
    where
        S: Default,
    {
        if self.rare.is_none() {
            RareState::build_plain(&mut self.rare);
            // A plain call's own key (see `start`) moves in with the rest.
            if let (Some(rare), Some(_)) = (&mut *self.rare, &*self.key) {
                rare.key = self.key.take();
            }
        }
        match &mut *self.rare {
            Some(rare) => rare,
            None => unreachable!("`rare` was just built"),
        }
    }

    /// Whether a plain first attempt's failure left a backoff for the next
    /// attempt to wait out (see `Call::after_plain`).
    #[inline(always)]
    fn backs_off_first(&self) -> bool {
        self.rare.as_ref().is_some_and(|rare| rare.backoff.is_some())
    }

    /// Attempts that ran so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Whether the next attempt, if it runs, is the last this call may
    /// make (the call starts now if it had not).
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    pub(crate) fn next_is_last(&mut self) -> bool
    where
        S: Default,
    {
        self.start_if_new();
        self.attempts.saturating_add(1) >= self.max_attempts
    }

    /// The timeout each attempt of this call runs under, if any.
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    pub(crate) fn attempt_timeout(&self) -> Option<std::time::Duration> {
        self.settings().attempt_timeout
    }

    /// This call's priority, over its settings' (an HTTP request's
    /// `x-priority`): set as the call starts, before its first attempt.
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    pub(crate) fn set_priority(&mut self, priority: crate::Priority)
    where
        S: Default,
    {
        self.start_if_new();
        self.rare().priority = Some(priority);
    }

    /// Makes the next attempt the last, whatever the policy allows: for a
    /// request that cannot be sent twice (no copy of it, or not
    /// idempotent). The call starts now if it had not.
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    pub(crate) fn allow_no_retry(&mut self)
    where
        S: Default,
    {
        self.start_if_new();
        self.max_attempts = self.max_attempts.min(self.attempts.saturating_add(1));
    }

    /// An admitted attempt begins: it is counted, and the previous
    /// attempt's error is superseded by this one's outcome. A retry's
    /// budget withdrawal is spent now: forgotten, or, for a bucket that
    /// refunds a retry that succeeds, kept to the call's end, where it is
    /// given back unless a failure forgot it first (see `Withdrawn::spent`):
    /// the success path does nothing more for it.
    #[inline(always)]
    fn begin_attempt<E>(&mut self)
    where
        S: LastError<E>,
    {
        self.attempts += 1;
        if let Some(rare) = &mut *self.rare {
            rare.last.clear();
            if let Some(withdrawn) = &mut rare.withdrawn {
                if withdrawn.taken.refundable().is_some() {
                    withdrawn.spent = true;
                } else {
                    rare.withdrawn = None;
                }
            }
        }
    }

    /// The attempt running now failed, or was cut or dropped: a retry's
    /// withdrawal kept for a refund is spent for good.
    #[inline]
    fn forget_spent(&mut self) {
        if let Some(rare) = &mut *self.rare {
            rare.forget_spent();
        }
    }

    /// When an attempt starting now must be cut short, and by what: the
    /// earlier of its timeout (one too long to arm is no timeout) and the
    /// call's deadline, which wins a tie.
    #[inline(always)]
    fn attempt_limit(&self) -> Option<(Instant, Limit)> {
        let timeout =
            self.settings().attempt_timeout.and_then(|limit| Some((clock::instant_after(limit)?, limit)));
        Limit::earlier(timeout, self.deadline())
    }

    /// Whether the call's attempts run under a timer: an attempt timeout, or
    /// the deadline.
    #[inline]
    fn attempts_are_timed(&self) -> bool {
        self.settings().attempt_timeout.is_some() || self.deadline().is_some()
    }
}

impl<S, H, V> Call<'_, S, H, V> {
    /// The call is over (an attempt ended it, or was dropped unfinished,
    /// which ends it too): its optional state goes, giving back what a
    /// retry that never ran took from the budget.
    ///
    /// Not a `Drop` of the call's own: every way a call ends goes through
    /// an attempt (the loop is always inside one when it suspends), and a
    /// call with a destructor would cost every successful call a test of
    /// what it holds when its caller's future is dropped, out of line.
    #[inline(always)]
    pub(super) fn end(&mut self) {
        if self.rare.is_some() {
            drop_more(&mut self.rare);
        }
        if self.key.is_some() {
            drop_more(&mut self.key);
        }
    }
}

/// Drops a call's optional state, or its key (see `Call::end`).
#[inline(never)]
fn drop_more<T>(rare: &mut ManuallyDrop<Option<T>>) {
    drop(ManuallyDrop::into_inner(std::mem::replace(rare, ManuallyDrop::new(None))));
}

/// How a call started (see `start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Started {
    /// Not yet: at its first attempt.
    No,
    /// Plain: on the policy's settings, though an override that only tunes
    /// the retries may be in force, looked up if an attempt fails.
    Plain,
    /// With its override (if any) looked up.
    General,
}

/// What cuts a running attempt short (see `Call::attempt_limit`, and
/// `timed::FirstLimits` for a plain call's first attempt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    /// Its own timeout, this long.
    Timeout(std::time::Duration),
    /// The call's deadline.
    Deadline,
}

impl Limit {
    /// When an attempt is cut short, and by what: the earlier of its
    /// timeout (`timeout`: when it ends, and how long it is) and the call's
    /// `deadline`, which wins a tie. `None` for neither (one too long to
    /// arm is none).
    #[inline(always)]
    fn earlier(
        timeout: Option<(Instant, std::time::Duration)>,
        deadline: Option<Instant>,
    ) -> Option<(Instant, Limit)> {
        match (timeout, deadline) {
            (None, None) => None,
            (Some((end, limit)), None) => Some((end, Limit::Timeout(limit))),
            (Some((end, limit)), Some(deadline)) if end < deadline => Some((end, Limit::Timeout(limit))),
            (_, Some(deadline)) => Some((deadline, Limit::Deadline)),
        }
    }
}
