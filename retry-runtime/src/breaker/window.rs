//! What a closed breaker remembers of recent outcomes, and when that is
//! enough to open it: counting, kept apart from the state machine (as Polly
//! keeps its behaviours apart from its circuit controller).
//!
//! Two modes: **count** (the last `failure_threshold` transient failures
//! within `window`; a success clears them) and **rate** (the share of calls
//! that failed within `window`, once at least `minimum_calls` ended there,
//! as resilience4j counts; or within the last `window_calls` calls, as its
//! `COUNT_BASED` window does, one bit a call in a ring). Rate mode counts per tenth of the window, as
//! resilience4j's time-based window counts per bucket: a slice is forgotten
//! once the window has elapsed since it began, so memory stays constant at
//! any traffic. Rate mode also judges the share of slow calls, when the
//! breaker times its attempts (`slow_call_rate_percent`): the same window,
//! a second count.

use std::collections::VecDeque;
use std::time::Duration;

use super::BreakerConfig;
use super::outcome::Outcome;

/// How many slices the failure-rate window is cut into.
const RATE_SLICES: u32 = 10;

/// Outcomes of the calls that ended within one slice of the window.
#[derive(Debug, Clone, Copy)]
pub(super) struct Slice {
    /// When the slice starts (a multiple of the slice width).
    start: Duration,
    failures: u64,
    /// Slow successes included.
    successes: u64,
    slow: u64,
}

/// The closed breaker's memory of recent outcomes.
#[derive(Debug, Clone)]
pub(super) enum FailureWindow {
    /// When recent transient failures happened, oldest first; at most
    /// `failure_threshold` of them.
    Count(VecDeque<Duration>),
    /// Outcomes per slice of the window, oldest first; at most
    /// `RATE_SLICES + 1` slices, whatever the traffic.
    Rate(VecDeque<Slice>),
    /// The last `window_calls` outcomes, one bit each (set: failed).
    Calls(CallRing),
}

/// The outcomes of the last `size` calls, a bit each, in a ring: memory is
/// `size / 8` bytes whatever the traffic (twice that when slow calls are
/// judged too), and the counts are kept as the ring turns, so judging the
/// rate reads two numbers.
#[derive(Debug, Clone)]
pub(super) struct CallRing {
    bits: Box<[u64]>,
    /// A bit a call, set: slow; only when slow calls are judged.
    slow_bits: Option<Box<[u64]>>,
    /// How many of the calls held were slow.
    slow: u32,
    size: u32,
    /// Where the next outcome goes.
    next: u32,
    /// Outcomes held (up to `size`), and how many of them failed.
    calls: u32,
    failures: u32,
    /// The concurrent breaker's total of successes up to which this ring
    /// has counted them (see [`FailureWindow::catch_up`]); `None` until the
    /// first catch-up after the ring was made or cleared.
    synced: Option<u64>,
}

impl CallRing {
    fn new(size: u32, judges_slow: bool) -> Self {
        let size = size.max(1);
        let words = size.div_ceil(64) as usize;
        CallRing {
            bits: vec![0; words].into_boxed_slice(),
            slow_bits: judges_slow.then(|| vec![0; words].into_boxed_slice()),
            slow: 0,
            size,
            next: 0,
            calls: 0,
            failures: 0,
            synced: None,
        }
    }

    /// Records one outcome, dropping the oldest once the ring is full.
    fn push(&mut self, failed: bool, slow: bool) {
        let (word, bit) = ((self.next / 64) as usize, self.next % 64);
        let mask = 1u64 << bit;
        if self.calls == self.size {
            if self.bits[word] & mask != 0 {
                self.failures -= 1;
            }
            if self.slow_bits.as_ref().is_some_and(|bits| bits[word] & mask != 0) {
                self.slow -= 1;
            }
        } else {
            self.calls += 1;
        }
        if failed {
            self.bits[word] |= mask;
            self.failures += 1;
        } else {
            self.bits[word] &= !mask;
        }
        if let Some(bits) = &mut self.slow_bits {
            if slow {
                bits[word] |= mask;
                self.slow += 1;
            } else {
                bits[word] &= !mask;
            }
        }
        self.next = (self.next + 1) % self.size;
    }

    /// Records `count` successes at once: past `size` of them, the ring
    /// holds nothing else.
    fn push_successes(&mut self, count: u64) {
        if count >= u64::from(self.size) {
            self.bits.fill(0);
            if let Some(bits) = &mut self.slow_bits {
                bits.fill(0);
            }
            (self.next, self.calls, self.failures, self.slow) = (0, self.size, 0, 0);
            return;
        }
        for _ in 0..count {
            self.push(false, false);
        }
    }

    fn clear(&mut self) {
        self.bits.fill(0);
        if let Some(bits) = &mut self.slow_bits {
            bits.fill(0);
        }
        (self.next, self.calls, self.failures, self.slow, self.synced) = (0, 0, 0, 0, None);
    }

    /// A ring of `size` calls holding this one's most recent outcomes, as
    /// many as it has room for, in order; which were slow only if both
    /// judge slow calls. The successes counted apart are caught up as before.
    fn resized(&self, size: u32, judges_slow: bool) -> CallRing {
        let mut ring = CallRing::new(size, judges_slow);
        let kept = self.calls.min(ring.size);
        // The oldest kept: `kept` before the next place, round the ring.
        let first = (self.next + self.size - kept) % self.size;
        for i in 0..kept {
            let at = (first + i) % self.size;
            let (word, mask) = ((at / 64) as usize, 1u64 << (at % 64));
            let slow = self.slow_bits.as_ref().is_some_and(|bits| bits[word] & mask != 0);
            ring.push(self.bits[word] & mask != 0, slow);
        }
        ring.synced = self.synced;
        ring
    }

    /// Whether the failures (or the slow calls) held reach their share of
    /// at least `minimum_calls` calls.
    fn exceeds(&self, config: &BreakerConfig) -> bool {
        rates_exceeded(u64::from(self.failures), u64::from(self.slow), u64::from(self.calls), config)
    }
}

impl FailureWindow {
    pub(super) fn new(config: &BreakerConfig) -> Self {
        match (config.failure_rate_percent, config.window_calls) {
            (None, _) => FailureWindow::Count(VecDeque::new()),
            (Some(_), None) => FailureWindow::Rate(VecDeque::new()),
            (Some(_), Some(calls)) => FailureWindow::Calls(CallRing::new(calls, config.judges_slow_calls())),
        }
    }

    /// Starts or stops keeping which of the calls were slow (a breaker
    /// reconfigured to judge slow calls, or no longer to): the calls held
    /// are kept, counted as not slow.
    pub(super) fn judge_slow_calls(&mut self, judges: bool) {
        if let FailureWindow::Calls(ring) = self {
            match (&ring.slow_bits, judges) {
                (None, true) => ring.slow_bits = Some(vec![0; ring.bits.len()].into_boxed_slice()),
                (Some(_), false) => (ring.slow_bits, ring.slow) = (None, 0),
                _ => {}
            }
        }
    }

    /// The window of a breaker reconfigured from `was` to `now`: a window
    /// of another kind (count, rate over time, rate over the last calls)
    /// cannot be carried over and starts empty; one of the last calls of
    /// another size keeps its most recent outcomes (see
    /// `CallRing::resized`); the same kind keeps its counts, those of calls
    /// held before slow calls were judged counting as not slow.
    pub(super) fn carry_over(&mut self, was: &BreakerConfig, now: &BreakerConfig) {
        let rate = |c: &BreakerConfig| c.failure_rate_percent.is_some();
        let kind = |c: &BreakerConfig| (rate(c), rate(c) && c.window_calls.is_some());
        match self {
            _ if kind(was) != kind(now) => *self = FailureWindow::new(now),
            FailureWindow::Calls(ring) if now.window_calls != was.window_calls => {
                *ring = ring.resized(now.window_calls.unwrap_or(ring.size), now.judges_slow_calls());
            }
            _ => self.judge_slow_calls(now.judges_slow_calls()),
        }
    }

    /// Forgets everything (a transition starts afresh).
    pub(super) fn clear(&mut self) {
        match self {
            FailureWindow::Count(failures) => failures.clear(),
            FailureWindow::Rate(slices) => slices.clear(),
            FailureWindow::Calls(ring) => ring.clear(),
        }
    }

    /// Whether a success must be recorded as it happens: there are
    /// failures to clear (count mode), every call counts (rate mode over
    /// time), or the window of calls holds fewer than `minimum_calls`, so
    /// that a success may complete a rate the failures before it reached.
    /// A window of calls that holds enough has its successes counted apart
    /// and handed over at the next failure ([`catch_up`](Self::catch_up)):
    /// a success lowers the rate, so only a failure can open it.
    pub(super) fn success_matters(&self, config: &BreakerConfig) -> bool {
        match self {
            FailureWindow::Count(failures) => !failures.is_empty(),
            FailureWindow::Rate(_) => true,
            FailureWindow::Calls(ring) => ring.calls < config.minimum_calls,
        }
    }

    /// Whether successes may be counted apart, without the breaker's lock,
    /// and handed over with [`catch_up`](Self::catch_up).
    pub(super) fn counts_successes_apart(&self) -> bool {
        matches!(self, FailureWindow::Calls(_))
    }

    /// Counts the successes the concurrent breaker counted apart since the
    /// last catch-up, given their running `total` (a window of calls only):
    /// they are older than the outcome about to be recorded. The first
    /// catch-up after the window was made or cleared only notes the total.
    pub(super) fn catch_up(&mut self, total: u64) {
        if let FailureWindow::Calls(ring) = self {
            if let Some(synced) = ring.synced {
                ring.push_successes(total.saturating_sub(synced));
            }
            ring.synced = Some(ring.synced.map_or(total, |synced| synced.max(total)));
        }
    }

    /// Whether recording `outcome` uses the time: in count mode a success
    /// only clears, so the clock need not be read. (A window of calls has
    /// no time in it, but any outcome may open the breaker, which starts
    /// its open period now.)
    pub(super) fn needs_time(&self, outcome: Outcome) -> bool {
        !matches!((self, outcome), (FailureWindow::Count(_), Outcome::Success | Outcome::Slow))
    }

    /// Records how a call admitted while closed ended, at `now`; `true`
    /// when the breaker should open. (Inline: its one caller is the core's
    /// `record`, already out of line behind the breaker's lock.)
    #[inline]
    pub(super) fn record(&mut self, config: &BreakerConfig, outcome: Outcome, now: Duration) -> bool {
        self.forget_before(now, config.window);
        match (self, outcome) {
            (_, Outcome::Neutral) => false,
            // Count mode judges no slow calls (`validate` refuses them
            // there): a slow call is a success.
            (FailureWindow::Count(failures), Outcome::Success | Outcome::Slow) => {
                failures.clear();
                false
            }
            (FailureWindow::Count(failures), Outcome::Failure) => {
                let threshold = config.failure_threshold as usize;
                failures.push_back(now);
                // Only the newest `failure_threshold` matter; older ones can
                // never complete a threshold again.
                while failures.len() > threshold {
                    failures.pop_front();
                }
                failures.len() >= threshold
            }
            (FailureWindow::Rate(slices), outcome) => {
                let slice = slice_at(slices, now, config.window);
                match outcome {
                    Outcome::Failure => slice.failures += 1,
                    Outcome::Slow => (slice.successes, slice.slow) = (slice.successes + 1, slice.slow + 1),
                    _ => slice.successes += 1,
                }
                // Judged after every outcome, as resilience4j does: the
                // success that brings the window to `minimum_calls` can
                // complete a rate that the failures before it reached.
                rate_exceeded(slices, config)
            }
            (FailureWindow::Calls(ring), outcome) => {
                ring.push(outcome == Outcome::Failure, outcome == Outcome::Slow);
                if outcome.succeeded() {
                    // Recorded here, so no longer among those counted apart.
                    ring.synced = ring.synced.map(|synced| synced + 1);
                }
                ring.exceeds(config)
            }
        }
    }

    /// Drops outcomes older than the window (`now - t >= window`).
    #[inline]
    fn forget_before(&mut self, now: Duration, window: Duration) {
        let expired = |t: &Duration| now.saturating_sub(*t) >= window;
        match self {
            FailureWindow::Count(failures) => {
                while failures.front().is_some_and(expired) {
                    failures.pop_front();
                }
            }
            // A slice is forgotten once the window has elapsed since it began.
            FailureWindow::Rate(slices) => {
                while slices.front().is_some_and(|slice| expired(&slice.start)) {
                    slices.pop_front();
                }
            }
            // The last calls, however old.
            FailureWindow::Calls(_) => {}
        }
    }

    /// How many slices are held (rate mode), for the memory test.
    #[cfg(test)]
    pub(super) fn slices(&self) -> usize {
        match self {
            FailureWindow::Count(_) | FailureWindow::Calls(_) => 0,
            FailureWindow::Rate(slices) => slices.len(),
        }
    }

    /// The words a window of calls holds, for the memory test.
    #[cfg(test)]
    pub(super) fn call_words(&self) -> usize {
        match self {
            FailureWindow::Calls(ring) => ring.bits.len(),
            _ => 0,
        }
    }
}

/// Whether the failures (or the slow calls) in `slices` reach their rate.
fn rate_exceeded(slices: &VecDeque<Slice>, config: &BreakerConfig) -> bool {
    let failed: u64 = slices.iter().map(|s| s.failures).sum();
    let slow: u64 = slices.iter().map(|s| s.slow).sum();
    let calls = failed.saturating_add(slices.iter().map(|s| s.successes).sum::<u64>());
    rates_exceeded(failed, slow, calls, config)
}

/// Whether `failed` (or `slow`) of `calls` reach the configured share, once
/// `calls` reach `minimum_calls`.
fn rates_exceeded(failed: u64, slow: u64, calls: u64, config: &BreakerConfig) -> bool {
    let reaches =
        |count: u64, percent: u8| count.saturating_mul(100) >= calls.saturating_mul(u64::from(percent));
    calls >= u64::from(config.minimum_calls)
        && (reaches(failed, config.failure_rate_percent.unwrap_or(100))
            || config.slow_call_rate_percent.is_some_and(|percent| reaches(slow, percent)))
}

/// The slice that `now` falls in, added if new.
fn slice_at(slices: &mut VecDeque<Slice>, now: Duration, window: Duration) -> &mut Slice {
    let start = slice_start(now, window);
    if slices.back().is_none_or(|last| last.start != start) {
        slices.push_back(Slice { start, failures: 0, successes: 0, slow: 0 });
    }
    // Just ensured: there is a last slice.
    slices.back_mut().unwrap_or_else(|| unreachable!())
}

/// Where the slice holding `t` starts: slices are `window / RATE_SLICES`
/// wide (at least 1 ns) and aligned to zero.
fn slice_start(t: Duration, window: Duration) -> Duration {
    let width = (window.as_nanos() / u128::from(RATE_SLICES)).max(1);
    let start = t.as_nanos() / width * width;
    // `start <= t`, so it fits a `Duration`.
    Duration::new(u64::try_from(start / 1_000_000_000).unwrap_or(u64::MAX), (start % 1_000_000_000) as u32)
}

#[cfg(test)]
pub(super) const MAX_SLICES: usize = RATE_SLICES as usize + 1;
