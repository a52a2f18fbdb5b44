//! What a replica counted while its flushes did not get through, and when.
//!
//! Totals are sent cumulatively, so the first flush that gets through after
//! an outage carries everything counted since the last one that did. Added
//! to the bucket of now, that is a burst that never happened: failures long
//! past could open the fleet's breaker, and first attempts long past would
//! swell the budget's share for a whole window. So a replica keeps the
//! totals it sent in each flush the server has not acknowledged, and the
//! flush that gets through sends them with their ages: the store places
//! what each added in the bucket of its time, and drops what is older than
//! the window (see `flush.lua`).

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// Cumulative totals as sent in the flushes the server has not
/// acknowledged, oldest first: the last one in each tenth of the window (a
/// bucket of the store's), and no more than one older than the window, so
/// at most a dozen whatever the outage's length.
#[derive(Debug)]
pub(super) struct Backlog<const N: usize> {
    /// Where the tenths of the window are counted from.
    origin: Instant,
    samples: VecDeque<(Instant, [u64; N])>,
}

impl<const N: usize> Backlog<N> {
    pub(super) fn new() -> Self {
        Backlog { origin: Instant::now(), samples: VecDeque::new() }
    }

    /// Notes the totals a flush sends at `now`, for a window of `window`.
    pub(super) fn note(&mut self, now: Instant, totals: [u64; N], window: Duration) {
        let width = (window / 10).max(Duration::from_millis(1));
        let tenth = |at: Instant| at.saturating_duration_since(self.origin).as_nanos() / width.as_nanos();
        // Within a tenth, the last sample stands for the tenth: the store
        // would put both in one bucket (or the next, at a boundary).
        if self.samples.back().is_some_and(|(at, _)| tenth(*at) == tenth(now)) {
            self.samples.pop_back();
        }
        self.samples.push_back((now, totals));
        // The newest sample older than the window bounds what the store
        // drops; the ones before it add nothing.
        while self.samples.get(1).is_some_and(|(at, _)| now.saturating_duration_since(*at) >= window) {
            self.samples.pop_front();
        }
    }

    /// The samples before the last (the flush in flight sends the last as
    /// its totals), each with its age at `now`.
    pub(super) fn earlier(&self, now: Instant) -> Vec<(Duration, [u64; N])> {
        let before_last = self.samples.len().saturating_sub(1);
        self.samples
            .iter()
            .take(before_last)
            .map(|(at, t)| (now.saturating_duration_since(*at), *t))
            .collect()
    }

    /// The server acknowledged a flush: it has everything noted so far.
    pub(super) fn clear(&mut self) {
        self.samples.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(10);

    async fn advance_ms(ms: u64) -> Instant {
        tokio::time::advance(Duration::from_millis(ms)).await;
        Instant::now()
    }

    #[tokio::test(start_paused = true)]
    async fn a_flush_that_gets_through_at_once_sends_no_earlier_samples() {
        let mut backlog = Backlog::new();
        backlog.note(Instant::now(), [5], WINDOW);
        assert!(backlog.earlier(Instant::now()).is_empty());
        backlog.clear();
        let now = advance_ms(100).await;
        backlog.note(now, [7], WINDOW);
        assert!(backlog.earlier(now).is_empty(), "what was acknowledged is gone");
    }

    /// Flushes every 100 ms that fail for 2.5 s: one sample per second (a
    /// tenth of the window), the last of each, with its age.
    #[tokio::test(start_paused = true)]
    async fn an_outage_is_kept_as_one_sample_per_tenth_of_the_window() {
        let mut backlog = Backlog::new();
        for total in 0..=25 {
            backlog.note(Instant::now(), [total], WINDOW);
            advance_ms(100).await;
        }
        let now = Instant::now();
        let earlier = backlog.earlier(now);
        let ms = |d: Duration| d.as_millis();
        let got: Vec<_> = earlier.iter().map(|(age, t)| (ms(*age), t[0])).collect();
        assert_eq!(got, [(1_700, 9), (700, 19)], "the last of each full second; 25 is the flush in flight");
    }

    /// An outage of a minute keeps a dozen samples, the oldest the newest
    /// one older than the window.
    #[tokio::test(start_paused = true)]
    async fn a_long_outage_keeps_at_most_one_sample_older_than_the_window() {
        let mut backlog = Backlog::new();
        for total in 0..600 {
            backlog.note(Instant::now(), [total], WINDOW);
            advance_ms(100).await;
        }
        let now = Instant::now();
        backlog.note(now, [600], WINDOW);
        let earlier = backlog.earlier(now);
        assert!(earlier.len() <= 11, "{} samples", earlier.len());
        assert!(earlier[0].0 >= WINDOW && earlier[1].0 < WINDOW, "{earlier:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_under_ten_milliseconds_still_counts_in_whole_milliseconds() {
        let mut backlog = Backlog::new();
        let window = Duration::from_millis(3);
        backlog.note(Instant::now(), [1], window);
        let now = advance_ms(1).await;
        backlog.note(now, [2], window);
        assert_eq!(backlog.earlier(now), [(Duration::from_millis(1), [1])]);
    }
}
