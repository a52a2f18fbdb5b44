//! Client-side adaptive throttling (Google SRE book, "Handling Overload").
//!
//! When a dependency is overloaded, every refused request still costs it
//! something: the connection, the parsing, the refusal. A client that sees
//! most of its requests refused should send fewer. Each client keeps two
//! counts over a sliding window: `requests` it attempted and `accepts`, the
//! attempts that got an answer that is not overload (a success, a permanent
//! error, a conflict). A request counts once it is answered (or refused
//! here): one still in flight says nothing yet, so a burst at start-up is
//! not throttled before a single answer came back (counted when sent, a
//! cold burst of 100 would see its r-th request refused with probability
//! (r - 1) / r). While `requests` stays below `k * accepts` nothing
//! changes; beyond it the client refuses a share of its own requests
//! locally, with probability `max(0, (requests - k * accepts) / (requests + 1))`,
//! before they reach the dependency. With `k = 2` a dependency that accepts
//! half of what it is sent sees no throttling; one that accepts nothing is
//! soon spared most of it, and recovers as soon as it accepts again.
//!
//! Two choices differ from the book's (k = 2 over two minutes), for one
//! reason: a throttle that remembers long reacts late and refuses long.
//! Over a two-minute window, an outage after a few healthy seconds is half
//! refused only 11.5 s in, and the recovered dependency is still refused a
//! minute after: the window still holds the outage's requests, and the
//! refusals themselves keep out the answers that would outweigh them. So
//! the window is half a second (an outage is half refused 0.4 s in), and
//! at most `max_refusal_percent` (80 %, as Envoy's admission control) of
//! requests are refused, so that one in five still reaches the dependency
//! and its recovery is seen at once: goodput is back within 95 % 0.7 s
//! after it (`tests/throttle_recovery.rs`, 200 requests a second).

mod guard;
mod window;
pub use window::ThrottleWindow;
use window::{saturating_nanos, tenth_of};

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::Instant;

use crate::config::ConfigError;
use crate::priority::Priority;

/// Settings of a [`Throttle`]; every field has a default.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::throttle::ThrottleConfig;
/// let cfg = ThrottleConfig { k: 1.5, ..Default::default() };
/// assert_eq!((cfg.window, cfg.max_refusal_percent), (Duration::from_millis(500), 80));
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThrottleConfig {
    /// How many requests per accept are sent before any is refused; the
    /// SRE book recommends 2. Lower throttles sooner. Default 2.0.
    pub k: f64,
    /// How far back requests and accepts count. Default 500 ms (the SRE
    /// book's is two minutes; see the module docs for why it is short).
    pub window: Duration,
    /// The most requests refused locally, in percent (1 to 100): what is
    /// left reaches the dependency even during an outage, so its recovery
    /// is seen at once. Default 80; 100 is the book's formula uncapped.
    pub max_refusal_percent: u8,
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        ThrottleConfig { k: 2.0, window: Duration::from_millis(500), max_refusal_percent: 80 }
    }
}

impl ThrottleConfig {
    /// The most requests refused locally, as a share (0.01 to 1).
    pub fn max_refusal(&self) -> f64 {
        f64::from(self.max_refusal_percent) / 100.0
    }

    /// Checks the settings: `k` a finite number of at least 1 (below 1, a
    /// healthy dependency would be throttled), `window` in (0, 1 day],
    /// `max_refusal_percent` in 1..=100.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.k.is_finite() && self.k >= 1.0) {
            return Err(ConfigError::new("k", format!("must be a number of at least 1, got {}", self.k)));
        }
        if self.window.is_zero() || self.window > Duration::from_secs(86_400) {
            return Err(ConfigError::new("window", format!("must be in (0, 1 day], got {:?}", self.window)));
        }
        if !(1..=100).contains(&self.max_refusal_percent) {
            return Err(ConfigError::new(
                "max_refusal_percent",
                format!("must be in 1..=100, got {}", self.max_refusal_percent),
            ));
        }
        Ok(())
    }
}

/// Whether a request goes out at `now` (nanoseconds) through `window`
/// with tenths `tenth` wide, factor `k` and at most `cap` refused, and the
/// refusal probability it was drawn against: the draw is taken only when
/// that probability is above zero. A refused request is counted at once; one that goes out, when
/// answered. What [`Throttle`] and the simulator's [`ThrottleCore`] share.
#[inline]
fn admit_at(
    window: &ThrottleWindow,
    now: u64,
    tenth: u64,
    k: f64,
    cap: f64,
    draw: impl FnOnce() -> f64,
) -> (bool, f64) {
    let p = window.probability_at(now, tenth, k, cap);
    if p == 0.0 {
        return (true, p);
    }
    let admitted = draw() >= p;
    if !admitted {
        window.count_at(now, tenth, false);
    }
    (admitted, p)
}

/// A named client-side throttle shared by the calls to one dependency;
/// see the module docs.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use stormproof::{throttle::{Throttle, ThrottleConfig}};
/// let throttle = Throttle::new("db", ThrottleConfig::default(), Some(7)).unwrap();
/// // A dependency that refuses everything, called every millisecond: from
/// // the window's second tenth (50 ms) on, the throttle refuses most calls
/// // itself, but never more than 80 % (`max_refusal_percent`).
/// let mut refused = 0;
/// for _ in 0..1000 {
///     tokio::time::advance(std::time::Duration::from_millis(1)).await;
///     if throttle.admit() {
///         throttle.answered(false); // sent, and refused by the dependency
///     } else {
///         refused += 1;
///     }
/// }
/// assert!((700..=800).contains(&refused), "{refused}");
/// # }
/// ```
#[derive(Debug)]
pub struct Throttle {
    name: String,
    window: ThrottleWindow,
    /// The settings every call reads, without a lock: `k`'s bits, the
    /// width of a tenth of the window in nanoseconds, and the most refused
    /// as a share's bits.
    k: AtomicU64,
    tenth: AtomicU64,
    cap: AtomicU64,
    /// The settings as declared, and the draws: locked only to reconfigure
    /// and to draw, which a call does only when the probability is above zero.
    state: Mutex<(ThrottleConfig, SmallRng)>,
    /// Whether the refusal-probability gauge was last set above zero.
    above_zero: AtomicBool,
    origin: Instant,
    /// The requests it refused, by priority.
    refusals: crate::priority::Refusals,
}

/// A throttle as pure logic: settings, counts and seeded draws, the time
/// passed in. [`Throttle`] runs the same window and admission on tokio's
/// clock, the simulator runs this on its own.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::{throttle::{ThrottleConfig, ThrottleCore}};
/// let mut core = ThrottleCore::new(ThrottleConfig::default(), 7);
/// // Nothing counted yet: nothing refused.
/// assert_eq!(core.admit(Duration::ZERO), (true, 0.0));
/// core.answered(Duration::ZERO, true);
/// ```
#[derive(Debug)]
pub struct ThrottleCore {
    config: ThrottleConfig,
    window: ThrottleWindow,
    draws: SmallRng,
}

impl ThrottleCore {
    /// A throttle on `config` with nothing counted; `seed` makes its
    /// draws reproducible.
    pub fn new(config: ThrottleConfig, seed: u64) -> Self {
        ThrottleCore { config, window: ThrottleWindow::default(), draws: SmallRng::seed_from_u64(seed) }
    }

    /// Whether a request may go out at `now` (time since any origin the
    /// caller keeps), and the probability of refusal it was drawn against:
    /// Google SRE's `max(0, (requests - k * accepts) / (requests + 1))`
    /// over the window, at most `max_refusal`, drawn only when above zero. A refused request is
    /// counted at once; one that goes out is counted by
    /// [`answered`](Self::answered).
    pub fn admit(&mut self, now: Duration) -> (bool, f64) {
        self.admit_as(now, Priority::Default)
    }

    /// [`admit`](Self::admit) for a request of `priority` (see
    /// [`Throttle::admit_as`]).
    pub fn admit_as(&mut self, now: Duration, priority: Priority) -> (bool, f64) {
        let (config, draws) = (&self.config, &mut self.draws);
        let (tenth, cap) = (tenth_of(config.window), config.max_refusal());
        let k = priority.k_of(config.k);
        admit_at(&self.window, saturating_nanos(now), tenth, k, cap, || draws.random())
    }

    /// Counts a request that went out, once answered; `accepted` when the
    /// answer was not overload.
    pub fn answered(&mut self, now: Duration, accepted: bool) {
        self.window.count_at(saturating_nanos(now), tenth_of(self.config.window), accepted);
    }
}

impl Throttle {
    /// A throttle that refuses nothing yet; `seed` makes its draws
    /// reproducible (else entropy). An invalid `config` is an error naming the field.
    pub fn new(
        name: impl Into<String>,
        config: ThrottleConfig,
        seed: Option<u64>,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let draws = match seed {
            Some(seed) => SmallRng::seed_from_u64(seed),
            None => SmallRng::seed_from_u64(rand::random()),
        };
        Ok(Throttle {
            name: name.into(),
            window: ThrottleWindow::default(),
            k: AtomicU64::new(config.k.to_bits()),
            tenth: AtomicU64::new(tenth_of(config.window)),
            cap: AtomicU64::new(config.max_refusal().to_bits()),
            state: Mutex::new((config, draws)),
            above_zero: AtomicBool::new(false),
            origin: Instant::now(),
            refusals: Default::default(),
        })
    }

    /// The name this throttle was declared under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings it runs on.
    pub fn config(&self) -> ThrottleConfig {
        self.lock().0
    }

    /// Runs on `config` from now on, keeping its counts. (A new window
    /// keeps those the new tenths do not reuse, each until it leaves the
    /// new window.)
    pub fn reconfigure(&self, config: ThrottleConfig) -> Result<(), ConfigError> {
        config.validate()?;
        let mut state = self.lock();
        state.0 = config;
        self.k.store(config.k.to_bits(), Ordering::Relaxed);
        self.tenth.store(tenth_of(config.window), Ordering::Relaxed);
        self.cap.store(config.max_refusal().to_bits(), Ordering::Relaxed);
        Ok(())
    }

    /// The probability it refuses a request now.
    pub fn refusal_probability(&self) -> f64 {
        self.window.probability_at(self.now(), self.tenth(), self.k(), self.cap())
    }

    /// Whether a request may go out now: refused with the refusal
    /// probability (a seeded draw, taken only when that probability is
    /// above zero), and then counted as a request at once. One that may go
    /// out is counted when [`answered`](Self::answered). A request of
    /// [`Priority::Default`]: see [`admit_as`](Self::admit_as).
    pub fn admit(&self) -> bool {
        self.admit_as(Priority::Default)
    }

    /// [`admit`](Self::admit) for a request of `priority`, judged with its
    /// own multiple of `k` (twice for critical requests, half for
    /// sheddable ones: see `crate::priority`), so that sheddable requests
    /// are refused first and critical ones last. The window is shared.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use stormproof::{Priority, throttle::{Throttle, ThrottleConfig}};
    /// let throttle = Throttle::new("search", ThrottleConfig::default(), Some(7)).unwrap();
    /// // Three requests for every one the dependency accepts.
    /// for n in 0..3_000 {
    ///     throttle.answered(n % 3 == 0);
    /// }
    /// # tokio::time::advance(std::time::Duration::from_millis(250)).await;
    /// let admitted = |priority| (0..1_000).filter(|_| throttle.admit_as(priority)).count();
    /// let (critical, sheddable) = (admitted(Priority::Critical), admitted(Priority::Sheddable));
    /// assert!(critical > sheddable, "{critical} critical, {sheddable} sheddable admitted");
    /// # }
    /// ```
    pub fn admit_as(&self, priority: Priority) -> bool {
        if priority != Priority::Default {
            return self.admit_other(priority);
        }
        let (admitted, p) =
            admit_at(&self.window, self.now(), self.tenth(), self.k(), self.cap(), || self.lock().1.random());
        self.report(p, p, admitted)
    }

    /// [`admit_as`](Self::admit_as) for a critical or sheddable request:
    /// out of the default's way.
    #[inline(never)]
    fn admit_other(&self, priority: Priority) -> bool {
        let (now, tenth, cap) = (self.now(), self.tenth(), self.cap());
        let k = priority.k_of(self.k());
        let (admitted, p) = admit_at(&self.window, now, tenth, k, cap, || self.lock().1.random());
        // The gauge shows a default request's probability, whatever this
        // request's priority: one gauge, one meaning.
        let default = self.window.probability_at(now, tenth, self.k(), cap);
        self.report(default, p, admitted)
    }

    /// The gauge at `gauge` (a default request's probability), and a
    /// refusal drawn against `p` counted.
    #[inline(always)]
    fn report(&self, gauge: f64, p: f64, admitted: bool) -> bool {
        if gauge == 0.0 {
            if self.above_zero.load(Ordering::Relaxed) {
                self.report_zero();
            }
            if p == 0.0 {
                return true;
            }
        } else {
            self.above_zero.store(true, Ordering::Relaxed);
            crate::observe::throttle_probability(&self.name, gauge);
        }
        if !admitted {
            crate::observe::throttle_refusal(&self.name, p);
        }
        admitted
    }

    /// Counts an admitted request once it is answered: `accepted` when the
    /// answer was not overload (a success, a conflict, a permanent error).
    pub fn answered(&self, accepted: bool) {
        self.window.count_at(self.now(), self.tenth(), accepted);
    }

    /// The gauge back at zero, once, when the probability fell to it.
    #[cold]
    fn report_zero(&self) {
        if self.above_zero.swap(false, Ordering::Relaxed) {
            crate::observe::throttle_probability(&self.name, 0.0);
        }
    }

    /// Nanoseconds since the throttle was made.
    fn now(&self) -> u64 {
        saturating_nanos(Instant::now().saturating_duration_since(self.origin))
    }

    fn k(&self) -> f64 {
        f64::from_bits(self.k.load(Ordering::Relaxed))
    }

    fn tenth(&self) -> u64 {
        self.tenth.load(Ordering::Relaxed)
    }

    fn cap(&self) -> f64 {
        f64::from_bits(self.cap.load(Ordering::Relaxed))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (ThrottleConfig, SmallRng)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tenth of the default window: what the counts of a tenth wait
    /// before they count.
    const TENTH: Duration = Duration::from_millis(50);

    /// Three requests for every accept, with the default `k` of 2: a
    /// critical request is judged with 4 (nothing to refuse), a default one
    /// with 2 (about a third refused), a sheddable one with 1 (about two
    /// thirds). Each priority's refusals are counted from a fresh window.
    #[tokio::test(start_paused = true)]
    async fn each_priority_is_judged_with_its_own_multiple_of_k() {
        let refused = async |priority| {
            let throttle = Throttle::new("t", ThrottleConfig::default(), Some(44)).unwrap();
            for n in 0..3_000 {
                throttle.answered(n % 3 == 0);
            }
            tokio::time::advance(TENTH).await;
            (0..300).filter(|_| !throttle.admit_as(priority)).count()
        };
        let critical = refused(Priority::Critical).await;
        let default = refused(Priority::Default).await;
        let sheddable = refused(Priority::Sheddable).await;
        assert_eq!(critical, 0, "4 x 1,000 accepts outweigh 3,000 requests");
        assert!((60..=140).contains(&default), "{default} of 300 default requests refused (p about 1/3)");
        assert!(
            (160..=240).contains(&sheddable),
            "{sheddable} of 300 sheddable requests refused (p about 2/3)"
        );
    }

    /// A plain call's quiet admission: yes while nothing is refused (a
    /// healthy dependency), counting nothing; no once a refusal must be
    /// drawn for, again counting nothing, so the call is admitted properly.
    #[tokio::test(start_paused = true)]
    async fn a_request_is_admitted_quietly_only_while_nothing_is_refused() {
        let throttle = Throttle::new("t", ThrottleConfig::default(), Some(7)).unwrap();
        assert!(throttle.admitted_quietly(), "nothing seen: nothing refused");
        for _ in 0..1_000 {
            throttle.answered(false);
        }
        tokio::time::advance(TENTH).await;
        let refusing = throttle.refusal_probability();
        assert!(refusing > 0.5, "{refusing}");
        assert!(!throttle.admitted_quietly(), "refusals are drawn for: not quietly");
        assert_eq!(throttle.refusal_probability(), refusing, "asking quietly counted nothing");
        // k = 2: as many accepts as requests in all outweigh the failures.
        for _ in 0..1_000 {
            throttle.answered(true);
        }
        tokio::time::advance(TENTH).await;
        assert_eq!(throttle.refusal_probability(), 0.0);
        assert!(throttle.admitted_quietly(), "accepted again: quietly again");
        assert_eq!(throttle.refusal_probability(), 0.0);
    }

    /// Half of `k` never goes below 1: with `k = 1` and a dependency that
    /// accepts everything, a sheddable request is not refused either.
    #[tokio::test(start_paused = true)]
    async fn a_healthy_dependency_refuses_no_priority_even_at_the_smallest_k() {
        let throttle = Throttle::new("t", ThrottleConfig { k: 1.0, ..Default::default() }, Some(45)).unwrap();
        for _ in 0..3_000 {
            throttle.answered(true);
        }
        tokio::time::advance(TENTH).await;
        assert!((0..300).all(|_| throttle.admit_as(Priority::Sheddable)));
    }

    #[tokio::test(start_paused = true)]
    async fn refusals_match_the_probability_within_sound_bounds() {
        // Seeded draws against a known, drifting probability: refusals are
        // a sum of independent Bernoulli draws whose p_i the test reads
        // before each, so the count must lie within 4 sigma of sum(p_i).
        let throttle =
            Throttle::new("t", ThrottleConfig { k: 1.0, ..Default::default() }, Some(2026)).unwrap();
        for _ in 0..5_000 {
            assert!(throttle.admit());
            throttle.answered(true);
        }
        tokio::time::advance(TENTH).await;
        for _ in 0..5_000 {
            if throttle.admit() {
                throttle.answered(false);
            }
        }
        tokio::time::advance(TENTH).await;
        let (mut expected, mut variance, mut refused) = (0.0, 0.0, 0.0);
        for call in 0..10_000 {
            if call % 1_000 == 999 {
                tokio::time::advance(TENTH).await;
            }
            let p = throttle.refusal_probability();
            expected += p;
            variance += p * (1.0 - p);
            if throttle.admit() {
                throttle.answered(false);
            } else {
                refused += 1.0;
            }
        }
        assert!(expected > 1_000.0, "the test exercises real refusals: {expected}");
        let sigma = variance.sqrt();
        assert!(
            (refused - expected).abs() <= 4.0 * sigma,
            "refused {refused}, expected {expected} +- {sigma}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_simulators_core_decides_as_the_throttle_does() {
        // The same settings and seed, against a dependency that accepts one
        // answer in four: the same admissions, call for call, and refusals
        // among them. Both clocks move a tenth every 40 calls (the
        // throttle's is tokio's, paused; the core's is given).
        let config = ThrottleConfig::default();
        let mut core = ThrottleCore::new(config, 9);
        let throttle = Throttle::new("t", config, Some(9)).unwrap();
        let mut refused = 0;
        let mut now = Duration::ZERO;
        for call in 0..400 {
            if call % 40 == 39 {
                tokio::time::advance(TENTH).await;
                now += TENTH;
            }
            let (admitted, _) = core.admit(now);
            assert_eq!(throttle.admit(), admitted, "call {call}");
            if admitted {
                core.answered(now, call % 4 == 0);
                throttle.answered(call % 4 == 0);
            } else {
                refused += 1;
            }
        }
        assert!(refused > 100, "a dependency accepting a quarter is throttled: {refused} refused");
        let nanos = saturating_nanos(now + TENTH);
        assert_eq!(
            core.window.sums_at(nanos, tenth_of(config.window)),
            throttle.window.sums_at(nanos, throttle.tenth())
        );
    }

    #[test]
    fn a_dependency_that_accepts_what_it_is_sent_is_never_throttled() {
        let throttle = Throttle::new("t", ThrottleConfig::default(), Some(1)).unwrap();
        for _ in 0..10_000 {
            assert!(throttle.admit());
            throttle.answered(true);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn requests_in_flight_count_only_once_answered() {
        // Uncapped, so that the probability is the formula's own.
        let config = ThrottleConfig { max_refusal_percent: 100, ..Default::default() };
        let throttle = Throttle::new("t", config, Some(1)).unwrap();
        // A cold burst: 100 requests out before any answer.
        assert!((0..100).all(|_| throttle.admit()), "nothing answered yet: nothing to throttle on");
        for _ in 0..100 {
            throttle.answered(false);
        }
        assert_eq!(throttle.refusal_probability(), 0.0, "counted from the next tenth");
        tokio::time::advance(TENTH).await;
        assert!((throttle.refusal_probability() - 100.0 / 101.0).abs() < 1e-12, "then every answer counts");
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_max_refusal_percent_is_refused() {
        // A dependency that accepts nothing: the formula's probability
        // nears 1, the cap holds it at 0.8, and about one request in five
        // still goes out (within 4 sigma of 2,000 of 10,000, beside the
        // first tenth's 100, sent before any answer counted).
        let throttle = Throttle::new("t", ThrottleConfig::default(), Some(3)).unwrap();
        let mut sent = 0.0;
        for call in 0..10_100 {
            if call % 100 == 99 {
                tokio::time::advance(TENTH).await;
            }
            if throttle.admit() {
                throttle.answered(false);
                sent += 1.0;
            }
        }
        assert_eq!(throttle.refusal_probability(), 0.8);
        let sigma = (10_000.0 * 0.2 * 0.8_f64).sqrt();
        assert!((sent - 2_100.0_f64).abs() <= 4.0 * sigma + 10.0, "{sent} sent of 10,100");
    }

    #[test]
    fn bad_settings_name_their_field() {
        assert_eq!(ThrottleConfig { k: 0.5, ..Default::default() }.validate().unwrap_err().field, "k");
        assert_eq!(ThrottleConfig { k: f64::NAN, ..Default::default() }.validate().unwrap_err().field, "k");
        assert_eq!(
            ThrottleConfig { window: Duration::ZERO, ..Default::default() }.validate().unwrap_err().field,
            "window"
        );
        for bad in [0, 101] {
            let config = ThrottleConfig { max_refusal_percent: bad, ..Default::default() };
            assert_eq!(config.validate().unwrap_err().field, "max_refusal_percent");
        }
    }
}
