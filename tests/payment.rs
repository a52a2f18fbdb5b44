//! The payment example at small scale, against the real loopback server:
//! every order is charged exactly once, every attempt of an order's charge
//! carries the same idempotency key (the one the library hands the
//! attempt), retries happen, and the breaker opens during the outage.
//!
//! Real sockets need the real clock, so this test runs in real time (a few
//! seconds). Every fault spell starts at a numbered request and that request
//! always has the fault, so what the assertions need happens however fast
//! the machine is.

#[path = "../examples/payment/scenario.rs"]
mod scenario;
#[path = "../examples/payment/server.rs"]
#[allow(dead_code)]
mod server;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use scenario::{Api, OrderOutcome, Tally};
use stormproof::{Registry, breaker::BreakerState};
use tracing_subscriber::layer::SubscriberExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_order_is_charged_exactly_once_through_faults() {
    let tally = Tally::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(tally.clone())).unwrap();
    let registry = Registry::new();
    let transitions = Arc::new(Mutex::new(Vec::new()));
    let log = transitions.clone();
    registry.on_transition(move |t| log.lock().unwrap().push((t.from, t.to)));
    scenario::declare_guards(&registry).unwrap();

    let server = server::start(server::FaultPlan::small()).await.unwrap();
    let api = Arc::new(Api::new(server.addr));
    let orders = 40;
    let mut tasks = Vec::new();
    for i in 0..orders {
        let api = api.clone();
        tasks.push(tokio::spawn(registry.scope(async move {
            scenario::place_order(&api, format!("order-{i}"), format!("sku-{i}"), Duration::from_secs(30))
                .await
        })));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), OrderOutcome::Charged);
    }

    // The key is `key = order_id`'s Display, handed to every attempt by the
    // library: a missing key, or one that changes between attempts, would
    // let a retry charge twice.
    let keys = server.ledger.keys_per_order();
    assert_eq!(keys.len(), orders, "every order sent a charge request");
    for (order, sent) in &keys {
        assert!(
            sent.iter().all(|key| key.as_deref() == Some(order.as_str())),
            "every charge request of {order} carries the key {order}: {sent:?}"
        );
    }
    let retried = keys.values().filter(|sent| sent.len() > 1).count();
    assert!(retried > 0, "some charges were sent more than once, so the keys were compared across attempts");
    assert_eq!(server.ledger.orders_with_inconsistent_keys(), []);

    let per_order = server.ledger.charges_per_order();
    assert_eq!(per_order.len(), orders, "no order lost");
    assert!(per_order.values().all(|&n| n == 1), "no order charged twice: {per_order:?}");
    assert_eq!(server.ledger.charges(), orders as u64);
    assert!(
        server.ledger.deduplicated.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "slow charges were retried"
    );
    assert!(tally.get("retry/transient") > 0, "503s and timeouts were retried: {:?}", tally.counts());
    assert!(tally.get("retry/throttled") > 0, "429s were retried: {:?}", tally.counts());
    let transitions = transitions.lock().unwrap();
    assert!(
        transitions.contains(&(BreakerState::Closed, BreakerState::Open)),
        "the outage opened the breaker: {transitions:?}"
    );
    assert_eq!(registry.bulkhead("payments").unwrap().in_use(), 0);
}
