//! Circuit breakers: stop calling a dependency that is down.
//!
//! Backoff helps with faults that clear up in seconds. A dependency that is
//! down for minutes only turns retries into wasted work and queued callers.
//! A breaker counts transient failures in a rolling window; at
//! `failure_threshold` it *opens* and every call fails fast with
//! `CircuitOpen` for `open_for`. Then it is *half-open*: a few probe calls
//! go through; `success_threshold` consecutive successes close it, any
//! failure opens it again.
//!
//! The rules live in [`BreakerCore`], a pure state machine that takes the
//! time as an argument. [`CircuitBreaker`] wraps it for concurrent use: the
//! common case, a closed breaker with no failure on record, is one atomic
//! load to admit and one to record a success, with no lock and no clock
//! read. Everything else (failures, open and half-open breakers, the
//! failure-rate mode, which counts every call) takes a short mutex.

mod admission;
mod announce;
mod config;
mod control;
mod guard;
mod keyed;
mod outcome;
mod permit;
mod phase;
mod state;
mod window;
mod word;

#[cfg(test)]
mod tests;

use std::time::Duration;

// Under `--cfg stormproof_loom` the breaker's own synchronisation is
// model-checked by loom (tests/loom_breaker.rs). (`--cfg loom` itself would
// switch tokio into its internal loom mode, which only builds in tokio's own
// test suite.)
#[cfg(stormproof_loom)]
use loom::sync::{
    Mutex, MutexGuard,
    atomic::{AtomicBool, AtomicU64, Ordering},
};
#[cfg(not(stormproof_loom))]
use std::sync::{
    Mutex, MutexGuard,
    atomic::{AtomicBool, AtomicU64, Ordering},
};

use tokio::time::Instant;

pub use admission::{Admission, Ticket, Transition};
#[cfg(test)]
pub(crate) use config::DEFAULT as DEFAULT_CONFIG;
pub(crate) use config::Hooks;
pub use config::{
    BreakerConfig, BreakerState, BreakerTransition, MAX_WINDOW_CALLS, NO_BREAKER, TransitionHook,
};
pub use guard::BreakerTicket;
pub use keyed::KeyedBreakers;
pub use outcome::Outcome;
pub use permit::BreakerPermit;
pub use state::BreakerCore;

use crate::config::ConfigError;
use crate::counter::PerThreadCounter;

/// A thread-safe circuit breaker; see the module docs.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use stormproof::{breaker::{BreakerConfig, BreakerState, CircuitBreaker, Outcome}};
/// let breaker = CircuitBreaker::new("payment", BreakerConfig { failure_threshold: 1, ..Default::default() }).unwrap();
/// let permit = breaker.try_acquire().expect("closed breakers admit");
/// permit.record(Outcome::Failure);
/// assert_eq!(breaker.state(), BreakerState::Open);
/// assert!(breaker.try_acquire().is_none(), "open breakers fail fast");
/// # }
/// ```
pub struct CircuitBreaker {
    name: String,
    /// Its key, for a breaker of a [`KeyedBreakers`] set, and how many
    /// times it was reconfigured (see `keyed`).
    keyed: crate::keyed::KeyedPart,
    published: AtomicU64,
    core: Mutex<BreakerCore>,
    origin: Instant,
    hooks: Option<Hooks>,
    announcements: announce::Announcements,
    counts: Counts,
    /// Whether a fleet shares it (feature `redis`), which holds its
    /// settings to the fleet's rule (see `control::fleet_rule`). Read and
    /// written with the core's lock held, so that a join and a
    /// reconfiguration never miss each other.
    shared: AtomicBool,
    /// `slow_call_duration` in milliseconds, `u64::MAX` when it judges no
    /// slow calls: read when a timed attempt ends. Written under the lock,
    /// before the word that says its attempts are timed is published.
    slow_call_ms: std::sync::atomic::AtomicU64,
}

/// Monotonic totals, for samplers that turn them into rates.
#[derive(Debug, Default)]
struct Counts {
    /// Attempts that ran and reported an outcome: on the success path, one
    /// plain increment of this thread's slot.
    calls: PerThreadCounter,
    failures: std::sync::atomic::AtomicU64,
    /// Outcomes neutral to the breaker (permanent errors, conflicts).
    neutrals: std::sync::atomic::AtomicU64,
    /// Successes of attempts admitted in an earlier epoch, which change
    /// nothing.
    stale_successes: std::sync::atomic::AtomicU64,
    rejections: std::sync::atomic::AtomicU64,
    /// Probes' outcomes, counted off the success path (probes take the lock).
    probe_successes: std::sync::atomic::AtomicU64,
    probe_failures: std::sync::atomic::AtomicU64,
    /// Successes judged slow (off the success path: a timed breaker's
    /// successes are judged after its one compare fails).
    slow_calls: std::sync::atomic::AtomicU64,
    /// Times the core's lock was taken: the unit tests check that the
    /// paths meant to be lock-free are.
    #[cfg(test)]
    locks: std::sync::atomic::AtomicU64,
}

/// A breaker's totals since it was made: attempts that ran (and reported),
/// failures among them, and attempts it refused. Read twice and subtract
/// for rates.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{breaker::{BreakerConfig, CircuitBreaker, Outcome}};
/// let breaker = CircuitBreaker::new("db", BreakerConfig::default()).unwrap();
/// breaker.try_acquire().unwrap().record(Outcome::Success);
/// breaker.try_acquire().unwrap().record(Outcome::Failure);
/// let totals = breaker.totals();
/// assert_eq!((totals.calls, totals.failures, totals.rejections), (2, 1, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BreakerTotals {
    /// Attempts that ran and reported an outcome.
    pub calls: u64,
    /// Of those, failures.
    pub failures: u64,
    /// Attempts refused (open, or no probe slot free).
    pub rejections: u64,
    /// Half-open probes that succeeded (also counted in `calls`), while
    /// their half-open period lasted: a probe that reports after it ended
    /// (the breaker reopened or closed meanwhile) is only a call.
    pub probe_successes: u64,
    /// Half-open probes that failed (also counted in `calls` and `failures`),
    /// as `probe_successes` counts them. A slow probe is counted here too.
    pub probe_failures: u64,
    /// Successes that took at least `slow_call_duration` (also counted in
    /// `calls`); 0 for a breaker that judges no slow calls.
    pub slow_calls: u64,
}

impl std::fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("name", &self.name)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl CircuitBreaker {
    /// A closed breaker, or an error naming the invalid setting.
    pub fn new(name: impl Into<String>, config: BreakerConfig) -> Result<Self, ConfigError> {
        let breaker = Self::unmeasured(name, config)?;
        breaker.measure_closed();
        Ok(breaker)
    }

    /// [`new`](Self::new), its state gauge left as it is: a registry makes
    /// breakers it may set aside, and sets the gauge of those it keeps
    /// (`registry::table::Kept`).
    pub(crate) fn unmeasured(name: impl Into<String>, config: BreakerConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let core = BreakerCore::new(config);
        let breaker = CircuitBreaker {
            name: name.into(),
            keyed: crate::keyed::KeyedPart::default(),
            published: AtomicU64::new(0),
            core: Mutex::new(core),
            origin: Instant::now(),
            hooks: None,
            announcements: announce::Announcements::default(),
            counts: Counts::default(),
            shared: AtomicBool::new(false),
            slow_call_ms: std::sync::atomic::AtomicU64::new(slow_call_ms(&config)),
        };
        breaker.publish(&breaker.lock());
        Ok(breaker)
    }

    /// Sets the state gauge of a breaker just made, closed: one that never
    /// moves reads closed, not missing.
    pub(crate) fn measure_closed(&self) {
        crate::observe::breaker_state(self.id(), "closed");
    }

    pub(crate) fn with_hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// The name this breaker was declared under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its key, for one of a breaker per key ([`KeyedBreakers`]).
    pub fn key(&self) -> Option<&str> {
        self.keyed.key()
    }

    /// This breaker as its traces and metrics name it.
    pub(crate) fn id(&self) -> crate::observe::BreakerId<'_> {
        crate::observe::BreakerId { name: &self.name, key: self.keyed.key().zip(self.keyed.label()) }
    }

    /// The breaker as one of a set per key: `key`, labelled `label` in metrics.
    pub(crate) fn with_key(mut self, key: &str, label: std::sync::Arc<str>) -> Self {
        self.keyed = crate::keyed::KeyedPart::of(key, label);
        self
    }

    /// Times it was reconfigured (see `keyed`).
    pub(crate) fn generation(&self) -> u64 {
        self.keyed.generation()
    }

    /// The settings it runs on.
    pub fn config(&self) -> BreakerConfig {
        *self.lock().config()
    }

    /// Totals since it was made (see [`BreakerTotals`]).
    pub fn totals(&self) -> BreakerTotals {
        BreakerTotals {
            calls: self.counts.calls.total(),
            failures: self.counts.failures.load(Ordering::Relaxed),
            rejections: self.counts.rejections.load(Ordering::Relaxed),
            probe_successes: self.counts.probe_successes.load(Ordering::Relaxed),
            probe_failures: self.counts.probe_failures.load(Ordering::Relaxed),
            slow_calls: self.counts.slow_calls.load(Ordering::Relaxed),
        }
    }

    /// Runs on `config` from now on, keeping the breaker's state (see
    /// [`BreakerCore::reconfigure`]); an invalid `config` is an error
    /// naming the field, and changes nothing. So is one that breaks the
    /// rule of a fleet that shares the breaker (feature `redis`: at most
    /// `half_open_max_calls` probes per round for the whole fleet, so a
    /// `success_threshold` above it could never close it).
    pub fn reconfigure(&self, config: BreakerConfig) -> Result<(), ConfigError> {
        config.validate()?;
        let mut core = self.lock();
        if self.shared.load(Ordering::Relaxed) {
            control::fleet_rule(core.config(), &config)?;
        }
        self.slow_call_ms.store(slow_call_ms(&config), Ordering::Relaxed);
        core.reconfigure(config);
        self.publish(&core);
        self.keyed.reconfigured();
        Ok(())
    }

    /// The state now; an open breaker whose `open_for` has elapsed reads half-open.
    pub fn state(&self) -> BreakerState {
        let word = self.published.load(Ordering::Acquire);
        match word::state(word) {
            BreakerState::Closed => BreakerState::Closed,
            _ => self.lock().state(self.now()),
        }
    }

    /// While open: how long until probes are admitted. `None` when not open.
    #[inline]
    pub fn remaining_open(&self) -> Option<Duration> {
        // Only a stored open state has an end; closed and half-open breakers
        // answer from the published word, with no lock and no clock read.
        // (The word is published under the lock, after every change.)
        if word::state(self.published.load(Ordering::Acquire)) != BreakerState::Open {
            return None;
        }
        self.remaining_open_locked()
    }

    #[inline(never)]
    fn remaining_open_locked(&self) -> Option<Duration> {
        let now = self.now();
        self.lock().open_until().map(|until| until.saturating_sub(now)).filter(|d| !d.is_zero())
    }

    /// The open period in force: while open, the current one; while
    /// half-open, the one a failed probe would open it for; while closed,
    /// `open_for` (see [`BreakerCore::open_period`]). The dashboard shows it.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use std::time::Duration;
    /// use stormproof::breaker::{BreakerConfig, CircuitBreaker, Outcome};
    /// let breaker = CircuitBreaker::new("db", BreakerConfig { failure_threshold: 1, ..Default::default() }).unwrap();
    /// assert_eq!(breaker.open_period(), Duration::from_secs(1));
    /// breaker.try_acquire().unwrap().record(Outcome::Failure);
    /// tokio::time::advance(Duration::from_secs(1)).await;
    /// breaker.try_acquire().unwrap().record(Outcome::Failure); // a failed probe
    /// assert_eq!((breaker.open_period(), breaker.remaining_open()), (Duration::from_secs(2), Some(Duration::from_secs(2))));
    /// # }
    /// ```
    pub fn open_period(&self) -> Duration {
        let now = self.now();
        self.lock().open_period(now)
    }

    /// Half-open probes running now; 0 unless half-open. (Read for
    /// dashboards: a closed breaker answers from its published word.)
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use std::time::Duration;
    /// use stormproof::{breaker::{BreakerConfig, CircuitBreaker, Outcome}};
    /// let config = BreakerConfig { failure_threshold: 1, open_for: Duration::from_secs(1), ..Default::default() };
    /// let breaker = CircuitBreaker::new("db", config).unwrap();
    /// breaker.try_acquire().unwrap().record(Outcome::Failure);
    /// tokio::time::advance(Duration::from_secs(1)).await;
    /// let probe = breaker.try_acquire().unwrap();
    /// assert_eq!(breaker.probes_in_flight(), 1);
    /// probe.record(Outcome::Success);
    /// assert_eq!(breaker.probes_in_flight(), 0);
    /// # }
    /// ```
    pub fn probes_in_flight(&self) -> u32 {
        if word::state(self.published.load(Ordering::Acquire)) == BreakerState::Closed {
            return 0;
        }
        self.lock().probes_in_flight()
    }

    /// Asks to run one attempt. `None` means fail fast: the breaker is open,
    /// or half-open with every probe slot taken.
    ///
    /// A closed breaker admits with one atomic load (inlined into the
    /// caller); any other state takes the lock.
    #[inline]
    pub fn try_acquire(&self) -> Option<BreakerPermit<'_>> {
        match self.try_acquire_closed() {
            Some(closed) => Some(self.permit(closed)),
            None => self.try_acquire_locked(),
        }
    }

    /// An attempt's admission if the breaker is closed, from the published
    /// word alone; `None` when it is not, having counted and changed
    /// nothing, so that the caller may still ask
    /// [`try_acquire`](Self::try_acquire) (the plain first attempt's
    /// admission: a breaker that is not closed sends the call down the
    /// general path, which asks it).
    ///
    /// A breaker that times its attempts (it judges slow calls) answers
    /// `None` too: its attempts are admitted by [`admit_other`](Self::admit_other),
    /// which notes that they are to be timed.
    #[inline]
    pub(crate) fn try_acquire_closed(&self) -> Option<ClosedTicket> {
        let word = self.published.load(Ordering::Acquire);
        word::closed_untimed(word).then(|| ClosedTicket { epoch: word::epoch(word) })
    }

    /// The permit of an attempt this breaker admitted while closed, to
    /// record its outcome.
    #[inline]
    pub(crate) fn permit(&self, closed: ClosedTicket) -> BreakerPermit<'_> {
        BreakerPermit::new(self, Ticket { epoch: closed.epoch, probe: false })
    }

    #[inline(never)]
    fn try_acquire_locked(&self) -> Option<BreakerPermit<'_>> {
        self.admit_other().map(|(ticket, _)| BreakerPermit::new(self, ticket))
    }

    /// Admission when the published word did not say closed and untimed:
    /// a closed breaker that times its attempts admits from the word alone,
    /// any other state under the lock. The ticket, and whether its attempt
    /// is to be timed (a breaker that judges slow calls times its probes
    /// too: a slow probe reopens it).
    #[inline(never)]
    fn admit_other(&self) -> Option<(Ticket, bool)> {
        let word = self.published.load(Ordering::Acquire);
        if word::closed_timed(word) {
            return Some((Ticket { epoch: word::epoch(word), probe: false }, true));
        }
        let ticket = self.admit_locked()?;
        Some((ticket, self.slow_call_ms.load(Ordering::Relaxed) != u64::MAX))
    }

    /// Admission when the breaker is not closed (or was not, as the word
    /// was read): under the lock, counting a refusal.
    #[inline(never)]
    fn admit_locked(&self) -> Option<Ticket> {
        let now = self.now();
        let mut core = self.lock();
        let (admission, transition) = core.admit(now);
        self.publish(&core);
        self.release(core, transition);
        match admission {
            Admission::Allowed(ticket) => Some(ticket),
            Admission::Rejected => {
                self.counts.rejections.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Whether recording `outcome` for a non-probe attempt can change
    /// nothing, decided from the published word alone: the common case,
    /// inlined into the caller.
    #[inline]
    fn nothing_to_record(&self, ticket: Ticket, outcome: Outcome) -> bool {
        match outcome {
            // A permanent error outside half-open is neutral.
            Outcome::Neutral => true,
            // Closed, quiet, untimed, and still in the ticket's epoch: one
            // compare. A stale success goes the slow way, to be counted as
            // stale; a timed one, to be judged slow or not.
            Outcome::Success => {
                word::closed_and_quiet_in(self.published.load(Ordering::Acquire), ticket.epoch)
            }
            Outcome::Failure | Outcome::Slow => false,
        }
    }

    /// Counts a success of an attempt admitted in an earlier epoch: the
    /// core ignores it, and so must a window of calls counting successes
    /// apart ([`successes`](Self::successes)).
    fn stale_success(&self) {
        self.counts.stale_successes.fetch_add(1, Ordering::Relaxed);
    }

    /// Records what [`nothing_to_record`](Self::nothing_to_record) could
    /// not rule out. A success of an attempt admitted in an earlier epoch
    /// would be ignored under the lock, so it is ignored before it (a
    /// breaker that just opened hears many such successes at once), and
    /// counted as stale. Out of line, so that the common case does not
    /// carry it.
    #[inline(never)]
    fn record_slow(&self, permit: BreakerTicket, outcome: Outcome) {
        let (ticket, outcome) = (permit.ticket(), self.judged(outcome, permit.started_ms()));
        if outcome == Outcome::Slow {
            self.counts.slow_calls.fetch_add(1, Ordering::Relaxed);
            crate::observe::slow_call(self.id());
        }
        let word = self.published.load(Ordering::Acquire);
        if outcome.succeeded() && !ticket.probe && word::epoch(word) != ticket.epoch {
            self.stale_success();
            return;
        }
        // A timed attempt's success that was not slow, while nothing else
        // needs it: no lock, as for an untimed one.
        if outcome == Outcome::Success && !ticket.probe && word::closed_timed_and_quiet_in(word, ticket.epoch)
        {
            return;
        }
        self.record_locked(ticket, outcome);
    }

    /// `outcome`, a success made slow if its attempt, started at `started`
    /// (see [`now_ms`](Self::now_ms)), took at least the breaker's
    /// `slow_call_duration` (an untimed attempt's is as it is).
    #[inline]
    fn judged(&self, outcome: Outcome, started: Option<u32>) -> Outcome {
        match (outcome, started) {
            (Outcome::Success, Some(started)) => {
                let threshold = self.slow_call_ms.load(Ordering::Relaxed);
                let took = u64::from(self.now_ms().wrapping_sub(started));
                if threshold != u64::MAX && took >= threshold { Outcome::Slow } else { outcome }
            }
            _ => outcome,
        }
    }

    /// Milliseconds since the breaker was made, wrapping: what a timed
    /// attempt's start is kept as (see `BreakerTicket`).
    #[inline]
    pub(super) fn now_ms(&self) -> u32 {
        self.ms_at(Instant::now())
    }

    /// [`now_ms`](Self::now_ms) at `at`.
    #[inline]
    pub(super) fn ms_at(&self, at: Instant) -> u32 {
        // Truncated on purpose: the count wraps every 49 days.
        at.saturating_duration_since(self.origin).as_millis() as u32
    }

    /// Records how the attempt `ticket` admitted ended (started at
    /// `started`, if it was timed): the success path's count, then, unless
    /// the published word shows there is nothing to change (one atomic
    /// load, inlined), the core's record.
    #[inline(always)]
    fn record_permit(&self, permit: BreakerTicket, outcome: Outcome) {
        self.count(outcome);
        if !permit.is_probe() && self.nothing_to_record(permit.ticket(), outcome) {
            return;
        }
        self.record_slow(permit, outcome);
    }

    /// [`record_permit`](Self::record_permit) for an untimed attempt's
    /// ticket (a [`BreakerPermit`]'s), its success path as it was before
    /// attempts were timed.
    #[inline(always)]
    fn record_ticket(&self, ticket: Ticket, outcome: Outcome) {
        self.count(outcome);
        if !ticket.probe && self.nothing_to_record(ticket, outcome) {
            return;
        }
        self.record_slow(BreakerTicket::untimed(ticket), outcome);
    }

    /// Frees the probe slot of an attempt dropped unfinished.
    #[inline(never)]
    fn abandon_probe(&self, ticket: Ticket) {
        self.lock().abandon(ticket);
    }

    /// Gives back the probe slot of an attempt never sent (see `BreakerPermit::give_back`).
    #[inline(never)]
    fn give_back_probe(&self, ticket: Ticket) {
        self.lock().give_back(ticket);
    }

    /// Counts an attempt that ran: the success path's one increment (of this thread's slot).
    #[inline]
    fn count(&self, outcome: Outcome) {
        self.counts.calls.increment();
        match outcome {
            Outcome::Success | Outcome::Slow => {}
            Outcome::Failure => _ = self.counts.failures.fetch_add(1, Ordering::Relaxed),
            Outcome::Neutral => _ = self.counts.neutrals.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Successes counted since the breaker was made (a window of calls
    /// reads them at each failure, rather than take the lock at each
    /// success).
    fn successes(&self) -> u64 {
        let not_successes = self.counts.failures.load(Ordering::Relaxed)
            + self.counts.neutrals.load(Ordering::Relaxed)
            + self.counts.stale_successes.load(Ordering::Relaxed);
        self.counts.calls.total().saturating_sub(not_successes)
    }

    fn record_locked(&self, ticket: Ticket, outcome: Outcome) {
        let mut core = self.lock();
        // The clock is read only when the core will use it (not for a
        // success that just clears failures or counts a probe).
        let now = if core.needs_time(outcome) { self.now() } else { Duration::ZERO };
        // A probe of a half-open period that has since ended (the breaker
        // reopened or closed, on its own or on a fleet's word) changes
        // nothing and is no probe of the period now: a fleet counts these
        // totals toward closing the round its replica last saw.
        let current = ticket.epoch == core.epoch();
        if !current && outcome.succeeded() {
            self.stale_success();
        }
        // A window of calls hears of the successes counted apart before
        // this outcome (which `count` has counted already, if a success of
        // this epoch: a stale one was counted as stale just above).
        let this_success = u64::from(current && outcome.succeeded());
        core.catch_up_successes(|| self.successes().saturating_sub(this_success));
        let transition = core.record(ticket, outcome, now);
        if transition.is_some() {
            // Counted from here, if the transition closed it afresh.
            core.catch_up_successes(|| self.successes());
        }
        self.publish(&core);
        if ticket.probe && current {
            let probes = match outcome {
                Outcome::Success => Some(&self.counts.probe_successes),
                Outcome::Failure | Outcome::Slow => Some(&self.counts.probe_failures),
                Outcome::Neutral => None,
            };
            if let Some(count) = probes {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.release(core, transition);
    }

    /// Lets go of the lock under which `transition`, if any, was made, and
    /// then announces it, outside the lock (so a hook may read the breaker
    /// it hears about) and in the order transitions were made (see
    /// `announce`). Inline: most changes make no transition, and then cost
    /// one test.
    #[inline]
    fn release(&self, core: MutexGuard<'_, BreakerCore>, transition: Option<Transition>) {
        match transition {
            None => drop(core),
            Some(transition) => self.announce_after(core, transition),
        }
    }

    #[inline(never)]
    fn announce_after(&self, core: MutexGuard<'_, BreakerCore>, transition: Transition) {
        self.announcements.push(transition);
        drop(core);
        self.announcements.announce(|transition| self.announce(transition));
    }

    #[inline(never)]
    fn announce(&self, (from, to): Transition) {
        crate::observe::breaker_transition(self.id(), from.label(), to.label());
        if let Some(hooks) = &self.hooks {
            let event = BreakerTransition { breaker: &self.name, key: self.key(), from, to };
            let hooks = std::sync::Arc::clone(&hooks.read().unwrap_or_else(|e| e.into_inner()));
            for hook in hooks.iter() {
                // A hook's panic is its own bug, and it would surface in
                // whichever call is announcing, perhaps another thread's
                // that made no transition: it is logged, and the other
                // hooks and transitions are still announced.
                let heard = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&event)));
                if let Err(panic) = heard {
                    crate::observe::transition_hook_panicked(self.id(), from.label(), to.label(), &*panic);
                }
            }
        }
    }

    fn publish(&self, core: &BreakerCore) {
        let word = word::published(
            core.epoch(),
            core.stored_state(),
            core.success_matters(),
            core.times_closed_attempts(),
        );
        self.published.store(word, Ordering::Release);
    }

    fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.origin)
    }

    /// The lock is never held across an await or a user callback that could
    /// panic into it, but a poisoned lock still holds a consistent core.
    fn lock(&self) -> MutexGuard<'_, BreakerCore> {
        #[cfg(test)]
        self.counts.locks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `slow_call_duration` in whole milliseconds (saturating), `u64::MAX`
/// when the breaker judges no slow calls.
fn slow_call_ms(config: &BreakerConfig) -> u64 {
    match config.slow_call_duration {
        Some(duration) if config.judges_slow_calls() => {
            u64::try_from(duration.as_millis()).unwrap_or(u64::MAX - 1)
        }
        _ => u64::MAX,
    }
}

/// A closed breaker's admission of one attempt, held as its epoch alone
/// ([`CircuitBreaker::try_acquire_closed`]): `Copy` and without a
/// destructor, because a permit of the closed era frees nothing when it is
/// dropped (it holds no probe slot), so an attempt can carry it at no cost
/// and make it a [`BreakerPermit`] ([`CircuitBreaker::permit`]) only to
/// record its outcome.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClosedTicket {
    epoch: u64,
}
