//! The part of a call's state only some calls need, kept apart so that a
//! plain call's success path writes and drops a few words instead of all of
//! it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::backoff::JitterRng;
use crate::budget::Withdrawal;
use crate::guards::Guards;
use crate::settings::Settings;

/// The part of a call's state that a plain call's success path never
/// touches: built when the call starts if it needs any of it, else at its
/// first failure (all of it is then at its starting value, as it would
/// have been at the start).
pub(super) struct More<S> {
    /// The override this call runs on; `None`: the policy's own settings.
    pub(super) overridden: Option<Arc<Settings>>,
    /// A scoped registry's guards (then the call has no cached ones).
    pub(super) scoped: Option<Arc<Guards>>,
    /// The call's idempotency key; while an attempt is polled in place, the
    /// key it displaced (see `context::poll_in`).
    pub(super) key: Option<Arc<str>>,
    /// `None` without a deadline, or when it is too far to arm.
    pub(super) deadline: Option<Instant>,
    pub(super) previous_wait: Option<Duration>,
    /// A backoff decided after a plain first attempt failed (see `plain`),
    /// waited out by the next attempt before it is admitted.
    pub(super) pending_wait: Option<Duration>,
    pub(super) rng: Option<JitterRng>,
    /// What the budget gave the retry decided last, until it is admitted:
    /// given back if it cannot run (see `cannot_run`).
    pub(super) withdrawn: Option<Withdrawal>,
    /// The call's span, when enabled.
    pub(super) span: Option<tracing::Span>,
    pub(super) last: S,
}

impl<S: Default> More<S> {
    /// A plain call's starting state, built at its first failure, in its
    /// slot (returned by value, it would be copied there: a few dozen bytes).
    #[cold]
    #[inline(never)]
    pub(super) fn build_plain(slot: &mut Option<Self>) {
        *slot = Some(More {
            overridden: None,
            scoped: None,
            key: None,
            deadline: None,
            previous_wait: None,
            pending_wait: None,
            rng: None,
            withdrawn: None,
            span: None,
            last: S::default(),
        });
    }
}
