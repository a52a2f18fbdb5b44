//! `Policy::run` without a key runs its first attempt as the attribute does,
//! and calls its closure only for an attempt the guards admitted.

use crate::support::*;

/// `Policy::run` takes the plain path too, for whatever guards its policy
/// names (found out as it runs): the same records, the closure called only
/// for an admitted attempt, a key making the call not plain.
#[tokio::test(start_paused = true)]
async fn policy_run_is_plain_without_a_key_and_calls_its_closure_only_when_admitted() {
    one_place("plain-run-place");
    let breaker =
        BreakerConfig { failure_threshold: 2, open_for: Duration::from_secs(60), ..Default::default() };
    registry().declare_breaker("plain-run-breaker", breaker).unwrap();
    registry().declare_budget("plain-run-budget", RatioBudget::default()).unwrap();
    let policy = stormproof::Policy::builder()
        .max_attempts(2)
        .base(Duration::from_millis(100))
        .jitter(stormproof::Jitter::None)
        .breaker("plain-run-breaker")
        .budget("plain-run-budget")
        .bulkhead("plain-run-place")
        .build()
        .unwrap();
    let budget = registry().budget("plain-run-budget").unwrap();
    let calls = AtomicU32::new(0);
    let in_use = AtomicUsize::new(0);
    // Each closure counts its calls as it is called, before its future is polled.
    let up = || {
        calls.fetch_add(1, Ordering::SeqCst);
        async {
            in_use.store(places_in_use("plain-run-place"), Ordering::SeqCst);
            Ok::<_, Flaky>(7)
        }
    };

    assert_eq!(policy.run(up).await, Ok(7));
    assert_eq!(in_use.load(Ordering::SeqCst), 1, "the attempt held the bulkhead's place");
    assert_eq!(places_in_use("plain-run-place"), 0, "and gave it back");
    assert_eq!(budget.totals().first_attempts, 1, "the first attempt counted once");
    assert_eq!(policy.run_with_key("order-1", up).await, Ok(7), "with a key: the same answer");
    assert_eq!(budget.totals().first_attempts, 2);

    let start = Instant::now();
    let down = || {
        calls.fetch_add(1, Ordering::SeqCst);
        async { Err::<u32, _>(Flaky::Down) }
    };
    assert_eq!(
        policy.run(down).await,
        Err(Flaky::Down),
        "the plain failure, then the retry's, opening the breaker"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(start.elapsed(), Duration::from_millis(100), "the retry ran after the backoff");
    assert_eq!(places_in_use("plain-run-place"), 0);

    let open = Rejection::CircuitOpen { breaker: "plain-run-breaker".to_owned() };
    assert_eq!(policy.run(up).await, Err(Flaky::Rejected(open)));
    assert_eq!(calls.load(Ordering::SeqCst), 4, "a refused plain attempt never calls the closure");
    assert_eq!(places_in_use("plain-run-place"), 0, "and its place went back");
}
