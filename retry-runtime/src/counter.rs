//! A monotonic counter that many threads bump without a locked instruction
//! and without fighting over one cache line: the success path's one
//! increment, read by samplers (the admin page, fleet sync) and the ratio
//! budget's retry path as a sum.
//!
//! Why not one atomic, or shards bumped with `fetch_add`: even uncontended,
//! an atomic read-modify-write (`lock xadd`) costs about as much as the
//! rest of a successful call (about 7 ns on the development machine, two
//! counters a call). So each thread counts in a slot only it writes, with a
//! plain load and store. The slot is the thread's *claim*: an index claimed
//! from a process-wide bitmap on the thread's first count and freed when it
//! exits, so a later thread reuses it and counts on from the count left
//! there (a reader sums the slots, so nothing is lost). Threads beyond
//! [`SLOTS`] at once, and counts made while a thread is exiting, share one
//! more slot bumped with `fetch_add`: correct, only slower.
//!
//! (The `thread_local` crate's `ThreadLocal` gives each object a slot per
//! thread too, but its lookup cost about 4 ns a counter here, most of what
//! this saves; one claim shared by every counter makes the lookup one
//! thread-local read.)

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Slots per counter: threads counting at once beyond this share the spare.
const SLOTS: usize = 64;

/// A thread that has not counted yet.
const UNCLAIMED: usize = usize::MAX;
/// A thread that found every slot taken: it uses the spare for its life.
const SPARE: usize = SLOTS;

/// Bit `i` set: slot `i` is claimed by a live thread.
static CLAIMED: AtomicU64 = AtomicU64::new(0);
/// One past the highest slot ever claimed: readers sum no further.
static HIGHEST: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's slot: `UNCLAIMED` until its first count. No destructor,
    /// so reading it is one thread-local load, even while the thread exits.
    static SLOT: Cell<usize> = const { Cell::new(UNCLAIMED) };
    /// Gives the slot back when the thread exits (registered by the claim).
    static RELEASE: Release = const { Release };
}

/// Gives this thread's slot back as it exits; counts made after that (by
/// other thread-locals' destructors) go to the spare.
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        let slot = SLOT.replace(SPARE);
        if slot < SLOTS {
            // Release: this thread's last stores happen before the next
            // claimer's first load of the slot (it claims with Acquire).
            CLAIMED.fetch_and(!(1 << slot), Ordering::Release);
        }
    }
}

/// Which of `stripes` stripes this thread writes (its slot's, so that the
/// first `stripes` threads to count each have their own). For counts that
/// must be reset by other threads (the throttle's window), which a plain
/// load and store would lose: those add with `fetch_add` on their stripe,
/// uncontended while threads are no more than stripes.
#[inline]
pub(crate) fn stripe(stripes: usize) -> usize {
    slot() % stripes
}

/// This thread's slot, claimed on its first call; `SPARE` when every slot
/// was taken then, or the thread is exiting.
#[inline]
fn slot() -> usize {
    let slot = SLOT.get();
    if slot != UNCLAIMED { slot } else { claim_slot() }
}

/// Claims the lowest free slot for this thread, or `SPARE` if none is free
/// (or the thread is exiting, when a claim could not be given back).
#[cold]
#[inline(never)]
fn claim_slot() -> usize {
    let slot = if RELEASE.try_with(|_| ()).is_err() { SPARE } else { claim_free() };
    SLOT.set(slot);
    slot
}

fn claim_free() -> usize {
    let mut claimed = CLAIMED.load(Ordering::Relaxed);
    loop {
        let free = (!claimed).trailing_zeros() as usize;
        if free >= SLOTS {
            return SPARE;
        }
        match CLAIMED.compare_exchange_weak(
            claimed,
            claimed | (1 << free),
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => {
                HIGHEST.fetch_max(free + 1, Ordering::Relaxed);
                return free;
            }
            Err(now) => claimed = now,
        }
    }
}

/// One slot's count, on a pair of cache lines of its own: x86's
/// adjacent-line prefetcher moves lines in 128-byte pairs, so two threads'
/// 64-byte slots side by side still contended (`contention/threads_2` in
/// `benches/overhead.rs`: 1.34-1.50x one thread's throughput with 64-byte
/// slots, 1.68-1.75x with these; crossbeam's `CachePadded` is 128 bytes on
/// x86_64 for the same reason).
#[repr(align(128))]
#[derive(Default)]
struct Slot(AtomicU64);

/// A counter of events, summed over the threads' slots when read.
///
/// About 4 KiB, held inline (there is one per breaker and per ratio
/// budget, and a box would cost every increment a pointer hop).
pub(crate) struct PerThreadCounter {
    /// `SLOTS` slots, one per claim, then the spare.
    slots: [Slot; SLOTS + 1],
}

impl Default for PerThreadCounter {
    fn default() -> Self {
        PerThreadCounter { slots: std::array::from_fn(|_| Slot::default()) }
    }
}

impl PerThreadCounter {
    /// Counts one event in this thread's slot.
    #[inline]
    pub(crate) fn increment(&self) {
        // One test for the common case: `UNCLAIMED` and `SPARE` are both
        // at least `SPARE`, so a thread yet to claim takes the cold path
        // with the spare's users.
        let slot = SLOT.get();
        if slot < SPARE {
            self.increment_own(slot);
        } else {
            self.increment_elsewhere();
        }
    }

    #[inline]
    fn increment_own(&self, slot: usize) {
        // Only this thread writes its slot while it holds the claim, so a
        // load and a store lose nothing; readers see each store whole.
        let own = &self.slots[slot].0;
        own.store(own.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }

    /// A thread's first count claims it a slot; without one, it counts in
    /// the spare.
    #[cold]
    #[inline(never)]
    fn increment_elsewhere(&self) {
        let slot = slot();
        if slot < SPARE {
            self.increment_own(slot);
        } else {
            self.slots[SPARE].0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Events counted so far (increments racing this read may or may not be in it).
    pub(crate) fn total(&self) -> u64 {
        let highest = HIGHEST.load(Ordering::Relaxed).min(SLOTS);
        let claimed = self.slots[..highest].iter();
        claimed
            .chain([&self.slots[SPARE]])
            .map(|slot| slot.0.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

impl std::fmt::Debug for PerThreadCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PerThreadCounter").field(&self.total()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increments_from_many_threads_all_count() {
        let counter = std::sync::Arc::new(PerThreadCounter::default());
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let counter = counter.clone();
                std::thread::spawn(move || (0..10_000).for_each(|_| counter.increment()))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(counter.total(), 60_000);
    }

    #[test]
    fn a_thread_with_a_slot_counts_in_it_not_in_the_spare() {
        let counter = PerThreadCounter::default();
        counter.increment();
        let own = slot();
        // (Only while another test holds every slot does this thread have none.)
        if own < SLOTS {
            let counts = (
                counter.slots[own].0.load(Ordering::Relaxed),
                counter.slots[SPARE].0.load(Ordering::Relaxed),
            );
            assert_eq!(counts, (1, 0));
        }
    }

    #[test]
    fn a_thread_that_exits_leaves_its_count_to_the_next_claimer_of_its_slot() {
        let counter = std::sync::Arc::new(PerThreadCounter::default());
        counter.increment();
        // One after the other: each later thread may reuse an earlier one's slot.
        for _ in 0..3 {
            let counter = counter.clone();
            std::thread::spawn(move || (0..100).for_each(|_| counter.increment())).join().unwrap();
        }
        assert_eq!(counter.total(), 301);
    }

    #[test]
    fn a_thread_that_exits_gives_back_its_own_slot_only() {
        // A holds its slot while B claims one and exits: A's claim must
        // survive B's release, or a later thread would share A's slot and
        // their plain stores would lose counts.
        let (claimed, release) = (std::sync::mpsc::channel(), std::sync::Barrier::new(2));
        let (holder, other, held) = std::thread::scope(|scope| {
            let (claimed_tx, release) = (claimed.0.clone(), &release);
            scope.spawn(move || {
                claimed_tx.send(slot()).unwrap();
                release.wait();
            });
            let holder = claimed.1.recv().unwrap();
            let other = std::thread::spawn(slot).join().unwrap();
            let held = holder < SLOTS && CLAIMED.load(Ordering::Acquire) & (1 << holder) != 0;
            // Let the holder go before judging, so that a failure fails
            // the test instead of leaving the holder waiting.
            release.wait();
            (holder, other, held)
        });
        // (Only while another test holds every slot is either thread without one.)
        if holder < SLOTS && other < SLOTS {
            assert!(held, "slot {holder} was given back by the thread of slot {other}");
        }
    }

    #[test]
    fn threads_beyond_the_slots_share_the_spare_and_lose_nothing() {
        // More threads alive at once than there are slots (other tests'
        // threads may hold some too): the rest count in the spare.
        let counter = std::sync::Arc::new(PerThreadCounter::default());
        let start = std::sync::Arc::new(std::sync::Barrier::new(SLOTS + 8));
        let threads: Vec<_> = (0..SLOTS + 8)
            .map(|_| {
                let (counter, start) = (counter.clone(), start.clone());
                std::thread::spawn(move || {
                    counter.increment();
                    // Every thread holds its claim until all have counted once.
                    start.wait();
                    (0..1_000).for_each(|_| counter.increment());
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(counter.total(), (SLOTS as u64 + 8) * 1_001);
        let spare = counter.slots[SPARE].0.load(Ordering::Relaxed);
        assert!(spare >= 8 * 1_001, "at least 8 threads found no slot: the spare holds {spare}");
        // They have exited and given their slots back: half as many threads
        // again, alive at once, each get one (other tests hold a few at most).
        let half = std::sync::Arc::new(std::sync::Barrier::new(SLOTS / 2));
        let threads: Vec<_> = (0..SLOTS / 2)
            .map(|_| {
                let half = half.clone();
                std::thread::spawn(move || {
                    let slot = slot();
                    half.wait();
                    slot
                })
            })
            .collect();
        let again: Vec<_> = threads.into_iter().map(|thread| thread.join().unwrap()).collect();
        assert!(again.iter().all(|slot| *slot < SLOTS), "slots not given back: {again:?}");
    }
}
