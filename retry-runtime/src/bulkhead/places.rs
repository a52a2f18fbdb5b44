//! Where a bulkhead keeps its free places: a lock-free pool while nobody
//! waits for one, tokio's fair semaphore as soon as somebody does.
//!
//! Why: tokio's `Semaphore` gives a permit back under its waiter list's
//! mutex even when the list is empty, so every call through a bulkhead
//! took and released a lock on its success path (about 100 instructions,
//! and a cache line every thread writes). A place given back while nobody
//! waits goes to the pool instead: one compare-and-swap, and the next
//! attempt takes it from there the same way. A caller about to wait moves
//! the pool's places into the semaphore in the same atomic step that counts
//! it as waiting, and while anybody waits, places go back to the semaphore,
//! which hands them to its waiters in the order they came (a newcomer does
//! not take a place ahead of them: the pool is empty, and the semaphore has
//! none to spare while it has waiters).
//!
//! The pool's count and the waiters' count share one word, so that a place
//! given back and a waiter arriving are ordered: either the place reached
//! the pool before the waiter emptied it into the semaphore, or the giver
//! saw the waiter and gave the place to the semaphore. No place is left in
//! the pool while somebody waits.
//!
//! **Critical attempts first** (see `crate::priority`). A critical waiter
//! waits in a line of its own, a second semaphore, and a place given back
//! while one waits goes there before the default line. The choice of line
//! and a critical waiter's arrival and departure are made under one small
//! lock, taken only while somebody waits (when tokio's semaphore takes its
//! own): a critical waiter arriving takes a place the default line holds
//! unclaimed, and the last one leaving moves what its line still holds to
//! the default line, so no place stays where nobody waits for it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{AcquireError, Semaphore, SemaphorePermit};

/// The pool's free places (low half of the word).
const POOLED: u64 = u32::MAX as u64;
/// One waiter (the high half of the word counts them).
const WAITER: u64 = 1 << 32;

/// A bulkhead's free places (see the module docs). A place taken is held
/// as a plain fact by whoever took it, and given back exactly once.
#[derive(Debug)]
pub(super) struct Places {
    /// Places for waiters, and any given back while somebody waited.
    semaphore: Semaphore,
    /// Places for critical waiters, who are given one before anybody in
    /// `semaphore`'s line.
    critical: Semaphore,
    /// Critical attempts waiting, counted under this lock with the choice
    /// of line (see the module docs).
    critical_waiting: Mutex<usize>,
    /// Places given back while nobody waited, and the waiters' count.
    pool: AtomicU64,
}

impl Places {
    pub(super) fn new(places: usize) -> Self {
        Places {
            semaphore: Semaphore::new(places),
            critical: Semaphore::new(0),
            critical_waiting: Mutex::new(0),
            pool: AtomicU64::new(0),
        }
    }

    fn lock_critical(&self) -> std::sync::MutexGuard<'_, usize> {
        self.critical_waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands `places` to the lines: as many as wait in the critical line
    /// there, the rest to the default line. Under the lock until both are
    /// handed: a critical waiter leaving (or arriving) between the count
    /// and the hand-over would leave a place in a line nobody waits in (or
    /// pass it over).
    fn to_lines(&self, places: usize) {
        let critical = self.lock_critical();
        let first = places.min(*critical);
        if first > 0 {
            self.critical.add_permits(first);
        }
        self.semaphore.add_permits(places - first);
        drop(critical);
    }

    /// Takes a free place if there is one, without waiting.
    #[inline]
    pub(super) fn try_take(&self) -> bool {
        let mut pool = self.pool.load(Ordering::Relaxed);
        while pool & POOLED != 0 {
            match self.pool.compare_exchange_weak(pool, pool - 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => pool = now,
            }
        }
        self.semaphore.try_acquire().map(SemaphorePermit::forget).is_ok()
    }

    /// Gives a place back: to the pool while nobody waits, else to the
    /// semaphore, which hands it to the first waiter.
    #[inline]
    pub(super) fn give_back(&self) {
        let mut pool = self.pool.load(Ordering::Relaxed);
        // Below `POOLED`: no waiter (their count is the high half), and room
        // in the pool (a pool as large as a `u32` can count would hold every
        // place of the largest bulkhead there is already).
        while pool < POOLED {
            match self.pool.compare_exchange_weak(pool, pool + 1, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => pool = now,
            }
        }
        self.to_lines(1);
    }

    /// Waits for a place, in line behind those already waiting (a critical
    /// attempt: in the critical line, served first).
    ///
    /// Cancel-safe: dropping the future while it waits takes nothing.
    pub(super) async fn take_waiting(&self, critical: bool) -> Result<(), AcquireError> {
        let _in_line = self.wait_in_line();
        if !critical {
            return self.semaphore.acquire().await.map(SemaphorePermit::forget);
        }
        let Some(_critical_line) = self.join_critical_line() else {
            return Ok(());
        };
        self.critical.acquire().await.map(SemaphorePermit::forget)
    }

    /// Counts a critical waiter, unless the default line holds a place
    /// nobody claimed (given back before this waiter was counted): then it
    /// takes it, and `None` says so.
    fn join_critical_line(&self) -> Option<CriticalLine<'_>> {
        let mut waiting = self.lock_critical();
        if let Ok(place) = self.semaphore.try_acquire() {
            place.forget();
            return None;
        }
        *waiting += 1;
        Some(CriticalLine { places: self })
    }

    /// A critical waiter leaves: the last one moves the places its line
    /// still holds (given to it as it left) to the default line.
    fn leave_critical_line(&self) {
        let mut waiting = self.lock_critical();
        *waiting -= 1;
        if *waiting == 0 {
            let stranded = self.critical.available_permits();
            let moved = self.critical.forget_permits(stranded);
            self.semaphore.add_permits(moved);
        }
    }

    /// Counts one waiter more and moves the pool's places into the
    /// semaphore, in one step; the waiter is counted until the guard drops.
    fn wait_in_line(&self) -> InLine<'_> {
        let counted = self.pool.fetch_update(Ordering::AcqRel, Ordering::Acquire, |pool| {
            // More than `u32::MAX` futures waiting at once would not fit in
            // memory; were it ever reached, the waiter would just not be counted.
            (pool & !POOLED).checked_add(WAITER)
        });
        let pooled = match counted {
            Ok(before) => before & POOLED,
            Err(_) => 0,
        };
        // Adding none takes no lock.
        self.semaphore.add_permits(pooled as usize);
        InLine { places: self, counted: counted.is_ok() }
    }

    /// Free places right now, in the pool and in the semaphore: a snapshot
    /// of two counts, so while a waiter moves the pool's places into the
    /// semaphore they may be missed for that instant (no place is lost).
    pub(super) fn available(&self) -> usize {
        let pooled = (self.pool.load(Ordering::Relaxed) & POOLED) as usize;
        let waiting_lines = self.semaphore.available_permits() + self.critical.available_permits();
        waiting_lines.saturating_add(pooled)
    }

    /// Adds `places` new free places (critical waiters served first).
    pub(super) fn add(&self, places: usize) {
        self.to_lines(places);
    }

    /// Takes up to `places` free places away for good: how many it took.
    pub(super) fn forget(&self, places: usize) -> usize {
        let wanted = u64::try_from(places).unwrap_or(u64::MAX);
        let taken = |pool: u64| (pool & POOLED).min(wanted);
        // Never refused: the closure always answers.
        let before =
            self.pool.fetch_update(Ordering::AcqRel, Ordering::Acquire, |pool| Some(pool - taken(pool)));
        let from_pool = taken(before.unwrap_or_else(|pool| pool)) as usize;
        let from_default = self.semaphore.forget_permits(places - from_pool);
        from_pool + from_default + self.critical.forget_permits(places - from_pool - from_default)
    }
}

/// A critical waiter, counted while it waits (see `Places::join_critical_line`).
struct CriticalLine<'a> {
    places: &'a Places,
}

impl Drop for CriticalLine<'_> {
    fn drop(&mut self) {
        self.places.leave_critical_line();
    }
}

/// A waiter, counted while it waits (see `Places::wait_in_line`).
struct InLine<'a> {
    places: &'a Places,
    counted: bool,
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        if self.counted {
            self.places.pool.fetch_sub(WAITER, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn places_given_back_while_nobody_waits_stay_in_the_pool() {
        let places = Places::new(2);
        assert!(places.try_take() && places.try_take());
        assert!(!places.try_take(), "both taken");
        places.give_back();
        places.give_back();
        assert_eq!(places.semaphore.available_permits(), 0, "the semaphore was not touched");
        assert_eq!(places.available(), 2);
        assert!(places.try_take() && places.try_take(), "taken from the pool");
        assert!(!places.try_take());
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_empties_the_pool_and_places_given_back_while_it_waits_reach_it() {
        let places = Arc::new(Places::new(2));
        assert!(places.try_take() && places.try_take());
        places.give_back();
        // The place in the pool is the waiter's at once.
        let pooled = tokio::time::timeout(Duration::from_secs(1), places.take_waiting(false)).await;
        pooled.expect("the pooled place was moved to the semaphore for the waiter").unwrap();
        assert_eq!(places.available(), 0);

        let waiter = tokio::spawn({
            let places = places.clone();
            async move { places.take_waiting(false).await }
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(!waiter.is_finished(), "nothing free: it waits");
        places.give_back();
        assert_eq!(places.pool.load(Ordering::Relaxed) & POOLED, 0, "not to the pool: somebody waits");
        waiter.await.unwrap().unwrap();
        assert_eq!(places.pool.load(Ordering::Relaxed), 0, "no waiter counted any more");
        places.give_back();
        places.give_back();
        assert_eq!(places.available(), 2, "every place back");
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_waiter_takes_nothing_and_is_no_longer_counted() {
        let places = Places::new(1);
        assert!(places.try_take());
        let gave_up = tokio::time::timeout(Duration::from_millis(5), places.take_waiting(false)).await;
        assert!(gave_up.is_err());
        assert_eq!(places.pool.load(Ordering::Relaxed), 0, "no waiter left counted");
        places.give_back();
        assert_eq!(places.pool.load(Ordering::Relaxed), 1, "so the place goes to the pool");
        assert_eq!(places.available(), 1);
    }

    #[test]
    fn forgetting_takes_from_the_pool_then_the_semaphore() {
        let places = Places::new(4);
        assert!(places.try_take() && places.try_take());
        places.give_back();
        assert_eq!(places.forget(2), 2, "one from the pool, one from the semaphore");
        assert_eq!(places.available(), 1);
        assert_eq!(places.forget(5), 1, "only free places are taken");
        assert_eq!(places.available(), 0);
        places.add(3);
        assert_eq!(places.available(), 3);
    }

    /// A waiter spawned as a task, started (so that it is in its line).
    async fn waiter(places: &Arc<Places>, critical: bool) -> tokio::task::JoinHandle<()> {
        let task = tokio::spawn({
            let places = places.clone();
            async move { places.take_waiting(critical).await.unwrap() }
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(!task.is_finished(), "nothing free: it waits");
        task
    }

    #[tokio::test(start_paused = true)]
    async fn a_critical_waiter_gets_the_next_place_before_an_earlier_default_one() {
        let places = Arc::new(Places::new(1));
        assert!(places.try_take());
        let default = waiter(&places, false).await;
        let critical = waiter(&places, true).await;
        places.give_back();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(critical.is_finished() && !default.is_finished(), "the critical one first");
        places.give_back();
        default.await.unwrap();
        places.give_back();
        assert_eq!(places.available(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_critical_waiter_that_gives_up_strands_no_place() {
        let places = Arc::new(Places::new(1));
        assert!(places.try_take());
        let default = waiter(&places, false).await;
        // Given to a critical waiter that is dropped before it runs again:
        // its line gives the place back, and the last to leave moves it on.
        let critical = waiter(&places, true).await;
        places.give_back();
        critical.abort();
        assert!(critical.await.unwrap_err().is_cancelled());
        tokio::time::timeout(Duration::from_secs(1), default)
            .await
            .expect("the place reached the default line")
            .unwrap();
        places.give_back();
        assert_eq!(places.available(), 1, "every place back");
    }

    #[tokio::test(start_paused = true)]
    async fn a_critical_waiter_that_times_out_leaves_the_line_to_the_others() {
        let places = Arc::new(Places::new(1));
        assert!(places.try_take());
        let default = waiter(&places, false).await;
        let gave_up = tokio::time::timeout(Duration::from_millis(5), places.take_waiting(true)).await;
        assert!(gave_up.is_err());
        places.give_back();
        tokio::time::timeout(Duration::from_secs(1), default)
            .await
            .expect("the place reached the default line")
            .unwrap();
        places.give_back();
        assert_eq!(places.available(), 1, "every place back");
    }

    #[tokio::test(start_paused = true)]
    async fn a_critical_waiter_takes_a_place_the_default_line_holds_unclaimed() {
        let places = Places::new(1);
        assert!(places.try_take());
        // Given back while a waiter was counted: to the default line, where nobody claims it.
        let in_line = places.wait_in_line();
        places.give_back();
        drop(in_line);
        let took = tokio::time::timeout(Duration::from_millis(1), places.take_waiting(true)).await;
        took.expect("taken at once").unwrap();
        assert_eq!(places.available(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn places_added_go_to_critical_waiters_first() {
        let places = Arc::new(Places::new(0));
        let default = waiter(&places, false).await;
        let critical = waiter(&places, true).await;
        places.add(1);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(critical.is_finished() && !default.is_finished());
        places.add(1);
        default.await.unwrap();
    }

    /// Threads taking, giving back and waiting all at once lose no place,
    /// and every waiter gets one. (That a place given back while somebody
    /// waits goes to the waiter, not the pool, is the test above: here a
    /// later waiter would move it along soon enough.)
    #[test]
    fn no_place_is_lost_or_stranded_under_contention() {
        const PLACES: usize = 3;
        let places = Arc::new(Places::new(PLACES));
        let threads: Vec<_> = (0..4)
            .map(|thread| {
                let places = places.clone();
                std::thread::spawn(move || {
                    let runtime =
                        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
                    for round in 0..20_000 {
                        if (thread + round) % 3 == 0 {
                            // At most 3 of the 4 threads hold a place at once, so a
                            // waiter always gets one, unless it was stranded in the pool.
                            // Every other waiter critical, and every fourth
                            // one gives up at once if no place comes (a
                            // timeout that may or may not fire): neither line
                            // strands a place, whoever leaves when.
                            let critical = round % 2 == 0;
                            let patience = if round % 4 == 0 {
                                Duration::from_micros(1)
                            } else {
                                Duration::from_secs(30)
                            };
                            let waited = runtime.block_on(async {
                                tokio::time::timeout(patience, places.take_waiting(critical)).await
                            });
                            match waited {
                                Ok(taken) => {
                                    taken.unwrap();
                                    places.give_back();
                                }
                                Err(_) => assert_eq!(
                                    patience,
                                    Duration::from_micros(1),
                                    "a place reached the waiter"
                                ),
                            }
                        } else if places.try_take() {
                            places.give_back();
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|thread| thread.join().unwrap());
        assert_eq!(places.available(), PLACES);
        assert_eq!(places.critical.available_permits(), 0, "none left in the critical line");
        assert!((0..PLACES).all(|_| places.try_take()), "every place can be taken");
        assert_eq!(places.pool.load(Ordering::Relaxed) >> 32, 0, "no waiter left counted");
    }
}
