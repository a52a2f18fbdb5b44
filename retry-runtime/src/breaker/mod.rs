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

mod state;

use std::sync::Arc;
use std::time::Duration;

// Under `--cfg resilient_loom` the breaker's own synchronisation is
// model-checked by loom (tests/loom_breaker.rs). (`--cfg loom` itself would
// switch tokio into its internal loom mode, which only builds in tokio's own
// test suite.)
#[cfg(resilient_loom)]
use loom::sync::{
    Mutex, MutexGuard,
    atomic::{AtomicU64, Ordering},
};
#[cfg(not(resilient_loom))]
use std::sync::{
    Mutex, MutexGuard,
    atomic::{AtomicU64, Ordering},
};

use tokio::time::Instant;

pub use state::{Admission, BreakerCore, Outcome, Ticket, Transition};

use crate::config::{ConfigError, positive};

/// Settings of a [`CircuitBreaker`]; every field has a default.
///
/// ```
/// # use retry_runtime as resilient;
/// use std::time::Duration;
/// use resilient::BreakerConfig;
/// let cfg = BreakerConfig { failure_threshold: 3, open_for: Duration::from_secs(10), ..Default::default() };
/// assert_eq!(cfg.window, Duration::from_secs(10));
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Transient failures inside `window` that open the breaker. Default 5.
    pub failure_threshold: u32,
    /// How long a failure is remembered (`now - t >= window` forgets it). Default 10 s.
    pub window: Duration,
    /// How long the breaker stays open before probing. Default 30 s.
    pub open_for: Duration,
    /// Consecutive probe successes that close a half-open breaker. Default 2.
    pub success_threshold: u32,
    /// Probes allowed in flight at once while half-open. Default 2.
    pub half_open_max_calls: u32,
    /// Failure-rate mode: open when at least this percentage of the calls
    /// that ended inside `window` failed (and at least `minimum_calls` did),
    /// instead of counting `failure_threshold` failures. Default `None`.
    ///
    /// Calls are counted per tenth of the window, as resilience4j's
    /// time-based window counts per bucket: a slice is forgotten once the
    /// window has elapsed since it began, so memory stays constant at any
    /// traffic. (Count mode remembers each failure's exact time.)
    pub failure_rate_percent: Option<u8>,
    /// Calls inside the window before the failure rate is judged. Default 10.
    pub minimum_calls: u32,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failure_threshold: 5,
            window: Duration::from_secs(10),
            open_for: Duration::from_secs(30),
            success_threshold: 2,
            half_open_max_calls: 2,
            failure_rate_percent: None,
            minimum_calls: 10,
        }
    }
}

impl BreakerConfig {
    /// Checks the settings; a zero threshold or duration would make the breaker meaningless.
    ///
    /// ```
    /// # use retry_runtime as resilient;
    /// use resilient::BreakerConfig;
    /// let err = BreakerConfig { success_threshold: 0, ..Default::default() }.validate().unwrap_err();
    /// assert_eq!(err.field, "success_threshold");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        positive("failure_threshold", self.failure_threshold.into())?;
        positive("success_threshold", self.success_threshold.into())?;
        positive("half_open_max_calls", self.half_open_max_calls.into())?;
        if self.window.is_zero() {
            return Err(ConfigError::new("window", "must be greater than zero"));
        }
        if self.open_for.is_zero() {
            return Err(ConfigError::new("open_for", "must be greater than zero"));
        }
        if let Some(percent) = self.failure_rate_percent {
            if !(1..=100).contains(&percent) {
                return Err(ConfigError::new(
                    "failure_rate_percent",
                    format!("must be in 1..=100, got {percent}"),
                ));
            }
            positive("minimum_calls", self.minimum_calls.into())?;
        }
        Ok(())
    }
}

/// The three states of a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls run; failures are counted.
    Closed,
    /// Calls fail fast with `CircuitOpen`.
    Open,
    /// A limited number of probe calls run to test the dependency.
    HalfOpen,
}

impl BreakerState {
    /// Lower-case name for traces and metrics: `closed`, `open`, `half_open`.
    pub fn label(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }

    fn from_bits(bits: u64) -> BreakerState {
        match bits & STATE_MASK {
            0 => BreakerState::Closed,
            1 => BreakerState::Open,
            _ => BreakerState::HalfOpen,
        }
    }

    fn bits(self) -> u64 {
        match self {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::HalfOpen => 2,
        }
    }
}

impl std::fmt::Display for BreakerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// A state change of a named breaker, as given to
/// [`Registry::on_transition`](crate::Registry::on_transition) hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerTransition<'a> {
    /// The breaker's name.
    pub breaker: &'a str,
    /// The state it left.
    pub from: BreakerState,
    /// The state it entered.
    pub to: BreakerState,
}

/// A callback told of every transition of the breakers it is attached to.
pub type TransitionHook = Arc<dyn Fn(&BreakerTransition<'_>) + Send + Sync>;

pub(crate) type Hooks = Arc<std::sync::RwLock<Vec<TransitionHook>>>;

// The published word: bits 0-1 the stored state, bit 2 "closed with failures
// on record" (or "counts every call"), bits 3.. the epoch. Written only under
// the mutex; read without it by the fast paths.
const STATE_MASK: u64 = 0b11;
const SLOW_SUCCESS: u64 = 0b100;
const EPOCH_SHIFT: u32 = 3;

/// A thread-safe circuit breaker; see the module docs.
///
/// ```
/// # use retry_runtime as resilient;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use resilient::{BreakerConfig, BreakerState, CircuitBreaker, Outcome};
/// let breaker = CircuitBreaker::new("payment", BreakerConfig { failure_threshold: 1, ..Default::default() }).unwrap();
/// let permit = breaker.try_acquire().expect("closed breakers admit");
/// permit.record(Outcome::Failure);
/// assert_eq!(breaker.state(), BreakerState::Open);
/// assert!(breaker.try_acquire().is_none(), "open breakers fail fast");
/// # }
/// ```
pub struct CircuitBreaker {
    name: String,
    published: AtomicU64,
    core: Mutex<BreakerCore>,
    origin: Instant,
    /// Failure-rate mode: successes are timestamped too.
    counts_successes: bool,
    hooks: Option<Hooks>,
}

impl std::fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("name", &self.name)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

/// Permission to run one attempt through a [`CircuitBreaker`].
///
/// Report how the attempt ended with [`record`](Self::record). Dropping the
/// permit without recording (the attempt was cancelled, or never ran)
/// records nothing and frees any half-open probe slot it held.
#[must_use = "an unrecorded permit tells the breaker nothing"]
pub struct BreakerPermit<'a> {
    breaker: &'a CircuitBreaker,
    /// The ticket, packed so that a permit is two words (cheap to move and
    /// to keep across an await): see [`PackedTicket`].
    ticket: PackedTicket,
}

/// A [`Ticket`] in one word: `epoch << 2 | probe << 1 | held`. `held` is
/// cleared once the ticket is handed back. (Epochs stay far below 2^61: the
/// published word already keeps them in 61 bits.)
#[derive(Clone, Copy)]
struct PackedTicket(u64);

impl PackedTicket {
    const HELD: u64 = 0b01;
    const PROBE: u64 = 0b10;

    #[inline]
    fn new(ticket: Ticket) -> Self {
        PackedTicket(ticket.epoch << 2 | if ticket.probe { Self::PROBE } else { 0 } | Self::HELD)
    }

    #[inline]
    fn take(&mut self) -> Option<Ticket> {
        let word = std::mem::replace(&mut self.0, 0);
        (word & Self::HELD != 0).then_some(Ticket { epoch: word >> 2, probe: word & Self::PROBE != 0 })
    }

    #[inline]
    fn peek(self) -> Option<Ticket> {
        let mut copy = self;
        copy.take()
    }
}

impl std::fmt::Debug for BreakerPermit<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreakerPermit")
            .field("breaker", &self.breaker.name)
            .field("ticket", &self.ticket.peek())
            .finish()
    }
}

impl<'a> BreakerPermit<'a> {
    #[inline]
    fn new(breaker: &'a CircuitBreaker, ticket: Ticket) -> Self {
        BreakerPermit { breaker, ticket: PackedTicket::new(ticket) }
    }

    /// Whether this attempt is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.peek().is_some_and(|t| t.probe)
    }

    /// Records the attempt's outcome.
    #[inline]
    pub fn record(mut self, outcome: Outcome) {
        if let Some(ticket) = self.ticket.take() {
            // The common case, inlined: a success or a permanent error of a
            // closed-era attempt that leaves nothing to do (one atomic load).
            if !ticket.probe && self.breaker.nothing_to_record(ticket, outcome) {
                return;
            }
            self.breaker.record_locked(ticket, outcome);
        }
    }
}

impl Drop for BreakerPermit<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            if ticket.probe {
                self.breaker.abandon(ticket);
            }
        }
    }
}

impl CircuitBreaker {
    /// A closed breaker, or an error naming the invalid setting.
    pub fn new(name: impl Into<String>, config: BreakerConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let core = BreakerCore::new(config);
        let breaker = CircuitBreaker {
            name: name.into(),
            published: AtomicU64::new(0),
            core: Mutex::new(core),
            origin: Instant::now(),
            counts_successes: config.failure_rate_percent.is_some(),
            hooks: None,
        };
        breaker.publish(&breaker.lock());
        Ok(breaker)
    }

    pub(crate) fn with_hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// The name this breaker was declared under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings it runs on.
    pub fn config(&self) -> BreakerConfig {
        *self.lock().config()
    }

    /// The state now; an open breaker whose `open_for` has elapsed reads half-open.
    pub fn state(&self) -> BreakerState {
        let word = self.published.load(Ordering::Acquire);
        match BreakerState::from_bits(word) {
            BreakerState::Closed => BreakerState::Closed,
            _ => self.lock().state(self.now()),
        }
    }

    /// While open: how long until probes are admitted. `None` when not open.
    pub fn remaining_open(&self) -> Option<Duration> {
        // Only a stored open state has an end; closed and half-open breakers
        // answer from the published word, with no lock and no clock read.
        // (The word is published under the lock, after every change.)
        if BreakerState::from_bits(self.published.load(Ordering::Acquire)) != BreakerState::Open {
            return None;
        }
        let now = self.now();
        self.lock().open_until().map(|until| until.saturating_sub(now)).filter(|d| !d.is_zero())
    }

    /// Asks to run one attempt. `None` means fail fast: the breaker is open,
    /// or half-open with every probe slot taken.
    ///
    /// A closed breaker admits with one atomic load (inlined into the
    /// caller); any other state takes the lock.
    #[inline]
    pub fn try_acquire(&self) -> Option<BreakerPermit<'_>> {
        let word = self.published.load(Ordering::Acquire);
        if BreakerState::from_bits(word) == BreakerState::Closed {
            let ticket = Ticket { epoch: word >> EPOCH_SHIFT, probe: false };
            return Some(BreakerPermit::new(self, ticket));
        }
        self.try_acquire_locked()
    }

    #[inline(never)]
    fn try_acquire_locked(&self) -> Option<BreakerPermit<'_>> {
        let now = self.now();
        let mut core = self.lock();
        let (admission, transition) = core.admit(now);
        self.publish(&core);
        drop(core);
        self.notify(transition);
        match admission {
            Admission::Allowed(ticket) => Some(BreakerPermit::new(self, ticket)),
            Admission::Rejected => None,
        }
    }

    /// Whether recording `outcome` for a non-probe `ticket` can change
    /// nothing, decided from the published word alone.
    #[inline]
    fn nothing_to_record(&self, ticket: Ticket, outcome: Outcome) -> bool {
        match outcome {
            // A permanent error outside half-open is neutral.
            Outcome::Neutral => true,
            Outcome::Success => {
                let word = self.published.load(Ordering::Acquire);
                let fast = word & (STATE_MASK | SLOW_SUCCESS) == BreakerState::Closed.bits();
                // Either nothing to clear, or the attempt belongs to an
                // earlier epoch and would be ignored anyway.
                fast || word >> EPOCH_SHIFT != ticket.epoch
            }
            Outcome::Failure => false,
        }
    }

    #[inline(never)]
    fn abandon(&self, ticket: Ticket) {
        self.lock().abandon(ticket);
    }

    #[inline(never)]
    fn record_locked(&self, ticket: Ticket, outcome: Outcome) {
        // In count mode a success only clears failures (closed) or counts a
        // probe (half-open): the time is never used, so the clock is not read.
        let now =
            if outcome == Outcome::Success && !self.counts_successes { Duration::ZERO } else { self.now() };
        let mut core = self.lock();
        let transition = core.record(ticket, outcome, now);
        self.publish(&core);
        drop(core);
        self.notify(transition);
    }

    /// Runs outside the lock, so a hook may read the breaker it hears about.
    fn notify(&self, transition: Option<Transition>) {
        if let Some((from, to)) = transition {
            crate::observe::breaker_transition(&self.name, from, to);
            if let Some(hooks) = &self.hooks {
                let event = BreakerTransition { breaker: &self.name, from, to };
                for hook in hooks.read().unwrap_or_else(|e| e.into_inner()).iter() {
                    hook(&event);
                }
            }
        }
    }

    fn publish(&self, core: &BreakerCore) {
        let stored = if core.is_closed() {
            BreakerState::Closed
        } else if core.open_until().is_some() {
            BreakerState::Open
        } else {
            BreakerState::HalfOpen
        };
        let slow = core.has_failures() || core.counts_successes();
        let word = (core.epoch() << EPOCH_SHIFT) | if slow { SLOW_SUCCESS } else { 0 } | stored.bits();
        self.published.store(word, Ordering::Release);
    }

    fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.origin)
    }

    /// The lock is never held across an await or a user callback that could
    /// panic into it, but a poisoned lock still holds a consistent core.
    fn lock(&self) -> MutexGuard<'_, BreakerCore> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }
}
