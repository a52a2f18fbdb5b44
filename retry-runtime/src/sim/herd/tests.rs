use std::time::Duration;

use super::*;
use crate::backoff::Jitter;
use crate::breaker::BreakerConfig;
use crate::budget::TokenBucket;
use engine::nanos;

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
    ];
    for (cfg, field) in cases {
        for strategy in Strategy::ALL {
            assert_eq!(simulate(&cfg, strategy).unwrap_err().field, field);
        }
    }
}

#[test]
fn extreme_settings_do_not_panic() {
    let cfg = HerdConfig {
        clients: 3,
        max_attempts: 200,
        base: Duration::MAX,
        cap: Duration::MAX,
        latency: Latency { mean: Duration::MAX, sd: Duration::MAX },
        model: Model::Overload { capacity: 1, tick: Duration::from_nanos(1) },
        bucket: Duration::from_nanos(1),
        ..Default::default()
    };
    for strategy in Strategy::ALL {
        let r = simulate(&cfg, strategy).unwrap();
        assert_eq!(r.succeeded + r.exhausted + r.budget_stopped + r.breaker_stopped, 3);
        assert!(r.load_by_bucket().len() <= r.arrivals.len());
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
