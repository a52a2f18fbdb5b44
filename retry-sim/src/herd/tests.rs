use std::time::Duration;

use super::*;
use report::nanos;
use stormproof_runtime::Jitter;
use stormproof_runtime::breaker::BreakerConfig;
use stormproof_runtime::budget::TokenBucket;
use stormproof_runtime::bulkhead::{AdaptiveLimit, BulkheadConfig};
use stormproof_runtime::throttle::ThrottleConfig;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn exact_network() -> Latency {
    Latency { mean: ms(10), sd: Duration::ZERO }
}

#[test]
fn one_client_writes_once_after_four_legs() {
    let cfg = HerdConfig { clients: 1, latency: exact_network(), ..HerdConfig::contention() };
    for strategy in Strategy::ALL {
        let r = simulate(&cfg, strategy).unwrap();
        assert_eq!((r.attempts, r.succeeded, r.gave_up()), (1, 1, 0), "{strategy}");
        assert_eq!(r.arrivals, [ms(30)], "read out, read back, write out");
        assert_eq!(r.completions, [ms(40)]);
        assert_eq!(r.end, ms(40));
    }
}

#[test]
fn contention_without_backoff_takes_about_n_rounds() {
    // With an exact network every client reads version 0 together: one
    // write wins per round, so N clients make N + (N-1) + ... + 1 writes.
    let cfg = HerdConfig { clients: 10, latency: exact_network(), ..HerdConfig::contention() };
    let r = simulate(&cfg, Strategy::Immediate).unwrap();
    assert_eq!(r.attempts, 55);
    assert_eq!(r.succeeded, 10);
    assert_eq!(r.max_completion(), Some(ms(400)), "ten rounds of four legs");
    assert_eq!(r.peak_load, 10);
}

#[test]
fn the_study_starts_waiting_at_index_one() {
    let cfg = HerdConfig { clients: 2, latency: exact_network(), base: ms(5), ..HerdConfig::contention() };
    let r = simulate(&cfg, Strategy::Backoff(Jitter::None)).unwrap();
    // Both write at 30 ms; the loser hears at 40, waits exp(1) = 10 ms,
    // reads (60), writes at 80.
    assert_eq!(r.arrivals, [ms(30), ms(30), ms(80)]);
    assert_eq!(r.first_retries, [ms(80)]);
    let library = HerdConfig { first_wait_index: 0, ..cfg };
    let r = simulate(&library, Strategy::Backoff(Jitter::None)).unwrap();
    assert_eq!(r.first_retries, [ms(75)]);
}

#[test]
fn overload_serves_capacity_per_tick_and_bounds_attempts() {
    let cfg = HerdConfig { clients: 25, latency: exact_network(), max_attempts: 2, ..HerdConfig::overload() };
    let r = simulate(&cfg, Strategy::Backoff(Jitter::None)).unwrap();
    // 25 arrive at 10 ms: 10 served. 15 retry after 100 ms: 10 served, 5 give up.
    assert_eq!((r.succeeded, r.exhausted), (20, 5));
    assert_eq!(r.attempts, 40);
    assert_eq!(r.first_retries, [ms(130); 15]);
    assert_eq!(r.peak_load, 25);
    assert_eq!(r.retry_peak, 15);
    assert_eq!(r.retry_arrivals, r.first_retries);
    assert_eq!(r.p50(), Some(ms(20)));
    assert_eq!(r.max_completion(), Some(ms(140)));
}

#[test]
fn the_breaker_fails_fast_and_stops_retries() {
    let cfg = HerdConfig {
        clients: 40,
        latency: exact_network(),
        breaker: BreakerConfig { failure_threshold: 5, ..Default::default() },
        ..HerdConfig::overload()
    };
    let r = simulate(&cfg, Strategy::Recommended).unwrap();
    assert_eq!(r.breaker_trips, 1);
    assert_eq!(r.succeeded, 10);
    // All 40 were admitted while closed; the 30 failures see an open breaker.
    assert_eq!(r.breaker_stopped, 30);
    assert_eq!(r.attempts, 40, "no retry reached the dependency");
    assert_eq!(r.succeeded + r.exhausted + r.budget_stopped + r.breaker_stopped, r.clients);
}

#[test]
fn an_empty_budget_stops_retries() {
    let cfg = HerdConfig {
        clients: 30,
        latency: exact_network(),
        budget: TokenBucket { capacity: 4, ..Default::default() }.into(),
        breaker: BreakerConfig { failure_threshold: 1_000, ..Default::default() },
        ..HerdConfig::overload()
    };
    let r = simulate(&cfg, Strategy::Recommended).unwrap();
    // 10 succeed at once (refilling nothing: the bucket is full); 20 fail,
    // 4 of them get a token.
    assert_eq!(r.budget_stopped, 16);
    assert_eq!(r.first_retries.len(), 4);
}

#[test]
fn bad_configs_are_errors_not_panics() {
    let cases = [
        (HerdConfig { clients: 0, ..Default::default() }, "clients"),
        (HerdConfig { max_attempts: 0, ..Default::default() }, "max_attempts"),
        (HerdConfig { base: ms(10), cap: ms(5), ..Default::default() }, "base"),
        (HerdConfig { bucket: Duration::ZERO, ..Default::default() }, "bucket"),
        (
            HerdConfig { model: Model::Overload { capacity: 0, tick: ms(10) }, ..Default::default() },
            "capacity",
        ),
        (
            HerdConfig { model: Model::Overload { capacity: 1, tick: Duration::ZERO }, ..Default::default() },
            "tick",
        ),
        (
            HerdConfig {
                budget: TokenBucket { capacity: 0, ..Default::default() }.into(),
                ..Default::default()
            },
            "budget",
        ),
        (
            HerdConfig {
                breaker: BreakerConfig { failure_threshold: 0, ..Default::default() },
                ..Default::default()
            },
            "breaker",
        ),
        (brownout(0, ms(20), ms(100)), "capacity"),
        (brownout(10, Duration::ZERO, ms(100)), "service_time"),
        (brownout(10, ms(20), Duration::ZERO), "timeout"),
        (
            HerdConfig {
                throttle: Some(ThrottleConfig { k: 0.5, ..Default::default() }),
                ..Default::default()
            },
            "throttle",
        ),
        (
            HerdConfig {
                bulkhead: BulkheadConfig { max_concurrent: 0, ..Default::default() },
                ..Default::default()
            },
            "bulkhead",
        ),
        (
            HerdConfig {
                bulkhead: BulkheadConfig {
                    max_concurrent: 4,
                    adaptive: Some(AdaptiveLimit::aimd(5)),
                    ..Default::default()
                },
                ..Default::default()
            },
            "bulkhead",
        ),
    ];
    for (cfg, field) in cases {
        for strategy in Strategy::ALL {
            assert_eq!(simulate(&cfg, strategy).unwrap_err().field, field);
        }
    }
}

/// Every client ends one way: success, or one of the reasons to stop.
pub(super) fn accounted(r: &HerdReport) -> u32 {
    r.succeeded
        + r.exhausted
        + r.budget_stopped
        + r.breaker_stopped
        + r.deadline_stopped
        + r.throttled
        + r.bulkhead_stopped
        + r.rate_limited
}

#[test]
fn extreme_settings_do_not_panic() {
    let nano = Duration::from_nanos(1);
    let models = [
        Model::Overload { capacity: 1, tick: nano },
        Model::Brownout { capacity: 1, service_time: Duration::MAX, timeout: Duration::MAX },
        Model::Brownout { capacity: u32::MAX, service_time: nano, timeout: nano },
    ];
    for model in models {
        let cfg = HerdConfig {
            clients: 3,
            max_attempts: 200,
            base: Duration::MAX,
            cap: Duration::MAX,
            latency: Latency { mean: Duration::MAX, sd: Duration::MAX },
            model,
            bucket: nano,
            throttle: Some(ThrottleConfig::default()),
            bulkhead: BulkheadConfig {
                max_concurrent: 1,
                max_wait: Some(Duration::MAX),
                ..Default::default()
            },
            ..Default::default()
        };
        for strategy in Strategy::ALL {
            let r = simulate(&cfg, strategy).unwrap();
            assert_eq!(accounted(&r), 3, "{model} {strategy}");
            assert!(r.load_by_bucket().len() <= r.arrivals.len());
        }
    }
}

#[test]
fn percentiles_are_nearest_rank() {
    let mut r = simulate(&HerdConfig { clients: 1, ..Default::default() }, Strategy::Immediate).unwrap();
    r.completions = (1..=100).map(ms).collect();
    assert_eq!(r.p50(), Some(ms(50)));
    assert_eq!(r.p99(), Some(ms(99)));
    assert_eq!(r.percentile(0.0), Some(ms(1)));
    assert_eq!(r.percentile(2.0), Some(ms(100)));
    assert_eq!(r.percentile(f64::NAN), Some(ms(1)));
    r.completions.clear();
    assert_eq!(r.p50(), None);
}

#[test]
fn load_is_counted_per_busy_bucket() {
    let mut r = simulate(&HerdConfig { clients: 1, ..Default::default() }, Strategy::Immediate).unwrap();
    r.arrivals = vec![ms(1), ms(5), ms(25), Duration::MAX];
    let max_bucket = Duration::MAX.as_nanos() / ms(10).as_nanos() * ms(10).as_nanos();
    assert_eq!(r.load_by_bucket(), [(ms(0), 2), (ms(20), 1), (nanos(max_bucket), 1)]);
}

#[test]
fn the_deadline_rule_holds_in_the_simulator_too() {
    // The library's own decision: no wait that would end at or past the
    // deadline, and a reply after it is too late. Without a deadline the
    // same herd finishes later than 100 ms.
    let deadline = ms(100);
    // Legs of exactly 10 ms, so an attempt arrives 10 ms after it starts.
    let base = HerdConfig { clients: 100, seed: 3, latency: exact_network(), ..HerdConfig::overload() };
    let unbounded = simulate(&base, Strategy::Backoff(Jitter::Full)).unwrap();
    assert!(unbounded.end > deadline, "the herd needs longer than the deadline: {:?}", unbounded.end);
    let bounded =
        simulate(&HerdConfig { deadline: Some(deadline), ..base }, Strategy::Backoff(Jitter::Full)).unwrap();
    assert!(bounded.deadline_stopped > 0);
    assert!(bounded.completions.iter().all(|&at| at <= deadline), "{:?}", bounded.completions);
    let leg = ms(10);
    assert!(
        bounded.arrivals.iter().all(|&at| at < deadline + leg),
        "no attempt starts at or after the deadline"
    );
    assert_eq!(bounded.succeeded + bounded.exhausted + bounded.deadline_stopped, bounded.clients);
}

fn brownout(capacity: u32, service_time: Duration, timeout: Duration) -> HerdConfig {
    HerdConfig { model: Model::Brownout { capacity, service_time, timeout }, ..HerdConfig::brownout() }
}

#[test]
fn brownout_latency_grows_with_the_load_each_request_finds() {
    // Five requests arrive together at a dependency that runs two at full
    // speed: the n-th takes 20 ms * max(1, n / 2).
    let cfg = HerdConfig { clients: 5, latency: exact_network(), ..brownout(2, ms(20), ms(1000)) };
    let r = simulate(&cfg, Strategy::Backoff(Jitter::None)).unwrap();
    assert_eq!(r.arrivals, [ms(10); 5]);
    assert_eq!(r.completions, [ms(40), ms(40), ms(50), ms(60), ms(70)], "10 + 20/20/30/40/50 + 10");
    assert_eq!((r.attempts, r.succeeded), (5, 5));
}

#[test]
fn brownout_timeouts_fail_attempts_but_the_dependency_finishes_their_work() {
    // One worker, 20 ms a request, attempts time out after 50 ms. Three
    // arrive at 10 ms and take 20, 40 and 60 ms: the first answers at 40,
    // the other two time out at 50 and retry 1 ms later (arriving at 61).
    // The third's work still runs until 70, so the first retry finds two
    // requests in service (40 ms, answer at 111, past its timeout at 101)
    // and the second finds three. Had the work been dropped at the
    // timeout, the first retry would have taken 20 ms and succeeded.
    let cfg = HerdConfig {
        clients: 3,
        max_attempts: 2,
        base: ms(1),
        latency: exact_network(),
        ..brownout(1, ms(20), ms(50))
    };
    let r = simulate(&cfg, Strategy::Backoff(Jitter::None)).unwrap();
    assert_eq!(r.arrivals, [ms(10), ms(10), ms(10), ms(61), ms(61)]);
    assert_eq!(r.completions, [ms(40)]);
    assert_eq!((r.succeeded, r.exhausted), (1, 2));
    assert_eq!(
        r.end,
        ms(101),
        "both retries time out 50 ms after they left; their late replies do not count"
    );
}

/// A bulkhead of `max` permits with no adaptive limit.
fn fixed_bulkhead(max: u32, max_wait: Option<Duration>) -> BulkheadConfig {
    BulkheadConfig { max_concurrent: max, max_wait, adaptive: None, ..Default::default() }
}

/// A dependency that never refuses (a tick far larger than the herd).
fn roomy() -> HerdConfig {
    HerdConfig {
        latency: exact_network(),
        model: Model::Overload { capacity: 1_000, tick: ms(10) },
        ..HerdConfig::overload()
    }
}

#[test]
fn the_bulkhead_holds_attempts_in_flight_to_its_limit_and_waiting_costs_no_attempt() {
    let cfg = HerdConfig { clients: 7, bulkhead: fixed_bulkhead(3, None), ..roomy() };
    let r = simulate(&cfg, Strategy::Adaptive).unwrap();
    // Three at a time, each attempt 20 ms; the next three start as the
    // first three reply, first come, first served.
    assert_eq!(r.arrivals, [ms(10), ms(10), ms(10), ms(30), ms(30), ms(30), ms(50)]);
    assert_eq!(r.completions, [ms(20), ms(20), ms(20), ms(40), ms(40), ms(40), ms(60)]);
    assert_eq!(r.attempts, 7, "one attempt per client: waiting for a permit is not an attempt");
    assert_eq!(r.limits, [(Duration::ZERO, 3)], "a fixed limit never moves");
}

#[test]
fn a_client_gives_up_after_max_wait_for_a_permit_or_at_its_deadline() {
    let cfg = HerdConfig { clients: 3, bulkhead: fixed_bulkhead(1, Some(ms(15))), ..roomy() };
    let r = simulate(&cfg, Strategy::Adaptive).unwrap();
    assert_eq!((r.succeeded, r.bulkhead_stopped, r.attempts), (1, 2, 1));
    assert_eq!(r.end, ms(20));

    // The deadline comes first (or at the same instant): it is the reason.
    for max_wait in [None, Some(ms(25)), Some(ms(30))] {
        let cfg = HerdConfig {
            clients: 3,
            deadline: Some(ms(25)),
            bulkhead: fixed_bulkhead(1, max_wait),
            ..roomy()
        };
        let r = simulate(&cfg, Strategy::Adaptive).unwrap();
        // The second client gets the permit at 20 ms and is cut by the
        // deadline; the third is still waiting when it passes.
        assert_eq!((r.succeeded, r.deadline_stopped, r.bulkhead_stopped), (1, 2, 0), "{max_wait:?}");
    }
}

#[test]
fn the_adaptive_limit_moves_with_the_answers_as_the_library_core_moves_it() {
    // Four attempts against one place per tick: one success, three
    // overload answers, all at 20 ms. The core hears them in that order
    // with four in flight: +1/4 (4.25), then x0.5 three times (2, 1, 1).
    let cfg = HerdConfig {
        clients: 4,
        max_attempts: 1,
        latency: exact_network(),
        model: Model::Overload { capacity: 1, tick: ms(10) },
        bulkhead: BulkheadConfig {
            max_concurrent: 4,
            max_wait: None,
            adaptive: Some(AdaptiveLimit::aimd(1).backoff_ratio(0.5)),
            ..Default::default()
        },
        ..HerdConfig::overload()
    };
    let r = simulate(&cfg, Strategy::Adaptive).unwrap();
    assert_eq!(r.limits, [(Duration::ZERO, 4), (ms(20), 2), (ms(20), 1)]);
    assert_eq!((r.succeeded, r.exhausted), (1, 3));
}

#[test]
fn conflicts_shrink_the_limit_to_the_few_writers_a_row_serves() {
    let cfg = HerdConfig { clients: 100, seed: 7, ..HerdConfig::contention() };
    let r = simulate(&cfg, Strategy::Adaptive).unwrap();
    let lowest = r.limits.iter().map(|&(_, limit)| limit).min();
    assert_eq!(r.limits.first(), Some(&(Duration::ZERO, 20)));
    assert!(
        lowest <= Some(2),
        "conflicts are overload signals: {:?}",
        r.limits.iter().take(10).collect::<Vec<_>>()
    );
}

#[test]
fn the_sre_throttle_refuses_nothing_of_a_cold_herd_the_limit_keeps_answered() {
    for preset in [HerdConfig::contention(), HerdConfig::overload(), HerdConfig::brownout()] {
        let cfg = HerdConfig { clients: 100, ..preset };
        let without = simulate(&cfg, Strategy::Adaptive).unwrap();
        assert_eq!(without.throttled, 0, "off by default");
        let with = HerdConfig { throttle: Some(ThrottleConfig::default()), ..cfg };
        let r = simulate(&with, Strategy::Adaptive).unwrap();
        // Requests count once answered: 100 clients starting together are
        // not refused before the first answers, and the answers that come
        // back (successes, conflicts, a share of refusals) keep it open.
        assert_eq!(r.throttled, 0, "{}", cfg.model);
        assert_eq!((r.succeeded, r.attempts), (without.succeeded, without.attempts), "{}", cfg.model);
        assert_eq!(accounted(&r), 100);
    }
}
