//! A deterministic harness that shows *why* backoff, jitter, budgets and
//! breakers matter, with numbers you can reproduce.
//!
//! Claims about retries are easy to make and hard to check: "jitter breaks
//! up a thundering herd", "immediate retries burn every attempt before the
//! outage ends", "backoff without jitter only moves the spike". Both source
//! documents of this crate prove such claims with a harness whose clock and
//! randomness are under the test's control, so a run gives the same numbers
//! every time and a regression shows up as a changed number rather than a
//! flaky test. This module ships that harness, in two parts that answer two
//! different questions.
//!
//! **One caller against a [`Storm`]** ("does *this* policy behave?"). A
//! `Storm` is a fake dependency that fails with a transient error until a
//! point in time and then succeeds. It runs on tokio's clock, so under
//! `#[tokio::test(start_paused = true)]` the real [`Policy`](stormproof_runtime::Policy)
//! retry loop, with its real sleeps, is exercised in microseconds, and the
//! storm records the instant of every call: a test asserts the exact
//! schedule (0, 100, 300, 700, 1500 ms) instead of "it eventually worked".
//!
//! **Many callers in a [herd simulation](simulate)** ("what does a
//! *strategy* do to the dependency?"). One caller cannot show a thundering
//! herd; that needs hundreds of them failing together. Tokio is the wrong
//! engine for that question: its timer wheel has millisecond resolution,
//! tasks that wake on the same tick run in an order the scheduler chooses,
//! and a model of the dependency would have to be written as async code. The
//! herd simulation is instead a plain discrete-event loop on virtual time:
//! a priority queue of events keyed by `(time, sequence number)`, so ties
//! are broken by the order events were scheduled and a run is reproducible
//! bit for bit from its seed. It reuses the library's own arithmetic
//! ([`Backoff`](stormproof_runtime::backoff::Backoff), the retry decision, the budgets, the pure
//! breaker state machine [`BreakerCore`](stormproof_runtime::breaker::BreakerCore), the adaptive
//! concurrency limit [`LimitCore`](stormproof_runtime::bulkhead::LimitCore) and the throttle's
//! [`ThrottleWindow`](stormproof_runtime::throttle::ThrottleWindow), all of which take the time as
//! an argument), so what it measures is what the library does, not a
//! re-implementation of it. Three models of the dependency are offered (see
//! [`Model`]): the optimistic-concurrency contention model of the AWS study
//! "Exponential Backoff and Jitter", a capacity-limited dependency in the
//! spirit of the source story's storm, and a brownout, where load makes the
//! dependency slow and timeouts make slowness fail.
//!
//! [`peak_in_bucket`] is the yardstick both use: the most events that fall
//! into one fixed-width time bucket, i.e. how hard the herd hits at its worst.
//!
//! `cargo run --example storm` prints the comparison table and draws the
//! arrivals over time as an SVG chart.

mod fleet;
mod herd;
mod queue;
mod storm;

use std::time::Duration;

pub use fleet::{FleetReport, FleetSimConfig, Guards, simulate_fleet};
pub use herd::{HerdConfig, HerdReport, Latency, Model, PriorityMix, PriorityTally, Strategy, simulate};
pub use storm::{Storm, StormError};

/// The most events that fall into any one `bucket`-wide time bucket.
///
/// Buckets are aligned to zero: an event at `t` falls into bucket
/// `floor(t / bucket)`, as in the source story's `peakInBucket`. The input
/// need not be sorted. Returns 0 for no events or a zero-width bucket; it
/// never panics.
///
/// ```
/// # mod stormproof { pub use stormproof_runtime::*; pub use stormproof_sim as sim; }
/// use std::time::Duration;
/// use stormproof::sim::peak_in_bucket;
///
/// let ms = Duration::from_millis;
/// // 10..20 ms holds three events, the most of any 10 ms bucket.
/// assert_eq!(peak_in_bucket(&[ms(3), ms(12), ms(15), ms(19), ms(20)], ms(10)), 3);
/// assert_eq!(peak_in_bucket(&[], ms(10)), 0);
/// assert_eq!(peak_in_bucket(&[ms(1)], Duration::ZERO), 0);
/// ```
pub fn peak_in_bucket(times: &[Duration], bucket: Duration) -> usize {
    let width = bucket.as_nanos();
    if width == 0 {
        return 0;
    }
    let mut keys: Vec<u128> = times.iter().map(|t| t.as_nanos() / width).collect();
    keys.sort_unstable();
    keys.chunk_by(|a, b| a == b).map(<[u128]>::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn peak_counts_the_busiest_aligned_bucket() {
        assert_eq!(peak_in_bucket(&[ms(9), ms(10)], ms(10)), 1, "9 and 10 ms are in different buckets");
        assert_eq!(peak_in_bucket(&[ms(25), ms(0), ms(21), ms(5), ms(29)], ms(10)), 3, "unsorted input");
        assert_eq!(peak_in_bucket(&[ms(7); 100], ms(10)), 100);
        assert_eq!(peak_in_bucket(&[Duration::MAX, Duration::MAX], ms(10)), 2);
        assert_eq!(peak_in_bucket(&[Duration::MAX, Duration::ZERO], Duration::MAX), 1);
        assert_eq!(peak_in_bucket(&[ms(1), ms(2)], Duration::from_nanos(1)), 1);
    }

    #[test]
    fn peak_of_nothing_is_zero() {
        assert_eq!(peak_in_bucket(&[], ms(10)), 0);
        assert_eq!(peak_in_bucket(&[ms(1), ms(2)], Duration::ZERO), 0);
    }
}
