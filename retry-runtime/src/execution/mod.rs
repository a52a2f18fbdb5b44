//! The retry loop, one attempt at a time.
//!
//! For each attempt, in this order:
//!
//! 1. **Admission** (see [`admission`]): the throttle may refuse it
//!    locally; an open breaker ends the call at once (retrying against it
//!    only burns attempts); the bulkhead and the rate limit may make it wait
//!    for a permit, then a turn (at most their `max_wait`, never past the
//!    deadline), holding no half-open probe slot meanwhile. The bulkhead
//!    permit is held for this attempt only, from before its turn: a turn is
//!    never spent on an attempt the bulkhead refuses.
//! 2. **Run** the attempt under the earlier of its timeout and the deadline;
//!    a timeout drops (cancels) the attempt's future. With hedging, more
//!    attempts start beside a slow one (see [`hedge`]). A timer beside a
//!    running attempt (its timeout, the deadline, a hedge falling due) is
//!    looked at only after the attempt has been polled: one that finishes
//!    as the timer fires has finished, and is neither cut short nor hedged.
//!    tokio's `timeout_at` polls in this order on the general path; the
//!    direct path (`direct`) and a hedging round (`hedge`) do so by hand.
//! 3. **Record** the outcome (see [`outcome`]) in the breaker: success,
//!    failure (transient, throttled, attempt timeout, deadline cut) or
//!    neutral (permanent, conflict); in the throttle, as an accept when the
//!    dependency answered without overload; in an adaptive bulkhead, as a
//!    latency sample.
//! 4. On a failure, **decide** (see [`decision`](crate::decision)): retry
//!    after which wait, or stop and why. The budget pays only for retries
//!    that will happen.
//! 5. **Back off**, holding nothing but the error (see [`slot`]).
//!
//! Why this order: the breaker sits *inside* the loop, so it sees every
//! attempt, and its counts are easy to reason about (N failing attempts are
//! N failures, whether they came from one call or N). The budget sits
//! *after* the breaker and only pays for retries: first attempts are free,
//! so the budget limits amplification without ever refusing fresh traffic.
//!
//! The caller gets the first success, or the last error an attempt
//! produced (an attempt that timed out produced `AttemptTimeout`), or a
//! [`Rejection`](crate::Rejection) when no attempt could run (`CircuitOpen`, `BulkheadFull`,
//! `DeadlineExceeded` while queued) or the deadline cut one short
//! (`DeadlineExceeded`). Once an attempt has produced an error, a retry that
//! cannot run ends the call with that error. Why it stopped is in the trace.
//!
//! Two paths run these steps: the general one ([`Execution::attempt_with`],
//! an `async fn`) and a hand-written future for the common case of a call
//! through the global registry whose bulkhead, if any, has a place free
//! (and which has no rate limit if it has a bulkhead), with or without an
//! attempt timeout and a deadline (`direct`), which polls the attempt where the caller built it. Both share every
//! decision: admission, the outcome's meaning, the retry decision. Before
//! either, the attribute awaits a plain call's first attempt on its own
//! (`plain`): the same admission and records on success, and the direct
//! path's own failure step after it.

mod admission;
mod answers;
mod direct;
mod general;
mod hedge;
mod key;
pub use key::{KeyFromDisplay, KeyFromInteger, KeyFromText, KeyProbe, KeyText, KeyWriter, idempotency_key};
mod lazy;
mod more;
mod outcome;
mod plain;
pub use plain::{
    BreakerBudget, Guarding, NoGuards, PlainFailure, PlainGuards, PlainRun, WithBulkhead,
    after_plain_failure, plain_attempt, started,
};
mod run;
pub use run::{Classified, ClassifyInner};
mod slot;
mod start;
pub use start::started_at_once;
mod unguarded;
pub use unguarded::UnguardedRun;

use std::future::Future;
use std::sync::Arc;

use tokio::time::{Instant, timeout_at};

pub use slot::{ErrorProbe, ForgetOtherError, Forgotten, KeepSendError, Kept, LastError};

use more::More;
use outcome::Guarded;

use crate::clock;
use crate::context;
use crate::error::ErrorHandling;
use crate::guards::{Guards, GuardsRef};
use crate::observe;
use crate::policy::{Nested, Policy};
use crate::settings::{Hedge, Settings};

/// What to do after one attempt.
#[derive(Debug)]
#[must_use = "a `Done` step carries the call's result"]
pub enum Step<T, E> {
    /// The call is over: return this.
    Done(Result<T, E>),
    /// The backoff wait is over: make the next attempt.
    Retry,
}

/// The state of one call's retry loop: made by `Policy::execution`, driven
/// with [`attempt`](Self::attempt) until it says [`Step::Done`].
///
/// `Policy::run` and the attribute do exactly that; the step form lets the
/// attribute inline the loop into your `async fn`, so that its body can
/// borrow `&mut self` and other parameters. `S` keeps the last error across
/// the wait for the next attempt (see [`LastError`]).
///
/// What a plain call's first attempt needs (the policy, its cached guards,
/// the attempt counts) is kept apart from what only some calls need: an
/// override's settings, a scoped registry's guards, a key, a deadline, an
/// enabled span, and the state of the backoff (see `More`). A call that
/// needs none of those when it starts leaves them unbuilt until its first
/// failure, so its success path writes, and drops, only a few words.
pub struct Execution<'p, S, H> {
    policy: &'p Policy,
    /// The global registry's guards, cached in the policy; `None` inside a
    /// scoped registry, whose guards are in `more`.
    cached: Option<&'p Guards>,
    max_attempts: u32,
    /// Attempts that ran (were admitted) so far.
    attempts: u32,
    /// `None` until the call needs any of it (see above).
    more: Option<More<'p, S>>,
    /// How this call classifies errors and makes rejections into them.
    handling: H,
}

impl<S, H> std::fmt::Debug for Execution<'_, S, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Execution")
            .field("operation", &self.policy.operation())
            .field("attempts", &self.attempts)
            .field("max_attempts", &self.max_attempts)
            .field("deadline", &self.deadline())
            .finish_non_exhaustive()
    }
}

impl<'p, S, H> Execution<'p, S, H> {
    /// The settings this call runs on (the policy's, or an override).
    #[inline]
    fn settings(&self) -> &Settings {
        match self.more.as_ref().and_then(|more| more.overridden.as_deref()) {
            Some(settings) => settings,
            None => self.policy.compiled_settings(),
        }
    }

    /// The guards this call uses, as a handle of its own, so that permits
    /// borrow it and not the call's state.
    #[inline]
    fn guards(&self) -> GuardsRef<'p> {
        match (self.cached, self.more.as_ref().and_then(|more| more.scoped.as_ref())) {
            (Some(guards), _) => GuardsRef::Cached(guards),
            (None, Some(scoped)) => GuardsRef::Scoped(Arc::clone(scoped)),
            (None, None) => unreachable!("a call has cached guards or a scoped registry's"),
        }
    }

    /// The call's deadline, if it has one that can be armed.
    #[inline]
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.more.as_ref().and_then(|more| more.deadline)
    }

    /// Whether the call's attempts run under a timer: an attempt timeout, or
    /// the deadline.
    #[inline]
    fn attempts_are_timed(&self) -> bool {
        self.settings().attempt_timeout.is_some() || self.deadline().is_some()
    }

    /// The state only some calls need, built now if it was not.
    #[inline]
    fn more(&mut self) -> &mut More<'p, S>
    where
        S: Default,
    {
        if self.more.is_none() {
            More::build_plain(&mut self.more);
        }
        match &mut self.more {
            Some(more) => more,
            None => unreachable!("`more` was just built"),
        }
    }

    /// Whether this call hedges: then [`attempt_hedged`](Self::attempt_hedged) is the way to attempt.
    #[inline]
    pub fn hedges(&self) -> bool {
        self.hedging().is_some()
    }

    /// The hedging this call does: its settings', unless it is made inside
    /// another call's attempt on this task and the policy says
    /// [`Nested::Once`]. A hedge is one more request to
    /// the dependency, and layers must not multiply those any more than
    /// retries: such a call makes its single attempt alone (its guards and
    /// timeouts still apply). The nesting is read where the round starts,
    /// which for a call that makes a single attempt is the poll it started
    /// in; a call that does not hedge never reads it.
    #[inline]
    fn hedging(&self) -> Option<Hedge> {
        let hedge = self.settings().hedge?;
        if self.policy.nested() == Nested::Once && context::nested() {
            observe::hedging_suppressed(self.policy.operation());
            return None;
        }
        Some(hedge)
    }

    /// Attempts that ran so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Whether the next attempt, if it runs, is the last this call may make.
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    pub(crate) fn next_is_last(&self) -> bool {
        self.attempts.saturating_add(1) >= self.max_attempts
    }

    /// The timeout each attempt of this call runs under, if any.
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    pub(crate) fn attempt_timeout(&self) -> Option<std::time::Duration> {
        self.settings().attempt_timeout
    }

    /// Makes the next attempt the last, whatever the policy allows: for a
    /// request that cannot be sent twice (no copy of it, or not idempotent).
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    pub(crate) fn allow_no_retry(&mut self) {
        self.max_attempts = self.max_attempts.min(self.attempts.saturating_add(1));
    }

    /// Runs one attempt with every guard; on a retryable failure it also
    /// waits out the backoff before returning [`Step::Retry`].
    ///
    /// The future should do nothing until polled (an `async` block doesn't),
    /// because it is created before the guards admit the attempt; use
    /// [`attempt_with`](Self::attempt_with) for futures that start work eagerly.
    #[inline]
    pub fn attempt<T, E, Fut>(&mut self, attempt: Fut) -> impl Future<Output = Step<T, E>>
    where
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        match self.direct_guards() {
            // The direct path holds its bulkhead place from here (see `direct`).
            Some((guards, phase))
                if guards.bulkhead.as_ref().is_none_or(|bulkhead| bulkhead.try_take_place()) =>
            {
                direct::Attempt::Direct { direct: direct::Direct::new(self, guards, attempt, phase) }
            }
            _ => direct::Attempt::General { general: self.attempt_with(move || attempt) },
        }
    }

    /// The guards when an attempt can take the direct path, and the phase
    /// it starts in: they come from the policy's cache (the global
    /// registry) and are ones the direct path runs (see `Guards::direct`). An attempt timeout and a deadline the direct path
    /// arms itself, and a planned wait it waits out first.
    #[inline]
    fn direct_guards(&self) -> Option<(&'p Guards, direct::Phase)> {
        let phase =
            |timed: bool| if timed { direct::Phase::AdmittingTimed } else { direct::Phase::Admitting };
        match (self.cached, &self.more) {
            // Nothing but the policy's settings: the common case, decided first.
            (Some(guards), None) if guards.direct => {
                Some((guards, phase(self.policy.compiled_settings().attempt_timeout.is_some())))
            }
            (Some(guards), Some(more)) if guards.direct => match more.pending_wait {
                // A wait a plain first attempt's failure planned (`plain`),
                // waited out first, holding nothing: so not with a bulkhead
                // place, which the direct path takes as the attempt is made
                // (the general path waits out the wait, then for a place).
                Some(_) if guards.bulkhead.is_some() => None,
                Some(_) => Some((guards, direct::Phase::Waiting)),
                None => Some((guards, phase(self.attempts_are_timed()))),
            },
            _ => None,
        }
    }

    /// An admitted attempt begins: it is counted, the first one tells the
    /// budget a call began (a ratio budget's share is of first attempts),
    /// and the previous attempt's error is superseded by this one's outcome.
    #[inline(always)]
    fn begin_attempt<E>(&mut self, guards: &Guards)
    where
        S: LastError<E>,
    {
        self.attempts += 1;
        if self.attempts == 1 {
            outcome::first_attempt_began(guards);
        }
        if let Some(more) = &mut self.more {
            more.last.clear();
            // The retry runs: its budget withdrawal is spent.
            more.withdrawn = None;
        }
    }

    /// Step 3: runs the attempt under the earlier of its timeout and the deadline.
    async fn run<T, E, Fut>(&self, attempt: Fut) -> Guarded<T, E>
    where
        Fut: Future<Output = Result<T, E>>,
    {
        let (key, span) = match &self.more {
            Some(more) => (more.key.clone(), more.span.as_ref()),
            None => (None, None),
        };
        let attempt = context::scope(key, span, attempt);
        match self.attempt_limit() {
            None => Guarded::Ran(attempt.await),
            Some((end, limit)) => match timeout_at(end, attempt).await {
                Ok(result) => Guarded::Ran(result),
                Err(_) => match limit {
                    Limit::Timeout(after) => Guarded::TimedOut(after),
                    Limit::Deadline => Guarded::Cut,
                },
            },
        }
    }

    /// When an attempt starting now must be cut short, and by what: the
    /// earlier of its timeout (one too long to arm is no timeout) and the
    /// call's deadline, which wins a tie. Both paths arm this one instant.
    #[inline(always)]
    fn attempt_limit(&self) -> Option<(Instant, Limit)> {
        let timeout =
            self.settings().attempt_timeout.and_then(|limit| Some((clock::instant_after(limit)?, limit)));
        match (timeout, self.deadline()) {
            (None, None) => None,
            (Some((end, limit)), None) => Some((end, Limit::Timeout(limit))),
            (Some((end, limit)), Some(deadline)) if end < deadline => Some((end, Limit::Timeout(limit))),
            (_, Some(deadline)) => Some((deadline, Limit::Deadline)),
        }
    }
}

/// What cuts a running attempt short (see `Execution::attempt_limit`).
enum Limit {
    /// Its own timeout, this long.
    Timeout(std::time::Duration),
    /// The call's deadline.
    Deadline,
}
