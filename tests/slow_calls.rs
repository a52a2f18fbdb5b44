//! Slow calls open the breaker (issue 44, item 1; resilience4j's
//! `slowCallDurationThreshold` and `slowCallRateThreshold`): an attempt
//! that succeeds but takes at least `slow_call_duration` counts as slow,
//! and the breaker opens when the slow calls reach `slow_call_rate_percent`
//! of its window (once `minimum_calls` ended there), whether or not any
//! failed. A slow half-open probe reopens it. A breaker that judges no slow
//! calls never reads the clock for them. The cases follow resilience4j's
//! own tests of the slow-call rate (`CircuitBreakerStateMachineTest`:
//! "should open when slow call rate is above threshold", "should not open
//! below the minimum number of calls", "a slow call in half-open counts").
//! On tokio's paused clock, each test in its own registry.

use std::time::Duration;

use stormproof::breaker::{BreakerConfig, BreakerState};
use stormproof::{Error, Policy, Registry, Rejection, registry};

type Result<T> = std::result::Result<T, Error<std::io::Error>>;

const SLOW: Duration = Duration::from_secs(2);

/// A breaker judging the last 10 calls: open at half of them slow (or failed).
fn judging_slow_calls() -> BreakerConfig {
    BreakerConfig {
        failure_rate_percent: Some(50),
        window_calls: Some(10),
        minimum_calls: 10,
        slow_call_duration: Some(SLOW),
        slow_call_rate_percent: Some(50),
        open_for: Duration::from_secs(5),
        success_threshold: 1,
        ..BreakerConfig::default()
    }
}

/// A registry whose breaker `search` judges slow calls, and a policy of it.
fn judged() -> (Registry, Policy) {
    let registry = Registry::new();
    registry.declare_breaker("search", judging_slow_calls()).unwrap();
    (registry, policy())
}

fn policy() -> Policy {
    Policy::builder()
        .name("slow_calls::answer")
        .max_attempts(1)
        .breaker("search")
        .budget("none")
        .build()
        .unwrap()
}

/// One call whose attempt answers after `took`: `Ok`, or the rejection
/// that refused it.
async fn call_taking(policy: &Policy, took: Duration) -> std::result::Result<(), Option<Rejection>> {
    let result: Result<()> = policy
        .run(|| async move {
            tokio::time::sleep(took).await;
            Ok(())
        })
        .await;
    result.map_err(|error| error.rejection().cloned())
}

#[tokio::test(start_paused = true)]
async fn successes_slower_than_the_threshold_open_the_breaker_once_the_window_holds_enough() {
    let (registry, policy) = judged();
    registry
        .scope(async {
            // Nine of ten: below `minimum_calls`, not judged yet; each as
            // long as the threshold (at least: slow; tests/metrics.rs
            // tells 99 ms from 100 ms).
            for _ in 0..9 {
                assert_eq!(call_taking(&policy, SLOW).await, Ok(()));
            }
            let breaker = registry.breaker("search").unwrap();
            assert_eq!(breaker.state(), BreakerState::Closed, "nine calls are fewer than minimum_calls");
            assert_eq!(breaker.totals().slow_calls, 9);
            // The tenth completes the window: every call succeeded, all slow.
            assert_eq!(call_taking(&policy, SLOW).await, Ok(()));
            assert_eq!(breaker.state(), BreakerState::Open);
            assert_eq!((breaker.totals().failures, breaker.totals().slow_calls), (0, 10));
            let refused = call_taking(&policy, Duration::ZERO).await;
            assert!(matches!(refused, Err(Some(Rejection::CircuitOpen { .. }))), "{refused:?}");
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn calls_faster_than_the_threshold_and_a_slow_share_below_the_rate_leave_it_closed() {
    let (registry, policy) = judged();
    registry
        .scope(async {
            let just_under = SLOW - Duration::from_millis(1);
            for _ in 0..50 {
                assert_eq!(call_taking(&policy, just_under).await, Ok(()));
            }
            let breaker = registry.breaker("search").unwrap();
            assert_eq!((breaker.state(), breaker.totals().slow_calls), (BreakerState::Closed, 0));
            // Four slow calls in every ten: 40 %, under the 50 % rate.
            for i in 0..50 {
                let took = if i % 10 < 4 { SLOW } else { Duration::ZERO };
                assert_eq!(call_taking(&policy, took).await, Ok(()));
            }
            assert_eq!((breaker.state(), breaker.totals().slow_calls), (BreakerState::Closed, 20));
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn a_slow_probe_reopens_the_breaker_and_a_fast_one_closes_it() {
    let (registry, policy) = judged();
    registry
        .scope(async {
            for _ in 0..10 {
                assert_eq!(call_taking(&policy, SLOW).await, Ok(()));
            }
            let breaker = registry.breaker("search").unwrap();
            assert_eq!(breaker.state(), BreakerState::Open);
            tokio::time::advance(Duration::from_secs(5)).await;
            assert_eq!(breaker.state(), BreakerState::HalfOpen);
            // The probe succeeds, slowly: the dependency is not back yet.
            assert_eq!(call_taking(&policy, SLOW * 3).await, Ok(()));
            assert_eq!(breaker.state(), BreakerState::Open);
            assert_eq!(breaker.totals().probe_failures, 1);
            // The next open period is twice as long (a failed probe).
            tokio::time::advance(Duration::from_secs(10)).await;
            assert_eq!(call_taking(&policy, Duration::from_millis(10)).await, Ok(()));
            assert_eq!(
                breaker.state(),
                BreakerState::Closed,
                "one fast probe closes it (success_threshold 1)"
            );
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn the_attribute_times_its_attempts_through_a_breaker_that_judges_slow_calls() {
    // The global registry: the attribute's guards are resolved there.
    registry().declare_breaker("slow_calls::catalog", judging_slow_calls()).unwrap();
    #[stormproof::resilient(max_attempts = 1, breaker = "slow_calls::catalog", budget = "none")]
    async fn lookup(took: Duration) -> Result<u32> {
        tokio::time::sleep(took).await;
        Ok(7)
    }
    for _ in 0..10 {
        assert_eq!(lookup(SLOW + Duration::from_millis(500)).await.unwrap(), 7);
    }
    let refused = lookup(Duration::ZERO).await.unwrap_err();
    assert!(matches!(refused.rejection(), Some(Rejection::CircuitOpen { .. })), "{refused:?}");
    assert_eq!(registry().breaker("slow_calls::catalog").unwrap().totals().slow_calls, 10);
}

#[tokio::test(start_paused = true)]
async fn reconfiguring_a_breaker_to_judge_slow_calls_keeps_its_state_and_times_from_then_on() {
    let registry = Registry::new();
    let untimed =
        BreakerConfig { slow_call_duration: None, slow_call_rate_percent: None, ..judging_slow_calls() };
    registry.declare_breaker("search", untimed).unwrap();
    let policy = policy();
    registry
        .scope(async {
            for _ in 0..10 {
                assert_eq!(call_taking(&policy, SLOW).await, Ok(()));
            }
            let breaker = registry.breaker("search").unwrap();
            assert_eq!((breaker.state(), breaker.totals().slow_calls), (BreakerState::Closed, 0));
            breaker.reconfigure(judging_slow_calls()).unwrap();
            for _ in 0..5 {
                assert_eq!(call_taking(&policy, SLOW).await, Ok(()));
            }
            // The window kept its ten fast-judged calls: five slow of ten.
            assert_eq!((breaker.state(), breaker.totals().slow_calls), (BreakerState::Open, 5));
        })
        .await;
}

#[test]
fn bad_slow_call_settings_are_errors_naming_the_field() {
    let field = |config: BreakerConfig| config.validate().unwrap_err().field;
    let rate = BreakerConfig { failure_rate_percent: Some(50), ..BreakerConfig::default() };
    assert_eq!(field(BreakerConfig { slow_call_duration: Some(SLOW), ..rate }), "slow_call_duration");
    assert_eq!(field(BreakerConfig { slow_call_rate_percent: Some(50), ..rate }), "slow_call_rate_percent");
    let both = BreakerConfig { slow_call_duration: Some(SLOW), slow_call_rate_percent: Some(50), ..rate };
    assert!(both.validate().is_ok());
    assert_eq!(
        field(BreakerConfig { slow_call_duration: Some(Duration::ZERO), ..both }),
        "slow_call_duration"
    );
    assert_eq!(field(BreakerConfig { slow_call_rate_percent: Some(0), ..both }), "slow_call_rate_percent");
    assert_eq!(field(BreakerConfig { slow_call_rate_percent: Some(101), ..both }), "slow_call_rate_percent");
    let count_mode = BreakerConfig { failure_rate_percent: None, ..both };
    let error = count_mode.validate().unwrap_err();
    assert_eq!(error.field, "slow_call_rate_percent");
    assert!(error.to_string().contains("failure_rate_percent"), "{error}");
}
