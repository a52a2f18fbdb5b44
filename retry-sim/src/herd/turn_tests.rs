//! The rate limit on virtual time: turns at the rate, waits bounded by
//! `max_wait` and the deadline, sheddable calls never waiting.

use std::time::Duration;

use super::*;
use stormproof_runtime::bulkhead::BulkheadConfig;
use stormproof_runtime::rate_limit::RateLimitConfig;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Four clients at time zero, network legs of exactly 10 ms, a dependency
/// and a bulkhead that refuse nothing, and a rate limit of ten a second
/// with no burst, under which an attempt may wait `max_wait` for its turn.
fn four_at_once(max_wait: Option<Duration>) -> HerdConfig {
    HerdConfig {
        clients: 4,
        latency: Latency { mean: ms(10), sd: Duration::ZERO },
        model: Model::Overload { capacity: 1_000, tick: ms(10) },
        bulkhead: BulkheadConfig { max_concurrent: 100, adaptive: None, ..Default::default() },
        rate_limit: Some(RateLimitConfig { per_second: 10, burst: 1, max_wait, ..Default::default() }),
        ..HerdConfig::overload()
    }
}

#[test]
fn attempts_that_wait_for_their_turn_go_at_the_rate() {
    let r = simulate(&four_at_once(Some(ms(1_000))), Strategy::Adaptive).unwrap();
    // Turns at 0, 100, 200 and 300 ms; each attempt arrives one leg later.
    assert_eq!(r.arrivals, [ms(10), ms(110), ms(210), ms(310)]);
    assert_eq!((r.succeeded, r.rate_limited, r.attempts), (4, 0, 4));
}

#[test]
fn an_attempt_whose_turn_is_further_than_max_wait_is_refused_at_once() {
    let r = simulate(&four_at_once(Some(ms(150))), Strategy::Adaptive).unwrap();
    assert_eq!((r.succeeded, r.rate_limited, r.attempts), (2, 2, 2), "turns 200 and 300 ms away: refused");
    let r = simulate(&four_at_once(None), Strategy::Adaptive).unwrap();
    assert_eq!((r.succeeded, r.rate_limited), (1, 3), "no max_wait: no wait");
    assert_eq!(r.end, ms(20), "the refused end at once");
}

#[test]
fn a_sheddable_call_never_waits_for_a_turn() {
    let sheddable = HerdConfig {
        priorities: PriorityMix { critical: 0, sheddable: 100 },
        ..four_at_once(Some(ms(1_000)))
    };
    let r = simulate(&sheddable, Strategy::Adaptive).unwrap();
    assert_eq!((r.succeeded, r.rate_limited), (1, 3));
}

#[test]
fn a_turn_at_or_past_the_deadline_ends_the_call_as_the_deadline_does() {
    let cfg = HerdConfig { deadline: Some(ms(250)), ..four_at_once(Some(ms(1_000))) };
    let r = simulate(&cfg, Strategy::Adaptive).unwrap();
    // The third client's turn (200 ms) is before it, its reply (220 ms) too.
    assert_eq!((r.succeeded, r.deadline_stopped, r.rate_limited), (3, 1, 0));
}

#[test]
fn a_rate_limit_the_library_would_refuse_is_an_error_naming_it() {
    let cfg = HerdConfig {
        rate_limit: Some(RateLimitConfig { per_second: 0, ..Default::default() }),
        ..four_at_once(None)
    };
    let error = simulate(&cfg, Strategy::Adaptive).unwrap_err();
    assert_eq!(error.field, "rate_limit");
    assert!(error.to_string().contains("per_second"), "{error}");
}

#[test]
fn the_furthest_instants_and_waits_do_not_panic_and_every_client_is_counted() {
    let cfg = HerdConfig {
        clients: 3,
        max_attempts: 200,
        arrivals: Duration::MAX,
        base: Duration::MAX,
        cap: Duration::MAX,
        latency: Latency { mean: Duration::MAX, sd: Duration::MAX },
        deadline: Some(Duration::MAX),
        rate_limit: Some(RateLimitConfig {
            per_second: 1,
            burst: 1,
            max_wait: Some(Duration::MAX),
            ..Default::default()
        }),
        ..HerdConfig::overload()
    };
    for rate_limit_per_key in [false, true] {
        for strategy in Strategy::ALL {
            let r = simulate(&HerdConfig { rate_limit_per_key, ..cfg }, strategy).unwrap();
            assert_eq!(super::tests::accounted(&r), 3, "{strategy}");
        }
    }
}
