//! `Policy`: every setting of a resilient call, validated once.
//!
//! The attribute builds one `static` policy per function; code that cannot
//! carry an attribute (closures, trait objects, generated clients) builds
//! one with [`Policy::builder`] and calls [`Policy::run`]. Both drive the
//! same call (see the `call` module), which reads the settings
//! here; this module knows nothing of the loop.

mod attribute;
mod builder;
mod guards;
mod per_key;

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use attribute::AttributeConfig;
pub use builder::PolicyBuilder;
#[cfg(feature = "config")]
pub(crate) use builder::factor_milli;

use crate::backoff::{Backoff, stream_seed};
use crate::guards::{GuardCache, GuardNames};
use crate::hooks::Hooks;
use crate::registry::{GuardKind, PolicyOverrides};
pub use crate::settings::{Hedge, MAX_HEDGES_LIMIT, SettingSource, SettingSources, Settings};

/// Upper bound of `max_attempts`: a bound on amplification, not a target.
pub const MAX_ATTEMPTS_LIMIT: u32 = 100;

/// What a call made inside another resilient call's attempt does.
///
/// Three layers that each retry 3 times make 27 attempts against the
/// dependency at the bottom. By default only the outermost layer retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Nested {
    /// Make a single attempt, and no hedge beside it (guards and timeouts
    /// still apply). The default.
    #[default]
    Once,
    /// Retry (and hedge) as if not nested.
    Retry,
}

/// The settings of a resilient call; see [`PolicyBuilder`] for every default.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use stormproof::{Jitter, Policy};
///
/// let policy = Policy::builder()
///     .max_attempts(3)
///     .base(Duration::from_millis(50))
///     .jitter(Jitter::None)
///     .build()?;
/// let mut calls = 0;
/// let answer = policy
///     .run(|| {
///         calls += 1;
///         let attempt = calls;
///         async move {
///             if attempt < 3 { Err(std::io::Error::from(std::io::ErrorKind::TimedOut)) } else { Ok(42) }
///         }
///     })
///     .await?;
/// assert_eq!((answer, calls), (42, 3));
/// # Ok(()) }
/// ```
pub struct Policy {
    operation: Cow<'static, str>,
    settings: Settings,
    guard_names: GuardNames,
    /// Declared by the attribute: `idempotent = false` makes this `false`.
    idempotent: bool,
    /// Whether calls carry an idempotency key (the attribute's `key`).
    has_key: bool,
    /// How many registries hold a configuration override for this
    /// operation, how many of those a plain first attempt cannot honour,
    /// and the global registry's (see the registry's `overrides` module);
    /// while none does, calls read no override (one relaxed load).
    overrides: PolicyOverrides,
    /// Whether its settings let a call's first attempt be plain and
    /// untimed (`Settings::allow_plain_with`: no deadline, attempt timeout,
    /// hedging, `on_stop` hook or guards per key, not sheddable with a
    /// throttle), worked out once, so that a call reads one byte.
    plain_settings: bool,
    /// Which guards it names, as far as `Policy::run` picks a shape by them.
    loop_guards: LoopGuards,
    seed: Option<u64>,
    nested: Nested,
    /// Jitter streams handed out so far, when seeded.
    streams: AtomicU64,
    cache: GuardCache,
    /// `on_retry` and `on_stop`.
    hooks: Hooks,
    /// Whether a call may start plain as far as the compiled policy says:
    /// no deadline to arm, no `on_stop` hook to time the call for.
    plain_start: bool,
    /// Whether a call's key chooses any of its guards (`guard_names`
    /// says, once: every call not made with its key's guards asks).
    per_key: bool,
}

/// Which guards a policy names, when they are at most the retry loop's
/// own (a breaker, a budget): `Policy::run` then sees them as the
/// attribute would (see `guards::Shape`), and tests nothing for the
/// others; any other set of guards is seen slot by slot, and so are the
/// guards of a policy whose first attempt races a timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoopGuards {
    /// No guard at all.
    Unguarded,
    /// A breaker alone.
    Breaker,
    /// A budget alone.
    Budget,
    /// A breaker and a budget.
    BreakerBudget,
    /// A bulkhead, a throttle or a rate limit, with any others.
    Other,
    /// Any guards, for a policy with an attempt timeout or a deadline (its
    /// first attempt races their timer) or an `on_stop` hook (its first
    /// attempt's start is read if it waits): see `call::timed`.
    Timed,
}

impl LoopGuards {
    /// The case of a policy naming a breaker, a budget, and any other
    /// guard, and whether its first attempt is timed (`timed`: an attempt
    /// timeout, a deadline or an `on_stop` hook).
    pub(crate) const fn of(breaker: bool, budget: bool, other: bool, timed: bool) -> Self {
        match (breaker, budget, other) {
            _ if timed => LoopGuards::Timed,
            (_, _, true) => LoopGuards::Other,
            (false, false, false) => LoopGuards::Unguarded,
            (true, false, false) => LoopGuards::Breaker,
            (false, true, false) => LoopGuards::Budget,
            (true, true, false) => LoopGuards::BreakerBudget,
        }
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("operation", &self.operation)
            .field("max_attempts", &self.settings.max_attempts)
            .field("backoff", &self.settings.backoff)
            .field("attempt_timeout", &self.settings.attempt_timeout)
            .field("deadline", &self.settings.deadline)
            .field("breaker", &self.guard_names.breaker)
            .field("budget", &self.guard_names.budget)
            .field("bulkhead", &self.guard_names.bulkhead)
            .field("throttle", &self.guard_names.throttle)
            .field("rate_limit", &self.guard_names.rate_limit)
            .field("seed", &self.seed)
            .field("nested", &self.nested)
            .finish()
    }
}

impl Clone for Policy {
    /// The same settings and promises; the clone resolves its own guard
    /// handles. It is a policy built in code, so no `[operations]` override
    /// of a configuration file applies to it (see the README's
    /// "`[operations]` and `check()` know the annotated functions only").
    fn clone(&self) -> Self {
        // The builder has no idempotency settings (only the attribute
        // declares them): a clone must not lose a non-idempotent
        // operation's promise. Its override counter is fresh and stays at
        // zero: registries count in only the policies registered at link
        // time, an annotated function's own static, which only the code
        // the attribute generates can name (and never clones). Sharing the
        // original's counter would put a pointer between every call and
        // the one load it pays for overrides (see `may_be_overridden`).
        Policy { idempotent: self.idempotent, has_key: self.has_key, ..self.to_builder().into_policy() }
    }
}

impl Policy {
    /// A builder with every default: 4 attempts, base 100 ms, cap 20 s, full
    /// jitter, no timeouts, the operation's own breaker and retry budget, and
    /// named after the place it is called from, so that a policy without a
    /// [`name`](PolicyBuilder::name) reports its traces, metrics and hooks
    /// there.
    ///
    /// The own breaker and budget belong to the name: policies of one name
    /// share them. A helper function that builds policies for several
    /// dependencies gives each a [`name`](PolicyBuilder::name) (or is
    /// `#[track_caller]`, so that each caller's line names its policy);
    /// otherwise one dependency's outage opens the breaker of all of them.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// let policy = stormproof::Policy::builder().build().unwrap();
    /// assert_eq!(policy.operation(), format!("{}:{}", file!(), line!() - 1));
    /// assert_eq!(stormproof::Policy::builder().name("charge").build().unwrap().operation(), "charge");
    /// ```
    #[track_caller]
    pub fn builder() -> PolicyBuilder {
        PolicyBuilder::default()
    }

    /// The builder that made this policy, to derive a variant.
    pub fn to_builder(&self) -> PolicyBuilder {
        PolicyBuilder {
            operation: self.operation.clone(),
            max_attempts: self.settings.max_attempts,
            base: self.settings.backoff.base,
            cap: self.settings.backoff.cap,
            jitter: self.settings.backoff.jitter,
            factor: self.settings.backoff.factor(),
            attempt_timeout: self.settings.attempt_timeout,
            deadline: self.settings.deadline,
            hedge: self.settings.hedge,
            priority: self.settings.priority,
            guard_names: self.guard_names.with_own_unnamed(),
            seed: self.seed,
            nested: self.nested,
            hooks: self.hooks.clone(),
        }
    }

    /// The operation's name, used in traces and metrics.
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// Attempts in all, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.settings.max_attempts
    }

    /// The backoff curve.
    pub fn backoff(&self) -> Backoff {
        self.settings.backoff
    }

    /// The per-attempt timeout, if any.
    pub fn attempt_timeout(&self) -> Option<Duration> {
        self.settings.attempt_timeout
    }

    /// The overall deadline of a call, if any.
    pub fn deadline(&self) -> Option<Duration> {
        self.settings.deadline
    }

    /// The retry settings it was built (or compiled) with.
    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// The name of its guard of `kind`, if it names one.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::{GuardKind, Policy};
    /// let policy = Policy::builder().breaker("payment").build().unwrap();
    /// assert_eq!(policy.guard_name(GuardKind::Breaker), Some("payment"));
    /// assert_eq!(policy.guard_name(GuardKind::Throttle), None);
    /// ```
    pub fn guard_name(&self, kind: GuardKind) -> Option<&str> {
        self.guard_names.get(kind)
    }

    /// Whether its budget is the operation's own, which every operation has
    /// unless it names a budget or says `budget = "none"`
    /// ([`NO_BUDGET`](crate::budget::NO_BUDGET)): the registry's budget named
    /// after the operation, with the default settings unless one of that
    /// name is declared.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::{GuardKind, Policy, budget::NO_BUDGET};
    /// let policy = Policy::builder().name("orders").build().unwrap();
    /// assert!(policy.has_default_budget());
    /// assert_eq!(policy.guard_name(GuardKind::Budget), Some("orders"));
    /// let off = Policy::builder().name("orders").budget(NO_BUDGET).build().unwrap();
    /// assert_eq!((off.has_default_budget(), off.guard_name(GuardKind::Budget)), (false, None));
    /// ```
    pub fn has_default_budget(&self) -> bool {
        self.guard_names.budget_by_default
    }

    /// Whether its breaker is the operation's own, which every operation
    /// has unless it names a breaker or says `breaker = "none"`
    /// ([`NO_BREAKER`](crate::breaker::NO_BREAKER)): the registry's breaker
    /// named after the operation, with
    /// [`BreakerConfig::per_operation`](crate::breaker::BreakerConfig::per_operation)'s
    /// settings unless one of that name is declared.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::{GuardKind, Policy, breaker::NO_BREAKER};
    /// let policy = Policy::builder().name("orders").build().unwrap();
    /// assert!(policy.has_default_breaker());
    /// assert_eq!(policy.guard_name(GuardKind::Breaker), Some("orders"));
    /// let off = Policy::builder().name("orders").breaker(NO_BREAKER).build().unwrap();
    /// assert_eq!((off.has_default_breaker(), off.guard_name(GuardKind::Breaker)), (false, None));
    /// ```
    pub fn has_default_breaker(&self) -> bool {
        self.guard_names.breaker_by_default
    }

    /// Whether retries are allowed without a key: `false` for an operation
    /// declared `idempotent = false`.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    /// Whether each call carries an idempotency key (the attribute's `key`).
    pub fn has_key(&self) -> bool {
        self.has_key
    }

    /// The settings it was built (or compiled) with, by reference.
    pub(crate) fn compiled_settings(&self) -> &Settings {
        &self.settings
    }

    /// Whether its settings let a call's first attempt be plain and
    /// untimed (see `call::start` and `Settings::allow_plain_with`).
    #[inline(always)]
    pub(crate) fn plain_settings(&self) -> bool {
        self.plain_settings
    }

    /// Whether a call may start plain as far as the compiled policy says
    /// (see `call::start`): no deadline, no `on_stop` hook.
    #[inline(always)]
    pub(crate) fn plain_start(&self) -> bool {
        self.plain_start
    }

    /// Its `on_retry` and `on_stop` hooks.
    #[inline(always)]
    pub(crate) fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    /// Which guards it names, as `Policy::run` picks a shape by them.
    #[inline(always)]
    pub(crate) fn loop_guards(&self) -> LoopGuards {
        self.loop_guards
    }

    /// Whether a registry may hold an override for this operation (then
    /// look it up). While no registry holds one, this is one relaxed load.
    #[inline]
    pub(crate) fn may_be_overridden(&self) -> bool {
        self.overrides.any()
    }

    /// Whether a registry may hold an override that a plain first attempt
    /// cannot honour (a deadline or an attempt timeout). One that only
    /// tunes the retries leaves the first attempt plain; the override is
    /// looked up if that attempt fails.
    #[inline]
    pub(crate) fn override_forbids_plain(&self) -> bool {
        self.overrides.forbid_plain()
    }

    /// What the registries told this policy of its operation's overrides:
    /// they add and remove themselves (see the `file` module).
    pub(crate) fn overrides(&self) -> &PolicyOverrides {
        &self.overrides
    }

    /// What a call nested in another resilient call's attempt does.
    pub fn nested(&self) -> Nested {
        self.nested
    }

    /// The seed of the next call's jitter stream, when the policy is seeded.
    pub(crate) fn next_seeded_stream(&self) -> Option<u64> {
        let seed = self.seed?;
        Some(stream_seed(seed, self.streams.fetch_add(1, Ordering::Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::NO_BREAKER;
    use crate::budget::NO_BUDGET;

    /// The attribute's arguments with nothing optional given.
    const BARE: AttributeConfig = AttributeConfig::bare("policy-unit");

    #[test]
    fn a_policy_knows_whether_its_first_attempt_may_be_plain_and_which_of_the_loops_guards_it_names() {
        let of = |config| {
            let policy = Policy::from_attribute(config);
            (policy.plain_settings(), policy.loop_guards())
        };
        let guarded = AttributeConfig { breaker: Some("b"), budget: Some("g"), ..BARE };
        let plain = AttributeConfig { default_budget: false, default_breaker: false, ..BARE };
        assert_eq!(of(BARE), (true, LoopGuards::BreakerBudget), "nothing optional: the operation's own two");
        assert_eq!(of(plain), (true, LoopGuards::Unguarded), "`budget = \"none\", breaker = \"none\"`");
        let own_budget = AttributeConfig { default_breaker: false, ..BARE };
        assert_eq!(of(own_budget), (true, LoopGuards::Budget), "`breaker = \"none\"`");
        let own_breaker = AttributeConfig { default_budget: false, ..BARE };
        assert_eq!(of(own_breaker), (true, LoopGuards::Breaker), "`budget = \"none\"`");
        let breaker_alone = AttributeConfig { breaker: Some("b"), ..plain };
        assert_eq!(of(breaker_alone), (true, LoopGuards::Breaker), "a breaker, budget none");
        assert_eq!(of(guarded), (true, LoopGuards::BreakerBudget), "a breaker and a budget");
        assert_eq!(
            of(AttributeConfig { breaker: Some("b"), ..BARE }),
            (true, LoopGuards::BreakerBudget),
            "a breaker, and the operation's own budget"
        );
        assert_eq!(
            of(AttributeConfig { budget: Some("g"), ..own_budget }),
            (true, LoopGuards::Budget),
            "a budget"
        );
        for (config, why) in [
            (AttributeConfig { bulkhead: Some("h"), ..guarded }, "a bulkhead"),
            (AttributeConfig { bulkhead: Some("h"), ..plain }, "only a bulkhead"),
            (AttributeConfig { throttle: Some("t"), ..guarded }, "a throttle"),
            (AttributeConfig { rate_limit: Some("r"), ..plain }, "a rate limit"),
        ] {
            assert_eq!(of(config), (true, LoopGuards::Other), "{why}: seen slot by slot");
        }
        for (config, why) in [
            (AttributeConfig { attempt_timeout_ms: Some(50), ..guarded }, "an attempt timeout"),
            (AttributeConfig { deadline_ms: Some(50), ..guarded }, "a deadline"),
            (AttributeConfig { hedge_after_ms: Some(50), ..guarded }, "hedging"),
        ] {
            assert!(!of(config).0, "{why} makes a policy's first attempt never plain");
        }
        // A policy built in code says the same of the same names.
        let built = |builder: crate::PolicyBuilder| builder.build().unwrap().loop_guards();
        assert_eq!(built(Policy::builder()), LoopGuards::BreakerBudget, "the operation's own two");
        assert_eq!(built(Policy::builder().budget(NO_BUDGET).breaker(NO_BREAKER)), LoopGuards::Unguarded);
        assert_eq!(built(Policy::builder().budget(NO_BUDGET)), LoopGuards::Breaker, "its own breaker");
        assert_eq!(built(Policy::builder().breaker("b").budget("g")), LoopGuards::BreakerBudget);
        assert_eq!(built(Policy::builder().breaker("b")), LoopGuards::BreakerBudget);
        assert_eq!(built(Policy::builder().breaker("b").budget(NO_BUDGET)), LoopGuards::Breaker);
        assert_eq!(built(Policy::builder().budget("g").breaker(NO_BREAKER)), LoopGuards::Budget);
        assert_eq!(built(Policy::builder().breaker("b").bulkhead("h")), LoopGuards::Other);
        assert_eq!(built(Policy::builder().rate_limit("r")), LoopGuards::Other);
        assert_eq!(built(Policy::builder().throttle("t").budget("g")), LoopGuards::Other);
    }

    /// Every operation has its own retry budget unless it names one or
    /// says `budget = "none"`: the registry's budget named after the
    /// operation, which a builder derived from the policy with another
    /// name follows.
    #[test]
    fn an_operation_without_a_named_budget_has_its_own() {
        let own = Policy::from_attribute(BARE);
        assert_eq!(own.guard_name(GuardKind::Budget), Some("policy-unit"));
        assert!(own.has_default_budget());
        let none = Policy::from_attribute(AttributeConfig { default_budget: false, ..BARE });
        assert_eq!(none.guard_name(GuardKind::Budget), None);
        assert!(!none.has_default_budget());
        let named = Policy::from_attribute(AttributeConfig { budget: Some("g"), ..BARE });
        assert_eq!(named.guard_name(GuardKind::Budget), Some("g"));
        assert!(!named.has_default_budget());
        let renamed = own.to_builder().name("renamed").build().unwrap();
        assert_eq!(renamed.guard_name(GuardKind::Budget), Some("renamed"), "follows the name");
        let built = Policy::builder().name("orders").build().unwrap();
        assert_eq!(built.guard_name(GuardKind::Budget), Some("orders"));
        assert!(built.has_default_budget());
        let off = built.to_builder().budget(NO_BUDGET).build().unwrap();
        assert_eq!(off.guard_name(GuardKind::Budget), None);
    }

    /// Every operation has its own breaker unless it names one or says
    /// `breaker = "none"`, named as its own budget is.
    #[test]
    fn an_operation_without_a_named_breaker_has_its_own() {
        let own = Policy::from_attribute(BARE);
        assert_eq!(own.guard_name(GuardKind::Breaker), Some("policy-unit"));
        assert!(own.has_default_breaker());
        let none = Policy::from_attribute(AttributeConfig { default_breaker: false, ..BARE });
        assert_eq!(none.guard_name(GuardKind::Breaker), None);
        assert!(!none.has_default_breaker());
        let named = Policy::from_attribute(AttributeConfig { breaker: Some("b"), ..BARE });
        assert_eq!(named.guard_name(GuardKind::Breaker), Some("b"));
        assert!(!named.has_default_breaker());
        let renamed = own.to_builder().name("renamed").build().unwrap();
        assert_eq!(renamed.guard_name(GuardKind::Breaker), Some("renamed"), "follows the name");
        let off = renamed.to_builder().breaker(NO_BREAKER).build().unwrap();
        assert_eq!((off.guard_name(GuardKind::Breaker), off.has_default_breaker()), (None, false));
        assert_eq!(off.guard_name(GuardKind::Budget), Some("renamed"), "the budget stays");
    }

    #[test]
    fn a_clone_keeps_the_attributes_idempotency_promises() {
        let unkeyed = Policy::from_attribute(AttributeConfig { max_attempts: 1, idempotent: false, ..BARE });
        let keyed = Policy::from_attribute(AttributeConfig { idempotent: false, has_key: true, ..BARE });
        for policy in [unkeyed, keyed] {
            let clone = policy.clone();
            assert_eq!(
                (clone.is_idempotent(), clone.has_key()),
                (policy.is_idempotent(), policy.has_key()),
                "{policy:?}"
            );
        }
    }
}
