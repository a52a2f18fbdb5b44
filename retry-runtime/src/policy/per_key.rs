//! The builder's guards per key: a breaker and a rate limit chosen by each
//! call's key (see [`Keyed`](crate::keyed::Keyed)).

use std::borrow::Cow;

use super::PolicyBuilder;

impl PolicyBuilder {
    /// Guards every attempt with a circuit breaker per key, from the set of
    /// breakers per key named `name` (see
    /// [`KeyedBreakers`](crate::breaker::KeyedBreakers)): a call's key is
    /// the one given to [`Policy::per`](crate::Policy::per) (a
    /// tenant, a host, a shard), so that one key's outage opens its own
    /// breaker and leaves the others' calls alone. The settings are those of
    /// the breaker declared under `name`; `max_keys` and `idle_for` bound the
    /// keys held. A call without a key ([`Policy::run`](crate::Policy::run))
    /// uses the empty key's breaker.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use stormproof::{Policy, Registry, breaker::{BreakerConfig, BreakerState}};
    /// let registry = Registry::new();
    /// registry.declare_breaker("search", BreakerConfig { failure_threshold: 2, ..Default::default() }).unwrap();
    /// let policy = Policy::builder().max_attempts(2).base(std::time::Duration::from_millis(1)).breaker_per("search").build().unwrap();
    /// let down = || async { Err::<(), _>(std::io::Error::from(std::io::ErrorKind::ConnectionReset)) };
    /// registry.scope(policy.per("tenant-a").run(down)).await.unwrap_err();
    /// assert_eq!(registry.breaker_for("search", "tenant-a").state(), BreakerState::Open);
    /// assert_eq!(registry.breaker_for("search", "tenant-b").state(), BreakerState::Closed);
    /// # }
    /// ```
    pub fn breaker_per(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self = self.breaker(name);
        self.guard_names.breaker_per = self.guard_names.breaker.is_some();
        self
    }

    /// Takes every attempt's turn from a rate limit per key, from the set
    /// of rate limits per key named `name`: a quota for each key given to
    /// [`Policy::per`](crate::Policy::per) (a tenant, an API key),
    /// on the settings of the rate limit declared under `name`, bounded as
    /// [`breaker_per`](Self::breaker_per) says.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use stormproof::{Error, Policy, Registry, Rejection, rate_limit::RateLimitConfig};
    /// let registry = Registry::new();
    /// registry.declare_rate_limit("api", RateLimitConfig { per_second: 1, burst: 1, ..Default::default() }).unwrap();
    /// let policy = Policy::builder().rate_limit_per("api").build().unwrap();
    /// let ok = || async { Ok::<_, Error<std::io::Error>>(()) };
    /// registry.scope(policy.per("tenant-a").run(ok)).await.unwrap();
    /// let over = registry.scope(policy.per("tenant-a").run(ok)).await.unwrap_err();
    /// assert!(matches!(over, Error::Rejected(Rejection::RateLimited { .. })), "its quota is spent");
    /// registry.scope(policy.per("tenant-b").run(ok)).await.unwrap(); // another's is not
    /// # }
    /// ```
    pub fn rate_limit_per(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self = self.rate_limit(name);
        self.guard_names.rate_limit_per = true;
        self
    }

    /// Holds every attempt to a bulkhead per key, from the set of bulkheads
    /// per key named `name`: a concurrency limit for each key given to
    /// [`Policy::per`](crate::Policy::per), so that one tenant's slow
    /// calls fill its own places and no other's, on the settings of the
    /// bulkhead declared under `name`, bounded as
    /// [`breaker_per`](Self::breaker_per) says.
    pub fn bulkhead_per(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self = self.bulkhead(name);
        self.guard_names.bulkhead_per = true;
        self
    }
}
