//! Every metric in the README's table, read back from a recording `metrics`
//! recorder (metrics-util's debugging recorder, scoped to the test's thread):
//! names, labels and values, after calls whose effect is known exactly.
//! Also the attribute's `name = "..."`: it is the `operation` label.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use stormproof::{
    Classify, ErrorClass, Policy, Priority, Registry, Rejection,
    breaker::{BreakerConfig, BreakerState},
    budget::TokenBucket,
    bulkhead::{AdaptiveLimit, BulkheadConfig},
    rate_limit::RateLimitConfig,
    resilient,
    throttle::ThrottleConfig,
};

#[derive(Debug, Clone, PartialEq)]
enum Fault {
    Down,
    Busy(Option<Duration>),
    Invalid,
    Rejected(Rejection),
}

impl Classify for Fault {
    fn classify(&self) -> ErrorClass {
        match self {
            Fault::Down => ErrorClass::Transient,
            Fault::Busy(retry_after) => ErrorClass::Throttled { retry_after: *retry_after },
            Fault::Invalid => ErrorClass::Permanent,
            Fault::Rejected(rejection) => rejection.classify(),
        }
    }
}

impl From<Rejection> for Fault {
    fn from(rejection: Rejection) -> Self {
        Fault::Rejected(rejection)
    }
}

/// The fleet tests' `redis-server` (a free loopback port, no persistence).
#[cfg(feature = "redis")]
#[allow(dead_code)]
#[path = "../retry-fleet/tests/fleet/server.rs"]
mod server;

/// A metric's labels, sorted.
type Labels = Vec<(String, String)>;

/// What a test recorded: every metric's name, labels and value.
struct Recorded(Vec<(String, Labels, DebugValue)>);

/// Runs `test` on a paused current-thread runtime with a fresh recorder
/// and takes one snapshot at the end (a snapshot resets what it reads).
fn recorded(test: impl AsyncFnOnce()) -> Recorded {
    let mut runtime = tokio::runtime::Builder::new_current_thread();
    runtime.enable_time().start_paused(true);
    recorded_on(runtime, test)
}

/// [`recorded`] on a runtime of this builder.
fn recorded_on(mut runtime: tokio::runtime::Builder, test: impl AsyncFnOnce()) -> Recorded {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        runtime.build().unwrap().block_on(test());
    });
    snapshot(&snapshotter)
}

/// What `snapshotter`'s recorder holds now.
fn snapshot(snapshotter: &Snapshotter) -> Recorded {
    let metrics = snapshotter.snapshot().into_vec().into_iter().map(|(key, _, _, value)| {
        let key = key.key();
        let mut labels: Vec<(String, String)> =
            key.labels().map(|l| (l.key().to_owned(), l.value().to_owned())).collect();
        labels.sort();
        (key.name().to_owned(), labels, value)
    });
    Recorded(metrics.collect())
}

impl Recorded {
    /// The value of metric `name` with exactly these labels, if recorded.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<&DebugValue> {
        let mut wanted: Vec<(String, String)> =
            labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        wanted.sort();
        self.0.iter().find(|(n, l, _)| n == name && *l == wanted).map(|(_, _, value)| value)
    }
}

fn counter(metrics: &Recorded, name: &str, labels: &[(&str, &str)]) -> u64 {
    match metrics.value(name, labels) {
        Some(DebugValue::Counter(n)) => *n,
        other => panic!("{name} {labels:?}: {other:?}"),
    }
}

fn gauge(metrics: &Recorded, name: &str, labels: &[(&str, &str)]) -> f64 {
    match metrics.value(name, labels) {
        Some(DebugValue::Gauge(level)) => level.into_inner(),
        other => panic!("{name} {labels:?}: {other:?}"),
    }
}

#[test]
fn retries_and_stops_are_counted_by_operation_class_and_reason() {
    let metrics = recorded(async || {
        let policy =
            Policy::builder().name("shop::quote").max_attempts(3).base(Duration::ZERO).build().unwrap();
        let mut n = 0;
        let _ = policy
            .run(|| {
                n += 1;
                let fault = if n == 1 { Fault::Down } else { Fault::Busy(None) };
                async move { Err::<(), _>(fault) }
            })
            .await;
        let _ = policy.run(|| async { Err::<(), _>(Fault::Invalid) }).await;
    });
    let op = ("operation", "shop::quote");
    assert_eq!(counter(&metrics, "stormproof_retries_total", &[op, ("class", "transient")]), 1);
    assert_eq!(counter(&metrics, "stormproof_retries_total", &[op, ("class", "throttled")]), 1);
    let default = ("priority", "default");
    assert_eq!(
        counter(&metrics, "stormproof_stops_total", &[op, ("reason", "attempts_exhausted"), default]),
        1
    );
    assert_eq!(counter(&metrics, "stormproof_stops_total", &[op, ("reason", "permanent"), default]), 1);
}

/// A call its guard refused is counted under its priority: the sheddable
/// call, refused at once by the full bulkhead, under `sheddable`; the
/// critical one, refused after its wait for a place, under `critical`.
#[test]
fn refused_calls_are_counted_by_priority() {
    let metrics = recorded(async || {
        let registry = Registry::new();
        let bulkhead = BulkheadConfig {
            max_concurrent: 1,
            max_wait: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        registry.declare_bulkhead("shop::pool", bulkhead).unwrap();
        let policy = |name: &'static str, priority| {
            let builder = Policy::builder().name(name).max_attempts(1).bulkhead("shop::pool");
            builder.priority(priority).build().unwrap()
        };
        let (holder, critical, sheddable) = (
            policy("shop::hold", Priority::Default),
            policy("shop::pay", Priority::Critical),
            policy("shop::suggest", Priority::Sheddable),
        );
        registry
            .scope(async {
                let hold = holder.run(|| async {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    Ok::<(), Fault>(())
                });
                let refused = async {
                    tokio::task::yield_now().await;
                    let shed = sheddable.run(|| async { Ok::<(), Fault>(()) }).await;
                    let waited = critical.run(|| async { Ok::<(), Fault>(()) }).await;
                    (shed, waited)
                };
                let (held, (shed, waited)) = tokio::join!(hold, refused);
                assert!(held.is_ok());
                assert!(matches!(shed, Err(Fault::Rejected(Rejection::BulkheadFull { .. }))), "{shed:?}");
                assert!(matches!(waited, Err(Fault::Rejected(Rejection::BulkheadFull { .. }))), "{waited:?}");
            })
            .await;
    });
    let full = ("reason", "bulkhead_full");
    let stops = |operation, priority| {
        counter(&metrics, "stormproof_stops_total", &[("operation", operation), full, ("priority", priority)])
    };
    assert_eq!(stops("shop::suggest", "sheddable"), 1);
    assert_eq!(stops("shop::pay", "critical"), 1);
}

#[test]
fn breaker_transitions_are_counted_and_its_state_is_a_gauge() {
    let metrics = recorded(async || {
        let registry = Registry::new();
        let config = BreakerConfig {
            failure_threshold: 1,
            open_for: Duration::from_secs(1),
            success_threshold: 1,
            ..Default::default()
        };
        registry.declare_breaker("db", config).unwrap();
        let policy = Policy::builder().max_attempts(1).breaker("db").build().unwrap();
        let _ = registry.scope(policy.run(|| async { Err::<(), _>(Fault::Down) })).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        registry.scope(policy.run(|| async { Ok::<_, Fault>(()) })).await.unwrap();
    });
    let transition = |from, to| {
        counter(
            &metrics,
            "stormproof_breaker_transitions_total",
            &[("breaker", "db"), ("from", from), ("to", to)],
        )
    };
    assert_eq!(transition("closed", "open"), 1);
    assert_eq!(transition("open", "half_open"), 1);
    assert_eq!(transition("half_open", "closed"), 1);
    assert_eq!(gauge(&metrics, "stormproof_breaker_state", &[("breaker", "db")]), 0.0, "closed again");
}

#[test]
fn a_breaker_that_never_moved_reads_closed() {
    let metrics = recorded(async || {
        let registry = Registry::new();
        registry.declare_breaker("declared", BreakerConfig::default()).unwrap();
        let policy = Policy::builder().max_attempts(1).breaker("made-on-first-use").build().unwrap();
        registry.scope(policy.run(|| async { Ok::<_, Fault>(()) })).await.unwrap();
    });
    for breaker in ["declared", "made-on-first-use"] {
        assert_eq!(gauge(&metrics, "stormproof_breaker_state", &[("breaker", breaker)]), 0.0, "{breaker}");
    }
}

/// A breaker made only to be set aside (a declaration of a name already
/// taken, or a reload, which makes each file breaker and keeps the one that
/// exists, reconfigured) must not report its state as the existing one's.
#[test]
fn declaring_or_reloading_an_open_breaker_leaves_its_gauge_open() {
    let metrics = recorded(async || {
        let registry = Registry::new();
        registry.declare_breaker("held-open", BreakerConfig::default()).unwrap();
        registry.breaker("held-open").unwrap().force_open();
        assert!(registry.declare_breaker("held-open", BreakerConfig::default()).is_err(), "taken");
        registry.reload_toml("[breakers.held-open]\nfailure_threshold = 3\n").unwrap();
        let breaker = registry.breaker("held-open").unwrap();
        assert_eq!((breaker.state(), breaker.config().failure_threshold), (BreakerState::Open, 3));
    });
    assert_eq!(gauge(&metrics, "stormproof_breaker_state", &[("breaker", "held-open")]), 1.0, "open");
}

/// The same for a budget: one made for a name taken, or by a reload that
/// keeps the existing one, must not report a full budget for it.
#[test]
fn declaring_or_reloading_a_spent_budget_leaves_its_gauge_at_its_level() {
    let metrics = recorded(async || {
        let registry = Registry::new();
        registry.declare_budget("spent", TokenBucket { capacity: 5, ..Default::default() }).unwrap();
        let budget = registry.budget("spent").unwrap();
        assert!((0..3).all(|_| budget.try_withdraw()));
        assert!(registry.declare_budget("spent", TokenBucket::default()).is_err(), "taken");
        registry.reload_toml("[budgets.spent]\ncapacity = 5\n").unwrap();
        assert_eq!(budget.available(), 2);
    });
    assert_eq!(gauge(&metrics, "stormproof_budget_available", &[("budget", "spent")]), 2.0);
}

/// A breaker or a budget a file declares (by a load, or a reload that adds
/// it) is the one kept under its name: its gauge reads it at once, as one
/// declared in code does; and a reload that changes a spent budget's
/// settings leaves its gauge at its level under them.
#[test]
fn guards_a_file_declares_or_reconfigures_are_measured() {
    let metrics = recorded(async || {
        let registry = Registry::new();
        registry.load_toml("[breakers.loaded]\n[budgets.loaded]\ncapacity = 4\n").unwrap();
        registry.declare_budget("spent", TokenBucket { capacity: 5, ..Default::default() }).unwrap();
        let spent = registry.budget("spent").unwrap();
        assert!((0..3).all(|_| spent.try_withdraw()));
        let file = "[breakers.added]\n[budgets.added]\ncapacity = 7\n[budgets.spent]\ncapacity = 10\n";
        registry.reload_toml(file).unwrap();
        assert_eq!(spent.available(), 2, "its tokens kept");
    });
    for breaker in ["loaded", "added"] {
        assert_eq!(gauge(&metrics, "stormproof_breaker_state", &[("breaker", breaker)]), 0.0, "{breaker}");
    }
    for (budget, level) in [("loaded", 4.0), ("added", 7.0), ("spent", 2.0)] {
        assert_eq!(gauge(&metrics, "stormproof_budget_available", &[("budget", budget)]), level, "{budget}");
    }
}

#[test]
fn the_budget_gauge_follows_withdrawals_and_deposits() {
    let metrics = recorded(async || {
        let registry = Registry::new();
        registry.declare_budget("api", TokenBucket { capacity: 10, ..Default::default() }).unwrap();
        let policy = Policy::builder().max_attempts(2).base(Duration::ZERO).budget("api").build().unwrap();
        // Five calls that each retry once: five tokens withdrawn.
        for _ in 0..5 {
            let _ = registry.scope(policy.run(|| async { Err::<(), _>(Fault::Down) })).await;
        }
        assert_eq!(registry.budget("api").unwrap().available(), 5);
        // Five successes: five tokens back.
        for _ in 0..5 {
            registry.scope(policy.run(|| async { Ok::<_, Fault>(()) })).await.unwrap();
        }
        assert_eq!(registry.budget("api").unwrap().available(), 10);
    });
    assert_eq!(gauge(&metrics, "stormproof_budget_available", &[("budget", "api")]), 10.0);
}

#[test]
fn the_throttle_gauge_falls_back_to_zero_once_its_refusals_leave_the_window() {
    let mut refused = 0;
    let metrics = recorded(async || {
        let registry = Registry::new();
        let config = ThrottleConfig::default();
        registry.declare_throttle("dep", config).unwrap();
        let throttle = registry.throttle("dep").unwrap();
        // A dependency that accepts nothing: the throttle starts refusing
        // (each tenth of the window judged on the ones before it).
        for call in 0..20 {
            if call % 5 == 4 {
                tokio::time::sleep(config.window / 10).await;
            }
            if throttle.admit() {
                throttle.answered(false);
            } else {
                refused += 1;
            }
        }
        assert!(refused > 0, "the throttle refused some of 20 calls to a dependency accepting none");
        // A window later every count has left it: nothing is refused any more.
        tokio::time::sleep(config.window).await;
        assert!(throttle.admit());
        assert_eq!(throttle.refusal_probability(), 0.0);
    });
    let dep = [("throttle", "dep")];
    assert_eq!(counter(&metrics, "stormproof_throttle_refusals_total", &dep), refused);
    assert_eq!(
        gauge(&metrics, "stormproof_throttle_refusal_probability", &dep),
        0.0,
        "not the last p above zero"
    );
}

#[test]
fn a_breakers_slow_calls_are_counted() {
    let metrics = recorded(async || {
        let registry = Registry::new();
        let config = BreakerConfig {
            failure_rate_percent: Some(50),
            slow_call_duration: Some(Duration::from_millis(100)),
            slow_call_rate_percent: Some(90),
            ..Default::default()
        };
        registry.declare_breaker("dep", config).unwrap();
        let policy = Policy::builder().max_attempts(1).breaker("dep").budget("none").build().unwrap();
        for took in [100, 99, 250] {
            let answered: Result<(), Fault> = registry
                .scope(policy.run(|| async move {
                    tokio::time::sleep(Duration::from_millis(took)).await;
                    Ok(())
                }))
                .await;
            answered.unwrap();
        }
    });
    assert_eq!(counter(&metrics, "stormproof_breaker_slow_calls_total", &[("breaker", "dep")]), 2);
}

#[test]
fn the_bulkhead_gauge_counts_permits_in_use() {
    let metrics = recorded(async || {
        let registry = Registry::new();
        registry
            .declare_bulkhead(
                "pool",
                BulkheadConfig { max_concurrent: 4, max_wait: None, ..Default::default() },
            )
            .unwrap();
        let bulkhead = registry.bulkhead("pool").unwrap();
        let first = bulkhead.acquire().await.unwrap();
        let second = bulkhead.acquire().await.unwrap();
        drop(first);
        // Still held when the snapshot is taken, after this block ends.
        std::mem::forget(second);
    });
    assert_eq!(gauge(&metrics, "stormproof_bulkhead_in_use", &[("bulkhead", "pool")]), 1.0);
}

/// Answers after 400 ms the first time, 30 ms after that: a hedge at
/// 100 ms answers first.
#[resilient(max_attempts = 1, hedge_after_ms = 100, max_hedges = 2)]
async fn slow_first(calls: &AtomicU32) -> Result<(), Fault> {
    let n = calls.fetch_add(1, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(if n == 0 { 400 } else { 30 })).await;
    Ok(())
}

async fn from_cache(_: Fault) -> Result<(), Fault> {
    Ok(())
}

#[resilient(max_attempts = 1, fallback = from_cache)]
async fn falls_back() -> Result<(), Fault> {
    Err(Fault::Down)
}

#[resilient(max_attempts = 1, rate_limit = "metered")]
async fn metered() -> Result<(), Fault> {
    Ok(())
}

#[resilient(max_attempts = 1, bulkhead = "adaptive-pool")]
async fn overloaded() -> Result<(), Fault> {
    Err(Fault::Down)
}

#[test]
fn hedges_fallbacks_refusals_over_the_rate_and_an_adaptive_limit_are_measured() {
    let mut limit = 0;
    let metrics = recorded(async || {
        let registry = Registry::new();
        let calls = AtomicU32::new(0);
        registry.scope(slow_first(&calls)).await.unwrap();
        assert_eq!(calls.load(Ordering::Relaxed), 2, "the attempt and one hedge");
        registry.scope(falls_back()).await.unwrap();
        registry.scope(falls_back()).await.unwrap();
        let quota = RateLimitConfig { per_second: 5, burst: 2, max_wait: None, ..Default::default() };
        registry.declare_rate_limit("metered", quota).unwrap();
        let results = [
            registry.scope(metered()).await,
            registry.scope(metered()).await,
            registry.scope(metered()).await,
        ];
        assert!(results[2].is_err(), "the third call at once is over a burst of 2: {results:?}");
        let pool = BulkheadConfig {
            max_concurrent: 8,
            adaptive: Some(AdaptiveLimit::aimd(2)),
            ..Default::default()
        };
        registry.declare_bulkhead("adaptive-pool", pool).unwrap();
        let _ = registry.scope(overloaded()).await;
        limit = registry.bulkhead("adaptive-pool").unwrap().limit();
    });
    let operation = |name| [("operation", name)];
    assert_eq!(counter(&metrics, "stormproof_hedges_total", &operation("metrics::slow_first")), 1);
    assert_eq!(counter(&metrics, "stormproof_fallbacks_total", &operation("metrics::falls_back")), 2);
    assert_eq!(counter(&metrics, "stormproof_rate_limited_total", &[("limiter", "metered")]), 1);
    assert!(limit < 8, "an overload error shrinks an AIMD limit: {limit}");
    let gauge_limit = gauge(&metrics, "stormproof_bulkhead_limit", &[("bulkhead", "adaptive-pool")]);
    assert_eq!(gauge_limit, f64::from(limit), "the gauge is where the limit went");
}

struct Inventory;
struct Ledger;

impl Inventory {
    #[resilient(max_attempts = 2, base_ms = 0, name = "inventory::load")]
    async fn load(&self) -> Result<(), Fault> {
        Err(Fault::Down)
    }
}

impl Ledger {
    // Same module, same method name: without `name` both would be `metrics::load`.
    #[resilient(max_attempts = 2, base_ms = 0, name = "ledger::load")]
    async fn load(&self) -> Result<(), Fault> {
        Err(Fault::Down)
    }
}

#[test]
fn the_name_argument_tells_two_methods_of_the_same_name_apart() {
    let metrics = recorded(async || {
        let _ = Inventory.load().await;
        let _ = Ledger.load().await;
        let _ = Ledger.load().await;
    });
    let retries = |operation| {
        counter(&metrics, "stormproof_retries_total", &[("operation", operation), ("class", "transient")])
    };
    assert_eq!((retries("inventory::load"), retries("ledger::load")), (1, 2));
}

/// A registry whose breaker `dep` the fleet `config` shares, joined (on
/// the runtime this runs on).
#[cfg(feature = "redis")]
fn joined(config: stormproof::fleet::FleetConfig) -> (Registry, stormproof::fleet::Fleet) {
    let registry = Registry::new();
    registry.declare_breaker("dep", BreakerConfig::default()).unwrap();
    let fleet = stormproof::fleet::Fleet::join(
        &registry,
        stormproof::fleet::FleetConfig { breakers: vec!["dep".into()], ..config },
    )
    .unwrap();
    (registry, fleet)
}

/// Waits, on the real clock, until `done`; ten seconds turn a hang into `what` failing.
#[cfg(feature = "redis")]
async fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now().checked_add(Duration::from_secs(10)).unwrap();
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A current-thread runtime on the real clock: real sockets need it (a
/// paused one would time every flush out).
#[cfg(feature = "redis")]
fn real_time() -> tokio::runtime::Builder {
    let mut runtime = tokio::runtime::Builder::new_current_thread();
    runtime.enable_all();
    runtime
}

/// `join_fleet` contacts nobody: a store that never answers (here a closed
/// port) must still show, the gauge at 0 from the join on, and is no
/// fallback (the guards were never the fleet's); nor is leaving.
#[cfg(feature = "redis")]
#[test]
fn a_fleet_whose_store_never_answers_reads_unlinked_and_counts_no_fallback() {
    use stormproof::fleet::FleetConfig;
    // Paused: each flush's store timeout passes at once (the connection is
    // refused, or the timer fires first), as it would in 50 ms.
    let mut runtime = real_time();
    runtime.start_paused(true);
    let metrics = recorded_on(runtime, async || {
        let (_registry, fleet) = joined(FleetConfig {
            url: "redis://127.0.0.1:1/".into(),
            prefix: "unreached".into(),
            sync_every: Duration::from_millis(100),
            ..Default::default()
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(fleet.failed_flushes() > 0 && !fleet.is_linked());
        fleet.leave().await;
    });
    let fleet = [("fleet", "unreached")];
    assert_eq!(gauge(&metrics, "stormproof_fleet_linked", &fleet), 0.0);
    assert!(metrics.value("stormproof_fleet_fallbacks_total", &fleet).is_none(), "no fallback");
}

/// A store lost is a fallback; a replica leaving on purpose is not.
#[cfg(feature = "redis")]
#[test]
fn losing_the_store_counts_a_fallback_and_leaving_does_not() {
    use stormproof::fleet::FleetConfig;
    let Some(mut server) = server::Server::start("losing_the_store_counts_a_fallback_...") else { return };
    let metrics = recorded_on(real_time(), async || {
        let (_registry, fleet) = joined(FleetConfig {
            url: server.url(),
            prefix: "lost".into(),
            sync_every: Duration::from_millis(20),
            // Long enough that a busy machine's slow flush is no loss: the
            // loss counted is the server's stop (a refused connection, at once).
            store_timeout: Duration::from_secs(2),
            ..Default::default()
        });
        until("linked", || fleet.is_linked()).await;
        server.stop();
        until("unlinked once the store is gone", || !fleet.is_linked()).await;
        server.restart();
        until("linked again", || fleet.is_linked()).await;
        fleet.leave().await;
    });
    let fleet = [("fleet", "lost")];
    assert_eq!(counter(&metrics, "stormproof_fleet_fallbacks_total", &fleet), 1, "the loss, not the leave");
    assert_eq!(gauge(&metrics, "stormproof_fleet_linked", &fleet), 0.0, "left");
}

/// Leaving while the store does not answer: the last flushes fail, and
/// that is the leave, not a store lost.
#[cfg(feature = "redis")]
#[test]
fn leaving_while_the_store_is_frozen_counts_no_fallback() {
    use stormproof::fleet::FleetConfig;
    let Some(server) = server::Server::start("leaving_while_the_store_is_frozen_...") else { return };
    let metrics = recorded_on(real_time(), async || {
        let (_registry, fleet) = joined(FleetConfig {
            url: server.url(),
            prefix: "frozen-leave".into(),
            // One flush as the fleet starts, none after it but the leave's.
            sync_every: Duration::from_secs(3_600),
            store_timeout: Duration::from_millis(300),
            ..Default::default()
        });
        until("linked", || fleet.is_linked()).await;
        server.pause();
        assert!(!fleet.leave().await, "the last flush could not get through");
        server.resume();
    });
    let fleet = [("fleet", "frozen-leave")];
    assert!(metrics.value("stormproof_fleet_fallbacks_total", &fleet).is_none(), "a leave is no fallback");
    assert_eq!(gauge(&metrics, "stormproof_fleet_linked", &fleet), 0.0);
}

/// Two registries of one process in one fleet (two replicas in one
/// process, as the fleet tests run them): the gauge, labelled by the fleet
/// as every gauge is by its guard's name, counts those that follow it, so
/// that one leaving (or losing the store) does not read as the other's.
#[cfg(feature = "redis")]
#[test]
fn two_registries_in_one_fleet_each_count_in_its_linked_gauge() {
    use stormproof::fleet::FleetConfig;
    let Some(server) = server::Server::start("two_registries_in_one_fleet_...") else { return };
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let linked = || gauge(&snapshot(&snapshotter), "stormproof_fleet_linked", &[("fleet", "two")]);
    metrics::with_local_recorder(&recorder, || {
        real_time().build().unwrap().block_on(async {
            let config = || FleetConfig {
                url: server.url(),
                prefix: "two".into(),
                sync_every: Duration::from_millis(20),
                // Long enough that a busy machine's slow flush is no loss.
                store_timeout: Duration::from_secs(2),
                ..Default::default()
            };
            let (_a, fleet_a) = joined(config());
            let (_b, fleet_b) = joined(config());
            until("both linked", || fleet_a.is_linked() && fleet_b.is_linked()).await;
            assert_eq!(linked(), 2.0, "both follow the fleet");
            fleet_a.leave().await;
            assert_eq!(linked(), 1.0, "b follows it still");
            fleet_b.leave().await;
            assert_eq!(linked(), 0.0, "none does");
        });
    });
}

/// A key of the fleet's holding another type than the hash the flush
/// script keeps there (another program's string at the breaker's state) is
/// replaced by the flush that finds it, and counted once, however many
/// flushes follow.
#[cfg(feature = "redis")]
#[test]
fn a_key_of_the_fleets_of_another_type_is_counted_once_when_replaced() {
    use stormproof::fleet::FleetConfig;
    let Some(server) = server::Server::start("a_key_of_the_fleets_of_another_type_...") else { return };
    server.command(&["SET", "typed:breaker:dep", "x"]);
    let metrics = recorded_on(real_time(), async || {
        let (_registry, fleet) = joined(FleetConfig {
            url: server.url(),
            prefix: "typed".into(),
            sync_every: Duration::from_millis(20),
            // Long enough that a busy machine's slow flush is no loss.
            store_timeout: Duration::from_secs(2),
            ..Default::default()
        });
        until("linked", || fleet.is_linked()).await;
        let flushes = fleet.flushes();
        until("three flushes more", || fleet.flushes() >= flushes + 3).await;
        assert_eq!((fleet.replaced_keys(), fleet.failed_flushes()), (1, 0));
        fleet.leave().await;
    });
    let fleet = [("fleet", "typed")];
    assert_eq!(counter(&metrics, "stormproof_fleet_keys_replaced_total", &fleet), 1);
    assert!(metrics.value("stormproof_fleet_fallbacks_total", &fleet).is_none(), "the fleet went on");
}

/// A breaker per key labels its metrics with the key, for the first
/// `max_keys` keys; every later key is `other`, so the series stay bounded
/// however many tenants come and go.
#[test]
fn a_breaker_per_key_labels_at_most_max_keys_keys() {
    let metrics = recorded(async || {
        let registry = Registry::new();
        registry.declare_breaker("search", BreakerConfig { max_keys: 2, ..Default::default() }).unwrap();
        for tenant in ["a", "b", "c", "d"] {
            registry.breaker_for("search", tenant).force_open();
        }
    });
    let opened = |key| {
        counter(
            &metrics,
            "stormproof_breaker_transitions_total",
            &[("breaker", "search"), ("from", "closed"), ("key", key), ("to", "open")],
        )
    };
    assert_eq!((opened("a"), opened("b"), opened("other")), (1, 1, 2));
    let state = |key| gauge(&metrics, "stormproof_breaker_state", &[("breaker", "search"), ("key", key)]);
    // Two held at most: "a" and "b" were evicted (all open, the least
    // recently used first), and read closed, as they will come back;
    // "c" and "d", held and open, share `other`.
    assert_eq!((state("a"), state("b"), state("other")), (0.0, 0.0, 1.0));
    let keys: std::collections::BTreeSet<&str> = metrics
        .0
        .iter()
        .filter(|(name, _, _)| name.starts_with("stormproof_breaker"))
        .flat_map(|(_, labels, _)| labels.iter().filter(|(k, _)| k == "key").map(|(_, v)| v.as_str()))
        .collect();
    assert_eq!(keys, ["a", "b", "other"].into(), "no series for `c` or `d`");
}

/// A rate limit per key counts its refusals under its key's label.
#[test]
fn a_rate_limit_per_key_counts_refusals_by_key() {
    let metrics = recorded(async || {
        let registry = Registry::new();
        let quota = RateLimitConfig { per_second: 1, burst: 1, ..Default::default() };
        registry.declare_rate_limit("api", quota).unwrap();
        for _ in 0..3 {
            let _ = registry.rate_limit_for("api", "customer-7").acquire().await;
        }
    });
    let refused =
        counter(&metrics, "stormproof_rate_limited_total", &[("key", "customer-7"), ("limiter", "api")]);
    assert_eq!(refused, 2, "one turn, two refusals");
}
