//! Capped exponential backoff with four jitter strategies.
//!
//! Why jitter at all: when a dependency fails, every client that called it
//! fails at about the same instant. Without jitter they all come back at the
//! same instant too, and the recovering dependency meets the same wall of
//! traffic that knocked it over (a *thundering herd*). Spreading the waits
//! at random turns that wall into a trickle; "full" jitter spreads them the
//! most and is the default, as the AWS study "Exponential Backoff and Jitter"
//! recommends.
//!
//! `n` counts the waits: `n = 0` is the wait after the first failure.
//! `exp(n) = min(cap, base * factor^n)`: with the default factor of 2,
//! exactly `base * 2^n`; with another (kept in thousandths, 1.000 to
//! 10.000), each step is `exp(n + 1) = exp(n) * factor_milli / 1000` in
//! whole nanoseconds, rounded down (and at least a nanosecond more), so the
//! same settings give the same waits on every machine. Saturating arithmetic: no `n`, base, cap or
//! factor overflows or panics.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// How a wait is randomised around the exponential curve.
///
/// | jitter | wait for wait-index `n` |
/// |---|---|
/// | `None` | `exp(n)` |
/// | `Full` | uniform in `[0, exp(n)]` |
/// | `Equal` | `exp(n)/2 + uniform in [0, exp(n)/2]` |
/// | `Decorrelated` | `min(cap, uniform in [base, prev * (factor + 1)])`, `prev` starting at `base` (`prev * 3` with the default factor 2, as AWS's) |
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::Jitter;
/// assert_eq!("full".parse::<Jitter>(), Ok(Jitter::Full));
/// assert_eq!(Jitter::default(), Jitter::Full);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Jitter {
    /// No randomness: every client waits exactly `exp(n)`.
    None,
    /// Uniform in `[0, exp(n)]`: the widest spread (the default).
    #[default]
    Full,
    /// Half fixed, half random: never shorter than `exp(n) / 2`.
    Equal,
    /// Each wait drawn from `[base, 3 * previous wait]`, capped.
    Decorrelated,
}

impl Jitter {
    /// The names accepted by [`str::parse`] and by the attribute's `jitter` argument.
    pub const NAMES: [&'static str; 4] = ["full", "equal", "decorrelated", "none"];

    /// The lower-case name of this strategy, as the attribute spells it.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// assert_eq!(stormproof::Jitter::Decorrelated.name(), "decorrelated");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Jitter::None => "none",
            Jitter::Full => "full",
            Jitter::Equal => "equal",
            Jitter::Decorrelated => "decorrelated",
        }
    }
}

impl std::fmt::Display for Jitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The error of parsing an unknown jitter name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownJitter(pub String);

impl std::fmt::Display for UnknownJitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown jitter `{}`; expected one of: \"full\", \"equal\", \"decorrelated\", \"none\"",
            self.0
        )
    }
}

impl std::error::Error for UnknownJitter {}

impl std::str::FromStr for Jitter {
    type Err = UnknownJitter;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Jitter::None),
            "full" => Ok(Jitter::Full),
            "equal" => Ok(Jitter::Equal),
            "decorrelated" => Ok(Jitter::Decorrelated),
            other => Err(UnknownJitter(other.to_owned())),
        }
    }
}

/// A capped exponential backoff curve with a jitter strategy.
///
/// It is pure arithmetic: the randomness comes from the caller, so the same
/// seed always gives the same waits.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::{backoff::Backoff, Jitter};
///
/// let backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(800), Jitter::None);
/// let waits: Vec<u128> = (0..6).map(|n| backoff.exp(n).as_millis()).collect();
/// assert_eq!(waits, [100, 200, 400, 800, 800, 800]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first wait before jitter (`exp(0)`).
    pub base: Duration,
    /// No wait before jitter exceeds this.
    pub cap: Duration,
    /// How waits are randomised.
    pub jitter: Jitter,
    /// How much each wait grows, in thousandths: 2000 doubles (the
    /// default), 1500 grows by half; 1000..=10000 (see
    /// [`validate_factor`](Self::validate_factor)).
    pub factor_milli: u32,
}

/// The default growth: each wait twice the one before.
pub const DOUBLING: u32 = 2000;
/// The least growth factor, in thousandths: waits that never shrink.
pub const MIN_FACTOR_MILLI: u32 = 1000;
/// The greatest growth factor, in thousandths.
pub const MAX_FACTOR_MILLI: u32 = 10_000;

const NANOS_PER_SEC: u128 = 1_000_000_000;

fn to_nanos(d: Duration) -> u128 {
    d.as_nanos()
}

/// Every value handled here is at most a `Duration`'s nanos, so the seconds fit a u64.
fn from_nanos(n: u128) -> Duration {
    // Most waits fit a u64 of nanoseconds (585 years): divided as a u64,
    // not through the 128-bit division routines.
    if let Ok(n) = u64::try_from(n) {
        return Duration::from_nanos(n);
    }
    let secs = u64::try_from(n / NANOS_PER_SEC).unwrap_or(u64::MAX);
    // The remainder is below 1e9, so it fits a u32.
    let nanos = (n % NANOS_PER_SEC) as u32;
    Duration::new(secs, nanos)
}

impl Backoff {
    /// A curve from `base`, doubling up to `cap`.
    pub const fn new(base: Duration, cap: Duration, jitter: Jitter) -> Self {
        Backoff { base, cap, jitter, factor_milli: DOUBLING }
    }

    /// This curve growing by `factor_milli` thousandths a step instead.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::time::Duration;
    /// use stormproof::{backoff::Backoff, Jitter};
    /// let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1), Jitter::None).with_factor(1500);
    /// let waits: Vec<u128> = (0..7).map(|n| backoff.exp(n).as_micros()).collect();
    /// assert_eq!(waits, [100_000, 150_000, 225_000, 337_500, 506_250, 759_375, 1_000_000]);
    /// ```
    pub const fn with_factor(self, factor_milli: u32) -> Self {
        Backoff { factor_milli, ..self }
    }

    /// How much each wait grows (`factor_milli` as a number: 2, 1.5).
    pub fn factor(&self) -> f64 {
        f64::from(self.factor_milli) / 1000.0
    }

    /// Checks a growth factor in thousandths: 1000 (waits that never grow)
    /// to 10000.
    pub fn validate_factor(factor_milli: u32) -> Result<(), crate::config::ConfigError> {
        if (MIN_FACTOR_MILLI..=MAX_FACTOR_MILLI).contains(&factor_milli) {
            Ok(())
        } else {
            Err(crate::config::ConfigError::new(
                "factor",
                format!(
                    "must be in 1.0..=10.0 (waits that never shrink, and grow at most tenfold a step), got {}",
                    f64::from(factor_milli) / 1000.0
                ),
            ))
        }
    }

    /// `min(cap, base * 2^n)` without jitter; saturates instead of overflowing.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::time::Duration;
    /// use stormproof::{backoff::Backoff, Jitter};
    /// let b = Backoff::new(Duration::from_millis(u64::MAX), Duration::from_secs(1), Jitter::None);
    /// assert_eq!(b.exp(100), Duration::from_secs(1));
    /// ```
    pub fn exp(&self, n: u32) -> Duration {
        if self.factor_milli != DOUBLING {
            return self.exp_by_factor(n);
        }
        // `base * 2^n` in `Duration`'s own arithmetic (no 128-bit
        // multiplication), at most 31 doublings a step: a non-zero base
        // passes any cap within five steps, so the loop is short whatever `n`.
        let mut grown = self.base;
        let mut left = n;
        while left > 0 && !grown.is_zero() && grown < self.cap {
            let step = left.min(31);
            grown = grown.saturating_mul(1 << step);
            left -= step;
        }
        grown.min(self.cap)
    }

    /// `exp(n)` for a factor other than 2: one step at a time, in whole
    /// nanoseconds rounded down, and at least one nanosecond more (so that
    /// a wait of a few nanoseconds grows too). A factor of 1 never grows;
    /// any other passes the cap within the loop's bound (a wait grows by at
    /// least 0.1% a step, and no `Duration` needs 65,000 such steps to pass
    /// any cap), so the loop ends whatever `n`.
    #[cold]
    fn exp_by_factor(&self, n: u32) -> Duration {
        let (factor, cap) = (u128::from(self.factor_milli.max(MIN_FACTOR_MILLI)), to_nanos(self.cap));
        let mut grown = to_nanos(self.base);
        if factor == u128::from(MIN_FACTOR_MILLI) {
            return from_nanos(grown.min(cap));
        }
        for _ in 0..n {
            if grown == 0 || grown >= cap {
                break;
            }
            // Below the cap, which is a Duration's nanos: no overflow.
            grown = (grown * factor / 1000).max(grown + 1);
        }
        from_nanos(grown.min(cap))
    }
    /// The jittered wait for wait-index `n`.
    ///
    /// `prev` is the previous jittered wait (only `Decorrelated` reads it; pass
    /// `None` for the first wait, which then starts from `base`).
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::time::Duration;
    /// use stormproof::{backoff::{Backoff, JitterRng}, Jitter};
    /// let b = Backoff::new(Duration::from_millis(100), Duration::from_secs(20), Jitter::Full);
    /// let mut rng = JitterRng::seeded(7);
    /// let wait = b.wait(3, None, &mut rng);
    /// assert!(wait <= Duration::from_millis(800));
    /// ```
    pub fn wait(&self, n: u32, prev: Option<Duration>, rng: &mut JitterRng) -> Duration {
        match self.jitter {
            Jitter::None => self.exp(n),
            Jitter::Full => from_nanos(rng.uniform(0, to_nanos(self.exp(n)))),
            Jitter::Equal => {
                let exp = to_nanos(self.exp(n));
                let half = exp / 2;
                // `exp - half` keeps the upper bound at exactly `exp` for odd values.
                from_nanos(half + rng.uniform(0, exp - half))
            }
            Jitter::Decorrelated => {
                let base = to_nanos(self.base);
                let cap = to_nanos(self.cap);
                let prev = prev.map_or(base, to_nanos);
                // `prev * (factor + 1)`: `prev * 3` with the default factor.
                let high = (prev.saturating_mul(u128::from(self.factor_milli) + 1000) / 1000).max(base);
                from_nanos(rng.uniform(base, high).min(cap))
            }
        }
    }
}

/// The source of jitter draws: a small, fast, seedable generator.
///
/// A fixed seed gives the same sequence of waits every run, which is how the
/// tests reproduce the source documents' numbers exactly.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::backoff::JitterRng;
/// let mut a = JitterRng::seeded(42);
/// let mut b = JitterRng::seeded(42);
/// assert_eq!(a.uniform(0, 1_000), b.uniform(0, 1_000));
/// ```
#[derive(Debug, Clone)]
pub struct JitterRng(Source);

/// Where a [`JitterRng`]'s draws come from.
#[derive(Debug, Clone)]
enum Source {
    /// A generator of its own, fixed by its seed.
    Own(SmallRng),
    /// The thread's generator (`rand::rng()`): nothing to seed per call,
    /// for a call whose draws need not be reproducible.
    Thread,
}

impl JitterRng {
    /// A generator whose draws are fixed by `seed`.
    pub fn seeded(seed: u64) -> Self {
        JitterRng(Source::Own(SmallRng::seed_from_u64(seed)))
    }

    /// A generator seeded from the operating system's entropy.
    pub fn from_entropy() -> Self {
        JitterRng::seeded(rand::random())
    }

    /// Draws from the thread's generator: what a call with no seed uses,
    /// since seeding a generator of its own (from the thread's) costs more
    /// than the few draws a call makes, and one with a zero wait draws nothing.
    pub(crate) fn from_thread() -> Self {
        JitterRng(Source::Thread)
    }

    /// A uniform draw in `[low, high]` (inclusive); returns `low` when `high <= low`.
    #[inline]
    pub fn uniform(&mut self, low: u128, high: u128) -> u128 {
        if high <= low { low } else { self.draw(low, high) }
    }

    #[inline(never)]
    fn draw(&mut self, low: u128, high: u128) -> u128 {
        match &mut self.0 {
            Source::Own(rng) => rng.random_range(low..=high),
            Source::Thread => rand::rng().random_range(low..=high),
        }
    }
}

/// Mixes a seed with a stream index so that concurrent calls sharing one
/// seed still draw independent, reproducible sequences: how a seeded
/// policy or registry seeds each call's [`JitterRng`], and how the
/// simulator seeds each of its callers.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::backoff::stream_seed;
/// assert_ne!(stream_seed(42, 0), stream_seed(42, 1));
/// assert_eq!(stream_seed(42, 1), stream_seed(42, 1));
/// ```
pub fn stream_seed(seed: u64, stream: u64) -> u64 {
    seed ^ stream.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn waits_double_then_stop_at_the_cap() {
        let b = Backoff::new(ms(100), ms(800), Jitter::None);
        let waits: Vec<_> = (0..6).map(|n| b.exp(n)).collect();
        assert_eq!(waits, [ms(100), ms(200), ms(400), ms(800), ms(800), ms(800)]);
    }

    #[test]
    fn nanoseconds_convert_back_exactly_on_both_sides_of_u64() {
        let edge = u128::from(u64::MAX);
        for n in [0, 1, 999_999_999, 1_000_000_001, edge - 1, edge, edge + 1, to_nanos(Duration::MAX)] {
            assert_eq!(to_nanos(from_nanos(n)), n, "{n} ns");
        }
    }

    #[test]
    fn extreme_inputs_saturate_instead_of_overflowing() {
        let huge = Backoff::new(ms(u64::MAX), ms(u64::MAX), Jitter::Full);
        assert_eq!(huge.exp(100), ms(u64::MAX));
        assert_eq!(huge.exp(u32::MAX), ms(u64::MAX));
        let max = Backoff::new(Duration::MAX, Duration::MAX, Jitter::Decorrelated);
        let mut rng = JitterRng::seeded(1);
        assert!(max.wait(100, Some(Duration::MAX), &mut rng) <= Duration::MAX);
        let zero_cap = Backoff::new(ms(0), ms(0), Jitter::Equal);
        assert_eq!(zero_cap.wait(100, None, &mut rng), Duration::ZERO);
        for jitter in [Jitter::None, Jitter::Full, Jitter::Equal, Jitter::Decorrelated] {
            let b = Backoff::new(ms(u64::MAX), ms(0), jitter);
            assert_eq!(b.wait(100, Some(ms(u64::MAX)), &mut rng), Duration::ZERO);
        }
    }

    #[test]
    fn a_zero_base_never_waits() {
        let b = Backoff::new(Duration::ZERO, ms(1000), Jitter::None);
        assert_eq!(b.exp(0), Duration::ZERO);
        assert_eq!(b.exp(50), Duration::ZERO);
    }

    #[test]
    fn the_same_seed_gives_the_same_waits() {
        let b = Backoff::new(ms(100), ms(20_000), Jitter::Full);
        let draw = |seed| {
            let mut rng = JitterRng::seeded(seed);
            (0..8).map(|n| b.wait(n, None, &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(9), draw(9));
        assert_ne!(draw(9), draw(10));
    }

    #[test]
    fn jitter_names_round_trip() {
        for name in Jitter::NAMES {
            assert_eq!(name.parse::<Jitter>().unwrap().name(), name);
        }
        let err = "fulll".parse::<Jitter>().unwrap_err();
        assert!(err.to_string().contains("\"decorrelated\""));
    }

    #[test]
    fn full_jitter_spreads_waits_over_the_whole_range() {
        // Sound statistics with a fixed seed: 10,000 draws from [0, 1000] ms
        // have a mean within 3% of 500 ms and reach both ends' tenths.
        let b = Backoff::new(ms(1000), ms(1000), Jitter::Full);
        let mut rng = JitterRng::seeded(2024);
        let draws: Vec<u128> = (0..10_000).map(|_| b.wait(0, None, &mut rng).as_millis()).collect();
        let mean = draws.iter().sum::<u128>() as f64 / draws.len() as f64;
        assert!((mean - 500.0).abs() < 15.0, "mean {mean}");
        assert!(draws.iter().any(|&d| d < 100));
        assert!(draws.iter().any(|&d| d > 900));
    }

    /// `exp` as first written, in 128-bit nanoseconds: the model the
    /// `Duration` arithmetic must agree with.
    fn exp_in_nanos(b: &Backoff, n: u32) -> Duration {
        let factor = 1u128.checked_shl(n).unwrap_or(u128::MAX);
        from_nanos(to_nanos(b.base).saturating_mul(factor).min(to_nanos(b.cap)))
    }

    #[test]
    fn exp_agrees_with_128_bit_nanoseconds_at_the_extremes() {
        let durations =
            [Duration::ZERO, Duration::from_nanos(1), ms(100), Duration::from_secs(u64::MAX), Duration::MAX];
        for base in durations {
            for cap in durations {
                for n in [0, 1, 30, 31, 32, 62, 63, 64, 93, 127, 128, 1000, u32::MAX] {
                    let b = Backoff::new(base, cap, Jitter::None);
                    assert_eq!(b.exp(n), exp_in_nanos(&b, n), "base {base:?} cap {cap:?} n {n}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn exp_agrees_with_128_bit_nanoseconds(base: u64, base_nanos in 0u32..1_000_000_000, cap: u64, n: u32) {
            let b = Backoff::new(Duration::new(base >> 20, base_nanos), Duration::from_nanos(cap), Jitter::None);
            prop_assert_eq!(b.exp(n), exp_in_nanos(&b, n));
            let b = Backoff::new(Duration::from_nanos(cap), Duration::new(base, base_nanos), Jitter::None);
            prop_assert_eq!(b.exp(n % 200), exp_in_nanos(&b, n % 200));
        }

        #[test]
        fn exp_is_capped_and_monotone(base in 0u64..10_000_000, cap in 0u64..10_000_000, n in 0u32..200) {
            let b = Backoff::new(ms(base), ms(cap), Jitter::None);
            prop_assert!(b.exp(n) <= ms(cap));
            prop_assert!(b.exp(n) <= b.exp(n.saturating_add(1)));
            if n < 20 {
                prop_assert_eq!(b.exp(n), ms(base.saturating_mul(1 << n).min(cap)));
            }
        }

        #[test]
        fn full_jitter_stays_in_zero_to_exp(base in 0u64..1_000_000, cap in 0u64..1_000_000, n in 0u32..100, seed: u64) {
            let b = Backoff::new(ms(base), ms(cap), Jitter::Full);
            let w = b.wait(n, None, &mut JitterRng::seeded(seed));
            prop_assert!(w <= b.exp(n));
        }

        #[test]
        fn equal_jitter_stays_in_half_to_exp(base in 0u64..1_000_000, cap in 0u64..1_000_000, n in 0u32..100, seed: u64) {
            let b = Backoff::new(ms(base), ms(cap), Jitter::Equal);
            let w = b.wait(n, None, &mut JitterRng::seeded(seed));
            prop_assert!(w >= b.exp(n) / 2);
            prop_assert!(w <= b.exp(n));
        }

        #[test]
        fn decorrelated_jitter_stays_in_base_to_three_prev_capped(
            base in 0u64..1_000_000, cap in 0u64..1_000_000, prev in 0u64..10_000_000, seed: u64,
        ) {
            let b = Backoff::new(ms(base), ms(cap), Jitter::Decorrelated);
            let w = b.wait(3, Some(ms(prev)), &mut JitterRng::seeded(seed));
            prop_assert!(w <= ms(cap));
            prop_assert!(w >= ms(base).min(ms(cap)));
            prop_assert!(w <= ms(prev.saturating_mul(3).max(base)));
        }

        #[test]
        fn any_wait_never_panics(base: u64, cap: u64, n: u32, prev: u64, seed: u64, j in 0usize..4) {
            let jitter = [Jitter::None, Jitter::Full, Jitter::Equal, Jitter::Decorrelated][j];
            let b = Backoff::new(ms(base), ms(cap), jitter);
            let w = b.wait(n, Some(ms(prev)), &mut JitterRng::seeded(seed));
            prop_assert!(w <= ms(cap));
        }
    }
}
