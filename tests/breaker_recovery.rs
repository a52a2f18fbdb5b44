//! A recovered dependency is let back in quickly (issue 45, item 2): a
//! breaker's first open period is short (`open_for`, 1 s by default), each
//! failed probe doubles it up to `max_open_for` (30 s), and closing starts
//! again from `open_for`, as resilience4j's `waitIntervalFunctionInOpenState`,
//! Polly's `BreakDurationGenerator` and Envoy's ejection time do. A dead
//! dependency is probed rarely; one back on its feet waits at most the
//! period it is in. On tokio's paused clock, with a call every 10 ms.

use std::io::{Error as IoError, ErrorKind};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use stormproof::breaker::BreakerConfig;
use stormproof::{Error, Registry, resilient};
use tokio::time::Instant;

/// The dependency: whether it is up, and the calls that reached it.
#[derive(Default)]
struct Dependency {
    up: AtomicBool,
    sent: AtomicU32,
}

#[resilient(max_attempts = 1, breaker = "recovery", budget = "none")]
async fn call(dependency: &Dependency) -> Result<(), Error<IoError>> {
    dependency.sent.fetch_add(1, Ordering::SeqCst);
    if dependency.up.load(Ordering::SeqCst) {
        Ok(())
    } else {
        Err(IoError::from(ErrorKind::ConnectionReset))?
    }
}

/// The dependency down for `outage` from the start, a call every 10 ms
/// through the breaker `config`; how long after the dependency came back
/// the first call succeeded, and how many calls reached it while it was down.
async fn back_after(config: BreakerConfig, outage: Duration) -> (Duration, u32) {
    let registry = Registry::new();
    registry.declare_breaker("recovery", config).unwrap();
    let start = Instant::now();
    let dependency = Dependency::default();
    let mut during = None;
    loop {
        if during.is_none() && start.elapsed() >= outage {
            dependency.up.store(true, Ordering::SeqCst);
            during = Some(dependency.sent.load(Ordering::SeqCst));
        }
        if registry.scope(call(&dependency)).await.is_ok() {
            return (start.elapsed() - outage, during.expect("succeeds only once it is up"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// With the defaults, a 3 s outage (open 1 s, a failed probe, open 2 s)
/// lets the dependency back in within 100 ms of its return, having sent it
/// 5 calls to open and 2 probe rounds; with the old fixed 30 s, it stays
/// cut off for 27 s after it came back.
#[tokio::test(start_paused = true)]
async fn a_recovered_dependency_is_let_back_in_within_a_second() {
    let (back, sent) = back_after(BreakerConfig::default(), Duration::from_secs(3)).await;
    assert!(back <= Duration::from_millis(100), "back {back:?} after the dependency");
    assert!(sent <= 5 + 2, "{sent} calls reached the dead dependency");
    let fixed = BreakerConfig {
        open_for: Duration::from_secs(30),
        max_open_for: Duration::from_secs(30),
        ..Default::default()
    };
    let (back, _) = back_after(fixed, Duration::from_secs(3)).await;
    assert!(back >= Duration::from_secs(26), "a fixed 30 s period: back only {back:?} after");
}

/// A dependency that stays down is probed at 1, 2, 4, 8, 16 s, then every
/// 30 s: over ten minutes, about 25 probes, not 600 (one a second).
#[tokio::test(start_paused = true)]
async fn a_dead_dependency_is_probed_ever_more_rarely() {
    let (_, sent) = back_after(BreakerConfig::default(), Duration::from_secs(600)).await;
    // 5 calls open it; then one probe per period (the first fails, and the
    // period's other slot is not taken: calls come one at a time).
    let periods = [1, 2, 4, 8, 16].len() as u32 + (600 - (1 + 2 + 4 + 8 + 16)) / 30;
    assert!(sent <= 5 + periods + 1, "{sent} calls reached the dead dependency in 10 minutes");
    assert!(sent >= 5 + periods - 1, "{sent}: it was probed every period");
}
