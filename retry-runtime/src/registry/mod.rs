//! The named registry: one set of guards per dependency, shared by every
//! call to that dependency.
//!
//! A breaker only protects a dependency if every call to it shares the
//! breaker; a budget only caps retries if every call draws on it. So guards
//! are declared once by name (`"payment"`, `"inventory-db"`) and found by
//! name from every call site. Tests run each case inside its own
//! [`Registry::new`] via [`Registry::scope`], so parallel tests never share
//! a breaker.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::breaker::{CircuitBreaker, Hooks};
use crate::budget::RetryBudget;
use crate::bulkhead::Bulkhead;
use crate::config::ConfigError;
use crate::rate_limit::RateLimit;
use crate::settings::Settings;
use crate::throttle::Throttle;

#[cfg(feature = "fleet")]
mod fleet;
mod hooks;
mod keyed;
mod named;
mod overrides;
mod table;

#[cfg(feature = "fleet")]
use fleet::JoinedFleet;
#[cfg(feature = "fleet")]
pub use fleet::{FleetClaim, FleetMembership, FleetStatus, FleetSync};
use overrides::Overrides;
pub(crate) use overrides::{OverriddenPolicies, PolicyOverrides};
use table::Table;

/// The kinds of guard a registry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GuardKind {
    /// A [`CircuitBreaker`].
    Breaker,
    /// A [`RetryBudget`].
    Budget,
    /// A [`Bulkhead`].
    Bulkhead,
    /// A [`Throttle`](crate::throttle::Throttle).
    Throttle,
    /// A [`RateLimit`](crate::rate_limit::RateLimit).
    RateLimit,
}

impl GuardKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [GuardKind; 5] = [
        GuardKind::Breaker,
        GuardKind::Budget,
        GuardKind::Bulkhead,
        GuardKind::Throttle,
        GuardKind::RateLimit,
    ];

    /// The kind as the attribute's argument names it: `breaker`, `budget`,
    /// `bulkhead`, `throttle` or `rate_limit`.
    pub fn label(self) -> &'static str {
        match self {
            GuardKind::Breaker => "breaker",
            GuardKind::Budget => "budget",
            GuardKind::Bulkhead => "bulkhead",
            GuardKind::Throttle => "throttle",
            GuardKind::RateLimit => "rate_limit",
        }
    }
}

/// Why a declaration was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryError {
    /// The configuration is invalid; the inner error names the field.
    InvalidConfig {
        /// The name being declared.
        name: String,
        /// What is wrong with its configuration.
        error: ConfigError,
    },
    /// A guard of this kind already exists under this name.
    AlreadyDeclared {
        /// The kind's label (see [`GuardKind::label`]).
        kind: &'static str,
        /// The name that is taken.
        name: String,
    },
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegistryError::InvalidConfig { name, error } => {
                write!(f, "cannot declare `{name}`: {error}")
            }
            RegistryError::AlreadyDeclared { kind, name } => write!(
                f,
                "a {kind} named `{name}` already exists (declared, or created with defaults on first use)"
            ),
        }
    }
}

impl std::error::Error for RegistryError {}

struct Inner {
    id: u64,
    seed: Option<u64>,
    streams: AtomicU64,
    breakers: Table<CircuitBreaker>,
    /// Breakers per key, by name (see `keyed`).
    keyed_breakers: keyed::Sets<CircuitBreaker>,
    /// Rate limits per key, by name.
    keyed_rate_limits: keyed::Sets<RateLimit>,
    /// Bulkheads per key, by name.
    keyed_bulkheads: keyed::Sets<Bulkhead>,
    budgets: Table<RetryBudget>,
    bulkheads: Table<Bulkhead>,
    throttles: Table<Throttle>,
    rate_limits: Table<RateLimit>,
    hooks: Hooks,
    /// Per-operation settings from a configuration file.
    overrides: Overrides,
    /// Held while a configuration file is checked and applied.
    #[cfg_attr(not(feature = "config"), allow(dead_code))]
    applying: std::sync::Mutex<()>,
    /// Whether a fleet's background task runs for this registry (one at most).
    #[cfg_attr(not(feature = "fleet"), allow(dead_code))]
    in_fleet: AtomicBool,
    /// The fleet it is in: what it was joined with (a reload checks
    /// against it), and how its task fares.
    #[cfg(feature = "fleet")]
    joined_fleet: std::sync::Mutex<Option<JoinedFleet>>,
}

/// A set of named guards (breakers, budgets, bulkheads, throttles and
/// rate limits); a cheap `Clone` handle.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{breaker::BreakerConfig, Registry};
/// let registry = Registry::new();
/// registry.declare_breaker("payment", BreakerConfig { failure_threshold: 3, ..Default::default() }).unwrap();
/// assert!(registry.breaker("payment").is_some());
/// assert!(registry.declare_breaker("payment", BreakerConfig::default()).is_err(), "names are unique");
/// ```
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("id", &self.inner.id)
            .field("seed", &self.inner.seed)
            .finish_non_exhaustive()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

tokio::task_local! {
    static SCOPED: Registry;
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Whether [`Registry::scope`] was ever called: until then no call needs to
/// look for a scoped registry (a task-local read) at all.
static SCOPES_USED: AtomicBool = AtomicBool::new(false);

/// The process-wide registry, used by every call not inside [`Registry::scope`].
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{registry, bulkhead::BulkheadConfig};
/// registry().declare_bulkhead("docs-example-db", BulkheadConfig::default()).unwrap();
/// assert_eq!(registry().bulkhead("docs-example-db").unwrap().in_use(), 0);
/// ```
pub fn registry() -> &'static Registry {
    static GLOBAL: OnceLock<Registry> = OnceLock::new();
    GLOBAL.get_or_init(Registry::new)
}

impl Registry {
    /// An empty registry with unseeded (entropy-drawn) jitter.
    pub fn new() -> Self {
        Registry::build(None)
    }

    /// An empty registry whose calls draw reproducible jitter from `seed`
    /// (unless their policy sets a seed of its own).
    pub fn with_seed(seed: u64) -> Self {
        Registry::build(Some(seed))
    }

    fn build(seed: Option<u64>) -> Self {
        Registry {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                seed,
                streams: AtomicU64::new(0),
                breakers: Table::new("breaker"),
                keyed_breakers: std::sync::Mutex::default(),
                keyed_rate_limits: std::sync::Mutex::default(),
                keyed_bulkheads: std::sync::Mutex::default(),
                budgets: Table::new("budget"),
                bulkheads: Table::new("bulkhead"),
                throttles: Table::new("throttle"),
                rate_limits: Table::new("rate_limit"),
                hooks: Arc::default(),
                overrides: Overrides::default(),
                applying: std::sync::Mutex::new(()),
                in_fleet: AtomicBool::new(false),
                #[cfg(feature = "fleet")]
                joined_fleet: std::sync::Mutex::new(None),
            }),
        }
    }

    /// Runs `fut` with every resilient call inside it (on this task) using
    /// this registry instead of the global one.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use stormproof::{Policy, Registry};
    /// let isolated = Registry::new();
    /// let policy = Policy::builder().breaker("payment").build().unwrap();
    /// isolated.scope(policy.run(|| async { Ok::<_, std::io::Error>(()) })).await.unwrap();
    /// assert!(isolated.breaker("payment").is_some(), "created on first use, in the scoped registry");
    /// # }
    /// ```
    ///
    /// The returned future owns a handle to the registry, so it can be spawned.
    ///
    /// The scope is a task-local: it covers the future it wraps and nothing
    /// else. A task spawned inside it (`tokio::spawn`, `spawn_local`, a
    /// `JoinSet`) starts outside any scope and uses the global registry. To
    /// carry the scope along, wrap the spawned future in it too:
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use stormproof::{Policy, Registry};
    /// let isolated = Registry::new();
    /// isolated
    ///     .scope(async {
    ///         let policy = Policy::builder().breaker("worker").build().unwrap();
    ///         // `Registry::current()` is the scope in effect here.
    ///         let task = tokio::spawn(Registry::current().scope(async move {
    ///             policy.run(|| async { Ok::<_, std::io::Error>(()) }).await
    ///         }));
    ///         task.await.unwrap().unwrap();
    ///     })
    ///     .await;
    /// assert!(isolated.breaker("worker").is_some(), "the spawned task used the scoped registry");
    /// # }
    /// ```
    pub fn scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> + use<F> {
        // Set before the scope can be entered: whoever polls the future
        // later (on any thread) got it through a synchronising hand-over.
        SCOPES_USED.store(true, Ordering::Relaxed);
        SCOPED.scope(self.clone(), fut)
    }

    /// The registry in effect on this task: the innermost [`scope`](Self::scope), else the global one.
    ///
    /// Use it to carry a scope into a task you spawn (see [`scope`](Self::scope)).
    pub fn current() -> Registry {
        with_current(Registry::clone)
    }

    /// The seed this registry was built with, if any.
    pub fn seed(&self) -> Option<u64> {
        self.inner.seed
    }

    /// Whether this registry holds a configuration file's override of `operation`.
    #[cfg_attr(not(feature = "config"), allow(dead_code))]
    pub(crate) fn overrides_operation(&self, operation: &str) -> bool {
        self.inner.overrides.contains(operation)
    }

    /// The settings a policy of `operation` (what it knows of its overrides,
    /// and the settings it was compiled with) runs on under this registry's
    /// override of the operation, if it holds one: its own, with the
    /// file's keys laid over them.
    pub(crate) fn operation_override_for(
        &self,
        operation: &str,
        overrides: &PolicyOverrides,
        compiled: Settings,
    ) -> Option<Arc<Settings>> {
        self.inner.overrides.get_for(operation, overrides, compiled)
    }

    /// The override this registry holds for `operation`, with where each
    /// of its settings comes from.
    pub(crate) fn operation_override_with_sources(
        &self,
        operation: &str,
    ) -> Option<(Settings, crate::settings::SettingSources)> {
        self.inner.overrides.get_with_sources(operation)
    }

    /// The operations this registry holds an override for, sorted.
    pub(crate) fn overridden_operations(&self) -> Vec<String> {
        self.inner.overrides.names()
    }

    /// Replaces every operation override; beside each, what its
    /// operation's policies know of their overrides, which it updates.
    #[cfg_attr(not(feature = "config"), allow(dead_code))]
    pub(crate) fn replace_overrides(
        &self,
        new: HashMap<String, (Settings, crate::settings::SettingSources, OverriddenPolicies)>,
    ) {
        self.inner.overrides.replace(new, Arc::ptr_eq(&self.inner, &registry().inner));
    }

    /// Held while a configuration file is checked and applied, so that two
    /// files never interleave.
    #[cfg_attr(not(feature = "config"), allow(dead_code))]
    pub(crate) fn applying(&self) -> std::sync::MutexGuard<'_, ()> {
        self.inner.applying.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn id(&self) -> u64 {
        self.inner.id
    }

    /// A reproducible jitter seed for the next call that needs one, when seeded.
    pub(crate) fn next_jitter_seed(&self) -> Option<u64> {
        let seed = self.inner.seed?;
        let stream = self.inner.streams.fetch_add(1, Ordering::Relaxed);
        Some(crate::backoff::stream_seed(seed, stream))
    }
}

/// Runs `f` on the registry in effect; only a scoped handle is cloned.
pub(crate) fn with_current<R>(f: impl FnOnce(&Registry) -> R) -> R {
    match with_scoped(Registry::clone) {
        Some(scoped) => f(&scoped),
        None => f(registry()),
    }
}

/// Runs `f` on the scoped registry in effect on this task, if any (without
/// cloning the handle).
#[inline]
pub(crate) fn with_scoped<R>(f: impl FnOnce(&Registry) -> R) -> Option<R> {
    if !SCOPES_USED.load(Ordering::Relaxed) {
        return None;
    }
    SCOPED.try_with(f).ok()
}

fn invalid(name: &str, error: ConfigError) -> RegistryError {
    RegistryError::InvalidConfig { name: name.to_owned(), error }
}
