//! The throttle's counts: requests and accepts over a sliding window, per
//! tenth of it, in a fixed ring of atomic slices that every call counts
//! into without a lock.
//!
//! Why a ring of atomics: every admission reads the window and every answer
//! adds to it, from every thread calling the dependency. Behind one mutex,
//! each call took it twice, and a busy dependency's callers queued on it.
//! Here an answer is one `fetch_add` on its thread's stripe of its slice
//! (each stripe on cache lines of its own), and an admission reads only the
//! nine tenths before the current one, summed once per tenth: threads
//! neither write nor read a line another thread writes (with one shared
//! slice, two threads ran at 1.09x one thread's calls). The current tenth
//! joins the sums when the next one begins, so the refusal probability
//! lags the answers by at most a tenth of the window (50 ms with the
//! default 0.5 s). Only the first count of a new tenth takes a lock, to
//! empty the slice it reuses: once per tenth of the window, not per call.

use std::time::Duration;

// Under `--cfg stormproof_loom` the window's synchronisation is model-checked
// by loom (tests/loom_throttle.rs), as the breaker's is.
#[cfg(stormproof_loom)]
use loom::sync::{
    Mutex,
    atomic::{AtomicU64, Ordering, fence},
};
use std::sync::TryLockError;
#[cfg(not(stormproof_loom))]
use std::sync::{
    Mutex,
    atomic::{AtomicU64, Ordering, fence},
};

use super::ThrottleConfig;

/// How many slices the window is cut into: a count leaves the window at
/// most a tenth of it early.
const SLICES: u64 = 10;

/// Stripes per slice: threads counting at once beyond this share stripes
/// (correct, with `fetch_add`, only slower).
const STRIPES: usize = 8;

/// One request, in a slice's packed counts (requests in the high half,
/// accepts in the low half: one `fetch_add` counts both).
const REQUEST: u64 = 1 << 32;
const ACCEPT: u64 = 1;
const ACCEPTS: u64 = u32::MAX as u64;
/// A half at 2^31 or more: its slice is full, and counts no more in this
/// tenth rather than let a half wrap (requests to zero, or accepts carrying
/// into requests). Half the room is left for the adds of threads that saw
/// the slice just below it.
const FULL: u64 = 1 << 63 | 1 << 31;

/// Requests and accepts over a sliding window, as pure logic: the time is
/// passed in, as a [`Duration`] since any fixed origin. Counted per tenth
/// of the window, so memory stays constant, and safe to share between
/// threads (`&self` everywhere).
///
/// A count belongs to the tenth of the window it was made in (tenths start
/// at multiples of `window / 10` from the origin) and leaves the window
/// with it, a whole window after that tenth began.
#[derive(Debug, Default)]
pub struct ThrottleWindow {
    slices: [Slice; SLICES as usize],
    /// The nine tenths before the current one, summed once per tenth.
    older: Older,
    /// Held only to start a new tenth in a slice (see [`Self::count_at`]).
    reuse: Mutex<()>,
}

/// The counts of the nine tenths before the one starting at `start`: they
/// no longer change (a new count goes to the current tenth), so every
/// admission in a tenth reads these three words and the current slice
/// instead of ten slices. Recounted by the first admission of each tenth.
/// (A count that a thread whose clock read came before a tenth began adds
/// after that tenth's recount is missed until the next one.)
///
/// The four words are one value, written by one thread at a time and read
/// as a seqlock: two admissions recounting at once (one whose clock read
/// came before a tenth began, one after) would otherwise leave one's
/// requests beside the other's accepts, kept for the whole tenth.
#[derive(Debug, Default)]
struct Older {
    /// Odd while a writer rewrites the words below, bumped again when it
    /// is done: a reader that finds it even and unchanged around its reads
    /// read one writer's words.
    version: AtomicU64,
    /// The current tenth's start plus one (0: never summed), and its width.
    start: AtomicU64,
    tenth: AtomicU64,
    requests: AtomicU64,
    accepts: AtomicU64,
    /// Held to rewrite them.
    write: Mutex<()>,
}

impl Older {
    /// The sums kept for the tenth whose start plus one is `label`, `tenth`
    /// wide, unless another tenth's are kept, or a writer was rewriting them.
    #[inline]
    fn read(&self, label: u64, tenth: u64) -> Option<(u64, u64)> {
        // Acquire: the words written before this version was published.
        let version = self.version.load(Ordering::Acquire);
        let kept = self.start.load(Ordering::Relaxed) == label && self.tenth.load(Ordering::Relaxed) == tenth;
        let sums = (self.requests.load(Ordering::Relaxed), self.accepts.load(Ordering::Relaxed));
        // A word a later writer wrote was written after its Release fence:
        // having read it, the load below sees that writer's odd version.
        fence(Ordering::Acquire);
        let whole = version.is_multiple_of(2) && self.version.load(Ordering::Relaxed) == version;
        (kept && whole).then_some(sums)
    }

    /// Keeps `sums` for the tenth whose start plus one is `label`; unless
    /// another thread is keeping its own (the next admission recounts).
    #[cold]
    fn keep(&self, label: u64, tenth: u64, (requests, accepts): (u64, u64)) {
        // Nothing panics under this lock: a poisoned one is still consistent.
        let _writing = match self.write.try_lock() {
            Ok(writing) => writing,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        // Only the lock's holder changes the version (Relaxed: the lock
        // orders writers).
        let version = self.version.load(Ordering::Relaxed);
        self.version.store(version.wrapping_add(1), Ordering::Relaxed);
        // The odd version before any word (see `read`).
        fence(Ordering::Release);
        self.start.store(label, Ordering::Relaxed);
        self.tenth.store(tenth, Ordering::Relaxed);
        self.requests.store(requests, Ordering::Relaxed);
        self.accepts.store(accepts, Ordering::Relaxed);
        // The words before the even version that publishes them.
        self.version.store(version.wrapping_add(2), Ordering::Release);
    }
}

#[derive(Debug, Default)]
struct Slice {
    /// Where this slice's tenth starts, in nanoseconds from the origin.
    start: AtomicU64,
    /// `requests << 32 | accepts` counted in it, a stripe per thread (see
    /// [`STRIPES`]), each half up to about 2^31 (see [`FULL`]).
    counts: [Stripe; STRIPES],
}

/// One stripe of a slice's counts, on a pair of cache lines of its own (as
/// the per-thread counter's slots are, for x86's adjacent-line prefetcher).
#[repr(align(128))]
#[derive(Debug, Default)]
struct Stripe(AtomicU64);

impl Slice {
    /// Adds `counts` to this thread's stripe, unless it is full (see
    /// [`FULL`]): saturating. (Relaxed: the load only bounds the add, whose
    /// own count is exact.)
    #[inline]
    fn add(&self, counts: u64) {
        let stripe = &self.counts[crate::counter::stripe(STRIPES)].0;
        if stripe.load(Ordering::Relaxed) & FULL == 0 {
            stripe.fetch_add(counts, Ordering::Relaxed);
        }
    }

    /// The requests and accepts of every stripe.
    fn sums(&self) -> (u64, u64) {
        self.counts
            .iter()
            .map(|stripe| stripe.0.load(Ordering::Relaxed))
            .fold((0, 0), |(r, a), counts| (r + (counts >> 32), a + (counts & ACCEPTS)))
    }
}

impl Clone for ThrottleWindow {
    /// A copy of the counts as they are now.
    fn clone(&self) -> Self {
        // The copy sums its older tenths afresh.
        let copy = ThrottleWindow::default();
        for (to, from) in copy.slices.iter().zip(&self.slices) {
            to.start.store(from.start.load(Ordering::Acquire), Ordering::Relaxed);
            for (to, from) in to.counts.iter().zip(&from.counts) {
                to.0.store(from.0.load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
        copy
    }
}

/// The width of a tenth of `window`, in nanoseconds (at least 1).
pub(super) fn tenth_of(window: Duration) -> u64 {
    (saturating_nanos(window) / SLICES).max(1)
}

/// `time` in nanoseconds, saturating (584 years).
pub(super) fn saturating_nanos(time: Duration) -> u64 {
    u64::try_from(time.as_nanos()).unwrap_or(u64::MAX)
}

impl ThrottleWindow {
    /// The probability of refusing a request at `now`:
    /// `max(0, (requests - k * accepts) / (requests + 1))` over the nine
    /// tenths of the window before the current one (the current tenth
    /// counts from the next).
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::time::Duration;
    /// use stormproof::{throttle::{ThrottleConfig, ThrottleWindow}};
    /// let cfg = ThrottleConfig { max_refusal_percent: 100, ..Default::default() };
    /// let window = ThrottleWindow::default();
    /// let (then, now) = (Duration::ZERO, cfg.window / 10); // a tenth later
    /// for _ in 0..99 { window.request(&cfg, then); }
    /// assert_eq!(window.refusal_probability(&cfg, then), 0.0, "the current tenth counts from the next");
    /// assert_eq!(window.refusal_probability(&cfg, now), 99.0 / 100.0, "no accept at all");
    /// let capped = ThrottleConfig::default();
    /// assert_eq!(window.refusal_probability(&capped, now), 0.8, "at most max_refusal_percent");
    /// for _ in 0..50 { window.accept(&cfg, now); }
    /// let later = now + cfg.window / 10;
    /// assert_eq!(window.refusal_probability(&cfg, later), 0.0, "99 requests <= 2 * 50 accepts");
    /// ```
    pub fn refusal_probability(&self, config: &ThrottleConfig, now: Duration) -> f64 {
        self.probability_at(saturating_nanos(now), tenth_of(config.window), config.k, config.max_refusal())
    }

    /// `max(0, (requests - k * accepts) / (requests + 1))` over the window
    /// at `now` (nanoseconds), for tenths `tenth` nanoseconds wide, at most `cap`.
    #[inline]
    pub(super) fn probability_at(&self, now: u64, tenth: u64, k: f64, cap: f64) -> f64 {
        let (requests, accepts) = self.sums_at(now, tenth);
        let requests = requests as f64;
        ((requests - k * accepts as f64) / (requests + 1.0)).clamp(0.0, cap)
    }

    /// Counts a request at `now` (answered, or refused here).
    pub fn request(&self, config: &ThrottleConfig, now: Duration) {
        self.count_at(saturating_nanos(now), tenth_of(config.window), false);
    }

    /// Counts an accept at `now`: an answer that was not overload. (Alone:
    /// [`request`](Self::request) counts the request it answered.)
    pub fn accept(&self, config: &ThrottleConfig, now: Duration) {
        self.add_at(saturating_nanos(now), tenth_of(config.window), ACCEPT);
    }

    /// The requests and accepts in the window at `now` (nanoseconds), for
    /// tenths `tenth` nanoseconds wide: the nine tenths before the current
    /// one, whose counts no longer change (see the module docs).
    #[inline]
    pub(super) fn sums_at(&self, now: u64, tenth: u64) -> (u64, u64) {
        let start = now - now % tenth;
        match self.older.read(start.wrapping_add(1), tenth) {
            Some(sums) => sums,
            None => self.recount_older(start, tenth),
        }
    }

    /// Sums the nine tenths before the one starting at `start` (those that
    /// began less than a window before it) and keeps the sums for the
    /// other admissions of this tenth.
    #[cold]
    fn recount_older(&self, start: u64, tenth: u64) -> (u64, u64) {
        let span = tenth.saturating_mul(SLICES);
        let (mut requests, mut accepts) = (0, 0);
        for slice in &self.slices {
            let began = slice.start.load(Ordering::Acquire);
            if began < start && start - began < span {
                let (r, a) = slice.sums();
                requests += r;
                accepts += a;
            }
        }
        self.older.keep(start.wrapping_add(1), tenth, (requests, accepts));
        (requests, accepts)
    }

    /// Counts a request at `now` (nanoseconds), and its accept when
    /// `accepted`, for tenths `tenth` nanoseconds wide.
    #[inline]
    pub(super) fn count_at(&self, now: u64, tenth: u64, accepted: bool) {
        self.add_at(now, tenth, REQUEST | u64::from(accepted));
    }

    fn add_at(&self, now: u64, tenth: u64, counts: u64) {
        let start = now - now % tenth;
        let slice = self.slice_for(start, tenth);
        // The slice holds this tenth, or a later one (a thread whose clock
        // read came later started it): either way the count belongs there.
        if slice.start.load(Ordering::Acquire) >= start {
            slice.add(counts);
            return;
        }
        self.reuse_for(slice, start, counts);
    }

    /// The slice of the ring that holds the tenth starting at `start`.
    #[inline]
    fn slice_for(&self, start: u64, tenth: u64) -> &Slice {
        &self.slices[((start / tenth) % SLICES) as usize]
    }

    /// Starts `start`'s tenth in `slice`, dropping the tenth a whole window
    /// older that it held, with `counts` in it; unless another thread
    /// started it first, then just counts. Under the lock, so that two
    /// threads starting the same tenth do not both empty it.
    #[cold]
    fn reuse_for(&self, slice: &Slice, start: u64, counts: u64) {
        let _reusing = self.reuse.lock().unwrap_or_else(|e| e.into_inner());
        if slice.start.load(Ordering::Acquire) >= start {
            slice.add(counts);
            return;
        }
        // Counts first, then the start that makes them current (Release): a
        // thread that sees the new start adds to the new counts.
        for stripe in &slice.counts {
            stripe.0.store(0, Ordering::Relaxed);
        }
        slice.counts[crate::counter::stripe(STRIPES)].0.store(counts, Ordering::Relaxed);
        slice.start.store(start, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts in the window at `now`, counted the slow way: every event
    /// whose tenth began less than a window before `now`, but not in the
    /// current tenth.
    fn model(events: &[(u64, bool, bool)], now: u64, tenth: u64) -> (u64, u64) {
        let current = now - now % tenth;
        events
            .iter()
            .map(|(at, request, accept)| (at - at % tenth, request, accept))
            .filter(|(began, _, _)| *began < current && now - began < tenth * SLICES)
            .fold((0, 0), |(r, a), (_, request, accept)| (r + u64::from(*request), a + u64::from(*accept)))
    }

    proptest::proptest! {
        #[test]
        fn the_sums_are_the_counts_made_in_the_last_ten_tenths(
            steps in proptest::collection::vec((0u8..4, 0u64..400), 0..300),
            tenth in 1u64..200,
        ) {
            let window = ThrottleWindow::default();
            let mut events = Vec::new();
            let mut now = 0;
            for (op, advance) in steps {
                now += advance;
                match op {
                    0 => { window.count_at(now, tenth, false); events.push((now, true, false)); }
                    1 => { window.count_at(now, tenth, true); events.push((now, true, true)); }
                    2 => { window.add_at(now, tenth, ACCEPT); events.push((now, false, true)); }
                    _ => {}
                }
                proptest::prop_assert_eq!(window.sums_at(now, tenth), model(&events, now, tenth));
            }
        }
    }

    #[test]
    fn counts_leave_the_window_a_tenth_at_a_time() {
        let cfg = ThrottleConfig { k: 2.0, window: Duration::from_secs(10), max_refusal_percent: 100 };
        let w = ThrottleWindow::default();
        for _ in 0..100 {
            w.request(&cfg, Duration::ZERO);
        }
        for _ in 0..100 {
            w.request(&cfg, Duration::from_millis(5_500));
        }
        assert_eq!(w.refusal_probability(&cfg, Duration::from_millis(9_999)), 200.0 / 201.0);
        // The tenth [0 s, 1 s) has left the window; [5 s, 6 s) has not.
        assert_eq!(w.refusal_probability(&cfg, Duration::from_millis(10_000)), 100.0 / 101.0);
        assert_eq!(w.refusal_probability(&cfg, Duration::from_millis(14_999)), 100.0 / 101.0);
        assert_eq!(w.refusal_probability(&cfg, Duration::from_millis(15_000)), 0.0);
    }

    #[test]
    fn a_slice_reused_a_window_later_holds_only_the_new_tenth() {
        let tenth = 1_000;
        let w = ThrottleWindow::default();
        w.count_at(500, tenth, true);
        // 10 tenths later, the same slice: the old counts are gone, the new
        // one is there (read a tenth later, when it is counted).
        w.count_at(10_500, tenth, false);
        assert_eq!(w.sums_at(11_500, tenth), (1, 0));
        // A late count for a tenth the slice has moved past still lands in it.
        let late = ThrottleWindow::default();
        late.count_at(500, tenth, true);
        late.count_at(10_500, tenth, false);
        late.count_at(10_400 - tenth * SLICES, tenth, true);
        assert_eq!(late.sums_at(11_500, tenth), (2, 1));
    }

    #[test]
    fn the_older_tenths_are_summed_again_for_another_width() {
        let w = ThrottleWindow::default();
        w.count_at(0, 1_000, false);
        assert_eq!(w.sums_at(1_000, 1_000), (1, 0), "[0, 1000) is in a window of ten 1000 ns tenths");
        // The same moment with tenths of 100 ns: the window is [100, 1100).
        assert_eq!(w.sums_at(1_000, 100), (0, 0));
    }

    #[test]
    fn a_clone_holds_the_same_counts_and_goes_its_own_way() {
        let w = ThrottleWindow::default();
        w.count_at(500, 1_000, true);
        w.count_at(1_500, 1_000, false);
        let copy = w.clone();
        assert_eq!(copy.sums_at(2_500, 1_000), (2, 1));
        copy.count_at(2_600, 1_000, false);
        assert_eq!((copy.sums_at(3_600, 1_000), w.sums_at(3_600, 1_000)), ((3, 1), (2, 1)));
    }

    #[test]
    fn the_probability_follows_the_sre_formula() {
        let cfg = ThrottleConfig { k: 2.0, window: Duration::from_secs(60), max_refusal_percent: 100 };
        let w = ThrottleWindow::default();
        let t = Duration::from_secs(1);
        for _ in 0..300 {
            w.request(&cfg, t);
        }
        for _ in 0..100 {
            w.accept(&cfg, t);
        }
        // (300 - 2 * 100) / 301, from the next tenth (6 s) on.
        let next = t + Duration::from_secs(6);
        assert!((w.refusal_probability(&cfg, next) - 100.0 / 301.0).abs() < 1e-12);
        // A minute later it is all forgotten.
        assert_eq!(w.refusal_probability(&cfg, t + Duration::from_secs(60)), 0.0);
    }

    #[test]
    fn a_tenth_that_counted_2_pow_32_requests_saturates_instead_of_wrapping() {
        // A tenth of a one-day window is 2.4 h: 2^32 requests in it are
        // 500 000 a second. As if they had come, none accepted:
        let tenth = 1_000;
        let w = ThrottleWindow::default();
        w.count_at(0, tenth, false);
        // This thread's stripe of the tenth's slice.
        let own = &w.slices[0].counts[crate::counter::stripe(STRIPES)].0;
        own.store(u64::from(u32::MAX) * REQUEST, Ordering::Relaxed);
        let full = ThrottleWindow::clone(&w).sums_at(tenth, tenth);
        w.count_at(1, tenth, false);
        w.count_at(2, tenth, true);
        let (requests, accepts) = w.sums_at(tenth, tenth);
        assert!(requests >= full.0 && accepts <= requests, "{full:?} then {:?}", (requests, accepts));
        assert!(w.probability_at(tenth, tenth, 2.0, 1.0) > 0.99, "a refusing dependency stays throttled");
        // The same with every request accepted: the accepts must not carry
        // into the requests.
        let w = ThrottleWindow::default();
        w.count_at(0, tenth, false);
        w.slices[0].counts[crate::counter::stripe(STRIPES)].0.store(u64::MAX, Ordering::Relaxed);
        w.count_at(3, tenth, true);
        let (requests, accepts) = w.sums_at(tenth, tenth);
        assert!(requests >= u64::from(u32::MAX) && accepts <= requests, "{:?}", (requests, accepts));
    }

    #[test]
    fn threads_counting_at_once_lose_no_count() {
        let w = ThrottleWindow::default();
        let tenth = 1_000;
        std::thread::scope(|s| {
            for thread in 0..4u64 {
                let w = &w;
                s.spawn(move || {
                    for i in 0..9_000u64 {
                        // Every thread crosses into new tenths, racing to start them.
                        w.count_at(i / 1_000 * tenth + thread, tenth, i % 2 == 0);
                    }
                });
            }
        });
        assert_eq!(w.sums_at(9 * tenth, tenth), (36_000, 18_000));
    }
}
