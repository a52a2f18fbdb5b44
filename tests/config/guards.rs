//! Throttles, rate limits and adaptive bulkhead limits in the file.

use stormproof::{
    Registry,
    bulkhead::{AdaptiveLimit, BulkheadConfig, DEFAULT_MAX_WAIT},
    rate_limit::RateLimitConfig,
    throttle::ThrottleConfig,
};
use tokio::time::Instant;

use super::{error, futures_like_acquire, ms};

const GUARDS: &str = r#"
[throttles.search]
k = 1.5
window_ms = 60_000
max_refusal_percent = 80

[rate_limits.geo-api]
per_second = 50
burst = 5
max_wait_ms = 20

[bulkheads.db]
max_concurrent = 16
adaptive = "gradient"
min_concurrent = 2
tolerance = 2.0
smoothing = 0.5

[bulkheads.cache]
max_concurrent = 8
adaptive = "aimd"
backoff_ratio = 0.8
"#;

#[test]
fn a_file_declares_throttles_rate_limits_and_adaptive_bulkheads() {
    let registry = Registry::new();
    registry.load_toml(GUARDS).unwrap();
    assert_eq!(
        registry.throttle("search").unwrap().config(),
        ThrottleConfig { k: 1.5, window: ms(60_000), max_refusal_percent: 80 }
    );
    assert_eq!(
        registry.rate_limit("geo-api").unwrap().config(),
        RateLimitConfig { per_second: 50, burst: 5, max_wait: Some(ms(20)), ..Default::default() }
    );
    assert_eq!(
        registry.bulkhead("db").unwrap().config(),
        BulkheadConfig {
            max_concurrent: 16,
            max_wait: Some(DEFAULT_MAX_WAIT),
            adaptive: Some(AdaptiveLimit::gradient(2).tolerance(2.0).smoothing(0.5)),
            ..Default::default()
        }
    );
    assert_eq!(
        registry.bulkhead("cache").unwrap().config().adaptive,
        Some(AdaptiveLimit::aimd(1).backoff_ratio(0.8)),
        "min_concurrent left out is 1"
    );
    let err = registry.load_toml("[throttles.search]\n[rate_limits.geo-api]").unwrap_err().to_string();
    assert!(err.contains("throttle `search` already exists"), "{err}");
    assert!(err.contains("rate limit `geo-api` already exists"), "{err}");
    registry
        .load_toml("[bulkheads.pinned]\nmax_concurrent = 4\nadaptive = \"aimd\"\nmin_concurrent = 4")
        .expect("a floor may be the maximum: a limit that does not move");
    assert_eq!(registry.bulkhead("pinned").unwrap().config().adaptive.map(|limit| limit.min()), Some(4));
}

#[test]
fn errors_in_the_new_tables_say_where_and_suggest_the_closest_key() {
    assert_eq!(error("[throttles.a]\nk = 0.5"), "<toml>:2:5: `k` must be a number of at least 1, got 0.5");
    assert_eq!(
        error("[throttles.a]\nwindow_ms = 0"),
        "<toml>:2:13: `window_ms` must be in (0, 1 day], got 0ns"
    );
    assert_eq!(
        error("[throttles.a]\nmax_refusal_percent = 0"),
        "<toml>:2:23: `max_refusal_percent` must be in 1..=100, got 0"
    );
    assert_eq!(
        error("[rate_limits.a]\nper_second = 0"),
        "<toml>:2:14: `per_second` must be greater than zero"
    );
    assert!(
        error("[rate_limits.a]\nmax_wiat_ms = 5")
            .starts_with("<toml>:2:1: `max_wiat_ms` is not a key here; did you mean `max_wait_ms`?"),
        "{}",
        error("[rate_limits.a]\nmax_wiat_ms = 5")
    );
    assert!(
        error("[throttle.a]\nk = 2")
            .starts_with("<toml>:1:2: `throttle` is not a section; did you mean `throttles`?")
    );
    assert_eq!(
        error("[bulkheads.a]\nadaptive = \"fast\""),
        r#"<toml>:2:12: `adaptive` must be one of: "aimd", "gradient""#
    );
    assert_eq!(
        error("[bulkheads.a]\nmin_concurrent = 2"),
        r#"<toml>:2:18: `min_concurrent` sets an adaptive limit: give `adaptive = "aimd"` or `adaptive = "gradient"` too"#
    );
    assert_eq!(
        error("[bulkheads.a]\nadaptive = \"aimd\"\ntolerance = 2.0"),
        r#"<toml>:3:13: `tolerance` is a gradient limit's key, but this bulkhead's `adaptive` is "aimd""#
    );
    assert_eq!(
        error("[bulkheads.a]\nmax_concurrent = 4\nadaptive = \"aimd\"\nmin_concurrent = 5"),
        "<toml>:4:18: `min_concurrent` must be in 1..=max_concurrent (4), got 5"
    );
    assert_eq!(
        error("[bulkheads.a]\nadaptive = \"aimd\"\nbackoff_ratio = 1.0"),
        "<toml>:3:17: `backoff_ratio` must be in (0, 1), got 1"
    );
    assert_eq!(
        error("[bulkheads.a]\nadaptive = \"aimd\"\nbackoff_ratio = 0.0"),
        "<toml>:3:17: `backoff_ratio` must be in (0, 1), got 0"
    );
    assert_eq!(
        error("[bulkheads.a]\nadaptive = \"gradient\"\ntolerance = inf"),
        "<toml>:3:13: `tolerance` must be a number of at least 1, got inf"
    );
    assert_eq!(
        error("[bulkheads.a]\nadaptive = \"gradient\"\nsmoothing = 0"),
        "<toml>:3:13: `smoothing` must be in (0, 1], got 0"
    );
}

#[tokio::test(start_paused = true)]
async fn a_reload_keeps_a_throttles_counts_and_judges_them_by_the_new_k() {
    let registry = Registry::with_seed(7);
    registry.load_toml("[throttles.search]\nk = 2").unwrap();
    let throttle = registry.throttle("search").unwrap();
    for i in 0..10 {
        throttle.answered(i % 2 == 0);
    }
    // Judged from the next tenth of the window on.
    tokio::time::advance(ThrottleConfig::default().window / 10).await;
    assert_eq!(throttle.refusal_probability(), 0.0, "10 requests <= 2 x 5 accepts");
    let report = registry.reload_toml("[throttles.search]\nk = 1").unwrap();
    assert_eq!(report.to_string(), "throttle `search`: k 2 -> 1");
    assert_eq!(throttle.refusal_probability(), 5.0 / 11.0, "the same counts, (10 - 1 x 5) / 11");
    let report = registry.reload_toml("[throttles.search]\nk = 1\nmax_refusal_percent = 40").unwrap();
    assert_eq!(report.to_string(), "throttle `search`: max_refusal_percent 80 -> 40");
    assert_eq!(throttle.refusal_probability(), 0.4, "the same counts, capped at the new share");
}

#[tokio::test(start_paused = true)]
async fn a_reload_changes_a_rate_limits_wait_in_place_and_refuses_a_new_quota() {
    let registry = Registry::new();
    registry.load_toml("[rate_limits.api]\nper_second = 10\nburst = 1").unwrap();
    let limit = registry.rate_limit("api").unwrap();
    limit.acquire().await.unwrap();
    assert!(limit.acquire().await.is_err(), "no wait allowed yet");
    let report =
        registry.reload_toml("[rate_limits.api]\nper_second = 10\nburst = 1\nmax_wait_ms = 100").unwrap();
    assert_eq!(report.to_string(), "rate limit `api`: max_wait_ms none -> 100");
    let start = Instant::now();
    limit.acquire().await.unwrap();
    assert_eq!(start.elapsed(), ms(100), "the turn taken before the reload still counts");
    let err = registry
        .reload_toml("[rate_limits.api]\nper_second = 20\nburst = 1\nmax_wait_ms = 5")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "<toml>:2:14: rate limit `api`: `per_second` cannot change on a running rate limit (10 -> 20): its limiter is built for one quota and a new one would forget the turns already taken (declare a new name, or restart)"
    );
    assert_eq!(limit.config().max_wait, Some(ms(100)), "nothing applied from the refused file");
}

#[tokio::test(start_paused = true)]
async fn a_reload_retunes_an_adaptive_limit_from_where_it_is_and_loses_no_permit() {
    let registry = Registry::new();
    registry
        .load_toml("[bulkheads.db]\nmax_concurrent = 10\nadaptive = \"aimd\"\nmin_concurrent = 2")
        .unwrap();
    let bulkhead = registry.bulkhead("db").unwrap();
    for _ in 0..20 {
        bulkhead.acquire().await.unwrap().finish(true);
    }
    assert_eq!(bulkhead.limit(), 2, "shrunk to its minimum by overload");
    let report = registry
        .reload_toml("[bulkheads.db]\nmax_concurrent = 10\nadaptive = \"aimd\"\nmin_concurrent = 2\nbackoff_ratio = 0.5")
        .unwrap();
    assert_eq!(
        report.to_string(),
        "bulkhead `db`: adaptive aimd (min_concurrent 2, backoff_ratio 0.9) -> aimd (min_concurrent 2, backoff_ratio 0.5)"
    );
    assert_eq!(bulkhead.limit(), 2, "the limit it had learnt is kept");
    let held = futures_like_acquire(&bulkhead, 2).await;
    assert!(bulkhead.try_acquire().is_none());
    drop(held);
    registry.reload_toml("[bulkheads.db]\nmax_concurrent = 6").unwrap();
    assert_eq!((bulkhead.limit(), bulkhead.config().adaptive), (6, None), "a fixed limit again");
    let all = futures_like_acquire(&bulkhead, 6).await;
    assert!(bulkhead.try_acquire().is_none(), "exactly 6 permits: none lost, none extra");
    drop(all);
    assert_eq!(bulkhead.in_use(), 0);
}

#[test]
fn the_guides_example_file_loads() {
    let readme = include_str!("../../docs/configuration.md");
    let section = &readme[readme.find("# Configuration").expect("the section")..];
    let start = section.find("```toml\n").expect("its example file") + "```toml\n".len();
    let example = &section[start..start + section[start..].find("```").expect("closed")];
    let registry = Registry::new();
    registry.load_toml(example).unwrap_or_else(|e| panic!("the guide's example file: {e}"));
    assert_eq!(registry.throttle("search").unwrap().config().k, 2.0);
    assert_eq!(registry.bulkhead("payments").unwrap().config().adaptive, Some(AdaptiveLimit::aimd(4)));
}

/// A breaker's count-based window from the file: read, checked against
/// the rate mode it belongs to, and reported on reload.
#[test]
fn a_breakers_window_of_calls_is_read_checked_and_reported() {
    let registry = Registry::new();
    let text = "[breakers.search]\nfailure_rate_percent = 50\nminimum_calls = 20\nwindow_calls = 100\n";
    registry.load_toml(text).unwrap();
    assert_eq!(registry.breaker("search").unwrap().config().window_calls, Some(100));
    let report = registry.reload_toml(&text.replace("100", "200")).unwrap();
    assert_eq!(report.to_string(), "breaker `search`: window_calls 100 -> 200");
    assert_eq!(
        error("[breakers.a]\nwindow_calls = 100"),
        "<toml>:2:16: `window_calls` sets the rate mode's window of calls: give `failure_rate_percent` too"
    );
    assert!(
        error("[breakers.a]\nfailure_rate_percent = 50\nwindow_calls = 10001").contains("`window_calls`"),
        "over 10,000 is refused at the key"
    );
    assert_eq!(
        error("[breakers.a]\nfailure_rate_percent = 50\nminimum_calls = 20\nwindow_calls = 10"),
        "<toml>:3:17: `minimum_calls` must be at most window_calls (10), got 20: the window would never hold enough calls to judge"
    );
}

/// A breaker's slow calls from the file (issue 44, item 1): read, checked
/// at the key, reported on reload, and the reload keeps the breaker's state.
#[tokio::test(start_paused = true)]
async fn a_breakers_slow_calls_are_read_checked_reported_and_reloaded_keeping_its_state() {
    let registry = Registry::new();
    let text = "[breakers.search]
failure_rate_percent = 50
minimum_calls = 2
window_calls = 4
";
    registry.load_toml(text).unwrap();
    let breaker = registry.breaker("search").unwrap();
    breaker.try_acquire().unwrap().record(stormproof::breaker::Outcome::Failure);
    let timed = format!(
        "{text}slow_call_ms = 2000
slow_call_rate_percent = 75
"
    );
    let report = registry.reload_toml(&timed).unwrap();
    assert_eq!(
        report.to_string(),
        "breaker `search`: slow_call_ms none -> 2000, slow_call_rate_percent none -> 75"
    );
    let config = breaker.config();
    assert_eq!(
        (config.slow_call_duration, config.slow_call_rate_percent),
        (Some(std::time::Duration::from_secs(2)), Some(75))
    );
    // The failure recorded before the reload is still in the window: one
    // more opens the breaker (two of two failed).
    breaker.try_acquire().unwrap().record(stormproof::breaker::Outcome::Failure);
    assert_eq!(breaker.state(), stormproof::breaker::BreakerState::Open);
    assert_eq!(
        error("[breakers.a]\nfailure_rate_percent = 50\nslow_call_ms = 2000"),
        "<toml>:3:16: `slow_call_ms` says which calls are slow: give slow_call_rate_percent too (the share of slow calls that opens the breaker)"
    );
    assert_eq!(
        error("[breakers.a]\nslow_call_ms = 2000\nslow_call_rate_percent = 50"),
        "<toml>:3:26: `slow_call_rate_percent` is judged over the rate mode's window: give failure_rate_percent too"
    );
    assert!(
        error("[breakers.a]\nfailure_rate_percent = 50\nslow_call_ms = 2000\nslow_call_rate_percent = 101")
            .contains("`slow_call_rate_percent`"),
        "over 100 is refused at the key"
    );
}
