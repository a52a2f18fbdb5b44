//! Bulkheads: a limit on concurrent attempts against one dependency.
//!
//! Why: a slow dependency holds every caller's task, connection and memory
//! for as long as it is slow. Capping how many attempts may be in flight at
//! once keeps one sick dependency from taking the whole service down with it
//! (the compartments of a ship's hull). A permit is held for one attempt
//! only, never across a backoff wait, so a retrying call does not block
//! healthy ones while it sleeps.

use std::time::Duration;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use tokio::time::Instant;

mod config;
pub(crate) mod guard;
mod keyed;
mod limit;
mod places;

pub use config::{BulkheadConfig, DEFAULT_MAX_WAIT};
pub use keyed::KeyedBulkheads;

pub use limit::{AdaptiveLimit, LimitCore};
use places::Places;

use crate::config::ConfigError;

/// A named concurrency limit: tokio's fair [`Semaphore`](tokio::sync::Semaphore) for callers who
/// wait, and a lock-free pool of places while nobody does (see `places`).
///
/// ```
/// # use stormproof_runtime as stormproof;
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use stormproof::{bulkhead::{Bulkhead, BulkheadConfig}};
/// let bulkhead = Bulkhead::new("db", BulkheadConfig { max_concurrent: 1, ..Default::default() }).unwrap();
/// let permit = bulkhead.acquire().await.unwrap();
/// assert_eq!(bulkhead.in_use(), 1);
/// drop(permit);
/// assert_eq!(bulkhead.in_use(), 0);
/// # }
/// ```
#[derive(Debug)]
pub struct Bulkhead {
    name: String,
    /// Its key, for a bulkhead of a [`KeyedBulkheads`] set, and how many
    /// times it was reconfigured (see `keyed`).
    keyed: crate::keyed::KeyedPart,
    /// `max_keys` and `idle_for` (see `BulkheadConfig`).
    per_key: crate::keyed::PerKeyBounds,
    max_concurrent: AtomicU32,
    /// The limit in force: `max_concurrent`, or the adaptive limit's.
    limit: AtomicU32,
    /// The adaptive limit, if any (`adaptive` says so without the lock).
    limiter: Mutex<Option<LimitCore>>,
    adaptive: std::sync::atomic::AtomicBool,
    /// `max_wait` in nanoseconds; `u64::MAX` for none.
    max_wait_nanos: AtomicU64,
    places: Places,
    /// Permits to retire as they come back, after a shrink below the
    /// permits in use (the semaphore can only forget free ones).
    owed: AtomicU32,
    /// Serialises resizes.
    resizing: Mutex<()>,
    /// The attempts it refused, by priority.
    refusals: crate::priority::Refusals,
    /// Its in-use gauge's key, made once (see `observe::bulkhead_key`).
    #[cfg(feature = "metrics")]
    gauge_key: metrics::Key,
}

/// One attempt's place in a [`Bulkhead`]; dropping it frees the place.
#[derive(Debug)]
#[must_use = "the place is given back as soon as the permit is dropped"]
pub struct BulkheadPermit<'a> {
    bulkhead: &'a Bulkhead,
    /// When the attempt started, for an adaptive limit's latency sample.
    started: Option<Instant>,
}

impl BulkheadPermit<'_> {
    /// Gives the place back, telling an adaptive limit how the attempt went:
    /// `overload` for an overload signal (a transient failure, a timeout, a
    /// conflict). Dropping the permit instead tells it nothing.
    pub fn finish(self, overload: bool) {
        if let Some(started) = self.started {
            self.bulkhead.sample(started.elapsed(), overload);
        }
    }
}

impl Drop for BulkheadPermit<'_> {
    fn drop(&mut self) {
        // The one way a place goes back, which also settles a shrink's debt.
        self.bulkhead.give_back_place();
    }
}

/// Returned by [`Bulkhead::acquire`] when no permit came free within `max_wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkheadFull;

impl std::fmt::Display for BulkheadFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no bulkhead permit came free within `max_wait`")
    }
}

impl std::error::Error for BulkheadFull {}

fn wait_nanos(max_wait: Option<Duration>) -> u64 {
    max_wait.map_or(u64::MAX, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX - 1))
}

impl Bulkhead {
    /// A bulkhead with `config.max_concurrent` free permits, or an error naming the invalid setting.
    pub fn new(name: impl Into<String>, config: BulkheadConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let name = name.into();
        Ok(Bulkhead {
            #[cfg(feature = "metrics")]
            gauge_key: crate::observe::bulkhead_key(&name, None),
            name,
            keyed: crate::keyed::KeyedPart::default(),
            per_key: crate::keyed::PerKeyBounds::new(config.max_keys, config.idle_for),
            max_concurrent: AtomicU32::new(config.max_concurrent),
            limit: AtomicU32::new(config.max_concurrent),
            limiter: Mutex::new(
                config.adaptive.map(|adaptive| LimitCore::new(adaptive, config.max_concurrent)),
            ),
            adaptive: std::sync::atomic::AtomicBool::new(config.adaptive.is_some()),
            max_wait_nanos: AtomicU64::new(wait_nanos(config.max_wait)),
            places: Places::new(config.max_concurrent as usize),
            owed: AtomicU32::new(0),
            resizing: Mutex::new(()),
            refusals: Default::default(),
        })
    }

    /// The name this bulkhead was declared under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings it runs on (a `max_wait` longer than u64::MAX
    /// nanoseconds, about 584 years, as that longest wait).
    pub fn config(&self) -> BulkheadConfig {
        let nanos = self.max_wait_nanos.load(Ordering::Relaxed);
        let adaptive = self.lock_limiter().as_ref().map(LimitCore::config);
        let (max_keys, idle_for) = self.per_key.load();
        BulkheadConfig {
            max_concurrent: self.max_concurrent.load(Ordering::Relaxed),
            max_wait: (nanos != u64::MAX).then(|| Duration::from_nanos(nanos)),
            adaptive,
            max_keys,
            idle_for,
        }
    }

    /// The limit in force: `max_concurrent`, or where an adaptive limit is now.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::{bulkhead::{AdaptiveLimit, Bulkhead, BulkheadConfig}};
    /// let config = BulkheadConfig { max_concurrent: 8, adaptive: Some(AdaptiveLimit::aimd(2)), ..Default::default() };
    /// let bulkhead = Bulkhead::new("db", config).unwrap();
    /// assert_eq!(bulkhead.limit(), 8, "an adaptive limit starts at the maximum");
    /// ```
    pub fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Permits held right now. After a shrink it may exceed the new limit
    /// until the calls holding them finish.
    pub fn in_use(&self) -> usize {
        let total = self.limit.load(Ordering::Relaxed) as usize + self.owed.load(Ordering::Relaxed) as usize;
        total.saturating_sub(self.places.available())
    }

    /// Waits for a permit, at most `max_wait` when it is set.
    ///
    /// Cancel-safe: dropping the future while it waits takes nothing.
    pub async fn acquire(&self) -> Result<BulkheadPermit<'_>, BulkheadFull> {
        // The uncontended case takes no timer and reads no clock.
        match self.try_acquire() {
            Some(permit) => Ok(permit),
            None => self.acquire_waiting().await,
        }
    }

    /// A permit if one is free right now, without waiting.
    #[inline]
    pub fn try_acquire(&self) -> Option<BulkheadPermit<'_>> {
        self.places.try_take().then(|| self.admitted())
    }

    /// [`acquire`](Self::acquire) once no permit was free: waits, at most `max_wait`.
    pub(crate) async fn acquire_waiting(&self) -> Result<BulkheadPermit<'_>, BulkheadFull> {
        self.wait_for_place(false).await?;
        Ok(self.admitted())
    }

    /// Waits for a place, at most `max_wait`, `critical` ahead of the
    /// others (see `places`).
    async fn wait_for_place(&self, critical: bool) -> Result<(), BulkheadFull> {
        let nanos = self.max_wait_nanos.load(Ordering::Relaxed);
        let max_wait = (nanos != u64::MAX).then(|| Duration::from_nanos(nanos));
        // A wait too long to arm is no limit.
        match max_wait.and_then(crate::clock::instant_after) {
            None => self.places.take_waiting(critical).await.map_err(|_| BulkheadFull),
            Some(until) => match tokio::time::timeout_at(until, self.places.take_waiting(critical)).await {
                Ok(taken) => taken.map_err(|_| BulkheadFull),
                Err(_) => Err(BulkheadFull),
            },
        }
    }

    /// Gives one place back, or, while a smaller limit is still owed
    /// places (see `resize_to`), retires it instead.
    #[inline]
    pub(crate) fn give_back_place(&self) {
        if !(self.owed.load(Ordering::Relaxed) > 0 && self.retire_one()) {
            self.places.give_back();
        }
        #[cfg(feature = "metrics")]
        crate::observe::bulkhead_level(&self.gauge_key, self.in_use());
    }

    #[inline]
    fn admitted(&self) -> BulkheadPermit<'_> {
        #[cfg(feature = "metrics")]
        crate::observe::bulkhead_level(&self.gauge_key, self.in_use());
        // Only an adaptive limit reads the clock.
        let started = self.adaptive.load(Ordering::Relaxed).then(Instant::now);
        BulkheadPermit { bulkhead: self, started }
    }

    /// Takes one owed permit off the debt; `false` if none is owed any more.
    fn retire_one(&self) -> bool {
        self.owed.fetch_update(Ordering::AcqRel, Ordering::Acquire, |owed| owed.checked_sub(1)).is_ok()
    }

    /// An adaptive limit's sample: moves the limit, and the permits with it.
    fn sample(&self, rtt: Duration, overload: bool) {
        let in_flight = u32::try_from(self.in_use()).unwrap_or(u32::MAX);
        let _resizing = self.resizing.lock().unwrap_or_else(|e| e.into_inner());
        let new = match self.lock_limiter().as_mut() {
            Some(core) => core.sample(rtt, overload, in_flight),
            None => return,
        };
        let old = self.limit();
        if new != old {
            self.resize_to(new);
            crate::observe::bulkhead_limit(&self.name, old, new);
        }
    }

    /// Moves the limit in force to `new` (the caller holds `resizing`):
    /// permits in use are never touched; a smaller limit takes free ones now
    /// and the rest as they come back.
    fn resize_to(&self, new: u32) {
        let old = self.limit.load(Ordering::Relaxed);
        if new > old {
            let mut grow = new - old;
            // Cancel debt first: those permits were never given back.
            while grow > 0 && self.retire_one() {
                grow -= 1;
            }
            self.places.add(grow as usize);
        } else if new < old {
            let shrink = old - new;
            let forgotten = u32::try_from(self.places.forget(shrink as usize)).unwrap_or(shrink);
            self.owed.fetch_add(shrink - forgotten.min(shrink), Ordering::AcqRel);
        }
        self.limit.store(new, Ordering::Relaxed);
    }

    fn lock_limiter(&self) -> std::sync::MutexGuard<'_, Option<LimitCore>> {
        self.limiter.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs on `config` from now on. Permits in use are not touched: a
    /// larger limit admits more at once; a smaller one takes free permits
    /// away now and the rest as calls give theirs back, so in-use may
    /// exceed the new limit until they do. An adaptive limit keeps where it
    /// is, within the new bounds. An invalid `config` is an error naming
    /// the field, and changes nothing.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use stormproof::{bulkhead::{Bulkhead, BulkheadConfig}};
    /// let bulkhead = Bulkhead::new("db", BulkheadConfig { max_concurrent: 3, ..Default::default() }).unwrap();
    /// let (a, b, c) = (bulkhead.acquire().await.unwrap(), bulkhead.acquire().await.unwrap(), bulkhead.acquire().await.unwrap());
    /// bulkhead.reconfigure(BulkheadConfig { max_concurrent: 1, ..Default::default() }).unwrap();
    /// assert_eq!(bulkhead.in_use(), 3, "nobody is evicted");
    /// drop((a, b));
    /// assert!(bulkhead.try_acquire().is_none(), "one still in use: at the new limit");
    /// drop(c);
    /// assert_eq!(bulkhead.in_use(), 0);
    /// # }
    /// ```
    pub fn reconfigure(&self, config: BulkheadConfig) -> Result<(), ConfigError> {
        config.validate()?;
        let _resizing = self.resizing.lock().unwrap_or_else(|e| e.into_inner());
        let new_limit = {
            let mut limiter = self.lock_limiter();
            let current = self.limit.load(Ordering::Relaxed);
            *limiter = config.adaptive.map(|adaptive| match limiter.take() {
                Some(mut core) if core.config() == adaptive => {
                    core.set_max(config.max_concurrent);
                    core
                }
                _ => LimitCore::starting_at(adaptive, config.max_concurrent, current),
            });
            limiter.as_ref().map_or(config.max_concurrent, LimitCore::limit)
        };
        self.resize_to(new_limit);
        self.adaptive.store(config.adaptive.is_some(), Ordering::Relaxed);
        self.max_concurrent.store(config.max_concurrent, Ordering::Relaxed);
        self.max_wait_nanos.store(wait_nanos(config.max_wait), Ordering::Relaxed);
        self.per_key.store(config.max_keys, config.idle_for);
        self.keyed.reconfigured();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_waiter_is_rejected_once_max_wait_passes() {
        let b = Bulkhead::new(
            "x",
            BulkheadConfig {
                max_concurrent: 1,
                max_wait: Some(Duration::from_millis(50)),
                adaptive: None,
                ..Default::default()
            },
        )
        .unwrap();
        let held = b.acquire().await.unwrap();
        let start = tokio::time::Instant::now();
        assert_eq!(b.acquire().await.unwrap_err(), BulkheadFull);
        assert_eq!(start.elapsed(), Duration::from_millis(50));
        drop(held);
        assert!(b.acquire().await.is_ok());
        assert_eq!(b.in_use(), 0);
    }

    /// The default bounds the wait: a second, then `BulkheadFull`.
    #[tokio::test(start_paused = true)]
    async fn by_default_a_waiter_is_rejected_after_a_second() {
        let b = Bulkhead::new("x", BulkheadConfig { max_concurrent: 1, ..Default::default() }).unwrap();
        let _held = b.acquire().await.unwrap();
        let start = tokio::time::Instant::now();
        // Bounded here too, so that an unbounded default fails and does not hang.
        let waited = tokio::time::timeout(Duration::from_secs(60), b.acquire()).await;
        assert_eq!(waited.expect("refused within the minute").unwrap_err(), BulkheadFull);
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    #[test]
    fn zero_concurrency_is_a_config_error() {
        let err = Bulkhead::new("x", BulkheadConfig { max_concurrent: 0, ..Default::default() }).unwrap_err();
        assert_eq!(err.field, "max_concurrent");
    }

    #[tokio::test(start_paused = true)]
    async fn an_adaptive_limit_shrinks_on_overload_and_no_permit_is_lost() {
        let config = BulkheadConfig {
            max_concurrent: 10,
            adaptive: Some(AdaptiveLimit::aimd(2)),
            ..Default::default()
        };
        let b = Bulkhead::new("x", config).unwrap();
        for _ in 0..20 {
            b.acquire().await.unwrap().finish(true);
        }
        assert_eq!(b.limit(), 2, "shrunk to its minimum");
        let (p, q) = (b.acquire().await.unwrap(), b.acquire().await.unwrap());
        assert!(b.try_acquire().is_none(), "the limit holds");
        drop((p, q));
        for _ in 0..20 {
            let held: Vec<_> = (0..b.limit()).map(|_| b.try_acquire().unwrap()).collect();
            held.into_iter().for_each(|p| p.finish(false));
        }
        assert_eq!(b.limit(), 10, "grown back while in use");
        assert_eq!(b.in_use(), 0);
        let all: Vec<_> = (0..10).map(|_| b.try_acquire().unwrap()).collect();
        assert!(b.try_acquire().is_none());
        drop(all);
    }
}
