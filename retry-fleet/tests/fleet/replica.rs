//! What a replica process does, by role (`FLEET_ROLE`); see `processes.rs`.

use std::io::BufRead;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use stormproof_fleet::{Fleet, FleetConfig};
use stormproof_runtime::breaker::NO_BREAKER;
use stormproof_runtime::{
    Classify, ErrorClass, Policy, Rejection,
    breaker::{BreakerConfig, BreakerState, Outcome},
    budget::RatioBudget,
    registry,
};

use super::processes::wall_ms;

#[derive(Debug)]
enum DepError {
    Down,
    #[allow(dead_code)]
    Rejected(Rejection),
}

impl Classify for DepError {
    fn classify(&self) -> ErrorClass {
        match self {
            DepError::Down => ErrorClass::Transient,
            DepError::Rejected(r) => r.classify(),
        }
    }
}

impl From<Rejection> for DepError {
    fn from(r: Rejection) -> Self {
        DepError::Rejected(r)
    }
}

fn env(key: &str) -> String {
    std::env::var(key)
        .unwrap_or_else(|_| panic!("{key} is not set: this test is a replica the fleet tests spawn"))
}

fn env_ms(key: &str) -> u64 {
    env(key).parse().expect("milliseconds")
}

pub fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(run(env("FLEET_ROLE")));
}

async fn sleep_until_wall(t: u64) {
    let now = wall_ms();
    if t > now {
        tokio::time::sleep(Duration::from_millis(t - now)).await;
    }
}

async fn run(role: String) {
    let mut config = FleetConfig {
        url: env("FLEET_URL"),
        prefix: env("FLEET_PREFIX"),
        sync_every: Duration::from_millis(env_ms("FLEET_SYNC_MS")),
        ..Default::default()
    };
    // A test that needs the guards linked throughout gives a busy machine
    // longer than the default before a slow flush makes them local.
    if let Ok(ms) = std::env::var("FLEET_STORE_TIMEOUT_MS") {
        config.store_timeout = Duration::from_millis(ms.parse().expect("milliseconds"));
    }
    match role.as_str() {
        "watch" | "fail" => {
            let breaker = BreakerConfig {
                failure_threshold: 5,
                open_for: Duration::from_secs(10),
                ..Default::default()
            };
            registry().declare_breaker("dep", breaker).unwrap();
            config.breakers = vec!["dep".into()];
        }
        "probe" => {
            let breaker = BreakerConfig {
                failure_threshold: 3,
                open_for: Duration::from_millis(env_ms("FLEET_OPEN_MS")),
                half_open_max_calls: 2,
                success_threshold: 2,
                ..Default::default()
            };
            registry().declare_breaker("dep", breaker).unwrap();
            config.breakers = vec!["dep".into()];
        }
        "retry" => {
            let budget = RatioBudget { ratio: 0.1, window: Duration::from_secs(10), min_per_sec: 2 };
            registry().declare_budget("dep", budget).unwrap();
            config.budgets = vec!["dep".into()];
            config.lease_size = 5;
        }
        "load" => {
            // A window longer than the test: no bucket expires before it is read.
            let breaker = BreakerConfig { window: Duration::from_secs(600), ..Default::default() };
            registry().declare_breaker("dep", breaker).unwrap();
            let budget = RatioBudget { window: Duration::from_secs(600), ..Default::default() };
            registry().declare_budget("dep", budget).unwrap();
            (config.breakers, config.budgets) = (vec!["dep".into()], vec!["dep".into()]);
        }
        other => panic!("unknown role {other}"),
    }
    let fleet = Fleet::join(registry(), config).expect("joins");
    wait_linked(&fleet).await;
    say("READY");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).expect("GO");
    let t0: u64 = line.trim().strip_prefix("GO ").expect("GO <t0>").parse().expect("t0");
    let run_ms = env_ms("FLEET_RUN_MS");
    sleep_until_wall(t0).await;
    let result = match role.as_str() {
        "watch" => watch(t0 + run_ms).await,
        "fail" => fail(t0 + run_ms).await,
        "probe" => probe(t0, env_ms("FLEET_DOWN_MS"), t0 + run_ms).await,
        "retry" => retry(t0 + run_ms).await,
        _ => load().await,
    };
    let (linked, flushes, failed_flushes) = (fleet.is_linked(), fleet.flushes(), fleet.failed_flushes());
    let left_linked = fleet.leave().await;
    let (linked, left_linked) = (u8::from(linked), u8::from(left_linked));
    say(&format!(
        "RESULT linked={linked} left_linked={left_linked} flushes={flushes} failed_flushes={failed_flushes} {result}"
    ));
}

/// To the parent, past libtest's capture (which takes only `print!`).
fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).expect("the parent reads");
}

async fn wait_linked(fleet: &Fleet) {
    for _ in 0..2_000 {
        if fleet.is_linked() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the fleet did not link within 10 s");
}

/// Notes the wall-clock instant its breaker opened (0: never).
async fn watch(end: u64) -> String {
    let breaker = registry().breaker("dep").unwrap();
    let mut opened_at = 0;
    while wall_ms() < end {
        if opened_at == 0 && breaker.state() == BreakerState::Open {
            opened_at = wall_ms();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    format!("opened_at={opened_at}")
}

/// Fails until its own breaker opens; notes when.
async fn fail(end: u64) -> String {
    let breaker = registry().breaker("dep").unwrap();
    let mut tripped_at = 0;
    while wall_ms() < end {
        if tripped_at == 0 {
            if let Some(permit) = breaker.try_acquire() {
                permit.record(Outcome::Failure);
            }
            if breaker.state() == BreakerState::Open {
                tripped_at = wall_ms();
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    format!("tripped_at={tripped_at}")
}

/// Four callers against a dependency down until `t0 + down`: counts the
/// probes sent, and notes when the breaker last closed.
async fn probe(t0: u64, down: u64, end: u64) -> String {
    let breaker = registry().breaker("dep").unwrap();
    let probes = Arc::new(AtomicU64::new(0));
    let mut callers = Vec::new();
    for _ in 0..4 {
        let (breaker, probes) = (breaker.clone(), probes.clone());
        callers.push(tokio::spawn(async move {
            while wall_ms() < end {
                if let Some(permit) = breaker.try_acquire() {
                    if permit.is_probe() {
                        probes.fetch_add(1, Ordering::Relaxed);
                    }
                    let ok = wall_ms() >= t0 + down;
                    permit.record(if ok { Outcome::Success } else { Outcome::Failure });
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }));
    }
    let (mut was_open, mut closed_at) = (false, 0);
    while wall_ms() < end {
        match breaker.state() {
            BreakerState::Closed if was_open => (was_open, closed_at) = (false, wall_ms()),
            BreakerState::Closed => {}
            _ => was_open = true,
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for caller in callers {
        caller.await.unwrap();
    }
    let closed = u8::from(breaker.state() == BreakerState::Closed);
    format!("probes={} closed_at={closed_at} closed={closed}", probes.load(Ordering::Relaxed))
}

/// Calls that always fail, each allowed three retries: counts the retries
/// the budget let through.
async fn retry(end: u64) -> String {
    // No breaker: it would stop the failing calls before the budget does.
    let policy = Policy::builder()
        .budget("dep")
        .breaker(NO_BREAKER)
        .max_attempts(4)
        .base(Duration::ZERO)
        .cap(Duration::ZERO)
        .build()
        .unwrap();
    let (mut calls, attempts) = (0u64, AtomicU64::new(0));
    while wall_ms() < end {
        calls += 1;
        let _ = policy
            .run(|| async {
                attempts.fetch_add(1, Ordering::Relaxed);
                Err::<(), _>(DepError::Down)
            })
            .await;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    format!("first={calls} retries={}", attempts.load(Ordering::Relaxed) - calls)
}

/// 8 tasks x 10,000 successful calls through the shared breaker and budget.
async fn load() -> String {
    let policy = Policy::builder().breaker("dep").budget("dep").max_attempts(1).build().unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let policy = policy.clone();
            tokio::spawn(async move {
                for _ in 0..10_000 {
                    policy.run(|| async { Ok::<_, DepError>(()) }).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let calls = registry().breaker("dep").unwrap().totals().calls;
    // Let a few more flushes come, so that the counts are read mid-run too.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let first = registry().budget("dep").unwrap().totals().first_attempts;
    format!("calls={calls} first={first}")
}
