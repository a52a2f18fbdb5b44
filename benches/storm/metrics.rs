//! Counts per 100 ms of a run, written by many tasks at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The width of a bucket.
pub const BUCKET: Duration = Duration::from_millis(100);

/// Counts per bucket of a run, from its start; what falls past the end is
/// counted in the last bucket.
pub struct Buckets {
    counts: Vec<AtomicU64>,
}

impl Buckets {
    /// Buckets for a run of `length`.
    pub fn new(length: Duration) -> Self {
        let n = (length.as_millis() / BUCKET.as_millis()) as usize + 1;
        Buckets { counts: (0..n).map(|_| AtomicU64::new(0)).collect() }
    }

    /// Counts `n` at `since_start`.
    pub fn add(&self, since_start: Duration, n: u64) {
        let i = ((since_start.as_millis() / BUCKET.as_millis()) as usize).min(self.counts.len() - 1);
        self.counts[i].fetch_add(n, Ordering::Relaxed);
    }

    /// The counts as they are now.
    pub fn snapshot(&self) -> Vec<u64> {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }
}

/// The sum of `counts` over `[from, to)`, in buckets.
pub fn sum(counts: &[u64], from: Duration, to: Duration) -> u64 {
    let (a, b) = (index(from), index(to).min(counts.len()));
    counts.get(a..b).map_or(0, |s| s.iter().sum())
}

/// The bucket `at` falls in.
pub fn index(at: Duration) -> usize {
    (at.as_millis() / BUCKET.as_millis()) as usize
}
