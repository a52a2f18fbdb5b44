//! The router's lifecycle: its sampler and its hook live no longer than it.

use std::sync::Arc;
use std::time::Duration;

use super::sampler::PERIOD;
use super::snapshot::{Counts, State};
use super::{Shared, router, routes};
use stormproof_runtime::Registry;
use stormproof_runtime::breaker::{BreakerConfig, Outcome};

pub(super) fn registry_with(breaker: &str) -> Registry {
    let registry = Registry::new();
    registry.declare_breaker(breaker, BreakerConfig { failure_threshold: 3, ..Default::default() }).unwrap();
    registry
}

pub(super) fn calls(registry: &Registry, breaker: &str, successes: u64, failures: u64) {
    let breaker = registry.breaker(breaker).unwrap();
    for _ in 0..successes {
        breaker.try_acquire().unwrap().record(Outcome::Success);
    }
    for _ in 0..failures {
        breaker.try_acquire().unwrap().record(Outcome::Failure);
    }
}

/// Lets every task that is ready run.
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn each_second_holds_what_the_breaker_counted_in_it() {
    let registry = registry_with("db");
    calls(&registry, "db", 4, 0); // before the router: not in its first second
    let shared = Shared::start(router(&registry));
    calls(&registry, "db", 5, 2);
    tokio::time::sleep(PERIOD + Duration::from_millis(1)).await;
    calls(&registry, "db", 1, 0);
    tokio::time::sleep(PERIOD).await;
    let snapshot = shared.snapshot();
    assert_eq!(
        snapshot.breakers[0].per_second,
        [
            Counts { calls: 7, failures: 2, rejections: 0, slow_calls: 0 },
            Counts { calls: 1, failures: 0, rejections: 0, slow_calls: 0 }
        ]
    );
    assert_eq!(snapshot.breakers[0].totals, Counts { calls: 12, failures: 2, rejections: 0, slow_calls: 0 });
}

#[tokio::test(start_paused = true)]
async fn a_breaker_made_after_the_router_counts_from_its_first_call() {
    let registry = Registry::new();
    let shared = Shared::start(router(&registry));
    registry.declare_breaker("late", BreakerConfig::default()).unwrap();
    calls(&registry, "late", 3, 0);
    tokio::time::sleep(PERIOD + Duration::from_millis(1)).await;
    assert_eq!(
        shared.snapshot().breakers[0].per_second,
        [Counts { calls: 3, failures: 0, rejections: 0, slow_calls: 0 }]
    );
}

#[tokio::test(start_paused = true)]
async fn transitions_are_recorded_with_their_forced_state() {
    let registry = registry_with("db");
    let shared = Shared::start(router(&registry));
    calls(&registry, "db", 0, 3);
    registry.breaker("db").unwrap().force_closed();
    let seen: Vec<_> =
        shared.snapshot().transitions.into_iter().map(|t| (t.seq, t.from, t.to, t.forced)).collect();
    assert_eq!(
        seen,
        [(1, State::Closed, State::Open, None), (2, State::Open, State::Closed, Some(State::Closed))]
    );
}

/// A second force-open of a breaker held open already (a repeated click)
/// is no transition: the dashboard, the hooks and the metrics saw
/// `open -> open` before, as if the state had changed.
#[tokio::test(start_paused = true)]
async fn forcing_a_breaker_into_the_state_it_is_held_in_is_no_transition() {
    let registry = registry_with("db");
    let shared = Shared::start(router(&registry));
    let breaker = registry.breaker("db").unwrap();
    breaker.force_open();
    breaker.force_open();
    breaker.force_closed();
    breaker.force_closed();
    let seen: Vec<_> = shared.snapshot().transitions.into_iter().map(|t| (t.from, t.to, t.forced)).collect();
    assert_eq!(
        seen,
        [(State::Closed, State::Open, Some(State::Open)), (State::Open, State::Closed, Some(State::Closed))]
    );
}

/// An AIMD limit moves by fractions (a tenth of a step per success at
/// 10), and the bulkhead admits it rounded: the dashboard shows what it
/// admits, not the fraction, and never a number it does not admit.
#[tokio::test(start_paused = true)]
async fn the_dashboard_shows_the_adaptive_limit_the_bulkhead_admits() {
    use stormproof_runtime::bulkhead::{AdaptiveLimit, BulkheadConfig};

    let registry = Registry::new();
    let config =
        BulkheadConfig { max_concurrent: 10, adaptive: Some(AdaptiveLimit::aimd(1)), ..Default::default() };
    registry.declare_bulkhead("search", config).unwrap();
    let shared = Shared::start(router(&registry));
    let bulkhead = registry.bulkhead("search").unwrap();
    bulkhead.try_acquire().unwrap().finish(true); // 10 * 0.9 = 9
    let admitted = || {
        let held: Vec<_> = std::iter::from_fn(|| bulkhead.try_acquire()).collect();
        held.len() as u32
    };
    let shown = || shared.snapshot().bulkheads[0].limit;
    assert_eq!((shown(), admitted()), (9, 9));
    // Successes with at least half the limit in use: 9 + 1/9 + 1/9.1 + ...
    // 9.44 after four (shown and admitted: 9), 9.54 after five (10).
    for (successes, limit) in [(4, 9), (1, 10)] {
        for _ in 0..successes {
            let held: Vec<_> = (0..5).map(|_| bulkhead.try_acquire().unwrap()).collect();
            held.into_iter().next().unwrap().finish(false);
        }
        assert_eq!((shown(), admitted()), (limit, limit));
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_the_router_ends_its_sampler_and_silences_its_hook() {
    let registry = registry_with("db");
    let shared = Shared::start(router(&registry));
    let sampler = shared.sampler.get().cloned().expect("built inside a runtime: the sampler started");
    let router: axum::Router = routes(shared.clone());
    let weak = Arc::downgrade(&shared);
    drop(shared);
    settle().await;
    assert!(!sampler.is_finished(), "the router still holds it");
    drop(router);
    assert!(weak.upgrade().is_none(), "nothing but the router held it: not the sampler, not the hook");
    settle().await;
    assert!(sampler.is_finished(), "the sampler ended with the router, without waiting for its next tick");
    // Its hook is gone from the registry, which outlives it.
    assert_eq!(registry.transition_hook_count(), 0, "the router's hook is left in the registry");
    calls(&registry, "db", 0, 3);
    registry.breaker("db").unwrap().reset();
}

#[tokio::test(start_paused = true)]
async fn routers_built_and_dropped_one_after_another_leave_no_hooks_behind() {
    let registry = registry_with("db");
    registry.on_transition(|_| {});
    for _ in 0..3 {
        let router = router(&registry).into_router();
        assert_eq!(registry.transition_hook_count(), 2, "the user's hook and this router's");
        drop(router);
        settle().await;
    }
    assert_eq!(registry.transition_hook_count(), 1, "only the user's hook is left");
    let kept = router(&registry).into_router();
    let shared = Shared::start(router(&registry));
    drop(shared);
    assert_eq!(
        registry.transition_hook_count(),
        2,
        "dropping one router takes out its own hook, not another's"
    );
    drop(kept);
}

#[test]
fn a_runtime_shutting_down_ends_the_sampler_and_the_router_can_still_be_dropped() {
    let registry = registry_with("db");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let shared = runtime.block_on(async { Shared::start(router(&registry)) });
    let sampler = shared.sampler.get().cloned().unwrap();
    drop(runtime);
    assert!(sampler.is_finished());
    drop(shared);
}

#[test]
fn a_router_built_outside_a_runtime_starts_its_sampler_with_its_first_request() {
    let registry = registry_with("db");
    let shared = Shared::start(router(&registry));
    assert!(shared.sampler.get().is_none(), "no runtime to run it on yet");
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    runtime.block_on(async {
        shared.ensure_sampler();
        calls(&registry, "db", 2, 0);
        tokio::time::sleep(PERIOD + Duration::from_millis(1)).await;
        assert_eq!(
            shared.snapshot().breakers[0].per_second,
            [Counts { calls: 2, failures: 0, rejections: 0, slow_calls: 0 }]
        );
    });
}

/// The `seq` of each `transition` event in `chunk`, and for a `snapshot`
/// event the highest `seq` it lists (0 for none), in the order sent.
fn seqs(chunk: &str) -> Vec<(bool, u64)> {
    let seq_in = |data: &str| -> Vec<u64> {
        data.split("\"seq\":")
            .skip(1)
            .map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap())
            .collect()
    };
    chunk
        .split("\n\n")
        .filter_map(|block| {
            let data = block.lines().find_map(|line| line.strip_prefix("data: "))?;
            match block.lines().find_map(|line| line.strip_prefix("event: "))? {
                "transition" => Some((true, seq_in(data)[0])),
                "snapshot" => Some((false, seq_in(data).into_iter().max().unwrap_or(0))),
                _ => None,
            }
        })
        .collect()
}

/// Transitions made at once on several threads reach the event stream in
/// the order of their `seq`: the page drops a transition whose `seq` is not
/// above the last it applied, so one sent out of order would be lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transitions_reach_the_stream_in_the_order_of_their_numbers() {
    use axum::response::IntoResponse;
    use futures_util::StreamExt;
    const TOGGLES: u64 = 5_000;

    let registry = Registry::new();
    for name in ["a", "b", "c"] {
        registry.declare_breaker(name, BreakerConfig::default()).unwrap();
    }
    let shared = Shared::start(router(&registry));
    let stream = super::events::events(axum::extract::State(shared.clone())).await;
    let mut body = stream.into_response().into_body().into_data_stream();
    let togglers: Vec<_> = ["a", "b", "c"]
        .into_iter()
        .map(|name| {
            let breaker = registry.breaker(name).unwrap();
            std::thread::spawn(move || {
                for _ in 0..TOGGLES {
                    breaker.force_open();
                    breaker.reset();
                }
            })
        })
        .collect();
    // The highest `seq` seen, and the last transition's since the last snapshot.
    let (mut highest, mut last, mut buffer) = (0, 0, String::new());
    // Two transitions per toggle, three breakers.
    while highest < 6 * TOGGLES {
        let chunk =
            tokio::time::timeout(Duration::from_secs(60), body.next()).await.unwrap().unwrap().unwrap();
        buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        let Some(end) = buffer.rfind("\n\n") else { continue };
        let complete: String = buffer.drain(..end + 2).collect();
        for (transition, seq) in seqs(&complete) {
            if transition {
                assert!(seq > last, "transition {seq} sent after {last}");
                last = seq;
            } else {
                // This client fell behind: a fresh snapshot, then the channel
                // from where it is (it may repeat what the snapshot holds).
                last = 0;
            }
            highest = highest.max(seq);
        }
    }
    togglers.into_iter().for_each(|thread| thread.join().unwrap());
}

/// The named events in `chunk`, each with its data, in the order sent.
pub(super) fn named_events(chunk: &str) -> Vec<(String, String)> {
    chunk
        .split("\n\n")
        .filter_map(|block| {
            let name = block.lines().find_map(|line| line.strip_prefix("event: "))?;
            let data = block.lines().find_map(|line| line.strip_prefix("data: "))?;
            Some((name.to_owned(), data.to_owned()))
        })
        .collect()
}

/// A page that stops reading holds no backlog of ticks (each a whole
/// snapshot: on one queue, a stalled page held up to 1024 of them), and
/// when it reads again it gets what happened since, in order: the
/// transition, then the latest tick only, not one per second it missed.
#[tokio::test(start_paused = true)]
async fn a_page_that_stops_reading_gets_the_latest_tick_not_the_ones_it_missed() {
    use axum::response::IntoResponse;
    use futures_util::StreamExt;

    let registry = registry_with("db");
    let shared = Shared::start(router(&registry));
    let stream = super::events::events(axum::extract::State(shared.clone())).await;
    let mut body = stream.into_response().into_body().into_data_stream();
    let first = String::from_utf8(body.next().await.unwrap().unwrap().to_vec()).unwrap();
    assert_eq!(named_events(&first)[0].0, "snapshot");

    // Half a period off the sampler's ticks: ten seconds of calls, each
    // second more, the last one opening the breaker; the page reads nothing.
    tokio::time::sleep(PERIOD / 2).await;
    for second in 1..=9 {
        calls(&registry, "db", second, 0);
        tokio::time::sleep(PERIOD).await;
    }
    calls(&registry, "db", 0, 3);
    tokio::time::sleep(PERIOD).await;

    let mut missed = String::new();
    // What is waiting: the next tick is half a period away.
    while let Ok(Some(chunk)) = tokio::time::timeout(Duration::from_millis(10), body.next()).await {
        missed.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    let missed = named_events(&missed);
    let names: Vec<&str> = missed.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["transition", "tick"], "not ten ticks");
    assert!(missed[0].1.contains(r#""from":"closed","to":"open""#), "{}", missed[0].1);
    let latest = &missed[1].1;
    assert!(latest.contains(r#""state":"open""#), "{latest}");
    assert!(
        latest.contains(r#""totals":{"calls":48,"failures":3,"rejections":0,"slow_calls":0}"#),
        "the latest: {latest}"
    );
}
