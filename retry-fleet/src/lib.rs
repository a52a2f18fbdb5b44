//! Fleet-wide breakers and budgets on Redis (feature `redis`): one
//! dependency, many replicas, one view of its health.
//!
//! A service runs as many replicas. Alone, each replica's breaker learns by
//! itself that a dependency is down (R replicas let through R times the
//! threshold's failures and R times the probes per cycle), and each
//! replica's budget caps only its own retries, so the fleet's retry
//! amplification grows with R. Sharing that state through a store fixes
//! both, and the ways it is usually shared show what to avoid: a round trip
//! on every call (the store's latency and its outages become every call's),
//! a distributed lock held across the user's call (one slow call stalls the
//! fleet), counters that lose updates, a new replica that resets the state.
//!
//! So here:
//!
//! - **The success path never touches Redis.** Each process keeps its local
//!   guards as the fast path; one background task per registry reports the
//!   guards' totals every `sync_every` (100 ms) in one Lua script per flush
//!   that adds them to time-bucketed counters, each with a TTL, and answers
//!   the fleet's verdicts in the same round trip.
//! - **Breakers**: the fleet opens when its failures in the window (count
//!   mode) or its failure rate (rate mode) cross the breaker's threshold;
//!   the open-until instant is one field of one key, in the server's clock,
//!   and every replica hears it at its next flush, so all are open within
//!   `sync_every` of it. After it, probe slots are handed out by an atomic
//!   counter in the same key, so the whole fleet sends at most
//!   `half_open_max_calls` probes per round; their outcomes close or reopen
//!   the fleet. No lock is ever held around a call.
//! - **Budgets** (ratio form): the fleet allows retries of at most `ratio`
//!   of the fleet's first attempts in the window (plus `min_per_sec` for the
//!   whole fleet); replicas lease tokens in batches of `lease_size`, so a
//!   batch of retries costs one round trip, and a retry needs a leased token
//!   as well as the local budget's leave. The tokens left when a lease ends
//!   (the store went away, the replica leaves) are handed back at the next
//!   flush that gets through, so the fleet can lease them again.
//! - **Redis down, slow or flushed**: a flush that does not answer within
//!   `store_timeout` (50 ms) makes the guards local again (said once per
//!   change, in the trace and the `stormproof_fleet_linked` gauge); the next
//!   flush that gets through resyncs. Totals are sent cumulatively, so a
//!   flush that timed out but ran is never counted twice (and its probe
//!   slots and tokens, asked for under a number, are answered again to the
//!   request sent again, not granted twice nor lost), and so are the
//!   totals of the flushes that failed, with their ages, so that what was
//!   counted meanwhile lands in the buckets of its time (none older than
//!   the window: an outage is not a burst now); a replica that
//!   starts reads the fleet's state and never resets it; a flushed state is
//!   rebuilt from what the replicas last saw, an open (or half-open) verdict
//!   winning over a closed one, so that losing it never undoes a trip, and
//!   a closed one keeping the failures counted since the loss; and a value
//!   in the fleet's keys the script cannot count with (written by hand or
//!   by another program), or any key of its (a breaker's state or buckets,
//!   a budget's buckets, a replica's records) that holds another type than
//!   a hash, is taken as lost in the same way, and a time in the breaker's
//!   state later than the server's clock as now. Such a key is replaced by
//!   the flush that finds it and said once: a `WARN` naming it, the
//!   `stormproof_fleet_keys_replaced_total` counter,
//!   [`Fleet::replaced_keys`], and a line on the admin dashboard.
//!
//! This crate uses the core through its public API only (the seam
//! `stormproof_runtime::fleet` lists it): a fleet breaker is the registry's
//! breaker, told the fleet's verdicts.
//!
//! ```no_run
//! # use stormproof_runtime as stormproof;
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use stormproof_fleet::{Fleet, FleetConfig};
//! use stormproof::{breaker::BreakerConfig, budget::RatioBudget, registry};
//!
//! registry().declare_breaker("payment", BreakerConfig { failure_rate_percent: Some(50), ..Default::default() })?;
//! registry().declare_budget("payment", RatioBudget::default())?;
//! let fleet = Fleet::join(registry(), FleetConfig {
//!     url: "redis://10.0.0.5:6379/".into(),
//!     prefix: "shop".into(),
//!     breakers: vec!["payment".into()],
//!     budgets: vec!["payment".into()],
//!     ..Default::default()
//! })?;
//! // ... serve; the fleet is shared for as long as `fleet` lives.
//! fleet.leave().await;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backlog;
mod breaker;
mod budget;
mod observe;
mod script;
mod store;
mod task;

use std::sync::Arc;
use std::sync::atomic::Ordering;

pub use stormproof_runtime::fleet::{FleetConfig, FleetError, FleetSync};

use stormproof_runtime::ConfigError;
use stormproof_runtime::Registry;
use stormproof_runtime::breaker::CircuitBreaker;
use stormproof_runtime::budget::BudgetConfig;
use task::{Shared, Task};

/// A registry's membership of a fleet: the background task runs while it
/// lives. Dropping it (or [`leave`](Self::leave)) stops the task and makes
/// the guards local again; dropped, it does so in the background, after a
/// last flush, and the registry can join again only once the task has
/// ended: to join again at once, `leave().await` instead.
#[must_use = "the fleet is left when this handle is dropped"]
#[derive(Debug)]
pub struct Fleet {
    shared: Arc<Shared>,
    task: Option<tokio::task::JoinHandle<bool>>,
    replica: u64,
}

impl Fleet {
    /// Whether the last flush got through, so that the guards follow the fleet.
    pub fn is_linked(&self) -> bool {
        self.shared.status.linked.load(Ordering::Acquire)
    }

    /// Flushes that got through so far.
    pub fn flushes(&self) -> u64 {
        self.shared.status.flushes.load(Ordering::Relaxed)
    }

    /// Flushes that failed or timed out so far.
    pub fn failed_flushes(&self) -> u64 {
        self.shared.status.failed_flushes.load(Ordering::Relaxed)
    }

    /// Keys of the fleet's found holding another type than the hash the
    /// flush script keeps there (another program's string, list, ...), so
    /// far: each was replaced by the flush that found it, and said once (a
    /// `WARN` naming it, the `stormproof_fleet_keys_replaced_total` counter,
    /// the admin dashboard), and the fleet went on.
    pub fn replaced_keys(&self) -> u64 {
        self.shared.status.replaced_keys()
    }

    /// This replica's id in the store's keys (random, per join).
    pub fn replica(&self) -> u64 {
        self.replica
    }

    /// Leaves the fleet and waits for the task to end: one last flush
    /// reports what was counted since the previous one (tried up to three
    /// times while the store was linked), and the guards are local when this
    /// returns. Whether that last flush got through.
    pub async fn leave(mut self) -> bool {
        self.shared.stop.notify_one();
        match self.task.take() {
            Some(task) => task.await.unwrap_or(false),
            None => false,
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // A stored permit: the task stops at its next await, even if it is
        // in the middle of a flush now.
        self.shared.stop.notify_one();
    }
}

impl Fleet {
    /// Shares the breakers and budgets of `registry` that `config` names
    /// with every replica that joins the same Redis under the same prefix
    /// (see the [crate docs](crate)). Returns at once: the background task
    /// connects by itself, and the guards stay local until its first flush
    /// gets through. Must be called inside a tokio runtime with IO and
    /// timers enabled (`enable_io()` and `enable_time()`, or `enable_all()`,
    /// on its builder, as `#[tokio::main]` and `#[tokio::test]` do): on a
    /// runtime without IO the task could never connect, and without timers
    /// it could not tick, so joining one is refused at once with
    /// [`FleetError::RuntimeWithoutIo`] or [`FleetError::RuntimeWithoutTime`]
    /// (tokio has no query for either: the checks register an unused socket
    /// and make an unused timer, and tokio's panic on doing so, which the
    /// panic hook still prints, is that error; under `panic = "abort"` the
    /// panic ends the process then and there).
    ///
    /// Each named guard must be declared: a breaker with
    /// `success_threshold <= half_open_max_calls` (the fleet's probes per
    /// round are `half_open_max_calls`, so more successes could never come;
    /// while the fleet shares it, [`CircuitBreaker::reconfigure`] refuses a
    /// change that breaks the rule, and so does a configuration file's
    /// load or reload; a join waits for a file being applied), a budget of
    /// the ratio form (a token bucket refills per success, which the
    /// success path does not report).
    ///
    /// [`CircuitBreaker::reconfigure`]: stormproof_runtime::breaker::CircuitBreaker::reconfigure
    pub fn join(registry: &Registry, config: FleetConfig) -> Result<Fleet, FleetError> {
        config.validate().map_err(FleetError::InvalidConfig)?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| FleetError::NoRuntime)?;
        if !io_enabled() {
            return Err(FleetError::RuntimeWithoutIo);
        }
        if !time_enabled() {
            return Err(FleetError::RuntimeWithoutTime);
        }
        let mut breakers = Vec::new();
        for name in &config.breakers {
            let breaker = registry
                .breaker(name)
                .ok_or(FleetError::NotDeclared { kind: "breaker", name: name.clone() })?;
            breakers.push((name.clone(), breaker));
        }
        let mut budgets = Vec::new();
        for name in &config.budgets {
            let budget = registry
                .budget(name)
                .ok_or(FleetError::NotDeclared { kind: "budget", name: name.clone() })?;
            if !matches!(budget.config(), BudgetConfig::Ratio(_)) {
                return Err(FleetError::Unsupported {
                    kind: "budget",
                    name: name.clone(),
                    why:
                        "it is a token bucket; a fleet shares ratio budgets (a share of the fleet's traffic)"
                            .into(),
                });
            }
            budgets.push(budget::BudgetSync::new(name.clone(), budget, config.lease_size));
        }
        let store = store::Store::new(&config.url, config.store_timeout, config.sync_every)
            .map_err(|e| FleetError::InvalidConfig(ConfigError::new("url", e)))?;
        // Not while a configuration file is checked and applied (the claim
        // waits for one and holds the next off until the join): the file
        // checks its breakers against the rule of the fleet that shares
        // them, which must not start sharing one between its checks and
        // its changes (its breaker would refuse what the file was let do).
        let claim = registry.claim_fleet().ok_or(FleetError::AlreadyJoined)?;
        // Claimed first: a join refused as the registry's second must not
        // unshare the breakers of its first. A refused one drops the claim,
        // which gives the membership back.
        let breakers = share(breakers)?;
        let shared = Arc::new(Shared::default());
        let membership = claim.join(config.clone(), shared.status.clone());
        let replica = rand::random::<u64>();
        let task = Task {
            prefix: config.prefix,
            replica,
            sync_every: config.sync_every,
            store_timeout: config.store_timeout,
            store,
            breakers,
            budgets,
            shared: shared.clone(),
            _membership: membership,
            clock: None,
            said_unreachable: false,
            leaving: false,
        };
        let task = runtime.spawn(task::heard(task.prefix.clone(), task.run()));
        Ok(Fleet { shared, task: Some(task), replica })
    }
}

/// Each breaker shared by the fleet (see `CircuitBreaker::share`:
/// checked against the fleet's rule with its lock held, so that no
/// reconfiguration slips in between), or none: the first that breaks the
/// rule is the error, and those shared before it are local again.
fn share(breakers: Vec<(String, Arc<CircuitBreaker>)>) -> Result<Vec<breaker::BreakerSync>, FleetError> {
    let mut shared: Vec<breaker::BreakerSync> = Vec::with_capacity(breakers.len());
    for (name, breaker) in breakers {
        if let Err(error) = breaker.share() {
            shared.iter().for_each(breaker::BreakerSync::leave);
            let why = format!("its `{}` {}", error.field, error.problem);
            return Err(FleetError::Unsupported { kind: "breaker", name, why });
        }
        shared.push(breaker::BreakerSync::new(name, breaker));
    }
    Ok(shared)
}

/// Whether the current tokio runtime can do IO, which the background task
/// needs to reach Redis. Tokio does not say: a runtime built without
/// `enable_io()` panics when a socket is registered with it, and in the
/// background task that panic would end the fleet unheard. So an unused
/// socket (unbound, non-blocking, closed at once) is registered here, where
/// the caller hears the answer: a panic doing so is the answer no (the
/// socket being non-blocking, tokio has no other reason to panic). A socket
/// that cannot be made (no file descriptors left) says nothing: `true`, and
/// the task's connection attempts report what goes wrong.
fn io_enabled() -> bool {
    #[cfg(unix)]
    let socket = std::os::unix::net::UnixDatagram::unbound();
    #[cfg(not(unix))]
    let socket = std::net::UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, 0));
    let Ok(socket) = socket.and_then(|socket| socket.set_nonblocking(true).map(|()| socket)) else {
        return true;
    };
    #[cfg(unix)]
    let register = move || drop(tokio::net::UnixDatagram::from_std(socket));
    #[cfg(not(unix))]
    let register = move || drop(tokio::net::UdpSocket::from_std(socket));
    std::panic::catch_unwind(register).is_ok()
}

/// Whether the current tokio runtime has timers, which the background task
/// ticks on and bounds each store trip with. As for IO (see `io_enabled`),
/// tokio does not say: making a timer on a runtime without them panics,
/// which in the task would end the fleet at its first tick. So an unused
/// one is made (and dropped unpolled, never registered) here.
fn time_enabled() -> bool {
    std::panic::catch_unwind(|| drop(tokio::time::sleep(std::time::Duration::ZERO))).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stormproof_runtime::breaker::BreakerConfig;

    fn config() -> FleetConfig {
        // Nothing listens there: these tests are about joining, not linking.
        FleetConfig { url: "redis://127.0.0.1:1/".into(), breakers: vec!["dep".into()], ..Default::default() }
    }

    fn registry() -> Registry {
        let registry = Registry::new();
        registry.declare_breaker("dep", BreakerConfig::default()).unwrap();
        registry
    }

    /// A runtime without IO cannot run the background task (its connection
    /// panics there, unheard, and the guards are never shared): joining on
    /// one is an error that says what to enable, and leaves the registry
    /// free to join from a runtime that has IO.
    #[test]
    fn joining_on_a_runtime_without_io_is_an_error_that_says_to_enable_it() {
        let registry = registry();
        let no_io = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let error = no_io.block_on(async { Fleet::join(&registry, config()) }).unwrap_err();
        assert_eq!(error, FleetError::RuntimeWithoutIo);
        let message = error.to_string();
        assert!(message.contains("IO disabled"), "{message}");
        assert!(message.contains("enable_io()") && message.contains("enable_all()"), "{message}");

        let io = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build().unwrap();
        let fleet = io.block_on(async { Fleet::join(&registry, config()) }).expect("joins where there is IO");
        drop(fleet);
    }

    /// A runtime without a timer cannot run the background task either (its
    /// ticks and store timeouts are tokio timers, whose creation panics
    /// there): joining on one is an error that says what to enable.
    #[test]
    fn joining_on_a_runtime_without_time_is_an_error_that_says_to_enable_it() {
        let registry = registry();
        let no_time = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
        let error = no_time.block_on(async { Fleet::join(&registry, config()) }).unwrap_err();
        assert_eq!(error, FleetError::RuntimeWithoutTime);
        let message = error.to_string();
        assert!(message.contains("enable_time()") && message.contains("enable_all()"), "{message}");
    }

    /// The fleet's rule for a breaker (`success_threshold <=
    /// half_open_max_calls`, its probes per round), checked at the join,
    /// holds as long as the fleet shares it: a reconfiguration in code that
    /// breaks it is an error naming the field it moved, and changes
    /// nothing. Left, the breaker is local again, and takes it.
    #[test]
    fn a_shared_breaker_refuses_a_reconfiguration_that_breaks_the_fleets_rule() {
        let registry = registry();
        let breaker = registry.breaker("dep").unwrap();
        let before = breaker.config();
        assert_eq!((before.success_threshold, before.half_open_max_calls), (2, 2));
        let more_successes = BreakerConfig { success_threshold: 3, ..before };
        let fewer_probes = BreakerConfig { half_open_max_calls: 1, ..before };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let fleet = Fleet::join(&registry, config()).expect("joins");
            let error = breaker.reconfigure(more_successes).unwrap_err();
            assert_eq!(error.field, "success_threshold", "{error}");
            assert!(error.problem.contains("half_open_max_calls (2)"), "{error}");
            let error = breaker.reconfigure(fewer_probes).unwrap_err();
            assert_eq!(error.field, "half_open_max_calls", "{error}");
            assert_eq!(breaker.config(), before, "refused: nothing changed");
            let both = BreakerConfig { success_threshold: 3, half_open_max_calls: 3, ..before };
            breaker.reconfigure(both).expect("within the rule");
            breaker.reconfigure(before).unwrap();
            fleet.leave().await;
        });
        breaker.reconfigure(more_successes).expect("local again: a local breaker has no such rule");
    }

    /// A join refused for a breaker's settings shares none of its breakers
    /// and leaves the registry free; a join refused because the registry
    /// is in a fleet already leaves that fleet's breakers shared.
    #[test]
    fn a_refused_join_shares_no_breaker_and_unshares_none() {
        let registry = registry();
        let strict = BreakerConfig { success_threshold: 3, half_open_max_calls: 2, ..Default::default() };
        registry.declare_breaker("strict", strict).unwrap();
        let dep = registry.breaker("dep").unwrap();
        let more_successes = BreakerConfig { success_threshold: 3, ..BreakerConfig::default() };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let both = FleetConfig { breakers: vec!["dep".into(), "strict".into()], ..config() };
            let error = Fleet::join(&registry, both).unwrap_err();
            assert!(matches!(&error, FleetError::Unsupported { name, .. } if name == "strict"), "{error}");
            let message = error.to_string();
            assert!(
                message.contains("`success_threshold` must be at most half_open_max_calls (2)"),
                "{message}"
            );
            dep.reconfigure(more_successes).expect("not shared: the join was refused");
            dep.reconfigure(BreakerConfig::default()).unwrap();
            let fleet = Fleet::join(&registry, config()).expect("the registry is free");
            assert_eq!(Fleet::join(&registry, config()).unwrap_err(), FleetError::AlreadyJoined);
            assert!(dep.reconfigure(more_successes).is_err(), "still shared by the first fleet");
            fleet.leave().await;
        });
    }

    /// The ERROR events of the current thread, as text.
    #[derive(Clone, Default)]
    struct Errors(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Errors {
        fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            struct Text(String);
            impl tracing::field::Visit for Text {
                fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                    self.0 += &format!("{}={value:?} ", field.name());
                }
            }
            if *event.metadata().level() == tracing::Level::ERROR {
                let mut text = Text(String::new());
                event.record(&mut text);
                self.0.lock().unwrap().push(text.0);
            }
        }
    }

    impl Errors {
        /// A subscriber that keeps the ERROR events in `self`.
        fn subscriber(&self) -> impl tracing::Subscriber {
            use tracing_subscriber::layer::SubscriberExt;
            tracing_subscriber::registry().with(self.clone())
        }
    }

    /// A runtime dropped while its thread unwinds from a panic of the
    /// application's (a test's failed assertion, `main` panicking) drops
    /// the fleet's task on the way: the task ends, and no error says that
    /// it panicked, which it did not.
    #[test]
    fn a_runtime_dropped_by_another_panic_is_no_panic_of_the_fleet_task() {
        let registry = registry();
        let errors = Errors::default();
        tracing::subscriber::with_default(errors.subscriber(), || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let fleet = runtime.block_on(async {
                let fleet = Fleet::join(&registry, config()).expect("joins");
                tokio::task::yield_now().await;
                fleet
            });
            let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let _held = (runtime, fleet);
                panic!("the application's own panic");
            }));
            assert!(unwound.is_err());
        });
        assert_eq!(*errors.0.lock().unwrap(), Vec::<String>::new());
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        assert!(runtime.block_on(async { Fleet::join(&registry, config()) }).is_ok(), "the task ended");
    }

    /// A panic in the task's future is the task's, logged as such.
    #[test]
    fn a_panic_in_the_task_is_logged_as_its_own() {
        let errors = Errors::default();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let ended = tracing::subscriber::with_default(errors.subscriber(), || {
            runtime.block_on(task::heard("shop".into(), async { panic!("a bug of ours") }))
        });
        assert!(!ended, "ended as a last flush that did not get through");
        let errors = errors.0.lock().unwrap();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("background task panicked") && errors[0].contains("shop"), "{errors:?}");
    }

    /// A dropped `Fleet` ends its task in the background, after a last
    /// flush (up to three tries of store_timeout each): until then the
    /// registry is still in the fleet, so joining again at once is
    /// refused, and the error says what does leave at once.
    #[test]
    fn joining_right_after_a_drop_is_refused_with_an_error_that_says_to_await_leave() {
        let registry = registry();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            drop(Fleet::join(&registry, config()).expect("joins"));
            let error = Fleet::join(&registry, config()).unwrap_err();
            assert_eq!(error, FleetError::AlreadyJoined);
            assert!(error.to_string().contains("`Fleet::leave().await`"), "{error}");
            let fleet = loop {
                match Fleet::join(&registry, config()) {
                    Ok(fleet) => break fleet,
                    Err(FleetError::AlreadyJoined) => tokio::task::yield_now().await,
                    Err(other) => panic!("{other}"),
                }
            };
            assert!(!fleet.leave().await, "never linked: no last flush");
            Fleet::join(&registry, config()).expect("left: joins again at once").leave().await;
        });
    }

    /// The task ends with its runtime too: a runtime shut down before its
    /// fleet was left (a test's, a binary's `main` returning) leaves the
    /// registry free to join again.
    #[test]
    fn a_fleet_whose_runtime_shut_down_can_be_joined_again() {
        let registry = registry();
        let runtime = || tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let first = runtime();
        let fleet = first.block_on(async {
            let fleet = Fleet::join(&registry, config()).expect("joins");
            // The task runs: it has started, and tries the store.
            tokio::task::yield_now().await;
            fleet
        });
        drop(first);
        let second = runtime();
        let again = second.block_on(async { Fleet::join(&registry, config()) });
        assert!(again.is_ok(), "the first fleet ended with its runtime: {:?}", again.err());
        drop((fleet, again));
    }
}
