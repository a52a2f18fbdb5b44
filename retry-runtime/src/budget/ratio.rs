//! The share-of-traffic budget: retries at most a ratio of first attempts
//! over a sliding window, plus a floor per second.

use std::collections::VecDeque;
use std::time::Duration;

use crate::config::ConfigError;

/// A share-of-traffic budget's settings (the default budget form, as in
/// Finagle, Envoy and the SRE book); every field has a default.
///
/// Over any `window`, retries may be at most `ratio` of the first attempts
/// made in it, plus `min_per_sec` per second of the window, so that a quiet
/// service can still retry. With the defaults, retries add at most 10% to
/// the load a dependency sees, whatever happens to it.
///
/// First attempts are counted without reading the clock (one relaxed
/// increment on the success path); the retry path places them in time by
/// the counts it saw at each retry. When no retry came for longer than the
/// window, the first attempts since the last one are taken to have come at
/// an even rate, and the window's share of them is counted.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::budget::RatioBudget;
/// let cfg = RatioBudget { ratio: 0.2, ..Default::default() };
/// assert_eq!((cfg.window, cfg.min_per_sec), (Duration::from_secs(10), 10));
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioBudget {
    /// Retries allowed per first attempt. Default 0.1 (10%).
    pub ratio: f64,
    /// How far back first attempts and retries count. Default 10 s.
    pub window: Duration,
    /// Retries allowed per second of the window whatever the traffic. Default 10.
    pub min_per_sec: u32,
}

impl Default for RatioBudget {
    fn default() -> Self {
        RatioBudget { ratio: 0.1, window: Duration::from_secs(10), min_per_sec: 10 }
    }
}

/// Longest window: a budget remembering more than a day of traffic would
/// not react to an outage.
const MAX_WINDOW: Duration = Duration::from_secs(86_400);

impl RatioBudget {
    /// Checks the settings: `ratio` in 0..=100 (a finite number), `window`
    /// in (0, 1 day].
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.ratio.is_finite() && (0.0..=100.0).contains(&self.ratio)) {
            return Err(ConfigError::new(
                "ratio",
                format!("must be a number in 0..=100, got {}", self.ratio),
            ));
        }
        if self.window.is_zero() || self.window > MAX_WINDOW {
            return Err(ConfigError::new("window", format!("must be in (0, 1 day], got {:?}", self.window)));
        }
        Ok(())
    }

    /// Retries allowed over a window that saw `first_attempts`.
    fn allowed(&self, first_attempts: f64) -> f64 {
        f64::from(self.min_per_sec) * self.window.as_secs_f64() + self.ratio * first_attempts
    }
}

/// One slice of the window: from `start`, the retries made in it, and how
/// many first attempts had been made before it began.
#[derive(Debug, Clone, Copy)]
struct Slice {
    start: Duration,
    first_attempts_before: u64,
    retries: u64,
}

/// The window's accounting as pure logic: the time and the running count of
/// first attempts are passed in. First attempts are counted by the caller
/// with no clock (one increment on the success path); they are placed in
/// time here, on the retry path, by the count each slice began with.
///
/// [`RetryBudget`](crate::budget::RetryBudget) runs it under a lock on tokio's
/// clock; the simulator runs it on its own. Public so that a model can
/// drive it without a clock:
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::{budget::{RatioBudget, RatioWindow}};
/// let config = RatioBudget { ratio: 0.1, window: Duration::from_secs(10), min_per_sec: 0 };
/// let mut window = RatioWindow::new(Duration::ZERO, 0);
/// // 20 first attempts allow 2 retries.
/// assert!(window.try_withdraw(&config, Duration::from_secs(1), 20));
/// assert!(window.try_withdraw(&config, Duration::from_secs(1), 20));
/// assert!(!window.try_withdraw(&config, Duration::from_secs(1), 20));
/// ```
#[derive(Debug, Clone)]
pub struct RatioWindow {
    /// Oldest first; the first may have begun before the window (the
    /// baseline its first attempts are counted from).
    slices: VecDeque<Slice>,
}

impl RatioWindow {
    /// A window opened at `now`, with `first_attempts` counted so far.
    pub fn new(now: Duration, first_attempts: u64) -> Self {
        RatioWindow {
            slices: VecDeque::from([Slice { start: now, first_attempts_before: first_attempts, retries: 0 }]),
        }
    }

    /// Retries still allowed at `now` (floored).
    pub fn available(&mut self, config: &RatioBudget, now: Duration, first_attempts: u64) -> u64 {
        let (allowed, used) = self.account(config, now, first_attempts);
        (allowed - used as f64).max(0.0) as u64
    }

    /// Takes one retry at `now`; `false` (and nothing taken) when the
    /// window has none left.
    pub fn try_withdraw(&mut self, config: &RatioBudget, now: Duration, first_attempts: u64) -> bool {
        let (allowed, used) = self.account(config, now, first_attempts);
        if used as f64 + 1.0 > allowed {
            return false;
        }
        let width = (config.window / 10).max(Duration::from_nanos(1));
        let needs_slice = self.slices.back().is_none_or(|last| now >= last.start.saturating_add(width));
        if needs_slice {
            self.slices.push_back(Slice { start: now, first_attempts_before: first_attempts, retries: 0 });
        }
        if let Some(last) = self.slices.back_mut() {
            last.retries += 1;
        }
        true
    }

    /// Forgets a retry taken at `at` that did not run after all, from the
    /// slice that counted it: not the latest retry, which may be another's
    /// in a later slice, still in the window when this one's has left it.
    /// A slice dropped since counts nothing any more: nothing to forget.
    pub fn give_back(&mut self, at: Duration) {
        if let Some(slice) = self.slices.iter_mut().rev().find(|slice| slice.start <= at)
            && slice.retries > 0
        {
            slice.retries -= 1;
        }
    }

    /// (retries allowed, retries made) over the window ending at `now`.
    fn account(&mut self, config: &RatioBudget, now: Duration, first_attempts: u64) -> (f64, u64) {
        let window_start = now.saturating_sub(config.window);
        // Keep one slice that began at or before the window: the baseline.
        while self.slices.len() >= 2 && self.slices[1].start <= window_start {
            self.slices.pop_front();
        }
        let Some(base) = self.slices.front().copied() else {
            return (config.allowed(first_attempts as f64), 0);
        };
        let since_base = first_attempts.saturating_sub(base.first_attempts_before) as f64;
        let in_window = if base.start >= window_start {
            since_base
        } else {
            // A baseline from before the window (no retry for a while):
            // assume the first attempts since it came at an even rate.
            let span = now.saturating_sub(base.start).as_secs_f64();
            if span > 0.0 { since_base * (config.window.as_secs_f64() / span).min(1.0) } else { since_base }
        };
        let used = self.slices.iter().filter(|s| s.start >= window_start).map(|s| s.retries).sum();
        (config.allowed(in_window), used)
    }

    /// How many slices are held, for the memory test.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.slices.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: u64) -> Duration {
        Duration::from_secs(v)
    }

    #[test]
    fn retries_are_a_share_of_first_attempts_plus_a_floor() {
        let config = RatioBudget { ratio: 0.1, window: s(10), min_per_sec: 1 };
        let mut window = RatioWindow::new(s(0), 0);
        // 1000 first attempts in the window: 10 s * 1/s + 10% * 1000 = 110 retries.
        let mut taken = 0;
        while window.try_withdraw(&config, s(5), 1000) {
            taken += 1;
        }
        assert_eq!(taken, 110);
        assert_eq!(window.available(&config, s(5), 1000), 0);
    }

    #[test]
    fn a_quiet_service_can_still_retry_at_the_floor() {
        let config = RatioBudget { ratio: 0.1, window: s(10), min_per_sec: 10 };
        let mut window = RatioWindow::new(s(0), 0);
        let taken = (0..1000).take_while(|_| window.try_withdraw(&config, s(1), 3)).count();
        assert_eq!(taken, 100, "10 per second over 10 s, and 0.3 from three first attempts");
    }

    #[test]
    fn retries_and_first_attempts_age_out_of_the_window() {
        let config = RatioBudget { ratio: 1.0, window: s(10), min_per_sec: 0 };
        let mut window = RatioWindow::new(s(0), 0);
        assert_eq!((0..100).take_while(|_| window.try_withdraw(&config, s(1), 20)).count(), 20);
        // Retries every second keep the baseline fresh: 9 s later the 20
        // retries of t=1 are still in the window, and 20 more first
        // attempts allow 20 more.
        assert_eq!((0..100).take_while(|_| window.try_withdraw(&config, s(2), 40)).count(), 20);
        // 30 s on, both ages of retries are forgotten.
        assert_eq!(window.available(&config, s(32), 40), 0, "no first attempt since: nothing allowed");
    }

    #[test]
    fn a_stale_baseline_spreads_first_attempts_evenly_over_its_span() {
        let config = RatioBudget { ratio: 1.0, window: s(10), min_per_sec: 0 };
        let mut window = RatioWindow::new(s(0), 0);
        assert!(window.try_withdraw(&config, s(1), 10));
        // No retry for 29 s: 30 first attempts since t=1 are assumed even,
        // so the 10 s window holds 30 * 10 / 30 = 10 of them.
        assert_eq!(window.available(&config, s(31), 40), 10);
    }

    #[test]
    fn memory_stays_bounded_under_steady_retries() {
        let config = RatioBudget { ratio: 10.0, window: s(10), min_per_sec: 100 };
        let mut window = RatioWindow::new(s(0), 0);
        for i in 0..100_000u64 {
            let now = Duration::from_millis(i * 7);
            window.try_withdraw(&config, now, i * 10);
            assert!(window.len() <= 12, "{} slices", window.len());
        }
    }

    #[test]
    fn bad_settings_name_their_field() {
        for (config, field) in [
            (RatioBudget { ratio: -0.1, ..Default::default() }, "ratio"),
            (RatioBudget { ratio: f64::NAN, ..Default::default() }, "ratio"),
            (RatioBudget { ratio: f64::INFINITY, ..Default::default() }, "ratio"),
            (RatioBudget { window: Duration::ZERO, ..Default::default() }, "window"),
            (RatioBudget { window: s(86_401), ..Default::default() }, "window"),
        ] {
            assert_eq!(config.validate().unwrap_err().field, field);
        }
    }
}
