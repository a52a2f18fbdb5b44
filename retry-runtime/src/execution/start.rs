//! How a call starts: its `Execution` built from the policy, the key and
//! the context it is made in, always in place (`start_with`; a started
//! execution returned by value would be copied whole).
//!
//! The plain call (the global registry's cached guards, no key, no
//! override possible, no deadline, DEBUG off) is recognised from what is
//! at hand before anything optional is computed, so its success path
//! neither builds nor drops the optional parts; every other call goes
//! through the out-of-line `start_general`, which looks up its override,
//! deadline and span and builds `More` when it needs any of them.

use std::sync::Arc;

use super::Execution;
use super::more::More;
use crate::clock;
use crate::context;
use crate::guards::{Guards, GuardsRef};
use crate::observe;
use crate::policy::{Nested, Policy};
use crate::registry;
use crate::settings::Settings;

/// The settings for a call of `policy` made now: the override the registry
/// in effect holds for its operation, if any. The global registry's is
/// the policy's own copy (no lock, no hash of the name).
#[inline(never)]
fn override_for_call(policy: &Policy) -> Option<Arc<Settings>> {
    registry::with_scoped(|scoped| scoped.operation_override(policy.operation()))
        .unwrap_or_else(|| policy.overrides().global())
}

/// Whether DEBUG may be enabled at all (a compile-time filter, then the
/// subscribers' current maximum): the check `debug_span!` starts with,
/// taken out so that the span's construction stays out of line.
#[inline(always)]
pub(super) fn debug_enabled() -> bool {
    use tracing::level_filters::{LevelFilter, STATIC_MAX_LEVEL};
    tracing::Level::DEBUG <= STATIC_MAX_LEVEL && tracing::Level::DEBUG <= LevelFilter::current()
}

/// The attempts a call may make: its settings', or one for a call nested
/// in another's attempt when the policy says so (see [`Nested`]).
#[inline(always)]
fn max_attempts(policy: &Policy, settings: &Settings, nested: bool) -> u32 {
    let max_attempts = settings.max_attempts;
    if nested && policy.nested() == Nested::Once && max_attempts > 1 {
        observe::retries_suppressed(policy.operation(), max_attempts);
        return 1;
    }
    max_attempts
}

/// The call's span, unless no subscriber is interested in it.
#[inline(never)]
fn call_span(policy: &Policy) -> Option<tracing::Span> {
    let span = tracing::debug_span!(target: crate::observe::target::CALL, "stormproof.call", operation = %policy.operation());
    (!span.is_disabled()).then_some(span)
}

/// The execution of a call of `policy` with `key`, built and started in
/// `execution`: for a call that starts its execution at once (the
/// attribute's functions that never make a plain first attempt: a key, a
/// deadline, a throttle, ...; `Policy::run_with_key`; the HTTP layers).
/// Built in place: returned by value from the out-of-line start, it would
/// be copied into the caller's future whole. `last` only selects the error
/// slot's type.
#[inline(always)]
pub fn started_at_once<'e, 'p, S: Default, H>(
    policy: &'p Policy,
    execution: &'e mut Option<Execution<'p, S, H>>,
    key: Option<Arc<str>>,
    last: S,
    handling: H,
) -> &'e mut Execution<'p, S, H> {
    drop(last);
    let execution = execution.insert(Execution::unstarted(policy, handling));
    execution.start_with(key);
    execution
}

/// Whether a call of `policy` made now with `key` starts plain (as far as
/// the facts at hand tell: no key, no override possible, no deadline
/// configured, DEBUG off); its guards must also be the global registry's.
#[inline(always)]
pub(super) fn starts_plain(policy: &Policy, settings: &Settings, key: &Option<Arc<str>>) -> bool {
    key.is_none() && !policy.may_be_overridden() && settings.deadline.is_none() && !debug_enabled()
}

impl<'p, S, H> Execution<'p, S, H> {
    /// An execution that has not started: only [`start`](Self::start) or
    /// [`start_plain`](Self::start_plain) makes it usable. Built in its slot field by field (see `plain::started`).
    #[inline(always)]
    pub(super) fn unstarted(policy: &'p Policy, handling: H) -> Self {
        Execution { policy, cached: None, max_attempts: 0, attempts: 0, more: None, handling }
    }

    /// Starts an unstarted execution in place, for a call without a key of
    /// its own made now.
    #[inline(always)]
    pub(super) fn start(&mut self)
    where
        S: Default,
    {
        self.start_with(None);
    }

    /// Starts an unstarted execution in place, for a call with `key` made
    /// now: the plain call (see `starts_plain`) is recognised from what is
    /// at hand, and none of the optional parts is computed for it.
    #[inline(always)]
    pub(super) fn start_with(&mut self, key: Option<Arc<str>>)
    where
        S: Default,
    {
        let policy = self.policy;
        // A call without a key of its own inherits the key of the call it is nested in.
        let (nested, key) = context::inherit(key);
        let settings = policy.compiled_settings();
        match policy.guards() {
            GuardsRef::Cached(cached) if starts_plain(policy, settings, &key) => {
                self.start_plain(cached, nested)
            }
            guards => self.start_general(guards, nested, key),
        }
    }

    /// Starts a plain call (see `starts_plain`) on the global registry's `guards`.
    #[inline(always)]
    pub(super) fn start_plain(&mut self, guards: &'p Guards, nested: bool) {
        self.cached = Some(guards);
        self.max_attempts = max_attempts(self.policy, self.policy.compiled_settings(), nested);
    }

    /// Starts the execution of a call whose plain first attempt, on the
    /// global registry's `guards`, failed: as the plain call it was, unless
    /// a registry may hold an override for the operation. The override's
    /// settings then govern the retries: a plain first attempt is allowed
    /// one that only tunes them (see `Policy::override_forbids_plain`), and
    /// it is looked up now, once, rather than by every call. (One set by a
    /// reload while the attempt ran applies whole, its deadline counted from
    /// now.)
    #[inline(always)]
    pub(super) fn start_after_plain(&mut self, guards: &'p Guards)
    where
        S: Default,
    {
        if self.policy.may_be_overridden() {
            self.start_general(GuardsRef::Cached(guards), false, None);
        } else {
            self.start_plain(guards, false);
        }
    }

    /// Any call not recognised as plain at once: its override, deadline and
    /// span are looked up, and `more` built in place when it needs any of them.
    #[inline(never)]
    fn start_general(&mut self, guards: GuardsRef<'p>, nested: bool, key: Option<Arc<str>>)
    where
        S: Default,
    {
        let policy = self.policy;
        let overridden = if policy.may_be_overridden() { override_for_call(policy) } else { None };
        let settings = overridden.as_deref().unwrap_or(policy.compiled_settings());
        self.max_attempts = max_attempts(policy, settings, nested);
        let deadline = settings.deadline.and_then(clock::instant_after);
        let span = if debug_enabled() { call_span(policy) } else { None };
        match guards {
            // Plain after all: the override is another operation's, the
            // deadline too far to arm, or no subscriber wants the span.
            GuardsRef::Cached(cached)
                if overridden.is_none() && key.is_none() && deadline.is_none() && span.is_none() =>
            {
                self.cached = Some(cached);
            }
            guards => {
                let scoped = match guards {
                    GuardsRef::Cached(guards) => {
                        self.cached = Some(guards);
                        None
                    }
                    GuardsRef::Scoped(guards) => Some(guards),
                };
                self.more = Some(More {
                    overridden,
                    scoped,
                    key,
                    deadline,
                    previous_wait: None,
                    pending_wait: None,
                    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
                    due: None,
                    rng: None,
                    withdrawn: None,
                    span,
                    last: S::default(),
                });
            }
        }
    }
}
