//! A first attempt is counted by a ratio budget; a success puts a token back
//! and a failure pays for its retry, as on every attempt.

use crate::support::*;

#[resilient(budget = "plain-ratio")]
async fn counted(dependency: &Dependency) -> Result<u32, Flaky> {
    dependency.answer()
}

#[tokio::test(start_paused = true)]
async fn a_plain_first_attempt_counts_for_a_ratio_budget() {
    registry().declare_budget("plain-ratio", RatioBudget::default()).unwrap();
    let dependency = Dependency::failing(0);
    for _ in 0..5 {
        counted(&dependency).await.unwrap();
    }
    let budget = registry().budget("plain-ratio").unwrap();
    assert_eq!(budget.totals().first_attempts, 5, "each call's first attempt is counted once");
}

#[resilient(jitter = "none", base_ms = 1, max_attempts = 3, budget = "plain-bucket")]
async fn refilling(dependency: &Dependency) -> Result<u32, Flaky> {
    dependency.answer()
}

#[tokio::test(start_paused = true)]
async fn a_plain_success_puts_a_token_back_and_a_plain_failure_pays_for_its_retry() {
    let bucket = TokenBucket { capacity: 2, retry_cost: 1, refill_per_success: 1, ..Default::default() };
    registry().declare_budget("plain-bucket", bucket).unwrap();
    let budget = registry().budget("plain-bucket").unwrap();

    let always_down = Dependency::failing(u32::MAX);
    assert_eq!(refilling(&always_down).await, Err(Flaky::Down));
    assert_eq!(always_down.attempts(), 3, "a plain first attempt, then two paid retries");
    assert_eq!(budget.available(), 0);

    let up = Dependency::failing(0);
    assert_eq!(refilling(&up).await, Ok(1));
    assert_eq!(budget.available(), 1, "the plain success refilled one token");
}
