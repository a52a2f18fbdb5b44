//! Every annotated function, registered at link time.
//!
//! Each `#[resilient]` function submits its policy to a link-time list
//! (the `inventory` crate), from any crate of the program and from tests
//! alike. That is what lets a configuration file's `[operations."name"]`
//! reach the function it names, and what lets [`Registry::check`]
//! find guard names that are used but never declared before the first call
//! would create them with the defaults.
//!
//! [`Registry::check`]: crate::Registry::check

mod check;

pub use check::{CheckReport, Undeclared, Unused};

use crate::policy::Policy;
use crate::registry::GuardKind;
use crate::settings::{SettingSources, Settings};

/// One annotated function's entry in the link-time list; only the code
/// `#[resilient]` generates makes one.
#[doc(hidden)]
#[derive(Debug)]
pub struct Operation {
    policy: &'static Policy,
}

impl Operation {
    /// The entry of the function whose policy is `policy`.
    pub const fn new(policy: &'static Policy) -> Self {
        Operation { policy }
    }

    /// Reports that a call of `policy` failed and its fallback runs instead.
    pub fn falling_back(policy: &Policy) {
        crate::observe::fallback(policy.operation());
    }
}

inventory::collect!(Operation);

/// What an annotated function declared: its name, retry settings and guards.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// // Lists every `#[resilient]` function linked into the program, with
/// // the settings in effect and where each comes from.
/// for operation in stormproof::operations() {
///     println!(
///         "{} makes up to {} attempts ({})",
///         operation.name, operation.effective.max_attempts, operation.sources.max_attempts
///     );
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OperationInfo {
    /// Its operation name (`module_path::fn`, or the attribute's `name`).
    pub name: String,
    /// The settings it was compiled with.
    pub settings: Settings,
    /// The settings its calls run on now, outside a scoped registry: the
    /// compiled ones with the global registry's override from a
    /// configuration file, if it holds one.
    pub effective: Settings,
    /// Where each of the settings in effect comes from: compiled, or a
    /// file's key (file and line).
    pub sources: SettingSources,
    /// Its named breaker, if any.
    pub breaker: Option<String>,
    /// Its named budget, if any.
    pub budget: Option<String>,
    /// Its named bulkhead, if any.
    pub bulkhead: Option<String>,
    /// Its named throttle, if any.
    pub throttle: Option<String>,
    /// Its named rate limiter, if any.
    pub rate_limit: Option<String>,
    /// `false` for an operation declared `idempotent = false`.
    pub idempotent: bool,
    /// Whether its calls carry an idempotency key (`key = ...`).
    pub has_key: bool,
}

/// Every `#[resilient]` function linked into this program, sorted by name,
/// with the settings its calls run on outside a scoped registry (see
/// [`Registry::operations`](crate::Registry::operations) for another registry's).
pub fn operations() -> Vec<OperationInfo> {
    crate::registry().operations()
}

impl crate::Registry {
    /// Every `#[resilient]` function linked into this program, sorted by
    /// name, with the settings its calls run on in this registry: the
    /// compiled ones with this registry's file override, and where each
    /// came from.
    pub fn operations(&self) -> Vec<OperationInfo> {
        operations_in(self)
    }
}

fn operations_in(registry: &crate::Registry) -> Vec<OperationInfo> {
    let mut all: Vec<OperationInfo> = registered()
        .map(|policy| {
            let name = |kind| policy.guard_name(kind).map(str::to_owned);
            // Its own settings with the file's keys laid over them (another
            // function of the name may be compiled otherwise).
            let (effective, sources) = registry
                .operation_override_with_sources(policy.operation())
                .map(|(file, sources)| (policy.settings().overlaid(&file, &sources), sources))
                .unwrap_or_else(|| (policy.settings(), SettingSources::COMPILED));
            OperationInfo {
                name: policy.operation().to_owned(),
                settings: policy.settings(),
                effective,
                sources,
                breaker: name(GuardKind::Breaker),
                budget: name(GuardKind::Budget),
                bulkhead: name(GuardKind::Bulkhead),
                throttle: name(GuardKind::Throttle),
                rate_limit: name(GuardKind::RateLimit),
                idempotent: policy.is_idempotent(),
                has_key: policy.has_key(),
            }
        })
        .collect();
    all.sort_by(|a, b| a.name.cmp(&b.name));
    all
}

/// The policies of every annotated function.
pub(crate) fn registered() -> impl Iterator<Item = &'static Policy> {
    inventory::iter::<Operation>.into_iter().map(|operation| operation.policy)
}

/// The policies of the annotated functions named `name` (usually one; two
/// same-named methods of one module share a name unless `name = "..."`).
pub(crate) fn named(name: &str) -> impl Iterator<Item = &'static Policy> + '_ {
    registered().filter(move |policy| policy.operation() == name)
}
