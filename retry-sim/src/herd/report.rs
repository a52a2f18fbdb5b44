//! What one run of a herd simulation did.

use std::time::Duration;

use super::config::Model;
use super::strategy::Strategy;
#[allow(unused_imports)]
use crate::peak_in_bucket;
use stormproof_runtime::Priority;

/// What one run of a strategy did.
///
/// Completion times are measured from time zero, when every client starts,
/// to the moment the client receives its successful reply. Percentiles are
/// nearest-rank over the clients that succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HerdReport {
    /// The strategy that ran.
    pub strategy: Strategy,
    /// The model it ran against.
    pub model: Model,
    /// Clients in the herd.
    pub clients: u32,
    /// Work: attempts that reached the dependency (in
    /// [`Model::Contention`], writes). Attempts a breaker refused are not counted.
    pub attempts: u64,
    /// Clients that got their success.
    pub succeeded: u32,
    /// Clients that used up `max_attempts`.
    pub exhausted: u32,
    /// Clients whose retry the budget refused ([`Strategy::Defaults`],
    /// [`Strategy::Recommended`] and [`Strategy::Adaptive`]).
    pub budget_stopped: u32,
    /// Clients stopped by the breaker ([`Strategy::Recommended`] only):
    /// either an attempt was refused (a fast failure, no load), or the
    /// breaker would still have been open when the wait ended, so the loop
    /// ended at once instead of waiting for a rejection.
    pub breaker_stopped: u32,
    /// Clients stopped by their deadline: the next wait would have ended at
    /// or past it, or a reply came after it.
    pub deadline_stopped: u32,
    /// Clients whose attempt the client-side throttle refused ([`Strategy::Adaptive`]
    /// only): refused locally, with no load, and the call ends.
    pub throttled: u32,
    /// Clients that waited `max_wait` for a bulkhead permit without getting
    /// one ([`Strategy::Adaptive`] only, with a `max_wait`).
    pub bulkhead_stopped: u32,
    /// Clients whose attempt the rate limit refused (with a
    /// [`rate_limit`](super::HerdConfig::rate_limit) only): over the rate
    /// for longer than its `max_wait`, or sheddable.
    pub rate_limited: u32,
    /// How many times the breaker opened.
    pub breaker_trips: u32,
    /// The bulkhead's limit over time ([`Strategy::Adaptive`] with one
    /// shared bulkhead only, else empty: see `HerdConfig::bulkhead_per_key`):
    /// where it started, then `(when, new limit)` at every change.
    pub limits: Vec<(Duration, u32)>,
    /// Completion time of every client that succeeded, sorted.
    pub completions: Vec<Duration>,
    /// When each attempt arrived at the dependency, in order (the chart's data).
    pub arrivals: Vec<Duration>,
    /// When each retry (an attempt after a client's first) arrived at the
    /// dependency, in order: the part of `arrivals` the strategy shapes.
    pub retry_arrivals: Vec<Duration>,
    /// When each client's first retry (second attempt) arrived at the dependency, in order.
    pub first_retries: Vec<Duration>,
    /// The bucket width used for [`peak_load`](Self::peak_load).
    pub bucket: Duration,
    /// The most attempts arriving in one `bucket`: [`peak_in_bucket`] of `arrivals`.
    ///
    /// Every client's first attempt leaves at time zero whatever the
    /// strategy (unless `HerdConfig::arrivals` spreads them), so with a
    /// large herd this is often the first wave; see
    /// `retry_peak` for the strategy's own footprint.
    pub peak_load: usize,
    /// The most *retries* arriving in one `bucket`: [`peak_in_bucket`] of
    /// `retry_arrivals`. This is the thundering herd a strategy makes (or
    /// breaks up): without jitter every client that failed together comes
    /// back together.
    pub retry_peak: usize,
    /// When the last client finished, one way or the other.
    pub end: Duration,
    /// The clients of each priority and those that succeeded, sheddable,
    /// default and critical (see [`HerdConfig::priorities`](super::HerdConfig::priorities)).
    pub by_priority: [super::PriorityTally; 3],
}

impl HerdReport {
    /// Clients that did not succeed, for whatever reason.
    pub fn gave_up(&self) -> u32 {
        self.clients - self.succeeded
    }

    /// The nearest-rank `q`-quantile (`q` in `[0, 1]`, clamped; NaN reads as 0)
    /// of the completion times; `None` when no client succeeded.
    ///
    /// ```
    /// # mod stormproof { pub use stormproof_runtime::*; pub use stormproof_sim as sim; }
    /// use stormproof::sim::{simulate, HerdConfig, Strategy};
    /// let report = simulate(&HerdConfig { clients: 10, ..HerdConfig::contention() }, Strategy::Recommended)?;
    /// assert!(report.percentile(0.5) <= report.percentile(0.99));
    /// assert_eq!(report.percentile(1.0), report.completions.last().copied());
    /// # Ok::<(), stormproof::ConfigError>(())
    /// ```
    pub fn percentile(&self, q: f64) -> Option<Duration> {
        let n = self.completions.len();
        if n == 0 {
            return None;
        }
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        // Nearest rank: the smallest value with at least q * n values at or
        // below it, that is the smallest `rank` with `rank / n >= q`. The
        // product `q * n` rounds (0.07 * 100 is 7.000000000000001, whose
        // ceiling is 8), so the rank it gives is checked against `q` by
        // division, which is exact where `q` is (7 / 100 is the `f64` 0.07).
        let share = |rank: usize| rank as f64 / n as f64;
        let mut rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        while rank > 1 && share(rank - 1) >= q {
            rank -= 1;
        }
        while rank < n && share(rank) < q {
            rank += 1;
        }
        self.completions.get(rank - 1).copied()
    }

    /// The median completion time.
    pub fn p50(&self) -> Option<Duration> {
        self.percentile(0.50)
    }

    /// The 99th-percentile completion time.
    pub fn p99(&self) -> Option<Duration> {
        self.percentile(0.99)
    }

    /// The slowest completion: when the last successful client finished.
    pub fn max_completion(&self) -> Option<Duration> {
        self.completions.last().copied()
    }

    /// Attempts arriving per `bucket`, for the buckets that saw any: `(start
    /// of the bucket, arrivals in it)`, in time order. Sparse, so its length
    /// is bounded by the number of arrivals however long the run.
    ///
    /// ```
    /// # mod stormproof { pub use stormproof_runtime::*; pub use stormproof_sim as sim; }
    /// use stormproof::sim::{simulate, HerdConfig, Strategy};
    /// let report = simulate(&HerdConfig::overload(), Strategy::Immediate)?;
    /// let total: usize = report.load_by_bucket().iter().map(|&(_, n)| n).sum();
    /// assert_eq!(total as u64, report.attempts);
    /// let busiest = report.load_by_bucket().iter().map(|&(_, n)| n).max();
    /// assert_eq!(busiest, Some(report.peak_load));
    /// # Ok::<(), stormproof::ConfigError>(())
    /// ```
    pub fn load_by_bucket(&self) -> Vec<(Duration, usize)> {
        let width = self.bucket.as_nanos().max(1);
        let mut buckets: Vec<(u128, usize)> = Vec::new();
        for at in &self.arrivals {
            let index = at.as_nanos() / width;
            match buckets.last_mut() {
                Some((last, count)) if *last == index => *count += 1,
                _ => buckets.push((index, 1)),
            }
        }
        buckets.into_iter().map(|(index, count)| (nanos(index.saturating_mul(width)), count)).collect()
    }
}

impl super::engine::Run<'_> {
    /// The run's report, once every event is processed.
    pub(super) fn report(mut self) -> HerdReport {
        self.completions.sort_unstable();
        let peak_load = peak_in_bucket(&self.arrivals, self.config.bucket);
        let retry_peak = peak_in_bucket(&self.retry_arrivals, self.config.bucket);
        HerdReport {
            strategy: self.strategy,
            model: self.config.model,
            clients: self.config.clients,
            attempts: self.attempts,
            succeeded: self.succeeded,
            exhausted: self.exhausted,
            budget_stopped: self.budget_stopped,
            breaker_stopped: self.breaker_stopped,
            deadline_stopped: self.deadline_stopped,
            throttled: self.throttled,
            bulkhead_stopped: self.bulkhead_stopped,
            rate_limited: self.rate_limited,
            breaker_trips: self.breaker_trips,
            limits: self.limits,
            completions: self.completions,
            arrivals: self.arrivals,
            retry_arrivals: self.retry_arrivals,
            first_retries: self.first_retries,
            bucket: self.config.bucket,
            peak_load,
            retry_peak,
            end: self.end,
            by_priority: std::array::from_fn(|i| {
                let priority = [Priority::Sheddable, Priority::Default, Priority::Critical][i];
                let clients = self.clients.iter().filter(|client| client.priority == priority).count();
                super::PriorityTally {
                    clients: u32::try_from(clients).unwrap_or(u32::MAX),
                    succeeded: self.succeeded_by_priority[i],
                }
            }),
        }
    }
}

/// A `Duration` from nanoseconds, saturating at `Duration::MAX`: where a
/// bucket of [`HerdReport::load_by_bucket`] starts.
pub(super) fn nanos(n: u128) -> Duration {
    let secs = u64::try_from(n / 1_000_000_000).unwrap_or(u64::MAX);
    Duration::new(secs, (n % 1_000_000_000) as u32)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{HerdConfig, Strategy, simulate};

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn a_quantile_on_a_whole_rank_is_that_rank_however_its_product_rounds() {
        let mut r = simulate(&HerdConfig { clients: 1, ..Default::default() }, Strategy::Immediate).unwrap();
        r.completions = (1..=100).map(ms).collect();
        // 0.07 * 100 is 7.000000000000001 in floating point: still the 7th of 100.
        for rank in 1..=100 {
            let q = rank as f64 / 100.0;
            assert_eq!(r.percentile(q), Some(ms(rank)), "q = {q}");
        }
        r.completions = (1..=7).map(ms).collect();
        assert_eq!(r.percentile(0.5), Some(ms(4)), "3.5 of 7 values: the 4th");
        assert_eq!(r.percentile(0.01), Some(ms(1)));
    }
}
