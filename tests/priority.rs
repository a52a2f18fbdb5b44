//! Priority shedding (issue 44, item 6): under three times the load a
//! bulkhead can serve, critical calls keep succeeding while sheddable
//! ones absorb the refusals; the same through the builder and from a
//! configuration file; a sheddable call never waits for a place or a turn.
//! On tokio's paused clock, each scenario in its own registry.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use stormproof::bulkhead::BulkheadConfig;
use stormproof::rate_limit::RateLimitConfig;
use stormproof::throttle::ThrottleConfig;
use stormproof::{Error, Policy, Priority, Registry, Rejection, resilient};
use tokio::time::Instant;

/// The dependency: 100 ms a request; the bulkhead lets 4 in at once, so
/// it serves 40 calls a second.
async fn dependency() -> Result<(), Error<std::io::Error>> {
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(())
}

#[resilient(max_attempts = 1, bulkhead = "db", priority = "critical", name = "priority::checkout")]
async fn checkout() -> Result<(), Error<std::io::Error>> {
    dependency().await
}

#[resilient(max_attempts = 1, bulkhead = "db", name = "priority::profile")]
async fn profile() -> Result<(), Error<std::io::Error>> {
    dependency().await
}

#[resilient(max_attempts = 1, bulkhead = "db", priority = "sheddable", name = "priority::prefetch")]
async fn prefetch() -> Result<(), Error<std::io::Error>> {
    dependency().await
}

/// Calls made and calls that succeeded, of one priority.
#[derive(Debug, Default)]
struct Tally {
    calls: AtomicU32,
    succeeded: AtomicU32,
}

impl Tally {
    fn failed(&self) -> u64 {
        u64::from(self.calls.load(Ordering::SeqCst) - self.succeeded.load(Ordering::SeqCst))
    }

    fn share(&self) -> f64 {
        f64::from(self.succeeded.load(Ordering::SeqCst)) / f64::from(self.calls.load(Ordering::SeqCst))
    }
}

/// 10 s of calls at 120 a second, three times what the bulkhead serves,
/// arriving evenly: of every ten, two `critical`, three `default`, five
/// `sheddable`, each a function of that priority; all run to their end.
async fn overload<C, D, S, FC, FD, FS>(
    registry: &Registry,
    critical: C,
    default: D,
    sheddable: S,
) -> [Arc<Tally>; 3]
where
    C: Fn() -> FC,
    D: Fn() -> FD,
    S: Fn() -> FS,
    FC: Future<Output = Result<(), Error<std::io::Error>>> + Send + 'static,
    FD: Future<Output = Result<(), Error<std::io::Error>>> + Send + 'static,
    FS: Future<Output = Result<(), Error<std::io::Error>>> + Send + 'static,
{
    registry.declare_bulkhead("db", BulkheadConfig { max_concurrent: 4, ..Default::default() }).unwrap();
    let tallies: [Arc<Tally>; 3] = Default::default();
    let mut calls = tokio::task::JoinSet::new();
    let start = Instant::now();
    for n in 0..1_200u32 {
        let (which, call): (usize, std::pin::Pin<Box<dyn Future<Output = _> + Send>>) = match n % 10 {
            0 | 5 => (0, Box::pin(registry.scope(critical()))),
            1 | 4 | 8 => (1, Box::pin(registry.scope(default()))),
            _ => (2, Box::pin(registry.scope(sheddable()))),
        };
        let tally = tallies[which].clone();
        tally.calls.fetch_add(1, Ordering::SeqCst);
        calls.spawn(async move {
            if call.await.is_ok() {
                tally.succeeded.fetch_add(1, Ordering::SeqCst);
            }
        });
        tokio::time::sleep_until(start + Duration::from_micros(8_333) * (n + 1)).await;
    }
    while calls.join_next().await.is_some() {}
    tallies
}

/// Three times the load the bulkhead serves: every critical call
/// succeeds (they are a fifth of the load, half of what it serves, and a
/// place that comes free goes to a waiting critical call first); the
/// default calls share what is left; the sheddable ones, refused at once
/// whenever no place is free, absorb the refusals.
#[tokio::test(start_paused = true)]
async fn under_three_times_the_load_critical_calls_succeed_and_sheddable_ones_are_refused() {
    let registry = Registry::new();
    let [critical, default, sheddable] = overload(&registry, checkout, profile, prefetch).await;
    // Every call that failed was refused by the bulkhead (one attempt
    // each, nothing else fails), which counted it under its priority.
    let refusals = registry.bulkhead("db").unwrap();
    let refusals = refusals.refusals();
    assert_eq!(refusals.of(Priority::Critical), critical.failed());
    assert_eq!(refusals.of(Priority::Default), default.failed());
    assert_eq!(refusals.of(Priority::Sheddable), sheddable.failed());
    assert!(refusals.of(Priority::Sheddable) > refusals.of(Priority::Default), "{refusals:?}");
    let (critical, default, sheddable) = (critical.share(), default.share(), sheddable.share());
    assert!(critical >= 0.99, "critical calls: {critical:.3} succeeded");
    assert!(default > sheddable, "default {default:.3} against sheddable {sheddable:.3}");
    assert!(sheddable < 0.1, "sheddable calls: {sheddable:.3} succeeded");
}

/// The same through the builder: three policies of three priorities run
/// through `Policy::run`.
#[tokio::test(start_paused = true)]
async fn the_builders_priority_sheds_the_same_way() {
    let policy = |priority| {
        let policy = Policy::builder().max_attempts(1).bulkhead("db").priority(priority).build().unwrap();
        Arc::new(policy)
    };
    let (critical, default, sheddable) =
        (policy(Priority::Critical), policy(Priority::Default), policy(Priority::Sheddable));
    let run = |policy: &Arc<Policy>| {
        let policy = policy.clone();
        move || {
            let policy = policy.clone();
            async move { policy.run(dependency).await }
        }
    };
    let registry = Registry::new();
    let [critical, default, sheddable] =
        overload(&registry, run(&critical), run(&default), run(&sheddable)).await;
    assert!(critical.share() >= 0.99, "critical calls: {:.3} succeeded", critical.share());
    assert!(default.share() > sheddable.share() && sheddable.share() < 0.1);
}

/// A configuration file changes an operation's priority without a
/// rebuild: the checkout, made sheddable, is shed; the profile, made
/// critical, goes through. The reload says what changed.
#[tokio::test(start_paused = true)]
async fn a_file_changes_an_operations_priority() {
    let registry = Registry::new();
    let swapped = "[operations.\"priority::checkout\"]\npriority = \"sheddable\"\n\
                   [operations.\"priority::profile\"]\npriority = \"critical\"\n";
    registry.load_toml("").unwrap();
    let report = registry.reload_toml(swapped).unwrap().to_string();
    assert!(report.contains("priority critical -> sheddable"), "{report}");
    assert!(report.contains("priority default -> critical"), "{report}");
    let [checkout_made_sheddable, profile_made_critical, _] =
        overload(&registry, checkout, profile, prefetch).await;
    assert!(profile_made_critical.share() >= 0.99, "{:.3}", profile_made_critical.share());
    assert!(checkout_made_sheddable.share() < 0.1, "{:.3}", checkout_made_sheddable.share());

    let error =
        registry.reload_toml("[operations.\"priority::checkout\"]\npriority = \"urgent\"\n").unwrap_err();
    let error = error.to_string();
    assert!(error.contains(":2:12") && error.contains("`priority` must be one of"), "{error}");
}

#[resilient(max_attempts = 1, rate_limit = "api", priority = "sheddable", name = "priority::poll")]
async fn poll() -> Result<(), Error<std::io::Error>> {
    Ok(())
}

#[resilient(max_attempts = 1, rate_limit = "api", name = "priority::fetch")]
async fn fetch() -> Result<(), Error<std::io::Error>> {
    Ok(())
}

/// A rate limit lets a default call wait for its turn (up to `max_wait`),
/// and refuses a sheddable one at once.
#[tokio::test(start_paused = true)]
async fn a_sheddable_call_never_waits_for_a_turn() {
    let registry = Registry::new();
    let limit = RateLimitConfig {
        per_second: 10,
        burst: 1,
        max_wait: Some(Duration::from_secs(1)),
        ..Default::default()
    };
    registry.declare_rate_limit("api", limit).unwrap();
    registry.scope(fetch()).await.unwrap();
    let start = Instant::now();
    let refused = registry.scope(poll()).await.unwrap_err();
    assert!(matches!(refused, Error::Rejected(Rejection::RateLimited { .. })), "{refused:?}");
    assert_eq!(start.elapsed(), Duration::ZERO, "refused at once");
    registry.scope(fetch()).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(100), "the default call waited for its turn");
    let limit = registry.rate_limit("api").unwrap();
    assert_eq!(limit.refusals().of(Priority::Sheddable), 1, "counted under its priority");
    assert_eq!(limit.refusals().total(), 1, "the default call waited, and was not refused");
}

#[resilient(max_attempts = 1, bulkhead = "priority_global", name = "priority::global")]
async fn global() -> Result<(), Error<std::io::Error>> {
    Ok(())
}

/// In the global registry, where a call may start plain: a file's
/// `priority = "sheddable"` reaches the call's admission there too. With
/// the bulkhead full, the call is refused at once; without the key, it
/// waits its `max_wait` (a second) first.
#[tokio::test(start_paused = true)]
async fn in_the_global_registry_a_files_priority_reaches_a_plain_call() {
    let registry = stormproof::registry();
    registry
        .declare_bulkhead("priority_global", BulkheadConfig { max_concurrent: 1, ..Default::default() })
        .unwrap();
    let bulkhead = registry.bulkhead("priority_global").unwrap();
    let _held = bulkhead.acquire().await.unwrap();
    registry.load_toml("[operations.\"priority::global\"]\npriority = \"sheddable\"\n").unwrap();
    let start = Instant::now();
    let refused = global().await.unwrap_err();
    assert!(matches!(refused, Error::Rejected(Rejection::BulkheadFull { .. })), "{refused:?}");
    assert_eq!(start.elapsed(), Duration::ZERO, "sheddable: refused at once");
    registry.reload_toml("").unwrap();
    assert!(global().await.is_err());
    assert_eq!(start.elapsed(), Duration::from_secs(1), "default: it waited its max_wait");
}

#[resilient(
    max_attempts = 1,
    throttle = "priority_throttle",
    priority = "sheddable",
    name = "priority::suggest"
)]
async fn suggest() -> Result<(), Error<std::io::Error>> {
    Ok(())
}

/// An adaptive throttle that has seen only rejections refuses sheddable
/// requests, and counts each under its priority: as many as the calls
/// refused, whatever the draws.
#[tokio::test(start_paused = true)]
async fn a_throttle_counts_the_requests_it_refused_by_priority() {
    let registry = Registry::new();
    registry.declare_throttle("priority_throttle", ThrottleConfig::default()).unwrap();
    let throttle = registry.throttle("priority_throttle").unwrap();
    for _ in 0..1_000 {
        throttle.answered(false);
    }
    tokio::time::advance(Duration::from_millis(100)).await;
    let mut refused = 0;
    for _ in 0..100 {
        if let Err(error) = registry.scope(suggest()).await {
            assert!(matches!(error, Error::Rejected(Rejection::Throttled { .. })), "{error:?}");
            refused += 1;
        }
    }
    assert!(refused > 0, "the throttle refused none of 100 requests after 1,000 rejections");
    assert_eq!(throttle.refusals().of(Priority::Sheddable), refused);
    assert_eq!(throttle.refusals().total(), refused);
}
