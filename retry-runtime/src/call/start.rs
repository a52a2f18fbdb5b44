//! How a call starts, at its first attempt: the settings in force now,
//! the guards of the registry in effect, the key and the nesting.
//!
//! The plain call (the global registry's cached guards, not nested, no
//! override possible, no deadline, DEBUG off; a key of its own kept in the
//! call's slot) is recognised from what is
//! at hand before anything optional is computed, so its success path
//! neither builds nor drops the optional parts; every other call goes
//! through the out-of-line `start_general`, which looks up its override,
//! deadline and span and builds `RareState` when it needs any of them.

use std::sync::Arc;

use super::rare_state::RareState;
use super::timed::FirstLimits;
use super::{Call, Started};
use crate::clock;
use crate::context;
use crate::guards::{GuardsRef, Shape};
use crate::observe;
use crate::policy::{Nested, Policy};
use crate::registry;
use crate::settings::Settings;

/// The settings for a call of `policy` made now: the override the registry
/// in effect holds for its operation, if any. The global registry's is
/// the policy's own copy (no lock, no hash of the name). The one way an
/// override (from a configuration file, or forced) reaches a call,
/// whatever its entry point.
#[inline(never)]
fn settings_now(policy: &Policy) -> Option<Arc<Settings>> {
    registry::with_scoped(|scoped| {
        scoped.operation_override_for(policy.operation(), policy.overrides(), policy.settings())
    })
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

/// The guards of a call of a policy with a breaker per key made without
/// its key (an entry point that knows none: the HTTP layers, a call of
/// `Call::new`): the empty key's.
#[cold]
#[inline(never)]
fn keyless(policy: &Policy) -> GuardsRef<'static> {
    GuardsRef::Scoped(Arc::new(policy.per_key_guards("").to_set()))
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

/// Whether a call of `policy` made now starts plain, its settings allowing
/// (`settings`): no override forbids it, DEBUG is off, and it is made
/// outside any attempt (so not nested, and inheriting no key).
#[inline(always)]
fn plain_now(policy: &Policy, settings: bool) -> bool {
    settings && !policy.override_forbids_plain() && !debug_enabled() && context::outside_attempts()
}

/// The call's span, unless no subscriber is interested in it.
#[inline(never)]
fn call_span(policy: &Policy) -> Option<tracing::Span> {
    let span = tracing::debug_span!(target: observe::target::CALL, "stormproof.call", operation = %policy.operation());
    (!span.is_disabled()).then_some(span)
}

impl<'p, S, H, V: Shape> Call<'p, S, H, V> {
    /// The guards of a call of `policy` made now whose first attempt is
    /// plain: settings with no deadline, attempt timeout or hedging (an
    /// override that only tunes the retries is looked up if the attempt
    /// fails), DEBUG off, made outside any attempt (so not nested, and
    /// inheriting no key), through the global registry. Decided from what
    /// is at hand as the attempt is made, before anything of the call is
    /// built (a call with a key of its own runs its plain first attempt in
    /// it: see `parts::InKey`).
    #[inline(always)]
    pub(super) fn plain_guards<W: Shape>(policy: &'p Policy) -> Option<&'p crate::guards::Guards> {
        if !plain_now(policy, policy.plain_settings()) {
            return None;
        }
        Self::global_guards_of::<W>(policy)
    }

    /// [`plain_guards`](Self::plain_guards) for a call of a policy with an
    /// attempt timeout or a deadline (or both), or an `on_stop` hook, and
    /// nothing else a plain call cannot have (no hedging or guards per
    /// key): the guards and the limits, which the first attempt races with
    /// a timer of its own (the attribute's in `call::timed`, the tower
    /// layer's in `http::tower::future`), its start read when it first
    /// waits (the hook's elapsed time counts from it). `None` for any other.
    #[inline(always)]
    pub(crate) fn plain_guards_timed<W: Shape>(
        policy: &'p Policy,
    ) -> Option<(&'p crate::guards::Guards, FirstLimits)> {
        let settings = policy.compiled_settings();
        let limits = FirstLimits::of(settings);
        // An `on_stop` hook needs the call's start: the attempt's, read when
        // it first waits (none armed without limits).
        let timed = settings.times_first_attempt(policy.hooks().on_stop.is_some())
            && settings.hedge.is_none()
            && !policy.per_key()
            && !policy.sheds_through_throttle();
        if !plain_now(policy, timed) {
            return None;
        }
        Some((Self::global_guards_of::<W>(policy)?, limits))
    }

    /// [`plain_guards`](Self::plain_guards) for a call whose key found its
    /// guards (`preset`, from the registry in effect, whichever it is): a
    /// policy with guards per key has no plain settings of its own (its
    /// calls without a key are never plain), so its settings are asked here.
    #[inline(always)]
    pub(super) fn plain_with(
        policy: &'p Policy,
        preset: &'p crate::guards::KeyedSet<'p>,
    ) -> Option<&'p crate::guards::KeyedSet<'p>> {
        let settings = policy.compiled_settings().allow_plain()
            && policy.hooks().on_stop.is_none()
            && !policy.sheds_through_throttle();
        plain_now(policy, settings).then_some(preset)
    }

    /// The global registry's guards for a call of `policy`, unless it runs
    /// inside a scoped registry.
    #[inline(always)]
    pub(super) fn global_guards_of<W: Shape>(policy: &'p Policy) -> Option<&'p crate::guards::Guards> {
        // No guard named: none to look up, in any registry.
        if W::NONE {
            Some(crate::guards::Guards::none())
        } else if W::EXACT {
            policy.global_named_guards()
        } else {
            policy.global_guards()
        }
    }
}

impl<'p, S: Default, H, V: Shape> Call<'p, S, H, V> {
    /// Starts the call if it has not started: at its first attempt, or
    /// when an entry point first asks what it allows.
    #[inline(always)]
    pub(super) fn start_if_new(&mut self) {
        if self.started == Started::No {
            self.start();
        }
    }

    /// Starts the call now: the plain call (see the module docs) is
    /// recognised from what is at hand, and none of the optional parts is
    /// computed for it.
    #[inline(always)]
    fn start(&mut self) {
        let policy = self.policy;
        // A call without a key of its own inherits the key of the call it is nested in.
        let (nested, key) = context::inherit(self.key.take());
        let settings = policy.compiled_settings();
        // The guards its key found (see `per_key`), else the policy's.
        let guards = match self.cached {
            Some(preset) => GuardsRef::Cached(preset),
            None if policy.per_key() => keyless(policy),
            None => policy.guards(),
        };
        match guards {
            // An override that only tunes the retries leaves the call plain:
            // it is looked up if an attempt fails (`adopt_override`).
            // A key of its own stays in the call's slot, where its attempts
            // are polled with it (`poll_in_context`) until a failure builds
            // the rare state, which takes it.
            GuardsRef::Cached(cached)
                if !nested
                    && !policy.override_forbids_plain()
                    && policy.plain_start()
                    && !debug_enabled() =>
            {
                self.cached = Some(cached);
                self.max_attempts = settings.max_attempts;
                self.started = Started::Plain;
                *self.key = key;
            }
            guards => self.start_general(guards, nested, key),
        }
    }

    /// After a failed attempt of a call that started plain: the override
    /// in force now, if any, governs its retries (one set by a reload while
    /// the attempt ran applies whole, its deadline counted from now). Looked
    /// up once, by a call that fails, rather than by every call.
    #[cold]
    #[inline(never)]
    pub(super) fn adopt_override(&mut self) {
        self.started = Started::General;
        if let Some(settings) = settings_now(self.policy) {
            // Its retries on the override's guards too: the breaker off.
            if !settings.breaker
                && let Some(cached) = self.cached.take()
            {
                match GuardsRef::Cached(cached).with_breaker_off() {
                    GuardsRef::Scoped(guards) => self.rare().scoped = Some(guards),
                    GuardsRef::Cached(cached) => self.cached = Some(cached),
                }
            }
            self.max_attempts = settings.max_attempts;
            // A deadline the call started with (its first attempt raced
            // it: `call::timed`) stands unless the override changed it.
            let started_with =
                self.deadline().filter(|_| settings.deadline == self.policy.compiled_settings().deadline);
            let deadline = started_with.or_else(|| settings.deadline.and_then(clock::instant_after));
            let rare = self.rare();
            rare.deadline = deadline;
            rare.overridden = Some(settings);
        }
    }

    /// Any call not recognised as plain at once: its override, deadline and
    /// span are looked up, and `rare` built in place when it needs any of them.
    #[inline(never)]
    fn start_general(&mut self, guards: GuardsRef<'p>, nested: bool, key: Option<Arc<str>>) {
        let policy = self.policy;
        self.started = Started::General;
        let overridden = if policy.may_be_overridden() { settings_now(policy) } else { None };
        let settings = overridden.as_deref().unwrap_or(policy.compiled_settings());
        // A file's `breaker = "none"` (such an override never allows a plain
        // start); compiled without a breaker, the guards have none to turn off.
        let guards = match &overridden {
            Some(settings) if !settings.breaker => guards.with_breaker_off(),
            _ => guards,
        };
        self.max_attempts = max_attempts(policy, settings, nested);
        let deadline = settings.deadline.and_then(clock::instant_after);
        let span = if debug_enabled() { call_span(policy) } else { None };
        // Timed only for a hook that reports the time the call took.
        let started_at = policy.hooks().on_stop.is_some().then(tokio::time::Instant::now);
        let scoped = match guards {
            GuardsRef::Cached(guards) => {
                self.cached = Some(guards);
                None
            }
            GuardsRef::Scoped(guards) => Some(guards),
        };
        // Plain after all: the override is another operation's, the
        // deadline too far to arm, or no subscriber wants the span.
        if overridden.is_none()
            && scoped.is_none()
            && key.is_none()
            && deadline.is_none()
            && span.is_none()
            && started_at.is_none()
        {
            return;
        }
        #[cfg(test)]
        super::rare_state::built::count();
        *self.rare = Some(RareState {
            overridden,
            scoped,
            priority: None,
            key,
            deadline,
            previous_wait: None,
            backoff: None,
            #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
            due: None,
            rng: None,
            withdrawn: None,
            timed_out: false,
            span,
            started_at,
            last: S::default(),
        });
    }
}
