//! [`Policy::per`]: a policy's calls with a key that chooses their guards
//! per key, as a value ([`ForKey`]) whose `run` returns the same named
//! future as `Policy::run`.
//!
//! Why a value and not a method `run_per(key, op)`: the call borrows its
//! key's guards (as the attribute's call borrows them from its own frame).
//! A future that owned them and lent them to the call inside it would
//! borrow from itself, which safe Rust does not allow; as an `async fn` it
//! could, but an `async fn`'s future carries every bound of the function,
//! and an error type that does not fit was three compile errors (see
//! `call::run_loop`). [`ForKey`] keeps the key's guards, found as each of
//! its calls starts (in the registry in effect then, a scoped one
//! included), and lends them to that call.

use std::fmt::Display;
use std::future::Future;
use std::sync::{Arc, OnceLock};

use super::key::key_of;
use super::run_loop::{NoKey, Run};
use super::traits_of::TraitsOf;
use super::{CallTarget, Classified, KeyedGuards};
use crate::error::{ErrorHandling, RunError};
use crate::policy::Policy;

/// A policy's calls with one key (a tenant, a host, a shard), which
/// chooses the guards the policy has per key
/// ([`PolicyBuilder::breaker_per`](crate::PolicyBuilder::breaker_per)):
/// made by [`Policy::per`]. The key's guards are found as each of its
/// calls starts (one lock and one hash lookup), in the registry in effect
/// then (a [`Registry::scope`](crate::Registry::scope) included), as the
/// attribute's calls find theirs: each call is a use of the key (see
/// [`keyed`](crate::keyed)). A policy without guards per key ignores the
/// key.
///
/// Its calls borrow it, one at a time (`run` takes `&mut self`): made for
/// a call, `policy.per(tenant).run(op).await`, or bound and used for
/// several. A future that must own everything (`tokio::spawn`, a function
/// returning it) makes it inside: `async move { policy.per(tenant).run(op).await }`.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use stormproof::{Policy, Registry, Rejection, breaker::{BreakerConfig, BreakerState}};
/// let registry = Registry::new();
/// registry.declare_breaker("search", BreakerConfig { failure_threshold: 1, ..Default::default() }).unwrap();
/// let policy = Policy::builder().max_attempts(1).breaker_per("search").build().unwrap();
/// let down = || async { Err::<u32, std::io::Error>(std::io::ErrorKind::ConnectionReset.into()) };
/// registry.scope(policy.per("tenant-a").run(down)).await.unwrap_err();
/// assert_eq!(registry.breaker_for("search", "tenant-a").state(), BreakerState::Open);
/// // Bound for two calls (a future that outlives the statement needs it bound).
/// let mut tenant_b = policy.per("tenant-b");
/// let first = tenant_b.run(|| async { Ok::<u32, std::io::Error>(7) });
/// assert_eq!(registry.scope(first).await.unwrap(), 7, "another tenant's breaker is closed");
/// assert_eq!(registry.scope(tenant_b.run(|| async { Ok::<u32, std::io::Error>(8) })).await.unwrap(), 8);
/// # }
/// ```
///
/// With a classification function first
/// ([`Policy::classify`](crate::Policy::classify)), `H` is that
/// [`Classified`] policy, whose function classifies the calls' errors:
/// `policy.classify(f).per(tenant).run(op)`.
#[derive(Debug)]
pub struct ForKey<'p, K, H = ()> {
    policy: &'p Policy,
    key: K,
    /// How errors are classified: by their type's traits (`()`), or by a
    /// [`Classified`] policy's function.
    with: H,
    /// The key's guards, once its call started (each call finds them
    /// afresh: `run` empties this).
    keyed: OnceLock<Option<KeyedGuards<'p>>>,
}

impl Policy {
    /// This policy's calls with `key` choosing the guards it has per key
    /// ([`PolicyBuilder::breaker_per`](crate::PolicyBuilder::breaker_per)
    /// and its kin): `policy.per(tenant).run(op)` is
    /// [`run`](Self::run) with the tenant's breaker. See [`ForKey`].
    pub fn per<K: Display>(&self, key: K) -> ForKey<'_, K> {
        ForKey { policy: self, key, with: (), keyed: OnceLock::new() }
    }
}

impl<'p, H: Copy> Classified<'p, H> {
    /// [`Policy::per`], classified by the function.
    pub fn per<K: Display>(&self, key: K) -> ForKey<'p, K, Classified<'p, H>> {
        ForKey { policy: self.policy(), key, with: *self, keyed: OnceLock::new() }
    }
}

impl<'a, 'p: 'a, K: Display, H> CallTarget<'a> for &'a ForKey<'p, K, H> {
    #[inline(always)]
    fn policy(self) -> &'a Policy {
        self.policy
    }

    /// Found as the call starts (its first poll), in the registry in
    /// effect then.
    #[inline]
    fn keyed(self) -> Option<&'a KeyedGuards<'a>> {
        self.keyed.get_or_init(|| KeyedGuards::of_display(self.policy, &self.key)).as_ref()
    }
}

impl<K: Display> ForKey<'_, K> {
    /// [`Policy::run`] with this key's guards: the same future, and the
    /// same one compile error for an error type that does not fit.
    #[inline(always)]
    pub fn run<T, E, F, Fut>(&mut self, op: F) -> Run<'_, &Self, NoKey, TraitsOf<E>, F, Fut, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: RunError,
    {
        Run::new(self.afresh(), NoKey, TraitsOf::new(), op)
    }

    /// [`Policy::run_with_key`] with this key's guards: `key` is the
    /// idempotency key every attempt reads through
    /// [`idempotency_key()`](crate::idempotency_key) (the attribute's `per
    /// = tenant, key = order_id`).
    #[inline(always)]
    pub fn run_with_key<I, T, E, F, Fut>(
        &mut self,
        key: I,
        op: F,
    ) -> Run<'_, &Self, Option<Arc<str>>, TraitsOf<E>, F, Fut, E>
    where
        I: Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: RunError,
    {
        Run::new(self.afresh(), Some(key_of(&key)), TraitsOf::new(), op)
    }
}

impl<K, H> ForKey<'_, K, H> {
    /// This, for a call that finds the key's guards afresh as it starts:
    /// the set counts each call as a use of the key (a key kept in use is
    /// not idle, nor the first evicted), and a call in another scoped
    /// registry finds that registry's.
    #[inline(always)]
    fn afresh(&mut self) -> &Self {
        self.keyed.take();
        self
    }
}

impl<K: Display, H: Copy> ForKey<'_, K, Classified<'_, H>> {
    /// [`Classified::run`] with this key's guards.
    #[inline(always)]
    pub fn run<T, E, F, Fut>(&mut self, op: F) -> Run<'_, &Self, NoKey, H, F, Fut, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E>,
    {
        let handling = self.with.handling();
        Run::new(self.afresh(), NoKey, handling, op)
    }

    /// [`Classified::run_with_key`] with this key's guards.
    #[inline(always)]
    pub fn run_with_key<I, T, E, F, Fut>(
        &mut self,
        key: I,
        op: F,
    ) -> Run<'_, &Self, Option<Arc<str>>, H, F, Fut, E>
    where
        I: Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E>,
    {
        let handling = self.with.handling();
        Run::new(self.afresh(), Some(key_of(&key)), handling, op)
    }
}
