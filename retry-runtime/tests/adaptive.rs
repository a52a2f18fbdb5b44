//! Adaptive protection in the retry loop: hedging, the client-side
//! throttle, the rate limit, the adaptive bulkhead limit and the fallback,
//! under paused time with exact expectations where the contract fixes them
//! and stated bounds where it does not.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use common::{Attempts, TestError, ms};
use stormproof_runtime::breaker::NO_BREAKER;
use stormproof_runtime::{
    Nested, Policy, Registry, Rejection,
    breaker::{BreakerConfig, CircuitBreaker},
    budget::TokenBucket,
    bulkhead::{AdaptiveLimit, Bulkhead, BulkheadConfig},
    idempotency_key,
    rate_limit::{RateLimit, RateLimitConfig},
    throttle::ThrottleConfig,
};
use tokio::time::{Instant, sleep};

/// Ends the attempt's future's life in a flag when it is dropped before it finished.
struct CancelledFlag(Arc<AtomicU32>, bool);

impl Drop for CancelledFlag {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

// Named after each caller's line (`#[track_caller]`), so that the tests
// running at once in this process do not share its own breaker and budget.
#[track_caller]
fn hedging(after: u64, max: u32) -> Policy {
    Policy::builder().max_attempts(3).base(ms(100)).hedge(ms(after), max).seed(1).build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_hedge_starts_after_the_delay_and_the_first_success_wins_and_the_slow_one_is_cancelled() {
    let policy = hedging(50, 1);
    let attempts = Attempts::new();
    let cancelled = Arc::new(AtomicU32::new(0));
    let keys = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let result = policy
        .run_with_key("order-7", || {
            let n = attempts.mark();
            let (cancelled, keys) = (cancelled.clone(), keys.clone());
            async move {
                keys.lock().unwrap().push(idempotency_key().unwrap().to_string());
                let mut flag = CancelledFlag(cancelled, false);
                // The first attempt is stuck on a slow replica; the hedge is fast.
                sleep(if n == 1 { ms(300) } else { ms(20) }).await;
                flag.1 = true;
                Ok::<_, TestError>(n)
            }
        })
        .await;
    assert_eq!(result, Ok(2), "the hedge answered first");
    assert_eq!(start.elapsed(), ms(70), "hedge at 50 ms, answered 20 ms later");
    assert_eq!(attempts.times(), [0, 50]);
    assert_eq!(cancelled.load(Ordering::SeqCst), 1, "the slow attempt was dropped, not awaited");
    assert_eq!(*keys.lock().unwrap(), ["order-7", "order-7"], "every hedge carries the call's key");
}

#[tokio::test(start_paused = true)]
async fn hedges_start_one_every_delay_up_to_max_hedges() {
    let policy = hedging(40, 3);
    let attempts = Attempts::new();
    let start = Instant::now();
    let result = policy
        .run(|| {
            let n = attempts.mark();
            async move {
                sleep(ms(1_000)).await;
                Ok::<_, TestError>(n)
            }
        })
        .await;
    assert_eq!(attempts.times(), [0, 40, 80, 120], "three hedges, one every 40 ms, then no more");
    assert_eq!(result, Ok(1), "all equally slow: the first started is the first done");
    assert_eq!(start.elapsed(), ms(1_000));
}

#[tokio::test(start_paused = true)]
async fn a_round_whose_attempts_all_fail_counts_as_one_attempt_and_backs_off() {
    // Each attempt fails after 60 ms: the hedge (at 50) fails at 110; the round
    // has failed, and the retry comes after the backoff (no jitter: 100 ms).
    let policy = Policy::builder()
        .max_attempts(2)
        .base(ms(100))
        .jitter(stormproof_runtime::Jitter::None)
        .hedge(ms(50), 1)
        .build()
        .unwrap();
    let attempts = Attempts::new();
    let result = policy
        .run(|| {
            let n = attempts.mark();
            async move {
                sleep(ms(60)).await;
                if n < 4 { Err(TestError::Transient) } else { Ok(n) }
            }
        })
        .await;
    assert_eq!(attempts.times(), [0, 50, 210, 260], "round 2 starts 100 ms after round 1's last failure");
    assert_eq!(result, Ok(4), "the second round's hedge succeeded");
}

/// One attempt, marked in `attempts` when made, that succeeds after 100 ms:
/// long enough for a hedge at 10 ms.
fn slow_success(attempts: &Attempts) -> impl Future<Output = Result<(), TestError>> + use<> {
    attempts.mark();
    async {
        sleep(ms(100)).await;
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_hedge_takes_a_budget_token_and_without_one_there_is_no_hedge() {
    let registry = Registry::new();
    registry
        .declare_budget(
            "dep",
            TokenBucket { capacity: 1, retry_cost: 1, refill_per_success: 0, ..Default::default() },
        )
        .unwrap();
    let policy = Policy::builder().max_attempts(1).hedge(ms(10), 1).budget("dep").build().unwrap();
    let attempts = Attempts::new();
    let slow = || slow_success(&attempts);
    registry.scope(policy.run(slow)).await.unwrap();
    assert_eq!(attempts.count(), 2, "the first call hedged");
    assert_eq!(registry.budget("dep").unwrap().available(), 0, "and paid a token for it");
    registry.scope(policy.run(slow)).await.unwrap();
    assert_eq!(attempts.count(), 3, "no token left: the second call did not hedge");
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_ends_the_round_at_once() {
    let policy = hedging(10, 2);
    let attempts = Attempts::new();
    let start = Instant::now();
    let result = policy
        .run(|| {
            let n = attempts.mark();
            async move {
                sleep(if n == 1 { ms(500) } else { ms(5) }).await;
                Err::<(), _>(TestError::Permanent)
            }
        })
        .await;
    assert_eq!(result, Err(TestError::Permanent));
    assert_eq!(start.elapsed(), ms(15), "the hedge's permanent answer did not wait for the slow attempt");
}

#[tokio::test(start_paused = true)]
async fn the_throttle_refuses_locally_once_the_dependency_refuses_most_requests() {
    let registry = Registry::with_seed(9);
    // The formula uncapped, whose numbers these are (the default refuses
    // at most 80 %: tests/throttle_recovery.rs).
    registry
        .declare_throttle("dep", ThrottleConfig { max_refusal_percent: 100, ..Default::default() })
        .unwrap();
    let policy = Policy::builder().max_attempts(1).throttle("dep").build().unwrap();
    let sent = AtomicU32::new(0);
    let mut throttled = 0;
    for _ in 0..1_000 {
        // A call a millisecond: 50 in each tenth of the window, judged on
        // the tenths before it.
        sleep(ms(1)).await;
        let result = registry
            .scope(policy.run(|| {
                sent.fetch_add(1, Ordering::SeqCst);
                async { Err::<(), _>(TestError::Transient) }
            }))
            .await;
        match result {
            Err(TestError::Rejected(Rejection::Throttled { throttle })) => {
                assert_eq!(throttle, "dep");
                throttled += 1;
            }
            Err(TestError::Transient) => {}
            other => panic!("{other:?}"),
        }
    }
    let sent = sent.load(Ordering::SeqCst);
    assert_eq!(sent + throttled, 1_000);
    // The first tenth's 50 go out (nothing is judged yet); then with no
    // accepts the refusal probability is n / (n + 1) after n requests: the
    // expected number sent after them is H(1000) - H(50) ~ 3.
    assert!(sent <= 50 + 15, "the dependency was spared: {sent} of 1000 sent");
    // Answers that are not overload keep the throttle open.
    let registry = Registry::with_seed(9);
    registry.declare_throttle("dep", ThrottleConfig::default()).unwrap();
    for _ in 0..1_000 {
        let result = registry.scope(policy.run(|| async { Err::<(), _>(TestError::Permanent) })).await;
        assert_eq!(result, Err(TestError::Permanent), "a permanent error is an accept");
    }
}

#[tokio::test(start_paused = true)]
async fn a_cold_burst_is_not_throttled_before_its_first_answers() {
    let registry = Registry::with_seed(9);
    // The formula uncapped, whose numbers these are (the default refuses
    // at most 80 %: tests/throttle_recovery.rs).
    registry
        .declare_throttle("dep", ThrottleConfig { max_refusal_percent: 100, ..Default::default() })
        .unwrap();
    let policy = Policy::builder().max_attempts(1).throttle("dep").build().unwrap();
    let sent = AtomicU32::new(0);
    let burst = (0..100).map(|_| {
        registry.scope(policy.run(|| {
            sent.fetch_add(1, Ordering::SeqCst);
            async {
                sleep(ms(10)).await;
                Err::<(), _>(TestError::Transient)
            }
        }))
    });
    let results = futures_join_all(burst).await;
    assert_eq!(sent.load(Ordering::SeqCst), 100, "all went out: nothing was answered yet");
    assert!(results.iter().all(|r| *r == Err(TestError::Transient)));
    // The answers count from the next tenth of the window on.
    sleep(ms(50)).await;
    let probability = registry.throttle("dep").unwrap().refusal_probability();
    assert!((probability - 100.0 / 101.0).abs() < 1e-9, "then the 100 refusals count: {probability}");
}

#[tokio::test(start_paused = true)]
async fn the_rate_limit_waits_for_a_turn_within_max_wait_then_refuses() {
    let registry = Registry::new();
    let config = RateLimitConfig { per_second: 10, burst: 1, max_wait: Some(ms(150)), ..Default::default() };
    registry.declare_rate_limit("api", config).unwrap();
    let policy = Policy::builder().max_attempts(1).rate_limit("api").build().unwrap();
    let attempts = Attempts::new();
    let call = || {
        registry.scope(policy.run(|| {
            attempts.mark();
            async { Ok::<_, TestError>(()) }
        }))
    };
    let (a, b, c) = tokio::join!(call(), call(), call());
    assert_eq!(attempts.times(), [0, 100], "one turn every 100 ms");
    let refused = [a, b, c].into_iter().filter(|r| r.is_err()).collect::<Vec<_>>();
    assert_eq!(
        refused,
        [Err(TestError::Rejected(Rejection::RateLimited { limiter: "api".into() }))],
        "the third turn was 200 ms away, past max_wait"
    );
}

/// A call that a full bulkhead refuses (its `max_wait` passed) never ran,
/// so it leaves the rate limit's turns as they were: the turn is taken
/// only once the attempt holds its place, whether a turn was free when it
/// came or it would have had to wait for one. A turn cannot be given back
/// (a GCRA turn given back after later ones were handed out would let two
/// attempts go closer than the rate allows).
#[tokio::test(start_paused = true)]
async fn a_call_the_bulkhead_refuses_takes_no_rate_limit_turn() {
    for turn_free in [true, false] {
        let registry = Registry::new();
        // One turn a second, a burst of 2; an attempt may wait a second for its turn.
        let config =
            RateLimitConfig { per_second: 1, burst: 2, max_wait: Some(ms(1_000)), ..Default::default() };
        registry.declare_rate_limit("api", config).unwrap();
        let one_place = BulkheadConfig { max_concurrent: 1, max_wait: Some(ms(10)), ..Default::default() };
        registry.declare_bulkhead("api", one_place).unwrap();
        let (limit, bulkhead) = (registry.rate_limit("api").unwrap(), registry.bulkhead("api").unwrap());
        if !turn_free {
            assert!(limit.try_acquire() && limit.try_acquire(), "the burst is spent");
        }
        let place = bulkhead.try_acquire().unwrap();
        let policy = Policy::builder().max_attempts(1).rate_limit("api").bulkhead("api").build().unwrap();
        let (attempts, start) = (Attempts::new(), Instant::now());
        let result = registry
            .scope(policy.run(|| {
                attempts.mark();
                async { Ok::<_, TestError>(()) }
            }))
            .await;
        let full = Err(TestError::Rejected(Rejection::BulkheadFull { bulkhead: "api".into() }));
        assert_eq!((result, attempts.count()), (full, 0), "turn free: {turn_free}");
        assert_eq!(start.elapsed(), ms(10), "refused once the bulkhead's max_wait passed");
        drop(place);
        // The turns the limiter had before the call: 2 (a burst), or none
        // until the next one, a second after the burst was spent.
        if turn_free {
            assert!(limit.try_acquire() && limit.try_acquire(), "both turns are left");
        } else {
            assert!(!limit.try_acquire(), "no turn yet");
            sleep(ms(990)).await;
            assert!(limit.try_acquire(), "the next turn, at 1 s, was not spent by the call");
        }
    }
}

/// A call whose breaker opens while it queues for a bulkhead place ends
/// `CircuitOpen` once it has the place, and spends no rate-limit turn: the
/// breaker is asked before the turn is taken (a turn cannot be given
/// back), as it is for an attempt that queues for nothing.
#[tokio::test(start_paused = true)]
async fn a_call_whose_breaker_opens_while_it_queues_for_a_place_takes_no_turn() {
    let queued = queued_for_the_only_place(true, |breaker| breaker.force_open()).await;
    let open = Err(TestError::Rejected(Rejection::CircuitOpen { breaker: "api".into() }));
    assert_eq!((queued.result, queued.attempts), (open, 0));
    assert_eq!(queued.bulkhead.in_use(), 0, "the place went back");
    assert!(queued.limit.try_acquire(), "the only turn was not spent on the refused call");
}

/// A call that queued for a place and finds its breaker half-open, with
/// one probe allowed in all (a fleet's share of the round), and no turn
/// free: asked before the turn, the breaker gave it the probe; the call
/// waits for the turn without it, and the probe, never sent, is given back
/// whole, so that the call is that probe once it has its turn, not refused
/// by a breaker whose one probe went unsent.
#[tokio::test(start_paused = true)]
async fn a_probe_given_back_while_a_queued_call_waits_for_its_turn_is_still_allowed() {
    // Open until now, then one probe in all.
    let queued =
        queued_for_the_only_place(false, |breaker| breaker.trip_until(Instant::now(), Some(1))).await;
    assert_eq!((queued.result, queued.attempts), (Ok(()), 1), "the call is the one probe");
}

/// How a call of [`queued_for_the_only_place`] ended, and its guards.
struct Queued {
    result: Result<(), TestError>,
    attempts: u32,
    limit: Arc<RateLimit>,
    bulkhead: Arc<Bulkhead>,
}

/// A single-attempt call through a rate limit of one turn a second (spent
/// beforehand unless `turn_free`), a bulkhead of one place held by another
/// caller, and a breaker: 10 ms into the call's wait for the place,
/// `meanwhile` acts on the breaker, then the place comes free.
async fn queued_for_the_only_place(turn_free: bool, meanwhile: impl FnOnce(&CircuitBreaker)) -> Queued {
    let registry = Registry::new();
    let config = RateLimitConfig { per_second: 1, burst: 1, max_wait: Some(ms(1_000)), ..Default::default() };
    registry.declare_rate_limit("api", config).unwrap();
    let one_place = BulkheadConfig { max_concurrent: 1, max_wait: None, ..Default::default() };
    registry.declare_bulkhead("api", one_place).unwrap();
    registry.declare_breaker("api", BreakerConfig::default()).unwrap();
    let (limit, bulkhead) = (registry.rate_limit("api").unwrap(), registry.bulkhead("api").unwrap());
    let breaker = registry.breaker("api").unwrap();
    let policy =
        Policy::builder().max_attempts(1).rate_limit("api").bulkhead("api").breaker("api").build().unwrap();
    if !turn_free {
        assert!(limit.try_acquire(), "the only turn of this second is gone");
    }
    let place = bulkhead.try_acquire().unwrap();
    let attempts = Attempts::new();
    let call = registry.scope(policy.run(|| {
        attempts.mark();
        async { Ok::<_, TestError>(()) }
    }));
    let meanwhile = async {
        sleep(ms(10)).await;
        meanwhile(&breaker);
        drop(place);
    };
    let (result, ()) = tokio::join!(call, meanwhile);
    let attempts = attempts.count();
    Queued { result, attempts, limit, bulkhead }
}

/// As above, for a call whose admission finds the bulkhead full, or no
/// turn free, before it waits: the probe it was admitted for goes back
/// with its slot, and the breaker, asked again after the wait, lets the
/// call be the round's one probe.
#[tokio::test(start_paused = true)]
async fn a_probe_given_back_as_a_call_starts_to_queue_is_still_allowed() {
    for queue_for in ["place", "turn"] {
        let registry = Registry::new();
        registry.declare_breaker("api", BreakerConfig::default()).unwrap();
        let breaker = registry.breaker("api").unwrap();
        let builder = Policy::builder().max_attempts(1).breaker("api");
        let policy = if queue_for == "place" {
            let one_place = BulkheadConfig { max_concurrent: 1, max_wait: None, ..Default::default() };
            registry.declare_bulkhead("api", one_place).unwrap();
            builder.bulkhead("api").build().unwrap()
        } else {
            let config =
                RateLimitConfig { per_second: 1, burst: 1, max_wait: Some(ms(2_000)), ..Default::default() };
            registry.declare_rate_limit("api", config).unwrap();
            assert!(
                registry.rate_limit("api").unwrap().try_acquire(),
                "the only turn of this second is gone"
            );
            builder.rate_limit("api").build().unwrap()
        };
        let bulkhead = registry.bulkhead("api");
        let place = bulkhead.as_ref().map(|bulkhead| bulkhead.try_acquire().unwrap());
        // Open until now, then one probe in all: the call takes it as it starts.
        breaker.trip_until(Instant::now(), Some(1));
        let attempts = Attempts::new();
        let call = registry.scope(policy.run(|| {
            attempts.mark();
            async { Ok::<_, TestError>(()) }
        }));
        let meanwhile = async {
            sleep(ms(10)).await;
            drop(place);
        };
        let (result, ()) = tokio::join!(call, meanwhile);
        assert_eq!(
            (result, attempts.count()),
            (Ok(()), 1),
            "queued for a {queue_for}: the call is the one probe"
        );
    }
}

/// Waves of 32 concurrent single-attempt calls against a dependency that
/// serves 4 at once and answers the rest with an immediate 503, through a
/// bulkhead of at most 32; returns the bulkhead's final limit and the 503s
/// of the last 20 waves.
async fn waves_against_capacity_four(adaptive: Option<AdaptiveLimit>) -> (u32, u32) {
    const CAPACITY: u32 = 4;
    let registry = Registry::new();
    registry
        .declare_bulkhead("dep", BulkheadConfig { max_concurrent: 32, adaptive, ..Default::default() })
        .unwrap();
    // No breaker: 28 of 32 failing would open the operation's own, and
    // this test is of the bulkhead alone.
    let policy = Policy::builder().max_attempts(1).bulkhead("dep").breaker(NO_BREAKER).build().unwrap();
    let in_flight = Arc::new(AtomicU32::new(0));
    let refused = Arc::new(AtomicU32::new(0));
    let mut late_refusals = 0;
    for wave in 0..60 {
        let before = refused.load(Ordering::SeqCst);
        let calls = (0..32).map(|_| {
            let (in_flight, refused) = (in_flight.clone(), refused.clone());
            registry.scope(policy.run(move || {
                let (in_flight, refused) = (in_flight.clone(), refused.clone());
                async move {
                    if in_flight.fetch_add(1, Ordering::SeqCst) >= CAPACITY {
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        refused.fetch_add(1, Ordering::SeqCst);
                        return Err(TestError::Transient);
                    }
                    sleep(ms(10)).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    Ok(())
                }
            }))
        });
        futures_join_all(calls).await;
        if wave >= 40 {
            late_refusals += refused.load(Ordering::SeqCst) - before;
        }
    }
    (registry.bulkhead("dep").unwrap().limit(), late_refusals)
}

#[tokio::test(start_paused = true)]
async fn an_adaptive_bulkhead_finds_the_concurrency_the_dependency_can_take() {
    let (fixed_limit, fixed_refusals) = waves_against_capacity_four(None).await;
    let (limit, refusals) = waves_against_capacity_four(Some(AdaptiveLimit::aimd(1))).await;
    assert_eq!(fixed_limit, 32);
    assert_eq!(fixed_refusals, 20 * 28, "a fixed limit lets every wave in: 28 of 32 get a 503");
    // AIMD saws around the capacity (up one per limit's worth of successes
    // while in use, down 10% per 503), probing past it as it goes: each
    // probe costs a 503 (120 of the fixed limit's 560 when this was written;
    // one step per success instead would cost 300).
    assert!((3..=8).contains(&limit), "settled near the capacity of 4: {limit}");
    assert!(
        refusals * 4 <= fixed_refusals,
        "at most a quarter of the fixed limit's 503s: {refusals} vs {fixed_refusals}"
    );
}

/// Polls every future on this task until all are done (no spawning: the
/// registry scope and the paused clock stay in effect), in order.
async fn futures_join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures.map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(value) => *output = Some(value),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
    })
    .await;
    outputs.into_iter().map(|o| o.expect("every future finished")).collect()
}

#[tokio::test(start_paused = true)]
async fn the_fallback_gets_the_final_error_and_its_result_is_returned() {
    let policy = Policy::builder().max_attempts(2).base(ms(1)).build().unwrap();
    let attempts = Attempts::new();
    let seen = Mutex::new(None);
    let result = policy
        .run_or_else(
            || {
                attempts.mark();
                async { Err::<u32, _>(TestError::Transient) }
            },
            |error| {
                *seen.lock().unwrap() = Some(error);
                async { Ok(7) }
            },
        )
        .await;
    assert_eq!(result, Ok(7));
    assert_eq!(attempts.count(), 2, "the retries ran first");
    assert_eq!(*seen.lock().unwrap(), Some(TestError::Transient));
    let untouched = policy.run_or_else(|| async { Ok::<u32, TestError>(1) }, |_| async { Ok(7) }).await;
    assert_eq!(untouched, Ok(1), "a success never falls back");
}

/// One attempt through `bulkhead` that takes `rtt`, alone.
async fn sample(bulkhead: &Bulkhead, rtt: u64, overload: bool) {
    let permit = bulkhead.try_acquire().expect("a free permit");
    tokio::time::advance(ms(rtt)).await;
    permit.finish(overload);
}

// Kills `Bulkhead::reconfigure`'s match guard `core.config() == adaptive`
// -> `true` / `false` and `==` -> `!=`: what the limit learned is kept only
// while its settings stay, and new settings are followed at once.
#[tokio::test(start_paused = true)]
async fn a_reconfigured_bulkhead_keeps_what_its_adaptive_limit_learned_only_while_the_limit_settings_stay() {
    let gradient = AdaptiveLimit::gradient(1);
    let config = BulkheadConfig { max_concurrent: 20, adaptive: Some(gradient), ..Default::default() };
    let bulkhead = Bulkhead::new("db", config).unwrap();
    for _ in 0..5 {
        sample(&bulkhead, 10, false).await;
    }
    assert_eq!(bulkhead.limit(), 20, "steady at the usual latency");
    // Same limit settings, another max_wait: the usual latency (10 ms) is
    // remembered, so a 100 ms attempt reads as latency rising and shrinks
    // the limit. Started afresh, 100 ms would be the usual latency.
    bulkhead.reconfigure(BulkheadConfig { max_wait: Some(ms(500)), ..config }).unwrap();
    sample(&bulkhead, 100, false).await;
    assert_eq!(bulkhead.limit(), 19, "the learned latency was forgotten");
    // Other limit settings: AIMD halving from where the limit stands.
    let aimd = AdaptiveLimit::aimd(1).backoff_ratio(0.5);
    bulkhead.reconfigure(BulkheadConfig { adaptive: Some(aimd), ..config }).unwrap();
    assert_eq!(bulkhead.limit(), 19, "the limit stays where it was");
    sample(&bulkhead, 10, true).await;
    assert_eq!(bulkhead.limit(), 9, "the new algorithm was not followed");
}

/// A registry with a budget of `tokens` retries and a rate limit of `burst`
/// turns (one more a second), and a policy hedging at 10 ms under both.
fn hedging_under_budget_and_rate_limit(tokens: u32, burst: u32) -> (Registry, Policy) {
    let registry = Registry::new();
    registry
        .declare_budget(
            "dep",
            TokenBucket { capacity: tokens, retry_cost: 1, refill_per_success: 0, ..Default::default() },
        )
        .unwrap();
    registry
        .declare_rate_limit(
            "api",
            RateLimitConfig { per_second: 1, burst, max_wait: None, ..Default::default() },
        )
        .unwrap();
    let policy =
        Policy::builder().max_attempts(1).hedge(ms(10), 1).budget("dep").rate_limit("api").build().unwrap();
    (registry, policy)
}

/// The budget is asked last: a hedge the rate limit refuses costs no token.
#[tokio::test(start_paused = true)]
async fn a_hedge_refused_by_the_rate_limit_takes_no_budget_token() {
    let (registry, policy) = hedging_under_budget_and_rate_limit(5, 1);
    let attempts = Attempts::new();
    registry.scope(policy.run(|| slow_success(&attempts))).await.unwrap();
    assert_eq!(attempts.count(), 1, "the only turn went to the first attempt: no hedge ran");
    assert_eq!(registry.budget("dep").unwrap().available(), 5, "and none was paid for");
}

/// ... and a hedge with no budget token left takes no rate-limit turn,
/// which the next call's first attempt then has.
#[tokio::test(start_paused = true)]
async fn a_hedge_with_no_budget_token_takes_no_rate_limit_turn() {
    // Four turns, and next to none back during the test.
    let (registry, policy) = hedging_under_budget_and_rate_limit(1, 4);
    let attempts = Attempts::new();
    let slow = || slow_success(&attempts);
    registry.scope(policy.run(slow)).await.unwrap();
    assert_eq!(attempts.count(), 2, "the first call hedged, with two turns and the only token");
    registry.scope(policy.run(slow)).await.unwrap();
    assert_eq!(attempts.count(), 3, "the second did not: no token");
    let start = Instant::now();
    assert_eq!(registry.scope(policy.run(slow)).await, Ok(()), "the fourth turn is left for the third call");
    assert_eq!((attempts.count(), start.elapsed()), (4, ms(100)), "at once, without waiting for a turn");
}

#[tokio::test(start_paused = true)]
async fn a_hedge_needs_a_rate_limit_turn_and_the_throttles_leave() {
    let registry = Registry::new();
    registry
        .declare_rate_limit(
            "api",
            RateLimitConfig { per_second: 1, burst: 1, max_wait: None, ..Default::default() },
        )
        .unwrap();
    registry.declare_throttle("dep", ThrottleConfig::default()).unwrap();
    let attempts = Attempts::new();
    let slow = || slow_success(&attempts);
    // The first attempt takes the only turn: at 10 ms there is none for a hedge.
    let limited = Policy::builder().max_attempts(1).hedge(ms(10), 1).rate_limit("api").build().unwrap();
    registry.scope(limited.run(slow)).await.unwrap();
    assert_eq!(attempts.count(), 1, "no turn, no hedge");
    // A throttle that has seen no refusals gives its leave: the hedge runs.
    let throttled = Policy::builder().max_attempts(1).hedge(ms(10), 1).throttle("dep").build().unwrap();
    registry.scope(throttled.run(slow)).await.unwrap();
    assert_eq!(attempts.count(), 3, "the throttle let the hedge through");
}

/// A hedge that falls due at the deadline would be cut as it starts: it
/// is not started, nor paid for, and its attempt is never made.
#[tokio::test(start_paused = true)]
async fn no_hedge_starts_at_the_deadline() {
    let registry = Registry::new();
    registry
        .declare_budget(
            "dep",
            TokenBucket { capacity: 5, retry_cost: 1, refill_per_success: 0, ..Default::default() },
        )
        .unwrap();
    let policy =
        Policy::builder().max_attempts(1).deadline(ms(100)).hedge(ms(50), 2).budget("dep").build().unwrap();
    let attempts = Attempts::new();
    let result = registry
        .scope(policy.run(|| {
            attempts.mark();
            async {
                sleep(ms(1_000)).await;
                Ok::<_, TestError>(())
            }
        }))
        .await;
    assert_eq!(result, Err(TestError::Rejected(Rejection::DeadlineExceeded { after: ms(100) })));
    assert_eq!(attempts.times(), [0, 50], "the second hedge fell due at the deadline: not made");
    assert_eq!(registry.budget("dep").unwrap().available(), 4, "one token, for the one hedge that ran");
}

/// A hedge whose budget cannot pay for a retry takes no rate-limit turn,
/// also when tokens are left but fewer than a retry costs.
#[tokio::test(start_paused = true)]
async fn a_hedge_the_budget_cannot_pay_for_takes_no_rate_limit_turn() {
    let registry = Registry::new();
    // A retry costs two tokens: after one hedge, one is left, which pays for none.
    registry
        .declare_budget(
            "dep",
            TokenBucket { capacity: 3, retry_cost: 2, refill_per_success: 0, ..Default::default() },
        )
        .unwrap();
    registry
        .declare_rate_limit(
            "api",
            RateLimitConfig { per_second: 1, burst: 4, max_wait: None, ..Default::default() },
        )
        .unwrap();
    let policy =
        Policy::builder().max_attempts(1).hedge(ms(10), 1).budget("dep").rate_limit("api").build().unwrap();
    let attempts = Attempts::new();
    let slow = || slow_success(&attempts);
    registry.scope(policy.run(slow)).await.unwrap();
    assert_eq!(attempts.count(), 2, "the first call hedged, with two turns and two of the three tokens");
    registry.scope(policy.run(slow)).await.unwrap();
    assert_eq!(attempts.count(), 3, "the second did not: one token is not a retry");
    assert_eq!(registry.scope(policy.run(slow)).await, Ok(()), "the fourth turn is left for the third call");
    assert_eq!(attempts.count(), 4);
}

/// A server's `Retry-After` heard by one attempt of a round is waited out
/// before the next round, even when another attempt failed after it.
#[tokio::test(start_paused = true)]
async fn the_retry_after_a_round_waits_out_a_retry_after_any_of_its_attempts_heard() {
    let policy = Policy::builder()
        .max_attempts(2)
        .base(ms(10))
        .jitter(stormproof_runtime::Jitter::None)
        .hedge(ms(50), 1)
        .build()
        .unwrap();
    let attempts = Attempts::new();
    let result = policy
        .run(|| {
            let n = attempts.mark();
            async move {
                match n {
                    // Throttled at 60 ms: "come back in a second".
                    1 => {
                        sleep(ms(60)).await;
                        Err(TestError::Throttled(Some(ms(1_000))))
                    }
                    // The hedge (at 50 ms) fails at 70 ms, last.
                    2 => {
                        sleep(ms(20)).await;
                        Err(TestError::Transient)
                    }
                    _ => Ok(n),
                }
            }
        })
        .await;
    assert_eq!(result, Ok(3));
    assert_eq!(attempts.times(), [0, 50, 1_060], "the retry came when the server said, not 10 ms after");
}

/// ... and no hedge starts while that `Retry-After` runs: it would be
/// one more request the server asked not to get yet.
#[tokio::test(start_paused = true)]
async fn no_hedge_starts_while_a_retry_after_the_round_heard_runs() {
    let policy = Policy::builder().max_attempts(1).hedge(ms(50), 2).build().unwrap();
    let attempts = Attempts::new();
    let result = policy
        .run(|| {
            let n = attempts.mark();
            async move {
                if n == 1 {
                    sleep(ms(60)).await;
                    Err(TestError::Throttled(Some(ms(1_000))))
                } else {
                    sleep(ms(200)).await;
                    Ok(n)
                }
            }
        })
        .await;
    assert_eq!(result, Ok(2), "the hedge already sent answered");
    assert_eq!(attempts.times(), [0, 50], "no second hedge at 100 ms, inside the server's second");
}

/// A hedge that answers at the deadline's instant answers the call, as an
/// attempt that answers then does without hedging: the deadline cutting
/// the slow attempt beside it at that instant does not undo the success.
#[tokio::test(start_paused = true)]
async fn a_hedge_that_succeeds_at_the_deadline_wins_over_the_cut_beside_it() {
    let attempts = Attempts::new();
    let answer_at_the_deadline = || {
        let n = attempts.mark();
        async move {
            // The first attempt is stuck; the hedge (or the only attempt) answers at 100 ms.
            sleep(if n == 2 {
                ms(50)
            } else if n == 1 {
                ms(1_000)
            } else {
                ms(100)
            })
            .await;
            Ok::<_, TestError>(n)
        }
    };
    let unhedged = Policy::builder().max_attempts(1).deadline(ms(100)).build().unwrap();
    let hedged = Policy::builder().max_attempts(1).deadline(ms(100)).hedge(ms(50), 1).build().unwrap();
    assert_eq!(hedged.run(answer_at_the_deadline).await, Ok(2), "the hedge answered at 100 ms");
    assert_eq!(unhedged.run(answer_at_the_deadline).await, Ok(3), "as an attempt alone does");
}

/// A registry with every guard a hedge asks for, each named "dep": a
/// budget of five tokens, a breaker, a bulkhead of two places, a rate limit
/// of three turns (one more a second) and a throttle (which refuses
/// nothing); and a policy under them that hedges once at 50 ms and retries
/// once, 100 ms after a failure.
fn hedging_under_every_guard() -> (Registry, Policy) {
    let registry = Registry::with_seed(3);
    registry
        .declare_budget(
            "dep",
            TokenBucket { capacity: 5, retry_cost: 1, refill_per_success: 0, ..Default::default() },
        )
        .unwrap();
    registry.declare_breaker("dep", BreakerConfig::default()).unwrap();
    let two_places = BulkheadConfig { max_concurrent: 2, max_wait: None, ..Default::default() };
    registry.declare_bulkhead("dep", two_places).unwrap();
    registry
        .declare_rate_limit(
            "dep",
            RateLimitConfig { per_second: 1, burst: 3, max_wait: None, ..Default::default() },
        )
        .unwrap();
    registry.declare_throttle("dep", ThrottleConfig::default()).unwrap();
    // Three accepts heard: a failure leaves it refusing nothing.
    let throttle = registry.throttle("dep").unwrap();
    (0..3).for_each(|_| throttle.answered(true));
    let policy = Policy::builder()
        .max_attempts(2)
        .base(ms(100))
        .jitter(stormproof_runtime::Jitter::None)
        .hedge(ms(50), 1)
        .budget("dep")
        .breaker("dep")
        .bulkhead("dep")
        .rate_limit("dep")
        .throttle("dep")
        .build()
        .unwrap();
    (registry, policy)
}

/// Runs `policy` under `registry`, each attempt (marked in `attempts`)
/// answering 50 ms after it starts, the first one with `first`, the others
/// with a success: the call's result, and how many bulkhead places were
/// in use as each attempt answered.
async fn answering_at_50_ms(
    registry: &Registry,
    policy: &Policy,
    attempts: &Attempts,
    first: Result<u32, TestError>,
) -> (Result<u32, TestError>, Vec<usize>) {
    let in_use = Mutex::new(Vec::new());
    let bulkhead = registry.bulkhead("dep").unwrap();
    let result = registry
        .scope(policy.run(|| {
            let n = attempts.mark();
            let (first, in_use, bulkhead) = (first.clone(), &in_use, &bulkhead);
            async move {
                sleep(ms(50)).await;
                in_use.lock().unwrap().push(bulkhead.in_use());
                if n == 1 { first } else { Ok(n) }
            }
        }))
        .await;
    (result, in_use.into_inner().unwrap())
}

/// The turns a rate limit has free now (taking them).
fn turns_left(limit: &RateLimit) -> u32 {
    (0..10).take_while(|_| limit.try_acquire()).count() as u32
}

/// An attempt that answers as its hedge falls due has answered: the round
/// sees it before the hedge's timer, as the retry loop sees an attempt that
/// finishes as its timeout fires. No hedge is admitted, so none is paid
/// for: no budget token, no rate-limit turn (neither can be given back),
/// no place, no breaker or throttle leave, and the body ran once.
#[tokio::test(start_paused = true)]
async fn an_attempt_that_answers_as_its_hedge_falls_due_spends_nothing_on_the_hedge() {
    let (registry, policy) = hedging_under_every_guard();
    let attempts = Attempts::new();
    let (result, in_use) = answering_at_50_ms(&registry, &policy, &attempts, Ok(1)).await;
    assert_eq!(result, Ok(1));
    assert_eq!(attempts.times(), [0], "the body ran once: no hedge was made at 50 ms");
    assert_eq!(in_use, [1], "no place was taken for a hedge as the attempt answered");
    let budget = registry.budget("dep").unwrap();
    assert_eq!((budget.available(), budget.totals().retries), (5, 0), "no token was paid for a hedge");
    let breaker = registry.breaker("dep").unwrap().totals();
    assert_eq!((breaker.calls, breaker.failures, breaker.rejections), (1, 0, 0));
    assert_eq!(registry.bulkhead("dep").unwrap().in_use(), 0);
    assert_eq!(registry.throttle("dep").unwrap().refusal_probability(), 0.0);
    assert_eq!(turns_left(&registry.rate_limit("dep").unwrap()), 2, "one turn taken, by the attempt");
}

/// ... and one that fails then has ended the round, as one that failed a
/// moment earlier would have: the loop decides, and the retry comes after
/// the backoff, counted once (one attempt more, one token, one turn), not
/// as a hedge admitted at 50 ms beside an attempt that was over.
#[tokio::test(start_paused = true)]
async fn an_attempt_that_fails_as_its_hedge_falls_due_is_retried_once_after_the_backoff() {
    let (registry, policy) = hedging_under_every_guard();
    let attempts = Attempts::new();
    let (result, in_use) = answering_at_50_ms(&registry, &policy, &attempts, Err(TestError::Transient)).await;
    assert_eq!(result, Ok(2), "the retry answered");
    assert_eq!(attempts.times(), [0, 150], "retried 100 ms after the failure at 50 ms, no hedge at 50");
    assert_eq!(in_use, [1, 1], "each attempt alone in the bulkhead");
    let budget = registry.budget("dep").unwrap();
    assert_eq!((budget.available(), budget.totals().retries), (4, 1), "one token, for the retry");
    let breaker = registry.breaker("dep").unwrap().totals();
    assert_eq!((breaker.calls, breaker.failures, breaker.rejections), (2, 1, 0));
    assert_eq!(registry.bulkhead("dep").unwrap().in_use(), 0);
    assert_eq!(turns_left(&registry.rate_limit("dep").unwrap()), 1, "two turns taken, one per attempt");
}

/// Two outer calls (keyless, then keyed, whose key the inner call inherits)
/// of a policy that retries once, each attempt calling `inner`, a hedged
/// policy whose attempts answer after 300 ms: when the inner attempts
/// started, and what each outer call got.
async fn hedged_inside_an_attempt(inner: &Policy) -> (Vec<u64>, [Result<u32, TestError>; 2]) {
    // A registry of its own: the outer policy's own breaker and budget,
    // named after this line, are not shared with the tests running beside.
    Registry::new()
        .scope(async {
            let outer = Policy::builder()
                .max_attempts(2)
                .base(ms(1))
                .jitter(stormproof_runtime::Jitter::None)
                .build()
                .unwrap();
            let attempts = Attempts::new();
            let slow = || {
                let n = attempts.mark();
                async move {
                    sleep(ms(300)).await;
                    Ok::<_, TestError>(n)
                }
            };
            let keyless = outer.run(|| inner.run(slow)).await;
            let keyed = outer.run_with_key("order-3", || inner.run(slow)).await;
            (attempts.times(), [keyless, keyed])
        })
        .await
}

#[tokio::test(start_paused = true)]
async fn a_call_nested_once_makes_one_attempt_and_no_hedge() {
    let (times, results) = hedged_inside_an_attempt(&hedging(50, 2)).await;
    assert_eq!(times, [0, 300], "one attempt per inner call, no hedge at 50 or 100 ms");
    assert_eq!(results, [Ok(1), Ok(2)]);
}

#[tokio::test(start_paused = true)]
async fn a_call_nested_with_retry_still_hedges() {
    let (times, results) =
        hedged_inside_an_attempt(&hedging(50, 2).to_builder().nested(Nested::Retry).build().unwrap()).await;
    assert_eq!(times, [0, 50, 100, 300, 350, 400], "two hedges per inner call, one every 50 ms");
    assert_eq!(results, [Ok(1), Ok(4)], "equally slow: the first started answered");
}

#[tokio::test(start_paused = true)]
async fn a_hedged_call_nested_once_still_times_its_single_attempt_out() {
    let inner = Policy::builder().hedge(ms(50), 2).attempt_timeout(ms(100)).build().unwrap();
    let (times, results) = hedged_inside_an_attempt(&inner).await;
    let timed_out = Err(TestError::Rejected(Rejection::AttemptTimeout { after: ms(100) }));
    assert_eq!(
        times,
        [0, 101, 201, 302],
        "one attempt per inner call, each outer call retrying once after 1 ms"
    );
    assert_eq!(results, [timed_out.clone(), timed_out]);
}
