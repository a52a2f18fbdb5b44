//! The breaker's state machine as pure logic: state + event + now -> new state.
//!
//! No atomics, no clock, no locks: time is a `Duration` since an arbitrary
//! origin, passed in by the caller. That keeps every rule of the contract
//! testable in isolation and model-checkable against a reference, and lets
//! the simulator drive the very same logic on virtual time. What the closed
//! breaker counts lives in [`window`](super::window); this module decides
//! the transitions.

use std::time::Duration;

use super::admission::{Admission, Ticket, Transition};
use super::outcome::Outcome;
use super::phase::Phase;
use super::window::FailureWindow;
use super::{BreakerConfig, BreakerState};

/// The pure breaker state machine.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::{breaker::{BreakerConfig, BreakerCore, BreakerState, Admission, Outcome}};
///
/// let cfg = BreakerConfig { failure_threshold: 2, open_for: Duration::from_secs(5), ..Default::default() };
/// let mut core = BreakerCore::new(cfg);
/// let t = Duration::ZERO;
/// for _ in 0..2 {
///     let (Admission::Allowed(ticket), _) = core.admit(t) else { unreachable!() };
///     core.record(ticket, Outcome::Failure, t);
/// }
/// assert_eq!(core.state(t), BreakerState::Open);
/// assert_eq!(core.admit(t).0, Admission::Rejected);
/// assert_eq!(core.state(Duration::from_secs(5)), BreakerState::HalfOpen);
/// ```
#[derive(Debug, Clone)]
pub struct BreakerCore {
    config: BreakerConfig,
    phase: Phase,
    epoch: u64,
    /// What the closed breaker remembers (empty in other phases).
    window: FailureWindow,
    /// Probes failed in a row since it last opened from closed: the open
    /// period is `open_for` doubled that many times, up to `max_open_for`.
    failed_probes: u32,
}

impl BreakerCore {
    /// A closed breaker with no history.
    pub fn new(config: BreakerConfig) -> Self {
        BreakerCore {
            window: FailureWindow::new(&config),
            config,
            phase: Phase::Closed,
            epoch: 0,
            failed_probes: 0,
        }
    }

    /// The settings it runs on.
    pub fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// The open period in force: while open, the current one; while
    /// half-open, the one a failed probe would open it for; while closed,
    /// `open_for` (each failed probe in a row doubles it, up to
    /// `max_open_for`; a close starts again from `open_for`).
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::time::Duration;
    /// use stormproof::breaker::{Admission, BreakerConfig, BreakerCore, BreakerState, Outcome};
    /// let s = Duration::from_secs;
    /// let mut core = BreakerCore::new(BreakerConfig { failure_threshold: 1, ..Default::default() });
    /// let mut fail = |core: &mut BreakerCore, now| {
    ///     let (Admission::Allowed(ticket), _) = core.admit(now) else { panic!("refused at {now:?}") };
    ///     core.record(ticket, Outcome::Failure, now);
    /// };
    /// fail(&mut core, s(0));
    /// assert_eq!(core.open_period(s(0)), s(1));
    /// fail(&mut core, s(1)); // a failed probe: open for 2 s
    /// assert_eq!((core.open_period(s(2)), core.state(s(2))), (s(2), BreakerState::Open));
    /// assert_eq!(core.open_period(s(3)), s(4), "half-open: what a failed probe would bring");
    /// fail(&mut core, s(3)); // another: 4 s
    /// assert_eq!(core.state(s(7)), BreakerState::HalfOpen);
    /// ```
    pub fn open_period(&self, now: Duration) -> Duration {
        let failed_probes = match (&self.phase, self.state(now)) {
            (Phase::ForcedOpen | Phase::ForcedClosed, _) | (_, BreakerState::Closed) => 0,
            (_, BreakerState::Open) => self.failed_probes,
            (_, BreakerState::HalfOpen) => self.failed_probes.saturating_add(1),
        };
        self.config.open_period_after(failed_probes)
    }

    /// The current epoch; it grows by one on every transition.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The state at `now`: an open breaker whose `open_for` has elapsed is half-open.
    pub fn state(&self, now: Duration) -> BreakerState {
        match self.phase {
            Phase::Closed => BreakerState::Closed,
            Phase::Open { until, .. } if now < until => BreakerState::Open,
            Phase::Open { .. } | Phase::HalfOpen { .. } => BreakerState::HalfOpen,
            Phase::ForcedOpen => BreakerState::Open,
            Phase::ForcedClosed => BreakerState::Closed,
        }
    }

    /// The state as stored, without looking at the clock: an open breaker
    /// stays `Open` here until an admission moves it to half-open.
    pub fn stored_state(&self) -> BreakerState {
        match self.phase {
            Phase::Closed | Phase::ForcedClosed => BreakerState::Closed,
            Phase::Open { .. } | Phase::ForcedOpen => BreakerState::Open,
            Phase::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// Whether its attempts are timed while closed: it judges slow calls
    /// (`slow_call_rate_percent`) and is closed (not forced).
    pub(crate) fn times_closed_attempts(&self) -> bool {
        self.phase == Phase::Closed && self.config.judges_slow_calls()
    }

    /// The state it is held in by hand, if any (until [`force`](Self::force)`(None)`).
    pub fn forced(&self) -> Option<BreakerState> {
        match self.phase {
            Phase::ForcedOpen => Some(BreakerState::Open),
            Phase::ForcedClosed => Some(BreakerState::Closed),
            _ => None,
        }
    }

    /// Holds the breaker open (`Some(Open)`: every call refused) or closed
    /// (`Some(Closed)`: every call runs, nothing counted) until released
    /// with `None`, which closes it with a clean history. Half-open cannot
    /// be forced (`Some(HalfOpen)` changes nothing), and forcing the state
    /// it is already held in changes nothing either: no transition, as
    /// resilience4j publishes none for forced-open to forced-open (a
    /// repeated click is no change of state to report). Returns the
    /// transition.
    pub fn force(&mut self, state: Option<BreakerState>) -> Option<Transition> {
        let phase = match state {
            Some(BreakerState::Open) => Phase::ForcedOpen,
            Some(BreakerState::Closed) => Phase::ForcedClosed,
            Some(BreakerState::HalfOpen) => return None,
            None => Phase::Closed,
        };
        if state.is_some() && self.phase == phase {
            return None;
        }
        Some(self.enter(phase))
    }

    /// While open: the instant at which probes will be admitted.
    pub fn open_until(&self) -> Option<Duration> {
        match self.phase {
            Phase::Open { until, .. } => Some(until),
            _ => None,
        }
    }

    /// Half-open probes admitted and not yet reported: 0 in any other state.
    pub fn probes_in_flight(&self) -> u32 {
        match self.phase {
            Phase::HalfOpen { in_flight, .. } => in_flight,
            _ => 0,
        }
    }

    /// Whether recording a success of this epoch could change anything
    /// (see `FailureWindow::success_matters`); when it could not, the
    /// concurrent wrapper skips the lock.
    pub fn success_matters(&self) -> bool {
        match self.phase {
            Phase::Closed => self.window.success_matters(&self.config),
            Phase::ForcedClosed => false,
            _ => true,
        }
    }

    /// Hands over the successes the concurrent breaker counted apart (a
    /// window of calls, while closed): `total()` is their running count.
    pub(crate) fn catch_up_successes(&mut self, total: impl FnOnce() -> u64) {
        if self.phase == Phase::Closed && self.window.counts_successes_apart() {
            self.window.catch_up(total());
        }
    }

    /// Whether [`record`](Self::record)ing `outcome` reads `now`: when it
    /// does not, the wrapper does not read the clock.
    pub fn needs_time(&self, outcome: Outcome) -> bool {
        match self.phase {
            Phase::Closed => self.window.needs_time(outcome),
            // A probe's success counts toward closing, which is timeless.
            Phase::HalfOpen { .. } => matches!(outcome, Outcome::Failure | Outcome::Slow),
            Phase::Open { .. } | Phase::ForcedOpen | Phase::ForcedClosed => false,
        }
    }

    /// Asks to run one attempt at `now`.
    pub fn admit(&mut self, now: Duration) -> (Admission, Option<Transition>) {
        let mut transition = None;
        if let Phase::Open { until, probes, .. } = self.phase {
            if now < until {
                return (Admission::Rejected, None);
            }
            transition = Some(self.enter(Phase::HalfOpen { in_flight: 0, successes: 0, allowance: probes }));
        }
        let max_probes = self.config.half_open_max_calls;
        let admission = match &mut self.phase {
            Phase::Closed | Phase::ForcedClosed => {
                Admission::Allowed(Ticket { epoch: self.epoch, probe: false })
            }
            Phase::HalfOpen { in_flight, allowance, .. }
                if *in_flight < max_probes && *allowance != Some(0) =>
            {
                *in_flight += 1;
                // Spent on admission and never given back: an abandoned
                // probe may have reached the dependency all the same.
                if let Some(left) = allowance {
                    *left -= 1;
                }
                Admission::Allowed(Ticket { epoch: self.epoch, probe: true })
            }
            _ => Admission::Rejected,
        };
        (admission, transition)
    }

    /// Hands back a ticket whose attempt never reported an outcome (it was
    /// cancelled, or never ran): frees its probe slot and changes nothing else.
    pub fn abandon(&mut self, ticket: Ticket) {
        if ticket.epoch != self.epoch || !ticket.probe {
            return;
        }
        if let Phase::HalfOpen { in_flight, .. } = &mut self.phase {
            *in_flight = in_flight.saturating_sub(1);
        }
    }

    /// Hands back a ticket whose attempt was certainly never made (its
    /// admission went on to wait for something else): as [`abandon`], and
    /// a probe counted against the period's allowance is allowed again.
    ///
    /// [`abandon`]: Self::abandon
    pub fn give_back(&mut self, ticket: Ticket) {
        if ticket.epoch != self.epoch || !ticket.probe {
            return;
        }
        if let Phase::HalfOpen { in_flight, allowance, .. } = &mut self.phase {
            *in_flight = in_flight.saturating_sub(1);
            if let Some(left) = allowance {
                *left = left.saturating_add(1);
            }
        }
    }

    /// Records how an admitted attempt ended, at `now`; returns the transition it caused.
    pub fn record(&mut self, ticket: Ticket, outcome: Outcome, now: Duration) -> Option<Transition> {
        if ticket.epoch != self.epoch {
            return None;
        }
        match self.phase {
            Phase::Closed => self.window.record(&self.config, outcome, now).then(|| {
                self.failed_probes = 0;
                self.open(now)
            }),
            Phase::Open { .. } | Phase::ForcedOpen | Phase::ForcedClosed => None,
            Phase::HalfOpen { .. } => {
                self.abandon(ticket);
                match outcome {
                    Outcome::Neutral => None,
                    // A slow probe: the dependency answers, but not yet as
                    // it should (see `slow_call_rate_percent`).
                    Outcome::Failure | Outcome::Slow => {
                        self.failed_probes = self.failed_probes.saturating_add(1);
                        Some(self.open(now))
                    }
                    Outcome::Success => {
                        let Phase::HalfOpen { successes, .. } = &mut self.phase else {
                            return None;
                        };
                        *successes += 1;
                        (*successes >= self.config.success_threshold).then(|| self.enter(Phase::Closed))
                    }
                }
            }
        }
    }

    fn open(&mut self, now: Duration) -> Transition {
        let until = now.saturating_add(self.config.open_period_after(self.failed_probes));
        self.enter(Phase::Open { since: now, until, probes: None })
    }

    /// Opens the breaker at `now` until `until`, on someone else's word (a
    /// fleet that saw the dependency fail): an open breaker keeps its
    /// epoch and only moves its end, any other opens. When `until` comes,
    /// the half-open period admits at most `probes` probes in all (still no
    /// more than `half_open_max_calls` at once); `None` keeps the usual rule.
    /// A forced breaker ignores it. Returns the transition.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::time::Duration;
    /// use stormproof::{breaker::{Admission, BreakerConfig, BreakerCore, BreakerState}};
    /// let s = Duration::from_secs;
    /// let mut core = BreakerCore::new(BreakerConfig::default());
    /// core.trip(s(0), s(5), Some(1));
    /// assert_eq!(core.state(s(4)), BreakerState::Open);
    /// assert!(matches!(core.admit(s(5)).0, Admission::Allowed(_)));
    /// assert_eq!(core.admit(s(5)).0, Admission::Rejected, "one probe in all");
    /// ```
    pub fn trip(&mut self, now: Duration, until: Duration, probes: Option<u32>) -> Option<Transition> {
        match &mut self.phase {
            Phase::ForcedOpen | Phase::ForcedClosed => None,
            Phase::Open { until: end, probes: allowance, .. } => {
                (*end, *allowance) = (until, probes);
                None
            }
            Phase::Closed | Phase::HalfOpen { .. } => {
                Some(self.enter(Phase::Open { since: now, until, probes }))
            }
        }
    }

    /// Closes an open or half-open breaker with a clean history, on someone
    /// else's word (a fleet whose probes succeeded). A closed or forced
    /// breaker is left as it is. Returns the transition.
    pub fn close(&mut self) -> Option<Transition> {
        match self.phase {
            Phase::Open { .. } | Phase::HalfOpen { .. } => Some(self.enter(Phase::Closed)),
            Phase::Closed | Phase::ForcedOpen | Phase::ForcedClosed => None,
        }
    }

    fn enter(&mut self, phase: Phase) -> Transition {
        if phase == Phase::Closed {
            // Closing resets the growth: the next outage starts short.
            self.failed_probes = 0;
        }
        let from = self.stored_state();
        self.phase = phase;
        self.epoch += 1;
        self.window.clear();
        (from, self.stored_state())
    }

    /// Runs on `config` from now on, keeping the state: an open breaker
    /// stays open, its end recomputed from when it opened and the new
    /// `open_for`; a half-open one keeps its probes and successes; a closed
    /// one keeps its failure history, judged by the new threshold at the
    /// next event (see `FailureWindow::carry_over`). No transition happens
    /// here, so the epoch stays. `config` must be valid.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::time::Duration;
    /// use stormproof::{breaker::{Admission, BreakerConfig, BreakerCore, BreakerState, Outcome}};
    /// let s = Duration::from_secs;
    /// let mut core = BreakerCore::new(BreakerConfig { failure_threshold: 1, open_for: s(30), ..Default::default() });
    /// let (Admission::Allowed(ticket), _) = core.admit(s(0)) else { unreachable!() };
    /// core.record(ticket, Outcome::Failure, s(0));
    /// core.reconfigure(BreakerConfig { failure_threshold: 1, open_for: s(5), ..Default::default() });
    /// assert_eq!(core.state(s(4)), BreakerState::Open);
    /// assert_eq!(core.state(s(5)), BreakerState::HalfOpen, "5 s after it opened, not 30");
    /// ```
    pub fn reconfigure(&mut self, config: BreakerConfig) {
        self.window.carry_over(&self.config, &config);
        self.config = config;
        let period = self.config.open_period_after(self.failed_probes);
        if let Phase::Open { since, until, .. } = &mut self.phase {
            *until = since.saturating_add(period);
        }
    }

    /// Whether the stored phase is closed (no clock needed to say so).
    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: u64) -> Duration {
        Duration::from_secs(v)
    }

    fn cfg() -> BreakerConfig {
        BreakerConfig {
            failure_threshold: 3,
            window: s(10),
            open_for: s(30),
            success_threshold: 2,
            half_open_max_calls: 2,
            ..Default::default()
        }
    }

    fn run(core: &mut BreakerCore, outcome: Outcome, now: Duration) -> Option<Transition> {
        match core.admit(now).0 {
            Admission::Allowed(t) => core.record(t, outcome, now),
            Admission::Rejected => panic!("rejected at {now:?}"),
        }
    }

    #[test]
    fn opens_at_the_threshold_and_rejects_until_open_for_elapses() {
        let mut c = BreakerCore::new(cfg());
        assert_eq!(run(&mut c, Outcome::Failure, s(0)), None);
        assert_eq!(run(&mut c, Outcome::Failure, s(1)), None);
        assert_eq!(run(&mut c, Outcome::Failure, s(2)), Some((BreakerState::Closed, BreakerState::Open)));
        assert_eq!(c.admit(s(31)).0, Admission::Rejected);
        assert_eq!(c.state(s(31)), BreakerState::Open);
        assert_eq!(c.state(s(32)), BreakerState::HalfOpen);
        assert_eq!(c.open_until(), Some(s(32)));
    }

    #[test]
    fn a_success_clears_failures_and_the_window_forgets_old_ones() {
        let mut c = BreakerCore::new(cfg());
        run(&mut c, Outcome::Failure, s(0));
        run(&mut c, Outcome::Failure, s(0));
        run(&mut c, Outcome::Success, s(1));
        run(&mut c, Outcome::Failure, s(2));
        run(&mut c, Outcome::Failure, s(3));
        assert!(c.is_closed(), "the success cleared the first two");
        // The failure at t=2 is forgotten at t=12 exactly (now - t >= window).
        assert_eq!(run(&mut c, Outcome::Failure, s(12)), None);
        assert!(c.is_closed());
        assert!(run(&mut c, Outcome::Failure, s(12)).is_some(), "t=3, 12, 12 are three in the window");
    }

    #[test]
    fn permanent_errors_never_count() {
        let mut c = BreakerCore::new(cfg());
        for _ in 0..10 {
            run(&mut c, Outcome::Neutral, s(0));
        }
        assert!(c.is_closed());
        assert!(!c.success_matters(), "nothing to clear");
    }

    #[test]
    fn half_open_admits_a_limited_number_of_probes() {
        let mut c = BreakerCore::new(cfg());
        for _ in 0..3 {
            run(&mut c, Outcome::Failure, s(0));
        }
        let (first, transition) = c.admit(s(30));
        assert_eq!(transition, Some((BreakerState::Open, BreakerState::HalfOpen)));
        let Admission::Allowed(first) = first else { panic!() };
        let Admission::Allowed(second) = c.admit(s(30)).0 else { panic!() };
        assert!(first.probe && second.probe);
        assert_eq!(c.admit(s(30)).0, Admission::Rejected);
        c.abandon(second);
        let Admission::Allowed(_third) = c.admit(s(30)).0 else { panic!("the abandoned slot is free again") };
        // A permanent error frees its slot and changes nothing.
        assert_eq!(c.record(first, Outcome::Neutral, s(30)), None);
        assert_eq!(c.state(s(30)), BreakerState::HalfOpen);
        assert!(matches!(c.admit(s(30)).0, Admission::Allowed(_)));
    }

    #[test]
    fn a_failed_probe_reopens_and_restarts_open_for() {
        let mut c = BreakerCore::new(cfg());
        for _ in 0..3 {
            run(&mut c, Outcome::Failure, s(0));
        }
        assert_eq!(run(&mut c, Outcome::Failure, s(40)), Some((BreakerState::HalfOpen, BreakerState::Open)));
        assert_eq!(c.open_until(), Some(s(70)));
        assert_eq!(c.admit(s(69)).0, Admission::Rejected);
    }

    #[test]
    fn consecutive_probe_successes_close_it() {
        let mut c = BreakerCore::new(cfg());
        for _ in 0..3 {
            run(&mut c, Outcome::Failure, s(0));
        }
        assert_eq!(run(&mut c, Outcome::Success, s(30)), None);
        assert_eq!(
            run(&mut c, Outcome::Success, s(30)),
            Some((BreakerState::HalfOpen, BreakerState::Closed))
        );
        assert!(c.is_closed());
    }

    #[test]
    fn outcomes_from_an_earlier_epoch_are_ignored() {
        let mut c = BreakerCore::new(cfg());
        let Admission::Allowed(slow) = c.admit(s(0)).0 else { panic!() };
        for _ in 0..3 {
            run(&mut c, Outcome::Failure, s(0));
        }
        // The slow closed-era attempt succeeds while the breaker is open.
        assert_eq!(c.record(slow, Outcome::Success, s(1)), None);
        assert_eq!(c.state(s(1)), BreakerState::Open);
    }

    #[test]
    fn failure_rate_mode_memory_stays_constant_under_any_traffic() {
        let mut c = BreakerCore::new(BreakerConfig { failure_rate_percent: Some(90), ..cfg() });
        for i in 0..100_000u64 {
            let now = Duration::from_micros(i * 997);
            let outcome = if i % 3 == 0 { Outcome::Failure } else { Outcome::Success };
            run(&mut c, outcome, now);
            assert!(c.window.slices() <= crate::breaker::window::MAX_SLICES, "{} slices", c.window.slices());
        }
        assert!(c.is_closed(), "a third of the calls failed, below 90%");
    }

    // The count-based window (resilience4j's COUNT_BASED), its reference
    // behaviour: the rate over the last `window_calls` calls, judged once
    // `minimum_calls` are held, whatever time passes between them.
    fn last_calls(window_calls: u32, minimum_calls: u32) -> BreakerCore {
        let config = BreakerConfig {
            failure_rate_percent: Some(50),
            minimum_calls,
            window_calls: Some(window_calls),
            ..cfg()
        };
        BreakerCore::new(config)
    }

    #[test]
    fn a_window_of_calls_judges_the_last_calls_however_old() {
        let mut c = last_calls(4, 4);
        // Three failures an hour apart, then a success: 3 of 4, 75 %.
        let hour = Duration::from_secs(3_600);
        assert_eq!(run(&mut c, Outcome::Success, s(0)), None);
        for i in 1..=2u32 {
            assert_eq!(run(&mut c, Outcome::Failure, hour * i), None, "not yet minimum_calls");
        }
        assert_eq!(run(&mut c, Outcome::Failure, hour * 3), Some((BreakerState::Closed, BreakerState::Open)));
    }

    #[test]
    fn a_window_of_calls_forgets_the_oldest_as_new_calls_come() {
        let mut c = last_calls(4, 4);
        // S S S F holds 25 %; one more failure pushes out the first S: S S F F, 50 %.
        for outcome in [Outcome::Success, Outcome::Success, Outcome::Success, Outcome::Failure] {
            assert_eq!(run(&mut c, outcome, s(0)), None);
        }
        assert_eq!(run(&mut c, Outcome::Failure, s(0)), Some((BreakerState::Closed, BreakerState::Open)));
        let mut c = last_calls(4, 4);
        for outcome in [Outcome::Failure, Outcome::Success, Outcome::Success, Outcome::Success] {
            assert_eq!(run(&mut c, outcome, s(0)), None, "25 %");
        }
        // The failure rolls out: S S S S, then S S S F.
        assert_eq!(run(&mut c, Outcome::Success, s(0)), None);
        assert_eq!(run(&mut c, Outcome::Failure, s(0)), None, "1 of the last 4");
        assert!(c.is_closed());
    }

    #[test]
    fn a_window_of_calls_holds_a_bit_a_call_whatever_the_traffic() {
        let mut c = last_calls(10_000, 100);
        assert_eq!(c.window.call_words(), 10_000usize.div_ceil(64));
        for i in 0..1_000_000u64 {
            // A failure in three: a third, below 50 %.
            let outcome = if i % 3 == 0 { Outcome::Failure } else { Outcome::Success };
            run(&mut c, outcome, Duration::from_micros(i));
        }
        assert_eq!(c.window.call_words(), 157, "10,000 bits, however many calls");
        assert!(c.is_closed());
    }

    #[test]
    fn a_window_of_calls_starts_afresh_on_each_transition() {
        let mut c = last_calls(4, 2);
        run(&mut c, Outcome::Failure, s(0));
        assert_eq!(run(&mut c, Outcome::Failure, s(0)), Some((BreakerState::Closed, BreakerState::Open)));
        // Probes close it; the window is empty again: one failure of one
        // call does not reopen it (minimum_calls 2).
        run(&mut c, Outcome::Success, s(30));
        assert_eq!(
            run(&mut c, Outcome::Success, s(30)),
            Some((BreakerState::HalfOpen, BreakerState::Closed))
        );
        assert_eq!(run(&mut c, Outcome::Failure, s(31)), None);
    }

    #[test]
    fn failure_rate_mode_opens_on_the_share_of_failures() {
        let mut c =
            BreakerCore::new(BreakerConfig { failure_rate_percent: Some(50), minimum_calls: 4, ..cfg() });
        for outcome in [Outcome::Success, Outcome::Success, Outcome::Success] {
            assert_eq!(run(&mut c, outcome, s(0)), None, "below minimum_calls");
        }
        assert_eq!(run(&mut c, Outcome::Failure, s(0)), None, "1 of 4 failed");
        assert_eq!(run(&mut c, Outcome::Failure, s(0)), None, "2 of 5 failed");
        assert!(c.is_closed());
        assert!(run(&mut c, Outcome::Failure, s(1)).is_some(), "3 of 6 is 50%");
    }

    #[test]
    fn failure_rate_mode_opens_on_the_success_that_reaches_minimum_calls() {
        // resilience4j's rule: the window is judged after every outcome, so
        // the call that brings it to `minimum_calls` opens it, whatever its
        // outcome.
        let mut c =
            BreakerCore::new(BreakerConfig { failure_rate_percent: Some(50), minimum_calls: 5, ..cfg() });
        for _ in 0..3 {
            assert_eq!(run(&mut c, Outcome::Failure, s(0)), None, "below minimum_calls");
        }
        assert_eq!(run(&mut c, Outcome::Success, s(0)), None, "4 calls: below minimum_calls");
        assert_eq!(
            run(&mut c, Outcome::Success, s(0)),
            Some((BreakerState::Closed, BreakerState::Open)),
            "5 calls, 3 failed: 60% >= 50%"
        );
    }

    #[test]
    fn a_forced_state_holds_until_reset() {
        let mut c = BreakerCore::new(cfg());
        assert_eq!(c.force(Some(BreakerState::Open)), Some((BreakerState::Closed, BreakerState::Open)));
        assert_eq!(c.admit(s(1_000)).0, Admission::Rejected, "no open_for ends it");
        assert_eq!((c.state(s(1_000)), c.forced()), (BreakerState::Open, Some(BreakerState::Open)));
        assert_eq!(c.force(Some(BreakerState::Closed)), Some((BreakerState::Open, BreakerState::Closed)));
        for _ in 0..10 {
            assert_eq!(run(&mut c, Outcome::Failure, s(1_000)), None, "forced closed counts no failure");
        }
        assert_eq!(c.forced(), Some(BreakerState::Closed));
        assert_eq!(c.force(Some(BreakerState::HalfOpen)), None, "half-open cannot be forced");
        assert_eq!(c.force(None), Some((BreakerState::Closed, BreakerState::Closed)));
        assert_eq!(c.forced(), None);
        run(&mut c, Outcome::Failure, s(1_000));
        run(&mut c, Outcome::Failure, s(1_000));
        assert!(
            run(&mut c, Outcome::Failure, s(1_000)).is_some(),
            "after reset it counts again, from a clean history"
        );
    }

    #[test]
    fn forcing_the_state_it_is_held_in_again_is_no_transition() {
        let mut c = BreakerCore::new(cfg());
        assert!(c.force(Some(BreakerState::Open)).is_some());
        let epoch = c.epoch();
        assert_eq!(c.force(Some(BreakerState::Open)), None, "held open already");
        assert_eq!((c.epoch(), c.forced()), (epoch, Some(BreakerState::Open)));
        assert_eq!(c.force(Some(BreakerState::Closed)), Some((BreakerState::Open, BreakerState::Closed)));
        let epoch = c.epoch();
        assert_eq!(c.force(Some(BreakerState::Closed)), None, "held closed already");
        assert_eq!((c.epoch(), c.forced()), (epoch, Some(BreakerState::Closed)));
        assert!(c.force(None).is_some(), "a reset ends the forcing");
        assert_eq!(
            c.force(None),
            Some((BreakerState::Closed, BreakerState::Closed)),
            "a reset of a closed breaker still clears its history, and says so"
        );
        // Forced open from an open breaker is a change: it is now held there.
        for _ in 0..3 {
            run(&mut c, Outcome::Failure, s(0));
        }
        assert_eq!(c.state(s(0)), BreakerState::Open);
        assert_eq!(c.force(Some(BreakerState::Open)), Some((BreakerState::Open, BreakerState::Open)));
    }

    #[test]
    fn a_trip_opens_until_the_given_end_then_admits_only_its_probes_in_all() {
        let mut c = BreakerCore::new(cfg());
        assert_eq!(c.trip(s(0), s(7), Some(1)), Some((BreakerState::Closed, BreakerState::Open)));
        assert_eq!(c.admit(s(6)).0, Admission::Rejected);
        let Admission::Allowed(probe) = c.admit(s(7)).0 else { panic!("the trip's end admits a probe") };
        assert_eq!(c.admit(s(7)).0, Admission::Rejected, "one probe in all, though two may run at once");
        c.abandon(probe);
        assert_eq!(c.admit(s(7)).0, Admission::Rejected, "an abandoned probe is not given back");
    }

    #[test]
    fn a_trip_of_an_open_breaker_moves_its_end_without_a_transition() {
        let mut c = BreakerCore::new(cfg());
        for _ in 0..3 {
            run(&mut c, Outcome::Failure, s(0));
        }
        let epoch = c.epoch();
        assert_eq!(c.trip(s(1), s(90), None), None);
        assert_eq!((c.epoch(), c.open_until()), (epoch, Some(s(90))));
        assert_eq!(c.trip(s(2), s(2), None), None, "and earlier too");
        assert_eq!(c.state(s(2)), BreakerState::HalfOpen);
        assert_eq!(c.admit(s(2)).0, Admission::Allowed(Ticket { epoch: epoch + 1, probe: true }));
        assert!(matches!(c.admit(s(2)).0, Admission::Allowed(_)), "no allowance: the usual two at once");
    }

    #[test]
    fn close_ends_an_open_or_half_open_breaker_but_no_forced_one() {
        let mut c = BreakerCore::new(cfg());
        assert_eq!(c.close(), None, "closed already");
        c.trip(s(0), s(10), Some(1));
        assert_eq!(c.close(), Some((BreakerState::Open, BreakerState::Closed)));
        c.trip(s(0), s(0), Some(1));
        let _ = c.admit(s(0));
        assert_eq!(c.close(), Some((BreakerState::HalfOpen, BreakerState::Closed)));
        c.force(Some(BreakerState::Open));
        assert_eq!((c.trip(s(0), s(1), None), c.close()), (None, None));
        assert_eq!(c.forced(), Some(BreakerState::Open), "a forced state outranks any verdict");
    }
    #[test]
    fn a_window_of_calls_resized_keeps_its_most_recent_outcomes() {
        let resized = |c: &mut BreakerCore, window_calls: u32| {
            c.reconfigure(BreakerConfig { window_calls: Some(window_calls), ..*c.config() });
        };
        // Grown from 4 to 8: F F S kept, and one more success makes 2 of 4, 50 %.
        let mut c = last_calls(4, 4);
        for outcome in [Outcome::Failure, Outcome::Failure, Outcome::Success] {
            assert_eq!(run(&mut c, outcome, s(0)), None, "not yet minimum_calls");
        }
        resized(&mut c, 8);
        assert_eq!(run(&mut c, Outcome::Success, s(1)), Some((BreakerState::Closed, BreakerState::Open)));
        // Shrunk from 8 to 4: of S S S F F, the last four (S S F F) kept,
        // so one more success holds 2 of 4, 50 %, where all eight would
        // hold 2 of 6.
        let mut c = last_calls(8, 4);
        for outcome in
            [Outcome::Success, Outcome::Success, Outcome::Success, Outcome::Failure, Outcome::Failure]
        {
            assert_eq!(run(&mut c, outcome, s(0)), None, "2 of 5, 40 %");
        }
        resized(&mut c, 4);
        assert_eq!(run(&mut c, Outcome::Success, s(1)), Some((BreakerState::Closed, BreakerState::Open)));
        // Round the ring: S S S S F into a window of 4 (minimum 2) turns it
        // once, and holds S S S F; shrunk to 2, it keeps S F, the last two in
        // order (the ring's first two places hold F and S: kept, they would
        // make one more success S S, 0 %), and one more success holds F S, 50 %.
        let mut c = last_calls(4, 2);
        for outcome in
            [Outcome::Success, Outcome::Success, Outcome::Success, Outcome::Success, Outcome::Failure]
        {
            assert_eq!(run(&mut c, outcome, s(0)), None, "at most 1 of 4");
        }
        resized(&mut c, 2);
        assert_eq!(
            run(&mut c, Outcome::Success, s(1)),
            Some((BreakerState::Closed, BreakerState::Open)),
            "F S: 50 %"
        );
    }
}
