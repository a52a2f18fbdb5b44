//! A monotonic counter that many threads bump without fighting over one
//! cache line: the success path's one relaxed increment, read by samplers
//! (the admin page, fleet sync) as deltas between two reads.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Shards, each on its own cache line; threads are spread over them.
const SHARDS: usize = 8;
const _: () = assert!(SHARDS.is_power_of_two());

#[repr(align(64))]
#[derive(Default)]
struct Padded(AtomicU64);

/// A counter of events, summed over shards when read.
#[derive(Default)]
pub(crate) struct ShardedCounter {
    shards: [Padded; SHARDS],
}

thread_local! {
    static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

/// This thread's shard, assigned round-robin on first use.
#[inline]
fn shard() -> usize {
    SHARD
        .try_with(|shard| {
            let mut index = shard.get();
            if index == usize::MAX {
                index = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
                shard.set(index);
            }
            index
        })
        .unwrap_or(0)
}

impl ShardedCounter {
    /// Counts one event: one relaxed increment, on this thread's shard.
    #[inline]
    pub(crate) fn increment(&self) {
        // `SHARDS` is a power of two: the mask spares the bounds check.
        self.shards[shard() & (SHARDS - 1)].0.fetch_add(1, Ordering::Relaxed);
    }

    /// Events counted so far (increments racing this read may or may not be in it).
    pub(crate) fn total(&self) -> u64 {
        self.shards.iter().map(|shard| shard.0.load(Ordering::Relaxed)).fold(0, u64::wrapping_add)
    }
}

impl std::fmt::Debug for ShardedCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ShardedCounter").field(&self.total()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increments_from_many_threads_all_count() {
        let counter = std::sync::Arc::new(ShardedCounter::default());
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let counter = counter.clone();
                std::thread::spawn(move || (0..10_000).for_each(|_| counter.increment()))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(counter.total(), 60_000);
    }
}
