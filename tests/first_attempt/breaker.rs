//! A first attempt's failure is recorded and retried after its wait; a
//! refusal runs nothing and is counted once; a probe's success closes the
//! breaker.

use crate::support::*;

#[resilient(jitter = "none", base_ms = 100, max_attempts = 2, breaker = "plain-breaker")]
async fn guarded(dependency: &Dependency) -> Result<u32, Flaky> {
    dependency.answer()
}

#[tokio::test(start_paused = true)]
async fn a_plain_failure_is_recorded_and_retried_a_refusal_runs_nothing_a_probe_success_closes() {
    let config = BreakerConfig {
        failure_threshold: 3,
        open_for: Duration::from_secs(1),
        success_threshold: 1,
        half_open_max_calls: 1,
        ..Default::default()
    };
    registry().declare_breaker("plain-breaker", config).unwrap();
    let breaker = registry().breaker("plain-breaker").unwrap();
    let down = Dependency::failing(u32::MAX);

    let start = Instant::now();
    assert_eq!(guarded(&down).await, Err(Flaky::Down));
    assert_eq!(down.attempts(), 2, "the failed plain attempt was retried");
    assert_eq!(start.elapsed(), Duration::from_millis(100), "after its backoff, at once");
    assert_eq!(breaker.state(), BreakerState::Closed, "two failures recorded of three");

    assert_eq!(guarded(&down).await, Err(Flaky::Down), "the third failure opens the breaker");
    assert_eq!(down.attempts(), 3, "and the retry is refused, ending the call with its error");
    assert_eq!(breaker.state(), BreakerState::Open);
    let rejections = breaker.totals().rejections;

    let open = Rejection::CircuitOpen { breaker: "plain-breaker".to_owned() };
    assert_eq!(guarded(&down).await, Err(Flaky::Rejected(open)));
    assert_eq!(down.attempts(), 3, "an open breaker refuses the first attempt: nothing runs");
    assert_eq!(
        breaker.totals().rejections,
        rejections + 1,
        "one refusal, counted once (not plain, then refused on the general path)"
    );

    tokio::time::advance(Duration::from_secs(1)).await;
    let up = Dependency::failing(0);
    assert_eq!(guarded(&up).await, Ok(1));
    assert_eq!(breaker.state(), BreakerState::Closed, "the half-open probe's success was recorded");
}
