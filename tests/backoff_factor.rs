//! The backoff multiplier (issue 44, item 7): `factor = 1.5` through the
//! attribute, the builder and the configuration file, with the exact
//! formula of every jitter. On tokio's paused clock, so the waits are exact.

use std::sync::Mutex;
use std::time::Duration;

use stormproof::backoff::{Backoff, JitterRng};
use stormproof::{Jitter, Policy, Registry, Rejection, resilient};
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn micros(n: u64) -> Duration {
    Duration::from_micros(n)
}

/// When each attempt started, from the first, of a call that always fails.
async fn attempt_times(run: impl AsyncFnOnce(&Mutex<Vec<Instant>>)) -> Vec<Duration> {
    let seen = Mutex::new(Vec::new());
    run(&seen).await;
    let seen = seen.into_inner().unwrap();
    seen.iter().map(|at| *at - seen[0]).collect()
}

#[resilient(max_attempts = 5, base_ms = 100, factor = 1.5, jitter = "none")]
async fn grows_by_half(seen: &Mutex<Vec<Instant>>) -> Result<(), Rejection> {
    seen.lock().unwrap().push(Instant::now());
    Err(Rejection::AttemptTimeout { after: ms(1) })
}

/// Waits of 100, 150, 225 and 337.5 ms: attempts at 0, 100, 250, 475 and
/// 813 ms (tokio's timer counts whole milliseconds and rounds a deadline up:
/// the 337.5 ms wait ends at the next one).
#[tokio::test(start_paused = true)]
async fn the_attribute_grows_each_wait_by_its_factor() {
    let times = attempt_times(async |seen| drop(grows_by_half(seen).await)).await;
    assert_eq!(times, [ms(0), ms(100), ms(250), ms(475), ms(813)]);
}

/// The waits decided, as the `on_retry` hook hears them, are exact.
#[tokio::test(start_paused = true)]
async fn the_builder_does_the_same() {
    let waits = std::sync::Arc::new(Mutex::new(Vec::new()));
    let heard = waits.clone();
    let policy = Policy::builder()
        .max_attempts(5)
        .base(ms(100))
        .factor(1.5)
        .jitter(Jitter::None)
        .on_retry(move |retry| heard.lock().unwrap().push(retry.wait()))
        .build()
        .unwrap();
    assert_eq!(policy.backoff().factor(), 1.5);
    let times = attempt_times(async |seen| {
        let _ = policy
            .run(|| async {
                seen.lock().unwrap().push(Instant::now());
                Err::<(), _>(std::io::Error::from(std::io::ErrorKind::ConnectionReset))
            })
            .await;
    })
    .await;
    assert_eq!(times, [ms(0), ms(100), ms(250), ms(475), ms(813)]);
    assert_eq!(*waits.lock().unwrap(), [ms(100), ms(150), ms(225), micros(337_500)]);
}

/// The cap still bounds the curve, and a factor of 1 keeps every wait at the base.
#[test]
fn the_cap_bounds_it_and_a_factor_of_one_never_grows() {
    let curve = |factor| Backoff::new(ms(100), ms(300), Jitter::None).with_factor(factor);
    let waits = |factor| (0..5).map(|n| curve(factor).exp(n)).collect::<Vec<_>>();
    assert_eq!(waits(1500), [ms(100), ms(150), ms(225), ms(300), ms(300)]);
    assert_eq!(waits(1000), [ms(100); 5]);
    assert_eq!(waits(2000), [ms(100), ms(200), ms(300), ms(300), ms(300)], "the default: doubling");
    // A huge n or base saturates at the cap rather than overflowing.
    let huge =
        Backoff::new(Duration::from_secs(u64::MAX / 4), Duration::MAX, Jitter::None).with_factor(10_000);
    assert_eq!(huge.exp(u32::MAX), Duration::MAX);
    assert_eq!(curve(1001).exp(u32::MAX), ms(300));
}

/// Each jitter is its documented formula around `exp(n) = base * 1.5^n`:
/// the same seed drawn by hand over the formula's range gives the same wait.
#[test]
fn every_jitter_follows_its_formula_with_the_factor() {
    let exp = |n: u32| Backoff::new(ms(100), ms(20_000), Jitter::None).with_factor(1500).exp(n);
    for seed in 0..50 {
        let curve = |jitter| Backoff::new(ms(100), ms(20_000), jitter).with_factor(1500);
        let (mut drawn, mut by_hand) = (JitterRng::seeded(seed), JitterRng::seeded(seed));
        for n in 0..6 {
            let full = curve(Jitter::Full).wait(n, None, &mut drawn);
            let expected = by_hand.uniform(0, exp(n).as_nanos());
            assert_eq!(full.as_nanos(), expected, "full, seed {seed}, n {n}");

            let equal = curve(Jitter::Equal).wait(n, None, &mut drawn);
            let whole = exp(n).as_nanos();
            let expected = whole / 2 + by_hand.uniform(0, whole - whole / 2);
            assert_eq!(equal.as_nanos(), expected, "equal, seed {seed}, n {n}");

            // Decorrelated: uniform in [base, prev * (factor + 1)], capped.
            let prev = ms(100 + 37 * u64::from(n));
            let decorrelated = curve(Jitter::Decorrelated).wait(n, Some(prev), &mut drawn);
            let high = prev.as_nanos() * 2500 / 1000;
            let expected = by_hand.uniform(ms(100).as_nanos(), high).min(ms(20_000).as_nanos());
            assert_eq!(decorrelated.as_nanos(), expected, "decorrelated, seed {seed}, n {n}");
        }
    }
}

#[resilient(name = "factor::filed", max_attempts = 4, base_ms = 100, jitter = "none")]
async fn filed(seen: &Mutex<Vec<Instant>>) -> Result<(), Rejection> {
    seen.lock().unwrap().push(Instant::now());
    Err(Rejection::AttemptTimeout { after: ms(1) })
}

/// `factor` in a file's `[operations]` table, and a reload that changes it.
#[tokio::test(start_paused = true)]
async fn a_file_sets_the_factor_and_a_reload_changes_it() {
    let registry = Registry::new();
    let times = attempt_times(async |seen| drop(registry.scope(filed(seen)).await)).await;
    assert_eq!(times, [ms(0), ms(100), ms(300), ms(700)], "compiled: doubling");

    registry.load_toml("[operations.\"factor::filed\"]\nfactor = 1.5\n").unwrap();
    let times = attempt_times(async |seen| drop(registry.scope(filed(seen)).await)).await;
    assert_eq!(times, [ms(0), ms(100), ms(250), ms(475)], "the file's 1.5");

    let report = registry.reload_toml("[operations.\"factor::filed\"]\nfactor = 3\n").unwrap();
    assert!(report.to_string().contains("factor 1.5 -> 3"), "{report}");
    let times = attempt_times(async |seen| drop(registry.scope(filed(seen)).await)).await;
    assert_eq!(times, [ms(0), ms(100), ms(400), ms(1300)], "reloaded: 3");
}

#[test]
fn a_bad_factor_in_a_file_is_an_error_at_its_key() {
    let registry = Registry::new();
    for (value, problem) in [
        ("0.5", "`factor` must be in 1.0..=10.0"),
        ("1.2345", "`factor` must be a number in 1.0..=10.0 with at most three decimals, got 1.2345"),
        ("\"fast\"", "`factor` must be a number"),
    ] {
        let text = format!("[operations.\"factor::filed\"]\nfactor = {value}\n");
        let error = registry.load_toml(&text).unwrap_err().to_string();
        assert!(error.starts_with("<toml>:2:10: "), "{value}: {error}");
        assert!(error.contains(problem), "{value}: {error}");
    }
}
