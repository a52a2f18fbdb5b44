//! Loom model checks of the breaker's atomic transitions: every
//! interleaving of two threads, not just the ones a stress test happens to hit.
//!
//! Run: `RUSTFLAGS="--cfg stormproof_loom" cargo test -p stormproof-runtime --test loom_breaker --release`
#![cfg(stormproof_loom)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use stormproof_runtime::{
    Registry,
    breaker::{BreakerConfig, BreakerState, CircuitBreaker, Outcome},
};

/// `loom::model`, with the body on a loom thread of a 1 MiB stack: a
/// breaker built on the model's main coroutine (whose stack is small)
/// overflows it, its per-thread counter taking 128 bytes a slot.
fn model<F: Fn() + Send + Sync + 'static>(body: F) {
    let body = Arc::new(body);
    loom::model(move || {
        let body = body.clone();
        loom::thread::Builder::new().stack_size(1 << 20).spawn(move || body()).unwrap().join().unwrap();
    });
}

fn config(threshold: u32) -> BreakerConfig {
    BreakerConfig {
        failure_threshold: threshold,
        open_for: Duration::from_nanos(1),
        success_threshold: 1,
        half_open_max_calls: 1,
        ..Default::default()
    }
}

#[test]
fn two_threads_racing_to_open_open_it_exactly_once() {
    model(|| {
        let registry = Registry::new();
        let transitions = Arc::new(AtomicU32::new(0));
        let seen = transitions.clone();
        registry.on_transition(move |t| {
            assert_eq!((t.from, t.to), (BreakerState::Closed, BreakerState::Open));
            seen.fetch_add(1, Ordering::SeqCst);
        });
        registry
            .declare_breaker("race", BreakerConfig { open_for: Duration::from_secs(60), ..config(2) })
            .unwrap();
        let breaker = registry.breaker("race").unwrap();
        race(&breaker, attempt(Outcome::Failure), attempt(Outcome::Failure));
        assert_eq!(breaker.state(), BreakerState::Open);
        assert_eq!(transitions.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_success_racing_a_failure_leaves_a_consistent_state() {
    model(|| {
        let breaker = Arc::new(
            CircuitBreaker::new("mixed", BreakerConfig { open_for: Duration::from_secs(60), ..config(1) })
                .unwrap(),
        );
        race(&breaker, attempt(Outcome::Success), attempt(Outcome::Failure));
        // Threshold 1: the failure opens it whatever the order; a success
        // admitted before the opening belongs to the old epoch and cannot close it.
        assert_eq!(breaker.state(), BreakerState::Open);
    });
}

/// Runs `first` and `second` on two loom threads at once and waits for both.
fn race<F, G>(breaker: &Arc<CircuitBreaker>, first: F, second: G)
where
    F: FnOnce(&CircuitBreaker) + Send + 'static,
    G: FnOnce(&CircuitBreaker) + Send + 'static,
{
    let (a, b) = (breaker.clone(), breaker.clone());
    let first = loom::thread::spawn(move || first(&a));
    let second = loom::thread::spawn(move || second(&b));
    first.join().unwrap();
    second.join().unwrap();
}

/// One attempt that ends with `outcome`, if the breaker admits it.
fn attempt(outcome: Outcome) -> impl FnOnce(&CircuitBreaker) + Send + 'static {
    move |breaker| {
        if let Some(permit) = breaker.try_acquire() {
            permit.record(outcome);
        }
    }
}

/// A breaker opened by one failure; with `open_for` of 1 ns it is half-open
/// by the time the threads start.
fn half_open_breaker() -> Arc<CircuitBreaker> {
    let breaker = Arc::new(CircuitBreaker::new("probe", config(1)).unwrap());
    breaker.try_acquire().unwrap().record(Outcome::Failure);
    std::thread::sleep(Duration::from_micros(1));
    breaker
}

/// What a probe does with its slot once admitted.
#[derive(Clone, Copy, PartialEq)]
enum Slot {
    /// Holds it for the rest of the model run.
    Keep,
    /// Gives it back unrecorded (a cancelled attempt).
    Abandon,
}

/// A half-open probe that counts its admission into `admitted`.
fn probe(admitted: &Arc<AtomicU32>, slot: Slot) -> impl FnOnce(&CircuitBreaker) + Send + 'static {
    let admitted = admitted.clone();
    move |breaker| {
        if let Some(permit) = breaker.try_acquire() {
            assert!(permit.is_probe());
            admitted.fetch_add(1, Ordering::SeqCst);
            if slot == Slot::Keep {
                std::mem::forget(permit);
            }
        }
    }
}

#[test]
fn two_probes_racing_in_half_open_get_one_slot() {
    model(|| {
        let breaker = half_open_breaker();
        let admitted = Arc::new(AtomicU32::new(0));
        race(&breaker, probe(&admitted, Slot::Keep), probe(&admitted, Slot::Keep));
        assert_eq!(admitted.load(Ordering::SeqCst), 1, "half_open_max_calls is 1");
    });
}

#[test]
fn abandoned_racing_probes_give_their_slots_back() {
    model(|| {
        let breaker = half_open_breaker();
        let admitted = Arc::new(AtomicU32::new(0));
        race(&breaker, probe(&admitted, Slot::Abandon), probe(&admitted, Slot::Abandon));
        let admitted = admitted.load(Ordering::SeqCst);
        assert!((1..=2).contains(&admitted), "one slot, freed after each abandon: {admitted}");
        let permit = breaker.try_acquire().expect("no probe slot leaked");
        permit.record(Outcome::Success);
        assert_eq!(breaker.state(), BreakerState::Closed);
    });
}

#[test]
fn transitions_made_on_two_threads_are_announced_in_the_order_they_were_made() {
    model(|| {
        let registry = Registry::new();
        let announced = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = announced.clone();
        // A hook that does some work first (here one atomic add), during
        // which the other thread can run: a gauge or a log written after it.
        let work = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
        registry.on_transition(move |t| {
            work.fetch_add(1, Ordering::SeqCst);
            log.lock().unwrap().push((t.from, t.to));
        });
        registry.declare_breaker("order", config(1)).unwrap();
        let breaker = registry.breaker("order").unwrap();
        // One thread opens it; the other, once `open_for` (1 ns) has
        // passed, probes it half-open and closes it again.
        race(&breaker, attempt(Outcome::Failure), attempt(Outcome::Success));
        let announced = announced.lock().unwrap().clone();
        // Hooks that set a gauge or draw a log must end on the state the
        // breaker is in: each transition leaves the state the one before entered.
        let mut state = BreakerState::Closed;
        for &(from, to) in &announced {
            assert_eq!(from, state, "announced out of order: {announced:?}");
            state = to;
        }
        // (`state()` says half-open once `open_for` has passed, before any
        // call makes the transition.)
        let now = match (state, breaker.state()) {
            (BreakerState::Open, BreakerState::HalfOpen) => BreakerState::Open,
            (_, now) => now,
        };
        assert_eq!(state, now, "the last announced is not the state: {announced:?}");
    });
}
