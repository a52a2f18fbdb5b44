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
//! soon spared almost everything, and recovers as soon as it accepts again.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::Instant;

use crate::config::ConfigError;

/// Settings of a [`Throttle`]; every field has a default.
///
/// ```
/// # use retry_runtime as resilient;
/// use std::time::Duration;
/// use resilient::ThrottleConfig;
/// let cfg = ThrottleConfig { k: 1.5, ..Default::default() };
/// assert_eq!(cfg.window, Duration::from_secs(120));
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThrottleConfig {
    /// How many requests per accept are sent before any is refused; the
    /// SRE book recommends 2. Lower throttles sooner. Default 2.0.
    pub k: f64,
    /// How far back requests and accepts count. Default 120 s.
    pub window: Duration,
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        ThrottleConfig { k: 2.0, window: Duration::from_secs(120) }
    }
}

impl ThrottleConfig {
    /// Checks the settings: `k` a finite number of at least 1 (below 1, a
    /// healthy dependency would be throttled), `window` in (0, 1 day].
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.k.is_finite() && self.k >= 1.0) {
            return Err(ConfigError::new("k", format!("must be a number of at least 1, got {}", self.k)));
        }
        if self.window.is_zero() || self.window > Duration::from_secs(86_400) {
            return Err(ConfigError::new("window", format!("must be in (0, 1 day], got {:?}", self.window)));
        }
        Ok(())
    }
}

/// Requests and accepts over a sliding window, as pure logic: the time is
/// passed in. Counted per tenth of the window, so memory stays constant.
#[derive(Debug, Clone, Default)]
pub struct ThrottleWindow {
    /// Per slice: its start, its requests, its accepts.
    slices: VecDeque<(Duration, u64, u64)>,
    /// The slices' requests and accepts summed, kept as they change, so
    /// that every admission reads two numbers instead of adding up ten.
    requests: u64,
    accepts: u64,
}

impl ThrottleWindow {
    /// The probability of refusing a request at `now`:
    /// `max(0, (requests - k * accepts) / (requests + 1))` over the window.
    ///
    /// ```
    /// # use retry_runtime as resilient;
    /// use std::time::Duration;
    /// use resilient::{ThrottleConfig, ThrottleWindow};
    /// let cfg = ThrottleConfig::default();
    /// let mut window = ThrottleWindow::default();
    /// let now = Duration::ZERO;
    /// for _ in 0..99 { window.request(&cfg, now); }
    /// assert_eq!(window.refusal_probability(&cfg, now), 99.0 / 100.0, "no accept at all");
    /// for _ in 0..50 { window.accept(&cfg, now); }
    /// assert_eq!(window.refusal_probability(&cfg, now), 0.0, "99 requests <= 2 * 50 accepts");
    /// ```
    pub fn refusal_probability(&mut self, config: &ThrottleConfig, now: Duration) -> f64 {
        self.forget_before(now, config.window);
        let requests = self.requests as f64;
        ((requests - config.k * self.accepts as f64) / (requests + 1.0)).max(0.0)
    }

    /// Counts a request at `now` (answered, or refused here).
    pub fn request(&mut self, config: &ThrottleConfig, now: Duration) {
        self.count(config, now, 1, 0);
    }

    /// Counts an accept at `now`: an answer that was not overload.
    pub fn accept(&mut self, config: &ThrottleConfig, now: Duration) {
        self.count(config, now, 0, 1);
    }

    /// Counts `requests` and `accepts` at `now`, in one slice lookup.
    /// (Wrapping, as their sums are: counts that large never happen, and
    /// wrapping keeps the sums equal to the slices' on the way back down.)
    fn count(&mut self, config: &ThrottleConfig, now: Duration, requests: u64, accepts: u64) {
        let slice = self.slice(config, now);
        slice.1 = slice.1.wrapping_add(requests);
        slice.2 = slice.2.wrapping_add(accepts);
        self.requests = self.requests.wrapping_add(requests);
        self.accepts = self.accepts.wrapping_add(accepts);
    }

    fn slice(&mut self, config: &ThrottleConfig, now: Duration) -> &mut (Duration, u64, u64) {
        self.forget_before(now, config.window);
        let width = (config.window / 10).max(Duration::from_nanos(1));
        if self.slices.back().is_none_or(|(start, _, _)| now >= start.saturating_add(width)) {
            self.slices.push_back((now, 0, 0));
        }
        // Just ensured: there is a last slice.
        self.slices.back_mut().unwrap_or_else(|| unreachable!())
    }

    fn forget_before(&mut self, now: Duration, window: Duration) {
        while let Some(&(start, requests, accepts)) = self.slices.front()
            && now.saturating_sub(start) >= window
        {
            self.slices.pop_front();
            self.requests = self.requests.wrapping_sub(requests);
            self.accepts = self.accepts.wrapping_sub(accepts);
        }
    }
}

/// A named client-side throttle shared by the calls to one dependency;
/// see the module docs.
///
/// ```
/// # use retry_runtime as resilient;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use resilient::{Throttle, ThrottleConfig};
/// let throttle = Throttle::new("db", ThrottleConfig::default(), Some(7)).unwrap();
/// // A dependency that refuses everything: the throttle soon refuses most calls itself.
/// let mut refused = 0;
/// for _ in 0..1000 {
///     if throttle.admit() {
///         throttle.answered(false); // sent, and refused by the dependency
///     } else {
///         refused += 1;
///     }
/// }
/// assert!(refused > 900, "{refused}");
/// # }
/// ```
#[derive(Debug)]
pub struct Throttle {
    name: String,
    state: Mutex<ThrottleCore>,
    origin: Instant,
}

/// A throttle as pure logic: settings, counts and seeded draws, the time
/// passed in. [`Throttle`] runs it on tokio's clock, the simulator on its own.
#[derive(Debug)]
pub(crate) struct ThrottleCore {
    config: ThrottleConfig,
    window: ThrottleWindow,
    draws: SmallRng,
}

impl ThrottleCore {
    pub(crate) fn new(config: ThrottleConfig, draws: SmallRng) -> Self {
        ThrottleCore { config, window: ThrottleWindow::default(), draws }
    }

    /// The refusal probability at `now`, and whether a request may go out:
    /// a draw against it, taken only when it is above zero. A refused
    /// request is counted at once; one that goes out, when answered.
    pub(crate) fn admit(&mut self, now: Duration) -> (bool, f64) {
        let p = self.window.refusal_probability(&self.config, now);
        if p == 0.0 {
            return (true, p);
        }
        let admitted = self.draws.random::<f64>() >= p;
        if !admitted {
            self.window.request(&self.config, now);
        }
        (admitted, p)
    }

    /// Counts a request that went out, once answered; `accepted` when the
    /// answer was not overload.
    pub(crate) fn answered(&mut self, now: Duration, accepted: bool) {
        self.window.count(&self.config, now, 1, u64::from(accepted));
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
            state: Mutex::new(ThrottleCore::new(config, draws)),
            origin: Instant::now(),
        })
    }

    /// The name this throttle was declared under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings it runs on.
    pub fn config(&self) -> ThrottleConfig {
        self.lock().config
    }

    /// Runs on `config` from now on, keeping its counts.
    pub fn reconfigure(&self, config: ThrottleConfig) -> Result<(), ConfigError> {
        config.validate()?;
        self.lock().config = config;
        Ok(())
    }

    /// The probability it refuses a request now.
    pub fn refusal_probability(&self) -> f64 {
        let now = self.now();
        let mut state = self.lock();
        let config = state.config;
        state.window.refusal_probability(&config, now)
    }

    /// Whether a request may go out now: refused with the refusal
    /// probability (a seeded draw, taken only when that probability is
    /// above zero), and then counted as a request at once. One that may go
    /// out is counted when [`answered`](Self::answered).
    pub fn admit(&self) -> bool {
        let now = self.now();
        let (admitted, p) = self.lock().admit(now);
        if p == 0.0 {
            return true;
        }
        crate::observe::throttle_probability(&self.name, p);
        if !admitted {
            crate::observe::throttle_refusal(&self.name, p);
        }
        admitted
    }

    /// Counts an admitted request once it is answered: `accepted` when the
    /// answer was not overload (a success, a conflict, a permanent error).
    pub fn answered(&self, accepted: bool) {
        let now = self.now();
        self.lock().answered(now, accepted);
    }

    fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.origin)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ThrottleCore> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn the_running_sums_are_always_the_slices_sums(
            steps in proptest::collection::vec((0u8..3, 0u64..400), 0..300),
        ) {
            let cfg = ThrottleConfig { k: 2.0, window: Duration::from_secs(1) };
            let mut window = ThrottleWindow::default();
            let mut now = Duration::ZERO;
            for (op, advance_ms) in steps {
                now += Duration::from_millis(advance_ms);
                match op {
                    0 => window.request(&cfg, now),
                    1 => window.accept(&cfg, now),
                    _ => {
                        window.refusal_probability(&cfg, now);
                    }
                }
                let sums = window.slices.iter().fold((0, 0), |(r, a), (_, requests, accepts)| (r + requests, a + accepts));
                proptest::prop_assert_eq!((window.requests, window.accepts), sums);
            }
        }
    }

    #[test]
    fn counts_leave_the_window_a_tenth_at_a_time_in_constant_memory() {
        let cfg = ThrottleConfig { k: 2.0, window: Duration::from_secs(10) };
        let mut w = ThrottleWindow::default();
        for _ in 0..100 {
            w.request(&cfg, Duration::ZERO);
        }
        for _ in 0..100 {
            w.request(&cfg, Duration::from_secs(5));
        }
        // A slice per tenth of the window, however many counts fall in it.
        assert_eq!(w.slices.len(), 2);
        assert_eq!(w.refusal_probability(&cfg, Duration::from_millis(9_900)), 200.0 / 201.0);
        // The first slice has left the window; the one from 5 s has not.
        assert_eq!(w.refusal_probability(&cfg, Duration::from_millis(10_500)), 100.0 / 101.0);
    }

    #[test]
    fn the_probability_follows_the_sre_formula() {
        let cfg = ThrottleConfig { k: 2.0, window: Duration::from_secs(60) };
        let mut w = ThrottleWindow::default();
        let t = Duration::from_secs(1);
        for _ in 0..300 {
            w.request(&cfg, t);
        }
        for _ in 0..100 {
            w.accept(&cfg, t);
        }
        // (300 - 2 * 100) / 301
        assert!((w.refusal_probability(&cfg, t) - 100.0 / 301.0).abs() < 1e-12);
        // A minute later it is all forgotten.
        assert_eq!(w.refusal_probability(&cfg, t + Duration::from_secs(60)), 0.0);
    }

    #[test]
    fn refusals_match_the_probability_within_sound_bounds() {
        // Seeded draws against a known, drifting probability: refusals are
        // a sum of independent Bernoulli draws whose p_i the test reads
        // before each, so the count must lie within 4 sigma of sum(p_i).
        let throttle =
            Throttle::new("t", ThrottleConfig { k: 1.0, ..Default::default() }, Some(2026)).unwrap();
        for _ in 0..5_000 {
            assert!(throttle.admit());
            throttle.answered(true);
        }
        for _ in 0..5_000 {
            if throttle.admit() {
                throttle.answered(false);
            }
        }
        let (mut expected, mut variance, mut refused) = (0.0, 0.0, 0.0);
        for _ in 0..10_000 {
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

    #[test]
    fn a_dependency_that_accepts_what_it_is_sent_is_never_throttled() {
        let throttle = Throttle::new("t", ThrottleConfig::default(), Some(1)).unwrap();
        for _ in 0..10_000 {
            assert!(throttle.admit());
            throttle.answered(true);
        }
    }

    #[test]
    fn requests_in_flight_count_only_once_answered() {
        let throttle = Throttle::new("t", ThrottleConfig::default(), Some(1)).unwrap();
        // A cold burst: 100 requests out before any answer.
        assert!((0..100).all(|_| throttle.admit()), "nothing answered yet: nothing to throttle on");
        for _ in 0..100 {
            throttle.answered(false);
        }
        assert!((throttle.refusal_probability() - 100.0 / 101.0).abs() < 1e-12, "then every answer counts");
    }

    #[test]
    fn bad_settings_name_their_field() {
        assert_eq!(ThrottleConfig { k: 0.5, ..Default::default() }.validate().unwrap_err().field, "k");
        assert_eq!(ThrottleConfig { k: f64::NAN, ..Default::default() }.validate().unwrap_err().field, "k");
        assert_eq!(
            ThrottleConfig { window: Duration::ZERO, ..Default::default() }.validate().unwrap_err().field,
            "window"
        );
    }
}
