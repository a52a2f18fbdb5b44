//! Edges of the contract that no other test pinned down, found by mutation
//! testing (`scripts/mutants.sh`): each test fails against the mutants named
//! in its comment, and the ones left alive are explained in
//! `scripts/mutants-survivors.md`.

mod common;

use std::io::{Error, ErrorKind};
use std::time::Duration;

use common::{Attempts, TestError, ms};
use stormproof_runtime::__private::Step;
use stormproof_runtime::__private::probe::{ByTraits, Kept};
use stormproof_runtime::{
    Classify, ErrorClass, Jitter, Policy, Registry, Rejection, StopReason,
    breaker::{Admission, BreakerConfig, BreakerCore, BreakerState, CircuitBreaker, Outcome},
    budget::{BudgetConfig, RatioBudget, RetryBudget, TokenBucket},
    bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull},
};
use tokio::time::{Instant, sleep};

fn s(v: u64) -> Duration {
    Duration::from_secs(v)
}

/// Admits an attempt that must be allowed.
fn admitted(core: &mut BreakerCore, now: Duration) -> stormproof_runtime::breaker::Ticket {
    match core.admit(now).0 {
        Admission::Allowed(ticket) => ticket,
        Admission::Rejected => panic!("rejected at {now:?}"),
    }
}

// Kills `BreakerCore::abandon`: `||` -> `&&` (a stale probe would pass the epoch check).
#[test]
fn a_probe_of_an_earlier_half_open_period_cannot_free_a_slot_of_the_current_one() {
    // Every open period 10 s: no growth after the failed probe (this test
    // is about the periods' slots, not their length).
    let cfg = BreakerConfig {
        failure_threshold: 1,
        open_for: s(10),
        max_open_for: s(10),
        half_open_max_calls: 2,
        success_threshold: 2,
        ..Default::default()
    };
    let mut core = BreakerCore::new(cfg);
    let first = admitted(&mut core, s(0));
    core.record(first, Outcome::Failure, s(0));
    // First half-open period: two probes; one is still running when the other fails.
    let slow = admitted(&mut core, s(10));
    let failing = admitted(&mut core, s(10));
    assert!(slow.probe && failing.probe);
    core.record(failing, Outcome::Failure, s(10));
    assert_eq!(core.state(s(10)), BreakerState::Open);
    // Second half-open period: both slots taken by new probes.
    let _new = [admitted(&mut core, s(20)), admitted(&mut core, s(20))];
    assert_eq!(core.admit(s(20)).0, Admission::Rejected);
    // The slow probe of the first period is cancelled now: it held a slot of
    // a period that is over, so no slot of this one comes free.
    core.abandon(slow);
    assert_eq!(core.admit(s(20)).0, Admission::Rejected, "a third probe was admitted");
    // Nor does it count if it reports instead.
    assert_eq!(core.record(slow, Outcome::Success, s(20)), None);
    assert_eq!(core.state(s(20)), BreakerState::HalfOpen);
}

// Kills `BreakerCore::is_closed -> true`.
#[test]
fn is_closed_is_false_once_the_breaker_opens_and_while_it_is_half_open() {
    let mut core = BreakerCore::new(BreakerConfig { failure_threshold: 1, ..Default::default() });
    assert!(core.is_closed());
    let ticket = admitted(&mut core, s(0));
    core.record(ticket, Outcome::Failure, s(0));
    assert!(!core.is_closed(), "open");
    let _probe = admitted(&mut core, s(30));
    assert!(!core.is_closed(), "half-open");
}

// Kills `CircuitBreaker::config`, `BreakerCore::config`, `RetryBudget::config`
// and `Bulkhead::config` -> defaults, and `RetryBudget::name` -> "" or "xyzzy".
#[test]
fn each_guard_reports_the_name_and_the_settings_it_was_declared_with() {
    let registry = Registry::new();
    let breaker = BreakerConfig {
        failure_threshold: 7,
        window: s(3),
        open_for: s(4),
        max_open_for: s(11),
        success_threshold: 5,
        half_open_max_calls: 6,
        failure_rate_percent: Some(40),
        minimum_calls: 8,
        window_calls: Some(12),
        slow_call_duration: Some(ms(1_500)),
        slow_call_rate_percent: Some(60),
        max_keys: 13,
        idle_for: s(14),
    };
    let budget = BudgetConfig::TokenBucket(TokenBucket {
        capacity: 9,
        retry_cost: 2,
        refill_per_success: 3,
        ..Default::default()
    });
    let bulkhead = BulkheadConfig { max_concurrent: 4, max_wait: Some(ms(25)), ..Default::default() };
    registry.declare_breaker("payments", breaker).unwrap();
    registry.declare_budget("ledger", budget).unwrap();
    registry.declare_bulkhead("pool", bulkhead).unwrap();

    let declared = registry.breaker("payments").unwrap();
    assert_eq!((declared.name(), declared.config()), ("payments", breaker));
    assert_eq!(BreakerCore::new(breaker).config(), &breaker);
    let declared = registry.budget("ledger").unwrap();
    assert_eq!((declared.name(), declared.config()), ("ledger", budget));
    let declared = registry.bulkhead("pool").unwrap();
    assert_eq!((declared.name(), declared.config()), ("pool", bulkhead));
}

// Kills `TokenBucket::validate`: `>` -> `>=`.
#[test]
fn a_retry_may_cost_the_whole_capacity() {
    let budget = RetryBudget::new(
        "all-in",
        TokenBucket { capacity: 3, retry_cost: 3, refill_per_success: 1, ..Default::default() },
    )
    .expect("a cost equal to the capacity is valid");
    assert!(budget.try_withdraw(), "one retry");
    assert!(!budget.try_withdraw(), "then none");
}

// Kills the `Display` impls of `BreakerState`, `StopReason` and `BulkheadFull` -> "".
#[test]
fn states_stop_reasons_and_a_full_bulkhead_display_as_documented() {
    let states = [BreakerState::Closed, BreakerState::Open, BreakerState::HalfOpen];
    let shown: Vec<String> = states.iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["closed", "open", "half_open"]);
    for reason in StopReason::ALL {
        assert_eq!(reason.to_string(), reason.label());
    }
    assert_eq!(StopReason::BulkheadFull.to_string(), "bulkhead_full");
    assert!(BulkheadFull.to_string().contains("`max_wait`"), "{BulkheadFull}");
}

// Kills `delete match arm QuotaExceeded` in `Classify for io::Error`.
#[test]
fn an_exceeded_quota_is_throttling_without_a_retry_after() {
    assert_eq!(Error::from(ErrorKind::QuotaExceeded).classify(), ErrorClass::Throttled { retry_after: None });
}

// Kills `Execution::run`: `end < deadline` -> `==` or `>`, and the match
// guard `timeout_first` -> `false` (every timeout would read as the deadline).
#[tokio::test(start_paused = true)]
async fn an_attempt_timeout_before_the_deadline_is_retried_not_taken_for_the_deadline() {
    let attempts = Attempts::new();
    let policy = Policy::builder()
        .jitter(Jitter::None)
        .max_attempts(3)
        .base(ms(10))
        .attempt_timeout(ms(100))
        .deadline(s(1))
        .build()
        .unwrap();
    let start = Instant::now();
    let result: Result<(), TestError> = policy
        .run(|| {
            attempts.mark();
            async {
                sleep(s(10)).await;
                Ok(())
            }
        })
        .await;
    assert_eq!(result, Err(TestError::Rejected(Rejection::AttemptTimeout { after: ms(100) })));
    // 0: times out at 100, waits 10; 110: times out at 210, waits 20; 230: times out at 330.
    assert_eq!(attempts.times(), [0, 110, 230]);
    assert_eq!(start.elapsed(), ms(330));
}

// Kills `Execution::attempts` -> 0 or 1.
#[tokio::test(start_paused = true)]
async fn the_step_form_counts_the_attempts_that_ran_and_not_a_refused_one() {
    let policy = Policy::builder().jitter(Jitter::None).base(ms(1)).max_attempts(5).build().unwrap();
    let mut execution = policy.call(None, Kept::<TestError>::default(), ByTraits);
    assert_eq!(execution.attempts(), 0);
    for ran in 1..=2 {
        assert!(matches!(execution.attempt(async { Err::<u8, _>(TestError::Transient) }).await, Step::Retry));
        assert_eq!(execution.attempts(), ran);
    }
    assert!(matches!(execution.attempt(async { Ok::<_, TestError>(5) }).await, Step::Done(Ok(5))));
    assert_eq!(execution.attempts(), 3);

    let registry = Registry::new();
    registry.declare_breaker("down", BreakerConfig { failure_threshold: 1, ..Default::default() }).unwrap();
    let guarded = Policy::builder().max_attempts(5).breaker("down").build().unwrap();
    registry
        .scope(async {
            let tripped: Result<(), _> = guarded.run(|| async { Err(TestError::Transient) }).await;
            assert_eq!(tripped, Err(TestError::Transient));
            let mut refused = guarded.call(None, Kept::<TestError>::default(), ByTraits);
            let step = refused.attempt(async { Ok::<_, TestError>(()) }).await;
            assert!(matches!(step, Step::Done(Err(TestError::Rejected(Rejection::CircuitOpen { .. })))));
            assert_eq!(refused.attempts(), 0, "the open breaker refused the only attempt");
        })
        .await;
}

/// A breaker that opens on its first failure and stays open for 10 s.
fn one_strike_breaker() -> CircuitBreaker {
    CircuitBreaker::new("db", BreakerConfig { failure_threshold: 1, open_for: s(10), ..Default::default() })
        .unwrap()
}

// Kills `CircuitBreaker::force_open`, `force` and `reset` -> `()`, and
// `CircuitBreaker::forced -> None`.
#[tokio::test(start_paused = true)]
async fn a_forced_open_breaker_refuses_every_call_until_reset_and_says_it_is_forced() {
    let breaker = one_strike_breaker();
    breaker.force_open();
    assert_eq!((breaker.state(), breaker.forced()), (BreakerState::Open, Some(BreakerState::Open)));
    assert!(breaker.try_acquire().is_none());
    // Held open by hand: `open_for` passing admits no probe.
    tokio::time::advance(s(60)).await;
    assert_eq!(breaker.state(), BreakerState::Open);
    assert!(breaker.try_acquire().is_none(), "a forced-open breaker admitted a probe");
    breaker.reset();
    assert_eq!((breaker.state(), breaker.forced()), (BreakerState::Closed, None));
    let permit = breaker.try_acquire().expect("a reset breaker admits calls");
    assert!(!permit.is_probe());
    permit.record(Outcome::Success);
}

// Kills `CircuitBreaker::force_closed` and `force` -> `()`.
#[tokio::test(start_paused = true)]
async fn a_forced_closed_breaker_runs_every_call_and_no_failure_opens_it_until_reset() {
    let breaker = one_strike_breaker();
    breaker.try_acquire().unwrap().record(Outcome::Failure);
    assert_eq!(breaker.state(), BreakerState::Open);
    breaker.force_closed();
    assert_eq!((breaker.state(), breaker.forced()), (BreakerState::Closed, Some(BreakerState::Closed)));
    for _ in 0..5 {
        breaker.try_acquire().expect("a forced-closed breaker admits every call").record(Outcome::Failure);
    }
    assert_eq!(breaker.state(), BreakerState::Closed, "a failure opened a forced-closed breaker");
    // Reset: closed with a clean history, and failures count again.
    breaker.reset();
    assert_eq!((breaker.state(), breaker.forced()), (BreakerState::Closed, None));
    breaker.try_acquire().unwrap().record(Outcome::Failure);
    assert_eq!(breaker.state(), BreakerState::Open);
}

// Kills `CircuitBreaker::totals -> Default::default()` and `count`: `==` -> `!=`
// (failures counted for the other outcomes).
#[tokio::test(start_paused = true)]
async fn totals_count_every_attempt_that_reported_its_failures_and_every_refusal() {
    let breaker =
        CircuitBreaker::new("db", BreakerConfig { failure_threshold: 2, ..Default::default() }).unwrap();
    for outcome in [Outcome::Success, Outcome::Neutral, Outcome::Failure, Outcome::Success, Outcome::Success]
    {
        breaker.try_acquire().unwrap().record(outcome);
    }
    // Admitted but never reported (cancelled): not counted as a call.
    drop(breaker.try_acquire().unwrap());
    for _ in 0..2 {
        breaker.try_acquire().unwrap().record(Outcome::Failure);
    }
    assert_eq!(breaker.state(), BreakerState::Open);
    for _ in 0..3 {
        assert!(breaker.try_acquire().is_none());
    }
    let totals = breaker.totals();
    // 4 of the 7 calls were not failures: counting those instead would read 4.
    assert_eq!((totals.calls, totals.failures, totals.rejections), (7, 3, 3));
}

// Kills `Bulkhead::resize_to`: `new - old` -> `new / old`, `grow > 0` ->
// `==`, `<` or `>=`, and `grow -= 1` -> `+=` or `/=` (the debt of a shrink
// under load cancelled wrongly when the limit grows again).
#[tokio::test(start_paused = true)]
async fn a_bulkhead_grown_while_still_over_its_limit_admits_nobody_until_it_is_under() {
    let bulkhead = Bulkhead::new("pool", BulkheadConfig { max_concurrent: 4, ..Default::default() }).unwrap();
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(bulkhead.try_acquire().unwrap());
    }
    // Down to 1 with 4 in use: 3 permits owed, retired as they come back.
    bulkhead.reconfigure(BulkheadConfig { max_concurrent: 1, ..Default::default() }).unwrap();
    // Up to 3 before any came back: 2 of the debt are cancelled, 1 stays owed.
    bulkhead.reconfigure(BulkheadConfig { max_concurrent: 3, ..Default::default() }).unwrap();
    assert!(bulkhead.try_acquire().is_none(), "admitted with 4 in use and a limit of 3");
    held.pop();
    assert_eq!(bulkhead.in_use(), 3);
    assert!(bulkhead.try_acquire().is_none(), "admitted with 3 in use and a limit of 3");
    held.pop();
    let third = bulkhead.try_acquire().expect("2 in use and a limit of 3");
    assert!(bulkhead.try_acquire().is_none());
    drop((third, held));
    let again: Vec<_> = (0..3).map(|_| bulkhead.try_acquire().expect("the limit of 3")).collect();
    assert!(bulkhead.try_acquire().is_none(), "more than the limit of 3 once all came back");
    drop(again);
}

// Kills `CircuitBreaker::probes_in_flight` and `BreakerCore::probes_in_flight`
// -> 0 or 1 (the dashboard's "probes in flight").
#[tokio::test(start_paused = true)]
async fn probes_in_flight_counts_the_half_open_probes_admitted_and_not_yet_reported() {
    let config =
        BreakerConfig { failure_threshold: 1, open_for: s(10), half_open_max_calls: 3, ..Default::default() };
    let breaker = CircuitBreaker::new("db", config).unwrap();
    breaker.try_acquire().unwrap().record(Outcome::Failure);
    assert_eq!(breaker.probes_in_flight(), 0, "open");
    tokio::time::advance(s(10)).await;
    let probes: Vec<_> = (0..3).map(|_| breaker.try_acquire().expect("a probe slot")).collect();
    assert_eq!(breaker.probes_in_flight(), 3);
    drop(probes);
    assert_eq!(breaker.probes_in_flight(), 0, "cancelled probes give their slots back");
}

// Kills `Execution::attempt_with`: `attempts == 1` -> `!=` (the ratio budget
// would count a call's retries as its first attempts, and not the first).
#[tokio::test(start_paused = true)]
async fn a_ratio_budget_counts_each_call_once_at_its_first_attempt() {
    let registry = Registry::new();
    let ratio = RatioBudget { ratio: 1.0, window: s(10), min_per_sec: 0 };
    registry.declare_budget("even", BudgetConfig::Ratio(ratio)).unwrap();
    // An attempt timeout keeps the call off the direct path: this is the general loop.
    let policy = Policy::builder()
        .jitter(Jitter::None)
        .base(ms(1))
        .max_attempts(5)
        .budget("even")
        .attempt_timeout(s(1));
    let policy = policy.build().unwrap();
    let attempts = Attempts::new();
    registry
        .scope(async {
            let result: Result<(), TestError> = policy
                .run(|| {
                    attempts.mark();
                    async { Err(TestError::Transient) }
                })
                .await;
            assert_eq!(result, Err(TestError::Transient));
        })
        .await;
    assert_eq!(attempts.count(), 2, "one first attempt buys one retry at a ratio of 1");
}

/// Kills `window > MAX_WINDOW` -> `>=` in `RatioBudget::validate`: the
/// documented range is (0, 1 day], so one day itself is a valid window.
#[test]
fn a_ratio_budgets_window_may_be_exactly_one_day_and_no_longer() {
    let day = Duration::from_secs(86_400);
    assert_eq!(RatioBudget { window: day, ..RatioBudget::default() }.validate(), Ok(()));
    let longer = RatioBudget { window: day + Duration::from_nanos(1), ..RatioBudget::default() };
    assert_eq!(longer.validate().map_err(|e| e.field), Err("window"));
}

#[test]
fn an_adaptive_limit_reports_its_floor_and_algorithm_as_the_dashboard_shows_them() {
    let aimd = stormproof_runtime::bulkhead::AdaptiveLimit::aimd(3);
    let gradient = stormproof_runtime::bulkhead::AdaptiveLimit::gradient(5);
    assert_eq!((aimd.min(), aimd.algorithm()), (3, "aimd"));
    assert_eq!((gradient.min(), gradient.algorithm()), (5, "gradient"));
    let config = BulkheadConfig { max_concurrent: 8, adaptive: Some(aimd), ..Default::default() };
    let adaptive = Bulkhead::new("edges-adaptive", config).unwrap().config().adaptive.unwrap();
    assert_eq!((adaptive.min(), adaptive.algorithm()), (3, "aimd"));
}

#[test]
fn an_adaptive_limits_floor_may_equal_max_concurrent_and_not_exceed_it() {
    let with_floor = |min| BulkheadConfig {
        max_concurrent: 4,
        adaptive: Some(stormproof_runtime::bulkhead::AdaptiveLimit::aimd(min)),
        ..Default::default()
    };
    assert!(Bulkhead::new("edges-floor", with_floor(4)).is_ok(), "a floor at the maximum: a fixed limit");
    let refused = Bulkhead::new("edges-floor", with_floor(5)).unwrap_err();
    assert!(refused.to_string().contains("adaptive"), "{refused}");
    assert!(Bulkhead::new("edges-floor", with_floor(0)).is_err());
}
