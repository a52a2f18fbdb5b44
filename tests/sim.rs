//! The simulation harness, through the facade: the source story's storm
//! against the real retry loop on tokio's paused clock, and the herd
//! simulation's reproducibility and the shapes the AWS study predicts.

use std::time::Duration;

use stormproof::breaker::BreakerConfig;
use stormproof::budget::BudgetConfig;
use stormproof::sim::{HerdConfig, Latency, Model, Storm, StormError, Strategy, peak_in_bucket, simulate};
use stormproof::{Classify, ErrorClass, Jitter, Policy, Rejection};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

// --- Storm + Policy on paused time -------------------------------------------

#[tokio::test(start_paused = true)]
async fn immediate_retries_burn_every_attempt_before_the_storm_ends() {
    let storm = Storm::until(ms(1000));
    let policy = Policy::builder().max_attempts(6).base(Duration::ZERO).build().unwrap();

    let result = policy.run(|| storm.call()).await;

    assert_eq!(result, Err(StormError::Storm { at: Duration::ZERO }));
    assert_eq!(storm.calls(), [Duration::ZERO; 6], "all six attempts at t = 0");
    assert_eq!(storm.elapsed(), Duration::ZERO, "the clock never moved");
}

#[tokio::test(start_paused = true)]
async fn exponential_backoff_delivers_after_the_storm() {
    let storm = Storm::until(ms(1000));
    let policy =
        Policy::builder().max_attempts(11).base(ms(100)).cap(ms(2000)).jitter(Jitter::None).build().unwrap();

    let delivered_at = policy.run(|| storm.call()).await.unwrap();

    assert_eq!(storm.calls(), [ms(0), ms(100), ms(300), ms(700), ms(1500)]);
    assert_eq!(delivered_at, ms(1500));
    assert_eq!(storm.elapsed(), ms(1500));
}

#[tokio::test(start_paused = true)]
async fn waits_double_then_stop_at_the_cap_and_none_follows_the_last_attempt() {
    let storm = Storm::endless();
    let policy =
        Policy::builder().max_attempts(7).base(ms(100)).cap(ms(800)).jitter(Jitter::None).build().unwrap();

    let result = policy.run(|| storm.call()).await;

    assert_eq!(storm.waits(), [ms(100), ms(200), ms(400), ms(800), ms(800), ms(800)]);
    assert_eq!(result, Err(StormError::Storm { at: ms(3100) }));
    assert_eq!(storm.elapsed(), ms(3100), "no wait after the last failure");
}

#[tokio::test(start_paused = true)]
async fn full_jitter_waits_stay_under_the_curve() {
    let storm = Storm::endless();
    let policy = Policy::builder().max_attempts(7).base(ms(100)).cap(ms(800)).seed(7).build().unwrap();
    let _ = policy.run(|| storm.call()).await;
    let curve = [100, 200, 400, 800, 800, 800].map(ms);
    let waits = storm.waits();
    assert_eq!(waits.len(), 6);
    assert!(waits.iter().zip(curve).all(|(w, c)| *w <= c), "{waits:?}");
}

#[test]
fn storm_errors_are_transient_and_take_rejections() {
    assert_eq!(StormError::Storm { at: ms(1) }.classify(), ErrorClass::Transient);
    let open = StormError::from(Rejection::CircuitOpen { breaker: "tower".into() });
    assert_eq!(open.classify(), ErrorClass::Permanent);
    assert!(open.to_string().contains("tower"));
}

// --- peak_in_bucket ------------------------------------------------------------

#[test]
fn peak_in_bucket_edge_cases() {
    assert_eq!(peak_in_bucket(&[], ms(10)), 0, "no events");
    assert_eq!(peak_in_bucket(&[ms(5), ms(6)], Duration::ZERO), 0, "zero bucket");
    assert_eq!(peak_in_bucket(&[ms(5)], ms(10)), 1);
    assert_eq!(peak_in_bucket(&[ms(9), ms(10), ms(19), ms(20)], ms(10)), 2, "aligned to zero");
    assert_eq!(peak_in_bucket(&[ms(30), ms(1), ms(35), ms(2), ms(39)], ms(10)), 3, "unsorted");
    assert_eq!(peak_in_bucket(&[ms(100); 100], ms(10)), 100);
    assert_eq!(peak_in_bucket(&[Duration::MAX, Duration::ZERO], Duration::MAX), 1);
}

// --- herd simulation -----------------------------------------------------------

fn every_config() -> Vec<HerdConfig> {
    [HerdConfig::contention(), HerdConfig::overload()]
        .into_iter()
        .flat_map(|preset| [10, 100].map(|clients| HerdConfig { clients, ..preset }))
        .collect()
}

#[test]
fn the_same_seed_gives_the_same_report() {
    for cfg in every_config() {
        for strategy in Strategy::ALL {
            let a = simulate(&cfg, strategy).unwrap();
            let b = simulate(&cfg, strategy).unwrap();
            assert_eq!(a, b, "{} {strategy} N={}", cfg.model, cfg.clients);
        }
    }
}

#[test]
fn a_different_seed_gives_a_different_run() {
    for cfg in every_config() {
        for strategy in Strategy::ALL {
            let a = simulate(&HerdConfig { seed: 1, ..cfg }, strategy).unwrap();
            let b = simulate(&HerdConfig { seed: 2, ..cfg }, strategy).unwrap();
            // The network is random in every run, so the arrival instants differ.
            assert_ne!(a.arrivals, b.arrivals, "{} {strategy} N={}", cfg.model, cfg.clients);
        }
    }
}

#[test]
fn contention_full_jitter_does_less_work_than_no_jitter() {
    for seed in 1..=5 {
        let cfg = HerdConfig { clients: 100, seed, ..HerdConfig::contention() };
        let immediate = simulate(&cfg, Strategy::Immediate).unwrap();
        let none = simulate(&cfg, Strategy::Backoff(Jitter::None)).unwrap();
        let full = simulate(&cfg, Strategy::Backoff(Jitter::Full)).unwrap();
        assert_eq!((none.succeeded, full.succeeded, immediate.succeeded), (100, 100, 100));
        assert!(
            full.attempts < none.attempts,
            "seed {seed}: full {} vs none {}",
            full.attempts,
            none.attempts
        );
        assert!(none.attempts < immediate.attempts, "seed {seed}");
        // Without jitter the herd stays in lockstep and drains far more slowly.
        assert!(full.max_completion() < none.max_completion(), "seed {seed}");
    }
}

#[test]
fn contention_work_grows_faster_than_the_herd_without_backoff() {
    let work = |clients| {
        let cfg = HerdConfig { clients, ..HerdConfig::contention() };
        simulate(&cfg, Strategy::Immediate).unwrap().attempts
    };
    // N clients, about one winner per round: about N^2 / 2 writes, so twice
    // the herd makes about four times the work.
    let (half, full) = (work(50), work(100));
    assert!(full > 3 * half, "{full} vs {half}");
}

#[test]
fn overload_immediate_retries_peak_higher_than_full_jitter() {
    for seed in 1..=5 {
        let cfg = HerdConfig { clients: 100, seed, ..HerdConfig::overload() };
        let immediate = simulate(&cfg, Strategy::Immediate).unwrap();
        let full = simulate(&cfg, Strategy::Backoff(Jitter::Full)).unwrap();
        assert!(
            immediate.retry_peak > 2 * full.retry_peak,
            "seed {seed}: immediate {} vs full {}",
            immediate.retry_peak,
            full.retry_peak
        );
        assert!(immediate.peak_load >= full.peak_load);
        assert!(immediate.attempts > full.attempts);
    }
}

#[test]
fn overload_early_retries_burn_attempts_and_clients_give_up() {
    let cfg = HerdConfig { clients: 190, ..HerdConfig::overload() };
    let immediate = simulate(&cfg, Strategy::Immediate).unwrap();
    let full = simulate(&cfg, Strategy::Backoff(Jitter::Full)).unwrap();
    assert!(immediate.exhausted > 0);
    assert!(full.gave_up() < immediate.gave_up(), "{} vs {}", full.gave_up(), immediate.gave_up());
}

#[test]
fn without_jitter_all_first_retries_land_in_one_bucket() {
    // The story's herd: everyone fails at the same instant (an exact network).
    let cfg = HerdConfig {
        clients: 100,
        latency: Latency { mean: ms(10), sd: Duration::ZERO },
        ..HerdConfig::overload()
    };
    let none = simulate(&cfg, Strategy::Backoff(Jitter::None)).unwrap();
    let retried = none.first_retries.len();
    assert_eq!(retried, 90, "capacity 10 per tick: 90 of 100 fail the first time");
    assert_eq!(peak_in_bucket(&none.first_retries, ms(10)), retried);

    let full = simulate(&cfg, Strategy::Backoff(Jitter::Full)).unwrap();
    assert!(peak_in_bucket(&full.first_retries, ms(10)) < 50, "full jitter breaks up the herd");
}

#[test]
fn recommended_bounds_the_work_by_the_budget() {
    for cfg in every_config() {
        let r = simulate(&cfg, Strategy::Recommended).unwrap();
        // The default budget: per window, retries up to the floor plus a
        // share of the first attempts (at most one per client).
        let BudgetConfig::Ratio(ratio) = cfg.budget else { panic!("the default budget is a ratio budget") };
        let window = ratio.window.as_secs_f64();
        let per_window = f64::from(ratio.min_per_sec) * window + ratio.ratio * f64::from(cfg.clients);
        let windows = (r.end.as_secs_f64() / window).floor() + 1.0;
        let retries = r.attempts - u64::from(cfg.clients);
        assert!(retries as f64 <= windows * per_window, "{} N={}: {retries} retries", cfg.model, cfg.clients);
        assert_eq!(r.succeeded + r.exhausted + r.budget_stopped + r.breaker_stopped, r.clients);
    }
}

#[test]
fn bad_configs_are_errors() {
    let zero_clients = HerdConfig { clients: 0, ..HerdConfig::overload() };
    assert_eq!(simulate(&zero_clients, Strategy::Immediate).unwrap_err().field, "clients");
    let zero_tick =
        HerdConfig { model: Model::Overload { capacity: 10, tick: Duration::ZERO }, ..Default::default() };
    assert_eq!(simulate(&zero_tick, Strategy::Recommended).unwrap_err().field, "tick");
}

// --- A herd through the real retry loop (moved from the runtime's retry_loop.rs) ---

#[tokio::test(start_paused = true)]
async fn without_jitter_a_herd_retries_in_one_bucket_and_full_jitter_spreads_it() {
    async fn first_retries(jitter: Jitter) -> Vec<Duration> {
        let registry = stormproof::Registry::with_seed(2024);
        let policy = std::sync::Arc::new(
            // The breaker off: the herd's 100 failures at once would open
            // the operation's own, and this test is of the jitter alone.
            Policy::builder()
                .jitter(jitter)
                .max_attempts(2)
                .base(ms(100))
                .cap(ms(100))
                .breaker(stormproof::breaker::NO_BREAKER)
                .build()
                .unwrap(),
        );
        let start = tokio::time::Instant::now();
        let second_attempts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut clients = Vec::new();
        for _ in 0..100 {
            let policy = policy.clone();
            let seen = second_attempts.clone();
            let registry = registry.clone();
            clients.push(tokio::spawn(async move {
                let mut n = 0;
                registry
                    .scope(policy.run(|| {
                        n += 1;
                        let second = n == 2;
                        let seen = seen.clone();
                        async move {
                            if second {
                                seen.lock().unwrap().push(start.elapsed());
                            }
                            Err::<(), _>(std::io::Error::from(std::io::ErrorKind::TimedOut))
                        }
                    }))
                    .await
            }));
        }
        for client in clients {
            client.await.unwrap().unwrap_err();
        }
        let times = second_attempts.lock().unwrap().clone();
        assert_eq!(times.len(), 100);
        times
    }
    let peak = |times: &[Duration]| peak_in_bucket(times, ms(10));
    assert_eq!(peak(&first_retries(Jitter::None).await), 100);
    let spread = peak(&first_retries(Jitter::Full).await);
    assert!(spread < 50, "busiest bucket {spread}");
}

/// gRPC's retry throttling on a herd of 30 against a capacity of 10 (the
/// simulator's `an_empty_budget_stops_retries` herd): 20 failures at once take the
/// count from 10 to 0; the first four leave it above 5 and are retried, as
/// gRPC's `RecordFailure` would allow them.
#[test]
fn retry_throttling_stops_retries_at_half_its_tokens() {
    let cfg = HerdConfig {
        clients: 30,
        latency: Latency { mean: ms(10), sd: Duration::ZERO },
        budget: stormproof::budget::RetryThrottling { max_tokens: 10, token_ratio: 0.1 }.into(),
        breaker: stormproof::breaker::BreakerConfig { failure_threshold: 1_000, ..Default::default() },
        ..HerdConfig::overload()
    };
    let r = simulate(&cfg, Strategy::Recommended).unwrap();
    assert_eq!(r.budget_stopped, 16);
    assert_eq!(r.first_retries.len(), 4);
}

/// The simulator models slow calls (issue 44, item 1): in a brownout
/// whose attempts time out only after a second, the dependency answers
/// every attempt, ever more slowly as the herd piles on, and a breaker
/// counting failures never opens; one judging slow calls (a success slower
/// than one and a half unloaded round trips) opens once half of its window
/// is slow, though nothing failed.
#[test]
fn in_a_brownout_a_breaker_judging_slow_calls_opens_where_failures_alone_do_not() {
    let rate_mode = stormproof::breaker::BreakerConfig {
        failure_rate_percent: Some(50),
        minimum_calls: 20,
        window_calls: Some(50),
        ..Default::default()
    };
    let judging_slow = stormproof::breaker::BreakerConfig {
        slow_call_duration: Some(ms(60)),
        slow_call_rate_percent: Some(50),
        ..rate_mode
    };
    let model = Model::Brownout { capacity: 10, service_time: ms(20), timeout: ms(1_000) };
    let config = |breaker| HerdConfig { breaker, model, ..HerdConfig::brownout() };
    let run = |breaker| simulate(&config(breaker), Strategy::Recommended).unwrap();
    let (failures_alone, slow_too) = (run(rate_mode), run(judging_slow));
    assert_eq!((failures_alone.succeeded, slow_too.succeeded), (100, 100), "nothing failed");
    assert_eq!((failures_alone.breaker_trips, slow_too.breaker_trips), (0, 1));
}

/// `clients` arriving over two seconds, spread over ten tenants (client
/// `i` calls tenant `i % 10`), the first three of which are down, against a
/// dependency with room for all, each client making at most 4 attempts:
/// the setting of the tests of guards per key below.
fn ten_tenants_three_down(clients: u32) -> HerdConfig {
    HerdConfig {
        clients,
        arrivals: Duration::from_secs(2),
        keys: 10,
        keys_down: 3,
        model: Model::Overload { capacity: 1_000, tick: Duration::from_millis(10) },
        max_attempts: 4,
        ..HerdConfig::overload()
    }
}

/// A breaker per key in the simulator (issue 44, item 3): 200 clients
/// arrive over two seconds, spread over ten tenants, and three tenants'
/// shards are down. One breaker shared by every client is opened by their
/// failures (three calls in ten fail: over its 25 %) and cuts the other
/// seven off while it is open; a breaker per tenant opens for the three
/// that are down and for no other.
#[test]
fn a_breaker_per_key_cuts_off_the_tenants_that_are_down_and_no_other() {
    let breaker =
        BreakerConfig { failure_rate_percent: Some(25), minimum_calls: 10, ..BreakerConfig::default() };
    let cfg = HerdConfig { breaker, ..ten_tenants_three_down(200) };
    let shared = simulate(&cfg, Strategy::Recommended).unwrap();
    let per_key = simulate(&HerdConfig { breaker_per_key: true, ..cfg }, Strategy::Recommended).unwrap();
    let up = 140;
    assert_eq!(per_key.succeeded, up, "every tenant that is up: {per_key:?}");
    // The shared breaker cuts the tenants that are up off too (the numbers
    // docs/simulation.md quotes: the run is deterministic).
    assert_eq!(shared.succeeded, 7, "{shared:?}");
    // The 60 clients of the tenants that are down: fewer attempts than
    // clients reach the dependency, their breakers open after a few.
    assert_eq!(per_key.attempts - u64::from(up), 35, "{per_key:?}");
}

/// A bulkhead per key in the simulator (issue 44, item 3): 1,000 clients
/// arrive over two seconds, spread over ten tenants, and three tenants'
/// shards are down, under `Strategy::Adaptive` (its adaptive bulkhead, a
/// client waiting at most 100 ms for a place). The down tenants' failures
/// are overload to an adaptive limit: one bulkhead shared by every client
/// shrinks to a single place, and the tenants that are up wait for it and
/// give up; a bulkhead per tenant shrinks for the three that are down and
/// for no other, and every call of the seven that are up succeeds.
#[test]
fn a_bulkhead_per_key_keeps_the_tenants_that_are_up_out_of_the_others_collapse() {
    let mut cfg = ten_tenants_three_down(1_000);
    cfg.bulkhead.max_wait = Some(Duration::from_millis(100));
    let shared = simulate(&cfg, Strategy::Adaptive).unwrap();
    let per_key = simulate(&HerdConfig { bulkhead_per_key: true, ..cfg }, Strategy::Adaptive).unwrap();
    assert_eq!(per_key.succeeded, 700, "every call of a tenant that is up: {per_key:?}");
    // The numbers docs/simulation.md quotes (the run is deterministic).
    assert_eq!((shared.succeeded, shared.bulkhead_stopped), (249, 746), "{shared:?}");
    assert_eq!(shared.limits.last().map(|&(_, limit)| limit), Some(1), "the shared limit collapsed");
    assert_eq!(per_key.bulkhead_stopped, 166, "refused: calls of the tenants that are down only");
    // With no tenant down, both serve every call.
    let healthy = HerdConfig { keys_down: 0, ..cfg };
    for bulkhead_per_key in [false, true] {
        let run = simulate(&HerdConfig { bulkhead_per_key, ..healthy }, Strategy::Adaptive).unwrap();
        assert_eq!(run.succeeded, 1_000, "per key: {bulkhead_per_key}");
    }
}

/// A rate limit per key in the simulator (issue 44, item 3): 1,000 clients
/// arrive over two seconds (500 a second), spread over ten tenants, and
/// three tenants' shards are down; every attempt may wait 20 ms for its
/// turn. The budget lets every retry through and the bulkhead is wide and
/// fixed, so that only the rate limit holds the retries back. One limit of
/// 600 a second shared by every client is spent by the retries of the
/// tenants that are down, and calls of the tenants that are up are
/// refused; ten limits of 60 a second, one per tenant (the same quota in
/// all), refuse the retries of the three and no call of the seven.
#[test]
fn a_rate_limit_per_key_keeps_the_retries_of_the_tenants_that_are_down_off_the_others_quota() {
    use stormproof::bulkhead::BulkheadConfig;
    use stormproof::rate_limit::RateLimitConfig;
    let quota = |per_second, burst| RateLimitConfig {
        per_second,
        burst,
        max_wait: Some(ms(20)),
        ..Default::default()
    };
    let cfg = HerdConfig {
        budget: stormproof::budget::RatioBudget { ratio: 1.0, min_per_sec: 1_000, ..Default::default() }
            .into(),
        bulkhead: BulkheadConfig { max_concurrent: 1_000, adaptive: None, ..Default::default() },
        rate_limit: Some(quota(600, 10)),
        ..ten_tenants_three_down(1_000)
    };
    let shared = simulate(&cfg, Strategy::Adaptive).unwrap();
    let per_key = simulate(
        &HerdConfig { rate_limit: Some(quota(60, 1)), rate_limit_per_key: true, ..cfg },
        Strategy::Adaptive,
    )
    .unwrap();
    assert_eq!(per_key.succeeded, 700, "every call of a tenant that is up: {per_key:?}");
    // The numbers docs/simulation.md quotes (the run is deterministic).
    assert_eq!((shared.succeeded, shared.rate_limited), (606, 317), "{shared:?}");
    assert_eq!(per_key.rate_limited, 270, "refused: calls of the tenants that are down only");
    // With no tenant down, both serve every call, none waiting too long.
    let healthy = HerdConfig { keys_down: 0, ..cfg };
    for (rate_limit, rate_limit_per_key) in [(quota(600, 10), false), (quota(60, 1), true)] {
        let config = HerdConfig { rate_limit: Some(rate_limit), rate_limit_per_key, ..healthy };
        let run = simulate(&config, Strategy::Adaptive).unwrap();
        assert_eq!((run.succeeded, run.rate_limited), (1_000, 0), "per key: {rate_limit_per_key}");
    }
}

/// The backoff's growth factor in the simulator (issue 44, item 7): one
/// client of a dependency that is down, network legs of exactly 10 ms, no
/// jitter. Each attempt leaves as the wait before it ends, one leg before
/// it arrives; the waits grow by the factor, exactly: 100, 150, 225 and
/// 337.5 ms at 1.5, against 100, 200, 400 and 800 ms by default.
#[test]
fn the_simulated_waits_grow_by_the_configured_factor() {
    let cfg = HerdConfig {
        clients: 1,
        keys_down: 1,
        max_attempts: 5,
        latency: Latency { mean: ms(10), sd: Duration::ZERO },
        ..HerdConfig::overload()
    };
    let arrivals = |factor_milli| {
        simulate(&HerdConfig { factor_milli, ..cfg }, Strategy::Backoff(Jitter::None)).unwrap().arrivals
    };
    let at = |micros: u64| Duration::from_micros(micros);
    assert_eq!(arrivals(1_500), [ms(10), ms(130), ms(300), ms(545), at(902_500)]);
    assert_eq!(arrivals(2_000), [ms(10), ms(130), ms(350), ms(770), ms(1_590)]);
    assert_eq!(cfg.factor_milli, 2_000, "doubling by default");
    let error =
        simulate(&HerdConfig { factor_milli: 999, ..cfg }, Strategy::Backoff(Jitter::None)).unwrap_err();
    assert_eq!(error.field, "factor_milli");
}

/// Retry cost by class in the simulator (issue 44, item 4): 190 clients of
/// a dependency in a brownout, whose attempts time out after 100 ms, under
/// the recommended strategy with a breaker that stays closed and a token
/// bucket of 100 tokens, 5 a retry: it pays 20 retries. A timeout costing
/// 10 halves that, as every retry here follows an attempt's own timeout,
/// which the simulator tells the budget as the retry loop does. Against an
/// overloaded dependency, which refuses at once and never times out, the
/// timeout's cost changes nothing.
#[test]
fn a_retry_after_a_timeout_costs_the_token_buckets_timeout_cost() {
    use stormproof::budget::TokenBucket;
    let bucket =
        |timeout_cost| TokenBucket { capacity: 100, retry_cost: 5, timeout_cost, ..Default::default() };
    let run = |timeout_cost, model: HerdConfig| {
        let cfg = HerdConfig {
            clients: 190,
            budget: bucket(timeout_cost).into(),
            breaker: BreakerConfig { failure_threshold: 10_000, ..BreakerConfig::default() },
            ..model
        };
        simulate(&cfg, Strategy::Recommended).unwrap()
    };
    let (same, dearer) = (run(None, HerdConfig::brownout()), run(Some(10), HerdConfig::brownout()));
    assert_eq!((same.attempts, same.budget_stopped), (190 + 20, 150), "{same:?}");
    assert_eq!((dearer.attempts, dearer.budget_stopped), (190 + 10, 150), "{dearer:?}");
    assert_eq!(
        run(None, HerdConfig::overload()),
        run(Some(10), HerdConfig::overload()),
        "no timeout, no difference"
    );
}
