//! A breaker per key (issue 44, item 3; asked in resilience4j #650 and
//! #703, Polly #624 and #1366): one declaration, `breaker = "search", per =
//! tenant`, gives each tenant its own breaker, so that one tenant's outage
//! opens its breaker and no other's. The keys are bounded: `max_keys` held
//! at once, least recently used out, and a key idle for `idle_for`
//! forgotten; an evicted key starts closed. Every entry point reaches the
//! same breakers: the attribute, `Policy::per(key).run`, and
//! `registry().breaker_for`. On tokio's paused clock, each test in its own
//! registry.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use stormproof::breaker::{BreakerConfig, BreakerState};
use stormproof::bulkhead::BulkheadConfig;
use stormproof::rate_limit::RateLimitConfig;
use stormproof::{Error, Policy, Registry, Rejection, resilient};

type Result<T> = std::result::Result<T, Error<std::io::Error>>;

fn reset() -> std::io::Error {
    std::io::ErrorKind::ConnectionReset.into()
}

/// A registry whose breaker `search` opens at the second failure, holds at
/// most three keys, and forgets a key idle for a minute.
fn registry() -> Registry {
    let registry = Registry::new();
    let config = BreakerConfig {
        failure_threshold: 2,
        open_for: Duration::from_secs(50),
        max_open_for: Duration::from_secs(300),
        max_keys: 3,
        idle_for: Duration::from_secs(60),
        ..BreakerConfig::default()
    };
    registry.declare_breaker("search", config).unwrap();
    registry
}

/// One search for `tenant`, failing when `down`; `attempts` counts the
/// attempts that ran.
#[resilient(max_attempts = 2, base_ms = 10, breaker = "search", budget = "none", per = tenant)]
async fn search(tenant: &str, down: bool, attempts: &AtomicU32) -> Result<u32> {
    attempts.fetch_add(1, Ordering::Relaxed);
    if down { Err(reset().into()) } else { Ok(7) }
}

/// The attempts one search ran, and what it returned.
async fn searched(registry: &Registry, tenant: &str, down: bool) -> (u32, Result<u32>) {
    let attempts = AtomicU32::new(0);
    let result = registry.scope(search(tenant, down, &attempts)).await;
    (attempts.load(Ordering::Relaxed), result)
}

/// The state of `tenant`'s breaker, read without using it (`None`: not held).
fn state_of(registry: &Registry, tenant: &str) -> Option<BreakerState> {
    Some(registry.keyed_breakers("search")?.peek(tenant)?.state())
}

fn refused_by(result: &Result<u32>) -> Option<String> {
    match result {
        Err(Error::Rejected(Rejection::CircuitOpen { breaker })) => Some(breaker.clone()),
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn one_tenants_outage_opens_its_breaker_and_no_other() {
    let registry = registry();
    let (attempts, result) = searched(&registry, "tenant-a", true).await;
    assert_eq!(attempts, 2, "two failing attempts open tenant-a's breaker");
    assert!(result.is_err());
    assert_eq!(state_of(&registry, "tenant-a"), Some(BreakerState::Open));

    let (attempts, result) = searched(&registry, "tenant-a", false).await;
    assert_eq!(
        (attempts, refused_by(&result).as_deref()),
        (0, Some("search[tenant-a]")),
        "refused by its own"
    );

    let (attempts, result) = searched(&registry, "tenant-b", false).await;
    assert_eq!((attempts, result.unwrap()), (1, 7), "another tenant's calls run");
    let set = registry.keyed_breakers("search").unwrap();
    assert_eq!(set.peek("tenant-b").unwrap().state(), BreakerState::Closed);
    assert_eq!(registry.breaker("search").unwrap().state(), BreakerState::Closed, "the template saw nothing");
}

#[tokio::test(start_paused = true)]
async fn the_registry_hands_out_the_breakers_the_calls_use() {
    let registry = registry();
    registry.breaker_for("search", "tenant-c").force_open();
    let (attempts, result) = searched(&registry, "tenant-c", false).await;
    assert_eq!((attempts, refused_by(&result).as_deref()), (0, Some("search[tenant-c]")));
    let set = registry.keyed_breakers("search").expect("made by the first use");
    assert_eq!(set.len(), 1);
    assert_eq!(set.config().failure_threshold, 2, "the declared breaker's settings");
}

#[tokio::test(start_paused = true)]
async fn past_max_keys_a_closed_tenant_is_evicted_before_an_open_one() {
    let registry = registry();
    assert!(searched(&registry, "tenant-a", true).await.1.is_err());
    for tenant in ["tenant-b", "tenant-c", "tenant-d"] {
        assert!(searched(&registry, tenant, false).await.1.is_ok());
    }
    let set = registry.keyed_breakers("search").unwrap();
    assert_eq!(set.len(), 3, "max_keys");
    assert!(set.peek("tenant-b").is_none(), "the least recently used closed tenant went");
    let (attempts, result) = searched(&registry, "tenant-a", false).await;
    assert_eq!((attempts, refused_by(&result).as_deref()), (0, Some("search[tenant-a]")), "kept, open");
    // Every tenant held open: the least recently used goes, and comes back closed.
    for tenant in ["tenant-c", "tenant-d"] {
        registry.breaker_for("search", tenant).force_open();
    }
    assert!(searched(&registry, "tenant-e", false).await.1.is_ok());
    assert!(set.peek("tenant-a").is_none());
    let (attempts, result) = searched(&registry, "tenant-a", false).await;
    assert_eq!((attempts, result.unwrap()), (1, 7), "evicted while open: back closed");
}

#[tokio::test(start_paused = true)]
async fn a_tenant_idle_for_idle_for_is_forgotten() {
    let registry = registry();
    assert!(searched(&registry, "tenant-a", true).await.1.is_err());
    tokio::time::advance(Duration::from_secs(59)).await;
    // Still held (its 50 s open ran out, so this call is a probe, which
    // fails: open again, for 100 s).
    assert_eq!(registry.keyed_breakers("search").unwrap().len(), 1);
    let (_, result) = searched(&registry, "tenant-a", true).await;
    assert!(result.is_err());
    assert_eq!(state_of(&registry, "tenant-a"), Some(BreakerState::Open), "the probe failed");
    // Still open 61 s later, were it held: forgotten, a minute idle.
    tokio::time::advance(Duration::from_secs(61)).await;
    let (attempts, result) = searched(&registry, "tenant-a", false).await;
    assert_eq!((attempts, result.unwrap()), (1, 7), "forgotten after a minute idle: closed");
}

#[tokio::test(start_paused = true)]
async fn policy_per_uses_the_same_breakers() {
    let registry = registry();
    let policy = Policy::builder()
        .max_attempts(2)
        .base(Duration::from_millis(10))
        .breaker_per("search")
        .budget("none")
        .build()
        .unwrap();
    let down = || async { Err::<u32, _>(Error::from(reset())) };
    registry.scope(policy.per("tenant-a").run(down)).await.unwrap_err();
    // The attribute's calls for tenant-a meet the breaker the policy opened.
    let (attempts, _) = searched(&registry, "tenant-a", false).await;
    assert_eq!(attempts, 0);
    let ok = || async { Ok::<u32, Error<std::io::Error>>(1) };
    assert_eq!(registry.scope(policy.per(42).run(ok)).await.unwrap(), 1, "any `Display` is a key");
    let set = registry.keyed_breakers("search").unwrap();
    assert_eq!(set.peek("42").unwrap().state(), BreakerState::Closed, "made by the call");
    // Without a key, the empty key's breaker.
    registry.scope(policy.run(down)).await.unwrap_err();
    assert_eq!(state_of(&registry, ""), Some(BreakerState::Open));
    let with_idempotency_key =
        policy.run_with_key("order-1", || async { Ok::<u32, Error<std::io::Error>>(2) });
    let refused = registry.scope(with_idempotency_key).await.unwrap_err();
    assert!(matches!(refused, Error::Rejected(Rejection::CircuitOpen { .. })), "{refused:?}");
    // Both keys: the tenant's breaker, and the idempotency key in every attempt.
    let keyed =
        || async { Ok::<_, Error<std::io::Error>>(stormproof::idempotency_key().unwrap().to_string()) };
    let mut tenant_z = policy.per("tenant-z");
    let both = tenant_z.run_with_key("order-2", keyed);
    assert_eq!(registry.scope(both).await.unwrap(), "order-2");
    assert!(state_of(&registry, "tenant-z").is_some(), "its tenant's breaker");
    let refused = registry.scope(policy.per("tenant-a").run_with_key("order-3", keyed)).await.unwrap_err();
    assert!(
        matches!(refused, Error::Rejected(Rejection::CircuitOpen { breaker }) if breaker == "search[tenant-a]")
    );
}

/// An error type the library cannot classify, classified by a function.
#[derive(Debug)]
enum DbError {
    Deadlock,
    Rejected(Rejection),
}

impl From<Rejection> for DbError {
    fn from(rejection: Rejection) -> Self {
        DbError::Rejected(rejection)
    }
}

/// With a classification function first, `per(key)` runs in the key's
/// guards, its errors classified by the function.
#[tokio::test(start_paused = true)]
async fn a_classified_policy_per_key_uses_its_keys_breaker() {
    let registry = registry();
    let policy = Policy::builder().max_attempts(1).breaker_per("search").budget("none").build().unwrap();
    let transient = |_: &DbError| stormproof::ErrorClass::Transient;
    let classified = policy.classify(transient);
    let mut tenant_d = classified.per("tenant-d");
    for _ in 0..2 {
        let deadlock = tenant_d.run(|| async { Err::<u32, _>(DbError::Deadlock) });
        assert!(matches!(registry.scope(deadlock).await, Err(DbError::Deadlock)));
    }
    assert_eq!(
        registry.breaker_for("search", "tenant-d").state(),
        BreakerState::Open,
        "two transient failures"
    );
    let refused = registry.scope(classified.per("tenant-d").run(|| async { Ok::<u32, DbError>(1) })).await;
    assert!(matches!(refused, Err(DbError::Rejected(Rejection::CircuitOpen { .. }))), "{refused:?}");
    let keyed = || async { Ok::<_, DbError>(stormproof::idempotency_key().unwrap().to_string()) };
    let other = registry.scope(classified.per("tenant-e").run_with_key("order-1", keyed)).await;
    assert_eq!(other.unwrap(), "order-1", "another tenant's breaker, the key in the attempt");
}

/// One `ForKey` used for several calls finds its key's guards as each call
/// starts: in each call's registry, and as a use of the key, which keeps it
/// from being forgotten as idle.
#[tokio::test(start_paused = true)]
async fn a_for_key_finds_its_guards_afresh_for_each_call() {
    let (first, second) = (registry(), registry());
    let policy = Policy::builder().max_attempts(1).breaker_per("search").budget("none").build().unwrap();
    let mut tenant = policy.per("tenant-a");
    for _ in 0..2 {
        let down = tenant.run(|| async { Err::<u32, _>(Error::from(reset())) });
        first.scope(down).await.unwrap_err();
    }
    assert_eq!(first.breaker_for("search", "tenant-a").state(), BreakerState::Open);
    let ok = tenant.run(|| async { Ok::<u32, Error<std::io::Error>>(1) });
    assert_eq!(second.scope(ok).await.unwrap(), 1, "another registry's breaker for the key: closed");
    assert_eq!(second.breaker_for("search", "tenant-a").totals().calls, 1);
    // Used every 40 s, under the set's `idle_for` of 60 s: never idle, so
    // the same breaker throughout (a lookup kept from the first call would
    // not count as a use, and the set would forget the key after 60 s).
    for _ in 0..4 {
        tokio::time::advance(Duration::from_secs(40)).await;
        second.scope(tenant.run(|| async { Ok::<u32, Error<std::io::Error>>(1) })).await.unwrap();
    }
    assert_eq!(second.breaker_for("search", "tenant-a").totals().calls, 5, "one breaker, all five calls");
}

#[resilient(max_attempts = 2, base_ms = 10, breaker = "search", budget = "none", per = tenant, hedge_after_ms = 50)]
async fn search_hedged(tenant: &str, down: bool, attempts: &AtomicU32) -> Result<u32> {
    attempts.fetch_add(1, Ordering::Relaxed);
    if down { Err(reset().into()) } else { Ok(7) }
}

/// A hedged function's attempts go to its tenant's breaker too.
#[tokio::test(start_paused = true)]
async fn a_hedged_call_uses_its_tenants_breaker() {
    let registry = registry();
    let attempts = AtomicU32::new(0);
    assert!(registry.scope(search_hedged("tenant-h", true, &attempts)).await.is_err());
    assert_eq!(state_of(&registry, "tenant-h"), Some(BreakerState::Open));
    let (attempts, result) = searched(&registry, "tenant-h", false).await;
    assert_eq!((attempts, refused_by(&result).as_deref()), (0, Some("search[tenant-h]")));
    let attempts = AtomicU32::new(0);
    assert_eq!(registry.scope(search_hedged("tenant-i", false, &attempts)).await.unwrap(), 7);
    assert_eq!(state_of(&registry, "tenant-i"), Some(BreakerState::Closed));
}

#[tokio::test(start_paused = true)]
async fn a_reload_reaches_every_tenant_keeping_its_state() {
    let registry = registry();
    assert!(searched(&registry, "tenant-a", true).await.1.is_err());
    assert!(searched(&registry, "tenant-b", false).await.1.is_ok());
    let report = registry
        .reload_toml("[breakers.search]\nfailure_threshold = 1\nopen_for_ms = 50000\nmax_keys = 3\nidle_for_ms = 60000\n")
        .unwrap();
    assert!(report.to_string().contains("failure_threshold"), "{report}");
    assert_eq!(state_of(&registry, "tenant-a"), Some(BreakerState::Open), "kept");
    let (attempts, _) = searched(&registry, "tenant-b", true).await;
    assert_eq!(attempts, 1, "one failure opens it now");
    assert_eq!(state_of(&registry, "tenant-b"), Some(BreakerState::Open));
}

#[resilient(max_attempts = 2, base_ms = 10, breaker = "per-key-global", budget = "none", per = tenant)]
async fn search_globally(tenant: u64, down: bool, attempts: &AtomicU32) -> Result<u32> {
    attempts.fetch_add(1, Ordering::Relaxed);
    if down { Err(reset().into()) } else { Ok(7) }
}

/// The same through the global registry, whose set each policy caches:
/// the tenant that failed is refused, another one's call runs (on the
/// plain path, with its key's guards).
#[tokio::test(start_paused = true)]
async fn through_the_global_registry_too() {
    let config =
        BreakerConfig { failure_threshold: 2, open_for: Duration::from_secs(30), ..Default::default() };
    stormproof::registry().declare_breaker("per-key-global", config).unwrap();
    let attempts = |tenant, down| async move {
        let attempts = AtomicU32::new(0);
        let result = search_globally(tenant, down, &attempts).await;
        (attempts.load(Ordering::Relaxed), result.is_ok())
    };
    assert_eq!(attempts(1, true).await, (2, false));
    assert_eq!(attempts(1, false).await, (0, false), "tenant 1 is cut off");
    assert_eq!(attempts(2, false).await, (1, true), "tenant 2 is not");
    let set = stormproof::registry().keyed_breakers("per-key-global").unwrap();
    assert_eq!(set.peek("1").unwrap().state(), BreakerState::Open);
    assert_eq!(set.peek("2").unwrap().state(), BreakerState::Closed);
}

/// A quota of one call a second for each tenant.
fn quotas() -> Registry {
    let registry = Registry::new();
    let quota = RateLimitConfig { per_second: 1, burst: 1, max_keys: 2, ..Default::default() };
    registry.declare_rate_limit("quota", quota).unwrap();
    registry
}

#[resilient(max_attempts = 1, breaker = "none", budget = "none", rate_limit = "quota", per = tenant)]
async fn quoted(tenant: &str, attempts: &AtomicU32) -> Result<u32> {
    attempts.fetch_add(1, Ordering::Relaxed);
    Ok(7)
}

/// A rate limit per key: each tenant has its own quota, so one that spends
/// its turns leaves the others theirs.
#[tokio::test(start_paused = true)]
async fn a_rate_limit_per_key_gives_each_tenant_its_own_quota() {
    let registry = quotas();
    let attempts = AtomicU32::new(0);
    assert!(registry.scope(quoted("tenant-a", &attempts)).await.is_ok());
    let over = registry.scope(quoted("tenant-a", &attempts)).await.unwrap_err();
    assert!(
        matches!(&over, Error::Rejected(Rejection::RateLimited { limiter }) if limiter == "quota[tenant-a]"),
        "{over:?}"
    );
    assert!(registry.scope(quoted("tenant-b", &attempts)).await.is_ok(), "another tenant's quota is its own");
    assert_eq!(attempts.load(Ordering::Relaxed), 2, "the refused call never ran");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(registry.scope(quoted("tenant-a", &attempts)).await.is_ok(), "a second later, a turn");
    let set = registry.keyed_rate_limits("quota").unwrap();
    assert_eq!(set.len(), 2);
    assert!(set.peek("tenant-a").is_some_and(|limit| limit.key() == Some("tenant-a")));
    // The policy's own: the same quotas.
    let policy = Policy::builder()
        .max_attempts(1)
        .breaker("none")
        .budget("none")
        .rate_limit_per("quota")
        .build()
        .unwrap();
    let ok = || async { Ok::<u32, Error<std::io::Error>>(1) };
    assert!(registry.scope(policy.per("tenant-a").run(ok)).await.is_err(), "tenant-a's turn is spent");
    assert!(registry.scope(policy.per("tenant-c").run(ok)).await.is_ok());
    assert_eq!(registry.keyed_rate_limits("quota").unwrap().len(), 2, "max_keys");
}

#[resilient(max_attempts = 1, breaker = "none", budget = "none", bulkhead = "pool", per = tenant)]
async fn held(tenant: &str, release: &tokio::sync::Notify) -> Result<u32> {
    release.notified().await;
    Ok(7)
}

/// A bulkhead per key: each tenant has its own places, so one whose calls
/// are slow fills its own and no other's.
#[tokio::test(start_paused = true)]
async fn a_bulkhead_per_key_gives_each_tenant_its_own_places() {
    let registry = Registry::new();
    let one_place =
        BulkheadConfig { max_concurrent: 1, max_wait: Some(Duration::from_millis(10)), ..Default::default() };
    registry.declare_bulkhead("pool", one_place).unwrap();
    let release = tokio::sync::Notify::new();
    let slow = registry.scope(held("tenant-a", &release));
    tokio::pin!(slow);
    // The first call of tenant-a takes its one place and waits.
    assert!(futures_poll(slow.as_mut()).await.is_none());
    assert_eq!(registry.keyed_bulkheads("pool").unwrap().peek("tenant-a").unwrap().in_use(), 1);
    let full = registry.scope(held("tenant-a", &release)).await.unwrap_err();
    assert!(
        matches!(&full, Error::Rejected(Rejection::BulkheadFull { bulkhead }) if bulkhead == "pool[tenant-a]"),
        "{full:?}"
    );
    // tenant-b's call has a place of its own.
    let other = registry.scope(held("tenant-b", &release));
    tokio::pin!(other);
    assert!(futures_poll(other.as_mut()).await.is_none());
    release.notify_waiters();
    assert_eq!(other.await.unwrap(), 7);
    assert_eq!(slow.await.unwrap(), 7);
    assert_eq!(registry.bulkhead_for("pool", "tenant-a").in_use(), 0);
}

/// Polls `future` once: its output if it was ready.
async fn futures_poll<F: std::future::Future + Unpin>(mut future: F) -> Option<F::Output> {
    std::future::poll_fn(move |cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut future).poll(cx) {
            std::task::Poll::Ready(output) => Some(output),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

/// A reload reaches each tenant's rate limit, keeping the turns it took: a
/// `max_wait` of two seconds lets tenant-a's next call wait for its turn,
/// which comes a second after the one it spent before the reload (a fresh
/// limiter would have let it go at once), and a smaller `max_keys` evicts
/// down to it at once.
#[tokio::test(start_paused = true)]
async fn a_reload_reaches_every_tenants_rate_limit_keeping_its_turns() {
    let registry = quotas();
    let attempts = AtomicU32::new(0);
    assert!(registry.scope(quoted("tenant-a", &attempts)).await.is_ok());
    assert!(registry.scope(quoted("tenant-b", &attempts)).await.is_ok());
    registry
        .reload_toml("[rate_limits.quota]\nper_second = 1\nburst = 1\nmax_wait_ms = 2000\nmax_keys = 2\n")
        .unwrap();
    let start = tokio::time::Instant::now();
    assert!(registry.scope(quoted("tenant-a", &attempts)).await.is_ok(), "it waits for its turn now");
    assert_eq!(start.elapsed(), Duration::from_secs(1), "the turn after the one it took before");
    let set = registry.keyed_rate_limits("quota").unwrap();
    assert_eq!(set.peek("tenant-a").unwrap().config().max_wait, Some(Duration::from_secs(2)));
    registry
        .reload_toml("[rate_limits.quota]\nper_second = 1\nburst = 1\nmax_wait_ms = 2000\nmax_keys = 1\n")
        .unwrap();
    assert_eq!(set.len(), 1, "down to the new max_keys at once");
    assert!(set.peek("tenant-a").is_some(), "the most recently used kept");
}

/// A reload reaches each tenant's bulkhead, keeping the places in use: a
/// tenant whose one place is held gets a second once the file says two.
#[tokio::test(start_paused = true)]
async fn a_reload_reaches_every_tenants_bulkhead_keeping_its_places() {
    let registry = Registry::new();
    let one_place =
        BulkheadConfig { max_concurrent: 1, max_wait: Some(Duration::from_millis(10)), ..Default::default() };
    registry.declare_bulkhead("pool", one_place).unwrap();
    let release = tokio::sync::Notify::new();
    let first = registry.scope(held("tenant-a", &release));
    tokio::pin!(first);
    assert!(futures_poll(first.as_mut()).await.is_none());
    registry.reload_toml("[bulkheads.pool]\nmax_concurrent = 2\nmax_wait_ms = 10\n").unwrap();
    let second = registry.scope(held("tenant-a", &release));
    tokio::pin!(second);
    // Pending either way (running, or queued for a place): the count of
    // places in use says which.
    assert!(futures_poll(second.as_mut()).await.is_none());
    assert_eq!(
        registry.keyed_bulkheads("pool").unwrap().peek("tenant-a").unwrap().in_use(),
        2,
        "a second place, the first still counted: kept"
    );
    release.notify_waiters();
    assert_eq!((first.await.unwrap(), second.await.unwrap()), (7, 7));
    assert_eq!(registry.bulkhead_for("pool", "tenant-a").in_use(), 0);
}
