//! Keys of the fleet holding another type than the hash the flush script
//! keeps there (another program's string), at every key the script reads,
//! with replicas as registries of this process: each is replaced and said
//! once, and the fleet goes on.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use stormproof_fleet::{Fleet, FleetConfig};
use stormproof_runtime::{
    Registry,
    breaker::{BreakerConfig, Outcome},
    budget::RatioBudget,
};

use super::SYNC_MS;
use super::faults::{open, until};
use super::server::Server;

/// A replica sharing breaker `dep` (opened by 3 failures in 10 s) and
/// budget `dep` in fleet `types`. The store timeout leaves room for a busy
/// machine: only the keys planted may make a flush fail.
fn replica(server: &Server) -> (Registry, Fleet) {
    let registry = Registry::new();
    registry.declare_breaker("dep", BreakerConfig { failure_threshold: 3, ..Default::default() }).unwrap();
    registry.declare_budget("dep", RatioBudget::default()).unwrap();
    let fleet = Fleet::join(
        &registry,
        FleetConfig {
            url: server.url(),
            prefix: "types".into(),
            sync_every: Duration::from_millis(SYNC_MS),
            store_timeout: Duration::from_secs(2),
            breakers: vec!["dep".into()],
            budgets: vec!["dep".into()],
            ..Default::default()
        },
    )
    .unwrap();
    (registry, fleet)
}

/// The `WARN` events about a fleet (those with a `fleet` field), each as
/// the key it names (`None`: it names none).
#[derive(Clone, Default)]
struct FleetWarnings(Arc<Mutex<Vec<Option<String>>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for FleetWarnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        #[derive(Default)]
        struct Fields {
            fleet: bool,
            key: Option<String>,
        }
        impl tracing::field::Visit for Fields {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                match field.name() {
                    "fleet" => self.fleet = true,
                    "key" => self.key = Some(value.to_owned()),
                    _ => {}
                }
            }
            fn record_debug(&mut self, field: &tracing::field::Field, _: &dyn std::fmt::Debug) {
                self.fleet |= field.name() == "fleet";
            }
        }
        if *event.metadata().level() == tracing::Level::WARN {
            let mut fields = Fields::default();
            event.record(&mut fields);
            if fields.fleet {
                self.0.lock().unwrap().push(fields.key);
            }
        }
    }
}

#[test]
fn a_key_of_another_type_at_every_key_the_script_reads_is_replaced_said_once_and_the_fleet_goes_on() {
    let _serial = super::serial();
    let warnings = FleetWarnings::default();
    let subscriber = {
        use tracing_subscriber::layer::SubscriberExt;
        tracing_subscriber::registry().with(warnings.clone())
    };
    // One thread: the fleets' tasks run where the subscriber is the default.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    tracing::subscriber::with_default(subscriber, || runtime.block_on(planted(&warnings)));
}

/// Two linked replicas; then a string at the breaker's state, at each
/// replica's records, and at the buckets of the breaker and of the budget
/// over the window and the seconds the test runs. Before, the first string
/// in a bucket failed every flush with WRONGTYPE, for good: the replicas
/// ran on local state unheard, and a trip in one was never heard by the
/// other. Now the replicas agree within the bound of a store without such
/// keys, no flush fails, and each key replaced is said once: a `WARN`
/// naming it, and the count of its replica's `Fleet`.
async fn planted(warnings: &FleetWarnings) {
    let Some(server) = Server::start("a_key_of_another_type_at_every_key_...") else { return };
    let (a, fleet_a) = replica(&server);
    let (b, fleet_b) = replica(&server);
    until("both linked", Duration::from_secs(5), || fleet_a.is_linked() && fleet_b.is_linked()).await;

    let (secs, _): (u64, u64) = redis::cmd("TIME").query(&mut server.connection().unwrap()).unwrap();
    let mut planted = vec!["types:breaker:dep".to_owned()];
    for fleet in [&fleet_a, &fleet_b] {
        for kind in ["breaker", "budget"] {
            planted.push(format!("types:replica:{:016x}:{kind}:dep", fleet.replica()));
        }
    }
    // Buckets of 1 s (10 s windows), epoch 0 for the breaker (closed).
    for id in secs - 9..=secs + 5 {
        planted.push(format!("types:breaker:dep:0:{id}"));
        planted.push(format!("types:budget:dep:{id}"));
    }
    for key in &planted {
        server.command(&["SET", key, "x"]);
    }
    // Each replica's budget counts a first attempt (written to the bucket
    // of now) and spends its lease below half (the next flush asks for
    // more: the window's buckets are read).
    for registry in [&a, &b] {
        let budget = registry.budget("dep").unwrap();
        budget.on_first_attempt();
        while budget.leased().is_some_and(|left| left >= 10) {
            assert!(budget.try_withdraw());
        }
    }
    for _ in 0..3 {
        a.breaker("dep").unwrap().try_acquire().unwrap().record(Outcome::Failure);
    }
    let heard = until("b opened on a's failures", Duration::from_millis(4 * SYNC_MS), || open(&b)).await;
    eprintln!("b opened {heard:?} after a's third failure, every key planted");
    for (registry, fleet) in [(&a, &fleet_a), (&b, &fleet_b)] {
        let budget = registry.budget("dep").unwrap();
        until("a lease topped up", Duration::from_secs(2), || budget.leased().is_some_and(|n| n >= 10)).await;
        let from = fleet.flushes();
        until("another flush", Duration::from_secs(2), || fleet.flushes() > from).await;
    }
    assert!(fleet_a.is_linked() && fleet_b.is_linked(), "the fleet went on");
    assert_eq!((fleet_a.failed_flushes(), fleet_b.failed_flushes()), (0, 0), "no flush failed");

    // Those read (all but the buckets of seconds the test did not reach)
    // hold a hash now, or nothing.
    let mut con = server.connection().unwrap();
    let mut replaced: Vec<String> = planted
        .iter()
        .filter(|key| redis::cmd("TYPE").arg(key).query::<String>(&mut con).unwrap() != "string")
        .cloned()
        .collect();
    replaced.sort();
    let now_buckets = [format!("types:breaker:dep:0:{secs}"), format!("types:budget:dep:{secs}")];
    for key in planted[..5].iter().chain(&now_buckets) {
        assert!(replaced.contains(key), "`{key}` was read, and replaced: {replaced:?}");
    }
    let counted = fleet_a.replaced_keys() + fleet_b.replaced_keys();
    assert_eq!(counted, replaced.len() as u64, "each key replaced counted once: {replaced:?}");
    let mut warned: Vec<Option<String>> = warnings.0.lock().unwrap().clone();
    warned.sort();
    let expected: Vec<Option<String>> = replaced.into_iter().map(Some).collect();
    assert_eq!(warned, expected, "one WARN per key replaced, naming it, and no other about the fleet");
    fleet_a.leave().await;
    fleet_b.leave().await;
}
