//! Adaptive concurrency limits: the bulkhead's limit moved by what the
//! dependency's answers say, as Netflix's concurrency-limits and Envoy's
//! adaptive concurrency filter move theirs.
//!
//! A fixed limit is tuned for yesterday's traffic: too high, and a slow
//! dependency queues the work of every caller; too low, and a fast one is
//! starved. An adaptive limit lives in `[min, max_concurrent]`: it shrinks
//! on overload signals (transient failures, timeouts, conflicts, and for the
//! gradient, rising latency) and grows on successes while the limit is in
//! use (a limit nobody reaches says nothing about the dependency).

use std::time::Duration;

use crate::config::ConfigError;

/// How a bulkhead's limit adapts; made by [`aimd`](Self::aimd) or
/// [`gradient`](Self::gradient) and tuned by its methods.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{bulkhead::{AdaptiveLimit, BulkheadConfig}};
/// let config = BulkheadConfig { max_concurrent: 64, adaptive: Some(AdaptiveLimit::aimd(4).backoff_ratio(0.8)), ..Default::default() };
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveLimit {
    min: u32,
    algorithm: Algorithm,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Algorithm {
    /// Additive increase, multiplicative decrease.
    Aimd { backoff_ratio: f64 },
    /// Netflix's Gradient2: the ratio of long-term to recent latency.
    Gradient { tolerance: f64, smoothing: f64, long_window: u32 },
}

impl AdaptiveLimit {
    /// Additive increase, multiplicative decrease: one more per limit's
    /// worth of successes while at least half the limit is in use (TCP's
    /// congestion avoidance: about one step per round trip); times
    /// `backoff_ratio` (default 0.9, Netflix's `AIMDLimit`) on an overload
    /// signal. Never below `min`.
    ///
    /// Netflix's `AIMDLimit` adds one per success instead. Where the
    /// overload signal is an error (a 503 past the capacity), every step
    /// past the capacity costs one: per success, a dependency at its
    /// capacity answers every few calls with an error; per round trip, a
    /// few times less often.
    pub fn aimd(min: u32) -> Self {
        AdaptiveLimit { min, algorithm: Algorithm::Aimd { backoff_ratio: 0.9 } }
    }

    /// A latency gradient (Netflix's `Gradient2Limit`): the limit follows
    /// `limit * clamp(tolerance * long_rtt / rtt, 0.5, 1) + sqrt(limit)`,
    /// smoothed, where `long_rtt` is an average over the last `long_window`
    /// samples (default 600; the first 10 evenly, as Netflix's), cut by 5%
    /// by any sample it is more than twice of (so that an outlier or a slow
    /// spell past is soon forgotten): latency rising above its usual level
    /// shrinks the limit before errors do. Defaults: tolerance 1.5, smoothing 0.2.
    /// An overload signal moves the limit toward half of itself (the
    /// gradient's floor, without the headroom: times 0.9 with the default
    /// smoothing), whatever the latency, and is not averaged into the
    /// usual latency.
    ///
    /// Latency alone does not take the limit below 4, whatever `min`: at
    /// the gradient's floor of 0.5, the target `limit / 2 + sqrt(limit)` is
    /// the limit itself at 4 (Netflix's limit keeps such headroom too, so
    /// that a limit can learn latency has fallen). Overload signals take it
    /// on down to `min`.
    pub fn gradient(min: u32) -> Self {
        AdaptiveLimit {
            min,
            algorithm: Algorithm::Gradient { tolerance: 1.5, smoothing: 0.2, long_window: 600 },
        }
    }

    /// AIMD: what an overload signal multiplies the limit by, in (0, 1).
    pub fn backoff_ratio(mut self, ratio: f64) -> Self {
        if let Algorithm::Aimd { backoff_ratio } = &mut self.algorithm {
            *backoff_ratio = ratio;
        }
        self
    }

    /// Gradient: how much slower than usual latency may get before the
    /// limit shrinks (at least 1).
    pub fn tolerance(mut self, value: f64) -> Self {
        if let Algorithm::Gradient { tolerance, .. } = &mut self.algorithm {
            *tolerance = value;
        }
        self
    }

    /// Gradient: how far each sample moves the limit toward its target, in (0, 1].
    pub fn smoothing(mut self, value: f64) -> Self {
        if let Algorithm::Gradient { smoothing, .. } = &mut self.algorithm {
            *smoothing = value;
        }
        self
    }

    /// The floor of the limit.
    pub fn min(&self) -> u32 {
        self.min
    }

    /// Which algorithm moves the limit: `aimd` or `gradient`.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::bulkhead::AdaptiveLimit;
    /// assert_eq!((AdaptiveLimit::aimd(2).algorithm(), AdaptiveLimit::gradient(2).algorithm()), ("aimd", "gradient"));
    /// ```
    pub fn algorithm(&self) -> &'static str {
        match self.algorithm {
            Algorithm::Aimd { .. } => "aimd",
            Algorithm::Gradient { .. } => "gradient",
        }
    }

    /// Checks the settings against the bulkhead's `max_concurrent`.
    pub(crate) fn validate(&self, max: u32) -> Result<(), ConfigError> {
        if self.min == 0 || self.min > max {
            return Err(ConfigError::new(
                "adaptive",
                format!("the minimum limit must be in 1..=max_concurrent ({max}), got {}", self.min),
            ));
        }
        match self.algorithm {
            Algorithm::Aimd { backoff_ratio } if !(backoff_ratio > 0.0 && backoff_ratio < 1.0) => {
                Err(ConfigError::new(
                    "adaptive",
                    format!("the backoff ratio must be in (0, 1), got {backoff_ratio}"),
                ))
            }
            Algorithm::Gradient { tolerance, smoothing, .. }
                if !(tolerance >= 1.0 && tolerance.is_finite() && smoothing > 0.0 && smoothing <= 1.0) =>
            {
                Err(ConfigError::new(
                    "adaptive",
                    format!(
                        "the tolerance must be at least 1 and the smoothing in (0, 1], got {tolerance} and {smoothing}"
                    ),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// In the configuration file's keys: `aimd (min_concurrent 2, backoff_ratio 0.9)`.
impl std::fmt::Display for AdaptiveLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let min = self.min;
        match self.algorithm {
            Algorithm::Aimd { backoff_ratio } => {
                write!(f, "aimd (min_concurrent {min}, backoff_ratio {backoff_ratio})")
            }
            Algorithm::Gradient { tolerance, smoothing, .. } => {
                write!(f, "gradient (min_concurrent {min}, tolerance {tolerance}, smoothing {smoothing})")
            }
        }
    }
}

/// The limit as pure logic: samples in, a limit out.
#[derive(Debug, Clone)]
pub struct LimitCore {
    config: AdaptiveLimit,
    max: u32,
    limit: f64,
    /// Gradient: the long-term average latency, in seconds.
    long_rtt: f64,
    /// Gradient: the samples averaged into `long_rtt`, counted up to `WARMUP`.
    averaged: u32,
}

/// Gradient: the first samples averaged evenly, as Netflix's `Gradient2Limit`
/// does (its `ExpAvgMeasurement` warm-up), before the long-term average
/// takes over.
const WARMUP: u32 = 10;

impl LimitCore {
    /// A limit starting at `max` (a new bulkhead trusts its dependency).
    pub fn new(config: AdaptiveLimit, max: u32) -> Self {
        LimitCore { config, max, limit: f64::from(max), long_rtt: 0.0, averaged: 0 }
    }

    /// A limit starting at `limit` (kept across a reconfiguration).
    pub fn starting_at(config: AdaptiveLimit, max: u32, limit: u32) -> Self {
        let limit = f64::from(limit).clamp(f64::from(config.min), f64::from(max));
        LimitCore { config, max, limit, long_rtt: 0.0, averaged: 0 }
    }

    /// How it adapts.
    pub fn config(&self) -> AdaptiveLimit {
        self.config
    }

    /// The limit now.
    pub fn limit(&self) -> u32 {
        self.limit.round().clamp(f64::from(self.config.min), f64::from(self.max)) as u32
    }

    /// Moves the limit for one attempt that took `rtt` with `in_flight`
    /// attempts running, `overload` when its answer was an overload signal.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::time::Duration;
    /// use stormproof::{bulkhead::{AdaptiveLimit, LimitCore}};
    /// let mut core = LimitCore::new(AdaptiveLimit::aimd(1), 10);
    /// let ms = Duration::from_millis;
    /// assert_eq!(core.sample(ms(5), true, 10), 9, "10 * 0.9");
    /// for _ in 0..9 {
    ///     core.sample(ms(5), false, 9);
    /// }
    /// assert_eq!(core.limit(), 10, "+1 per limit's worth of successes while in use");
    /// assert_eq!(core.sample(ms(5), false, 1), 10, "at the maximum");
    /// ```
    pub fn sample(&mut self, rtt: Duration, overload: bool, in_flight: u32) -> u32 {
        let (min, max) = (f64::from(self.config.min), f64::from(self.max));
        let in_use = f64::from(in_flight) * 2.0 >= self.limit;
        match self.config.algorithm {
            Algorithm::Aimd { backoff_ratio } => {
                if overload {
                    self.limit = (self.limit * backoff_ratio).floor();
                } else if in_use {
                    // One more per limit's worth of successes, as TCP's
                    // congestion avoidance: each step past the capacity costs
                    // an overload answer, so it probes once per round trip.
                    self.limit += 1.0 / self.limit.max(1.0);
                }
            }
            Algorithm::Gradient { tolerance, smoothing, long_window } => {
                let target = if overload {
                    // The gradient's floor, without the headroom: an
                    // overload always shrinks the limit (times 0.9 with the
                    // default smoothing, as AIMD's default backoff). Counted
                    // as twice the usual latency instead, it made a gradient
                    // of `tolerance / 2` plus the headroom: a limit below 16
                    // grew on 503s, and with a tolerance of 2 any limit did.
                    // Nor is it averaged into the usual latency (nor does
                    // it start it): its latency is not the usual one (a 503
                    // comes back fast, a timeout slow).
                    self.limit * 0.5
                } else {
                    let rtt = rtt.as_secs_f64().max(1e-9);
                    // The first few evenly: started at the first alone, the
                    // usual latency kept a first answer of no time (a cached
                    // one, a paused clock) for hundreds of samples, each of
                    // them reading as latency far above usual.
                    let weight = if self.averaged < WARMUP {
                        self.averaged += 1;
                        1.0 / f64::from(self.averaged)
                    } else {
                        2.0 / (f64::from(long_window) + 1.0)
                    };
                    self.long_rtt += (rtt - self.long_rtt) * weight;
                    let gradient = (tolerance * self.long_rtt / rtt).clamp(0.5, 1.0);
                    // Far above the latest sample, the usual latency is cut
                    // at once, as Netflix's Gradient2Limit cuts it: else one
                    // attempt that hung for an hour, or a slow spell past,
                    // held it up for thousands of samples, and latency rising
                    // meanwhile did not read as rising.
                    if self.long_rtt > rtt * 2.0 {
                        self.long_rtt *= 0.95;
                    }
                    let target = self.limit * gradient + self.limit.sqrt();
                    if in_use { target } else { target.min(self.limit) }
                };
                self.limit += (target - self.limit) * smoothing;
            }
        }
        self.limit = self.limit.clamp(min, max);
        self.limit()
    }

    /// Runs with a new `max`, keeping the limit within it.
    pub fn set_max(&mut self, max: u32) {
        self.max = max;
        self.limit = self.limit.min(f64::from(max));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn aimd_converges_on_a_capacity_it_cannot_see() {
        // A dependency that overloads past 12 concurrent attempts: the limit
        // saws between 12 * 0.9 and 13, never far from the capacity.
        let mut core = LimitCore::new(AdaptiveLimit::aimd(1), 100);
        let mut limits = Vec::new();
        for _ in 0..1_000 {
            let in_flight = core.limit();
            let limit = core.sample(ms(10), in_flight > 12, in_flight);
            limits.push(limit);
        }
        let tail = &limits[500..];
        assert!(tail.iter().all(|l| (10..=13).contains(l)), "{:?}", &tail[..20]);
    }

    #[test]
    fn gradient_shrinks_when_latency_rises_and_recovers_when_it_falls() {
        let mut core = LimitCore::new(AdaptiveLimit::gradient(2), 50);
        for _ in 0..200 {
            core.sample(ms(10), false, core.limit());
        }
        let healthy = core.limit();
        assert_eq!(healthy, 50, "at the maximum while latency is steady");
        for _ in 0..50 {
            core.sample(ms(40), false, core.limit());
        }
        let slow = core.limit();
        assert!(slow < healthy / 2, "latency x4: {slow}");
        for _ in 0..400 {
            core.sample(ms(10), false, core.limit());
        }
        assert!(core.limit() > slow * 2, "recovered to {}", core.limit());
    }

    #[test]
    fn latency_alone_takes_a_gradient_limit_down_to_4_and_overloads_on_to_its_min() {
        let mut core = LimitCore::new(AdaptiveLimit::gradient(1), 100);
        let mut rtt = ms(1);
        for _ in 0..300 {
            // Ever slower, by a tenth each time: the gradient at its floor.
            core.sample(rtt, false, core.limit());
            rtt = rtt.mul_f64(1.1);
        }
        assert_eq!(core.limit(), 4, "limit / 2 + sqrt(limit) = limit at 4");
        for _ in 0..20 {
            core.sample(ms(1), true, core.limit());
        }
        assert_eq!(core.limit(), 1, "overloads go on down to min");
    }

    #[test]
    fn gradient_follows_its_documented_formula_sample_by_sample() {
        // `AdaptiveLimit::gradient`'s docs, with its defaults: the target is
        // `limit * clamp(tolerance * long_rtt / rtt, 0.5, 1) + sqrt(limit)`,
        // the headroom only while at least half the limit is in use;
        // `long_rtt` an average over 600 samples that are not overload
        // (the first 10 of them evenly), cut by 5% by a sample it is more
        // than twice of; the limit moves a fifth of the way; an overload
        // moves it toward half of itself.
        let (tolerance, smoothing, weight) = (1.5, 0.2, 2.0 / 601.0);
        let mut core = LimitCore::starting_at(AdaptiveLimit::gradient(1), 100, 20);
        let (mut limit, mut long_rtt, mut averaged) = (20.0_f64, 0.0_f64, 0.0);
        let samples = [
            // An overload first: it is not averaged.
            (2, true, 20),
            (10, false, 20),
            (10, false, 11),
            (30, false, 12),
            (5, true, 15),
            (40, false, 3),
            (12, false, 9),
        ];
        // Less than half the usual latency: it is cut by 5% each time; then
        // latency above it.
        let samples = samples.into_iter().chain([(4, false, 12); 12]).chain([(25, false, 12); 2]);
        for (step, (rtt_ms, overload, in_flight)) in samples.enumerate() {
            let rtt = rtt_ms as f64 / 1000.0;
            let mut target = limit * 0.5;
            if !overload {
                averaged += 1.0;
                long_rtt += (rtt - long_rtt) * if averaged <= 10.0 { 1.0 / averaged } else { weight };
                target = limit * (tolerance * long_rtt / rtt).clamp(0.5, 1.0) + limit.sqrt();
                if long_rtt > 2.0 * rtt {
                    long_rtt *= 0.95;
                }
                if f64::from(in_flight) * 2.0 < limit {
                    target = target.min(limit);
                }
            }
            limit = (limit + (target - limit) * smoothing).clamp(1.0, 100.0);
            let expected = limit.round() as u32;
            assert_eq!(core.sample(ms(rtt_ms), overload, in_flight), expected, "sample {step}");
        }
    }

    #[test]
    fn the_limit_stays_within_min_and_max() {
        for config in [AdaptiveLimit::aimd(3), AdaptiveLimit::gradient(3)] {
            let mut core = LimitCore::new(config, 8);
            for i in 0..500u64 {
                let limit = core.sample(ms(1 + i % 97), i % 3 == 0, (i % 9) as u32);
                assert!((3..=8).contains(&limit), "{limit}");
            }
        }
    }

    #[test]
    fn a_smaller_max_takes_effect_at_once_and_bounds_every_later_sample() {
        for config in [AdaptiveLimit::aimd(1), AdaptiveLimit::gradient(1)] {
            let mut core = LimitCore::new(config, 8);
            core.set_max(4);
            assert_eq!(core.limit(), 4);
            for _ in 0..100 {
                assert!(core.sample(ms(1), false, 4) <= 4);
            }
        }
    }

    #[test]
    fn an_outage_of_overload_answers_leaves_the_usual_latency_where_it_was() {
        // Every answer a fast 503 for a while, then the dependency is back
        // at its usual 10 ms: latency rising to 40 ms must still read as
        // rising. Each overload counted as twice the usual latency in the
        // average of that same usual latency used to raise it a little,
        // compounding: 5,000 overloads made the usual latency 10 ms * e^16,
        // and the limit grew while latency quadrupled.
        let mut core = LimitCore::new(AdaptiveLimit::gradient(2), 50);
        for _ in 0..200 {
            core.sample(ms(10), false, core.limit());
        }
        for _ in 0..5_000 {
            core.sample(ms(1), true, core.limit());
        }
        for _ in 0..200 {
            core.sample(ms(10), false, core.limit());
        }
        let recovered = core.limit();
        for _ in 0..50 {
            core.sample(ms(40), false, core.limit());
        }
        assert!(core.limit() < recovered / 2, "latency x4 after the outage: {recovered} -> {}", core.limit());
    }

    #[test]
    fn a_long_outage_keeps_the_gradient_limit_within_min_and_max() {
        // Compounded long enough (about 215,000 overloads in a row: a few
        // minutes of fast 503s), the usual latency overflowed to infinity,
        // the gradient became NaN, and so did the limit for good: read as
        // 0, a bulkhead that admits nobody and never hears again.
        let mut core = LimitCore::new(AdaptiveLimit::gradient(2), 20);
        for i in 0..300_000 {
            let limit = core.sample(ms(1), true, core.limit());
            assert!((2..=20).contains(&limit), "overload {i}: limit {limit}");
        }
        for _ in 0..1_000 {
            core.sample(ms(1), false, core.limit());
        }
        assert_eq!(core.limit(), 20, "grown back once the dependency answers");
    }

    #[test]
    fn an_overload_shrinks_a_gradient_limit_whatever_its_level_and_tolerance() {
        // DESIGN: the limit shrinks on overload signals. Counted as twice
        // the usual latency, an overload made the gradient 0.75 with the
        // default tolerance, and the headroom `sqrt(limit)` was still added:
        // below 16 the target was above the limit, so a stream of 503s
        // grew it to 16; with a tolerance of 2 or more the gradient was 1,
        // and every 503 grew the limit by its headroom.
        let cases = [
            (AdaptiveLimit::gradient(1), 4),
            (AdaptiveLimit::gradient(1), 20),
            (AdaptiveLimit::gradient(1).tolerance(2.0), 20),
            (AdaptiveLimit::gradient(1).tolerance(3.0).smoothing(1.0), 10),
        ];
        for (config, start) in cases {
            let mut core = LimitCore::starting_at(config, 20, start);
            // The usual latency, with nobody else in flight: no move.
            assert_eq!(core.sample(ms(10), false, 1), start);
            for i in 0..3 {
                let before = core.limit;
                core.sample(ms(10), true, start);
                assert!(
                    core.limit < before,
                    "{config}, from {start}: overload {i} moved {before} to {}",
                    core.limit
                );
            }
            assert!(core.limit() < start, "{config}: {start} -> {}", core.limit());
        }
    }

    #[test]
    fn an_attempt_of_an_hour_is_soon_forgotten_by_the_usual_latency() {
        // One attempt that hung for an hour (no timeout) among 10 ms ones:
        // averaged in, it made the usual latency 12 s, which the average
        // over 600 samples forgets by a factor e per 300 samples: after 600
        // more at 10 ms it still read 1.6 s, and latency quadrupling did
        // not shrink the limit. Netflix's Gradient2Limit cuts the usual
        // latency by 5% whenever it is more than twice the latest sample.
        let mut core = LimitCore::new(AdaptiveLimit::gradient(2), 50);
        for _ in 0..200 {
            core.sample(ms(10), false, core.limit());
        }
        core.sample(Duration::from_secs(3_600), false, core.limit());
        for _ in 0..600 {
            core.sample(ms(10), false, core.limit());
        }
        let before = core.limit();
        for _ in 0..50 {
            core.sample(ms(40), false, core.limit());
        }
        assert!(core.limit() < before / 2, "latency x4: {before} -> {}", core.limit());
    }

    #[test]
    fn a_first_attempt_of_no_time_does_not_set_the_usual_latency() {
        // The first attempt answered at once (a cached answer, or a paused
        // clock reading the same instant twice): taken as the usual latency
        // by itself, 0 ns made every 10 ms answer after it read as latency
        // far above usual, and the limit sank from 50 to about 4 for the
        // ~330 samples the average took to come up. Netflix's Gradient2Limit
        // averages its first 10 samples evenly.
        let mut core = LimitCore::new(AdaptiveLimit::gradient(1), 50);
        core.sample(Duration::ZERO, false, 50);
        let mut lowest = core.limit();
        for _ in 0..300 {
            lowest = lowest.min(core.sample(ms(10), false, core.limit()));
        }
        assert!(lowest >= 45, "sank to {lowest}");
        assert_eq!(core.limit(), 50);
    }

    #[test]
    fn bad_settings_are_errors() {
        assert!(AdaptiveLimit::aimd(0).validate(10).is_err());
        assert!(AdaptiveLimit::aimd(11).validate(10).is_err());
        assert!(AdaptiveLimit::aimd(1).backoff_ratio(1.0).validate(10).is_err());
        assert!(
            AdaptiveLimit::aimd(1).backoff_ratio(0.0).validate(10).is_err(),
            "a ratio of 0 would drop the limit to its floor"
        );
        assert!(AdaptiveLimit::aimd(10).validate(10).is_ok(), "a floor at the maximum");
        assert!(AdaptiveLimit::gradient(1).tolerance(0.5).validate(10).is_err());
        assert!(AdaptiveLimit::gradient(1).smoothing(0.0).validate(10).is_err());
        assert!(AdaptiveLimit::gradient(1).validate(10).is_ok());
    }
}
