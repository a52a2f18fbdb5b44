//! The retry settings of an operation, and the settings one call runs on.

use std::time::Duration;

use crate::backoff::Backoff;
use crate::priority::Priority;

/// The retry settings of an operation: what the attribute's arguments (or
/// the builder) set, and what a configuration file's `[operations."..."]`
/// table may override.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The backoff curve.
    pub backoff: Backoff,
    /// The per-attempt timeout, if any.
    pub attempt_timeout: Option<Duration>,
    /// The overall deadline of a call, if any.
    pub deadline: Option<Duration>,
    /// Hedged attempts, if any.
    pub hedge: Option<Hedge>,
    /// Whether retries (and hedges) are paid from the operation's retry
    /// budget: `true` for an operation with a budget (its own by default,
    /// or a named one), `false` for one compiled with `budget = "none"` or
    /// whose `[operations."..."]` table says `budget = "none"`.
    pub budget: bool,
    /// Whether attempts ask the operation's circuit breaker, and it hears
    /// how they end: `true` for an operation with a breaker (its own by
    /// default, or a named one), `false` for one compiled with `breaker =
    /// "none"` or whose `[operations."..."]` table says `breaker = "none"`.
    pub breaker: bool,
    /// How much the operation's calls matter when a guard is saturated
    /// (see [`Priority`]).
    pub priority: Priority,
}

impl Settings {
    /// Whether a call on these settings can make its first attempt plain
    /// (see `execution::plain`): nothing to arm as the call starts, no
    /// deadline, attempt timeout or hedging. The rest (`max_attempts`, the
    /// backoff) matters only once an attempt has failed.
    pub(crate) const fn allow_plain(&self) -> bool {
        self.deadline.is_none() && self.attempt_timeout.is_none() && self.hedge.is_none()
    }

    /// Whether a policy's first attempt is timed (see `call::timed`): it
    /// races an attempt timeout or a deadline, or an `on_stop` hook reports
    /// the time the call took, from its start.
    pub(crate) const fn times_first_attempt(&self, on_stop: bool) -> bool {
        self.attempt_timeout.is_some() || self.deadline.is_some() || on_stop
    }

    /// Whether a policy's call may start plain and untimed as far as these
    /// settings and the rest of the policy say: none of the above, no
    /// `on_stop` hook (which reads the start of a timed first attempt), no
    /// guards per key (plain only with its key's), and not a sheddable call
    /// with a `throttle` (whose refusal is drawn for with its own multiple
    /// of `k`: see `Throttle::admitted_quietly`).
    pub(crate) const fn allow_plain_with(&self, on_stop: bool, per_key: bool, throttle: bool) -> bool {
        self.allow_plain() && !on_stop && !per_key && !self.sheds_through(throttle)
    }

    /// Whether a call on these settings is sheddable and judged by a
    /// `throttle` (if it names one): then never plain, as the throttle's
    /// quiet admission judges a default call (see `allow_plain_with`).
    pub(crate) const fn sheds_through(&self, throttle: bool) -> bool {
        throttle && matches!(self.priority, Priority::Sheddable)
    }

    /// These settings (one function's, as compiled) with a configuration
    /// file's override laid over them: each key `sources` says the file
    /// set is `file`'s, every other stays this function's. Two functions
    /// of one operation name may be compiled with different settings; a
    /// table of that name changes in each only the keys it gives.
    pub(crate) fn overlaid(self, file: &Settings, sources: &SettingSources) -> Settings {
        let pick = |source: &SettingSource| matches!(source, SettingSource::File { .. });
        let mut settings = self;
        if pick(&sources.max_attempts) {
            settings.max_attempts = file.max_attempts;
        }
        if pick(&sources.base) {
            settings.backoff.base = file.backoff.base;
        }
        if pick(&sources.cap) {
            settings.backoff.cap = file.backoff.cap;
        }
        if pick(&sources.factor) {
            settings.backoff.factor_milli = file.backoff.factor_milli;
        }
        if pick(&sources.jitter) {
            settings.backoff.jitter = file.backoff.jitter;
        }
        if pick(&sources.attempt_timeout) {
            settings.attempt_timeout = file.attempt_timeout;
        }
        if pick(&sources.deadline) {
            settings.deadline = file.deadline;
        }
        if pick(&sources.budget) {
            settings.budget = file.budget;
        }
        if pick(&sources.breaker) {
            settings.breaker = file.breaker;
        }
        if pick(&sources.priority) {
            settings.priority = file.priority;
        }
        settings
    }
}

/// Where one setting of an operation in effect comes from: what the
/// function was compiled with (or the builder set), or a configuration
/// file's `[operations."..."]` table, at this line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingSource {
    /// The attribute's argument, the builder's setting, or their default.
    Compiled,
    /// A configuration file's key.
    File {
        /// The file, as it was named when loaded.
        file: String,
        /// The key's line, from 1.
        line: usize,
    },
}

impl std::fmt::Display for SettingSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SettingSource::Compiled => f.write_str("compiled"),
            SettingSource::File { file, line } => write!(f, "{file}:{line}"),
        }
    }
}

/// Where each of an operation's settings in effect comes from (see
/// [`OperationInfo`](crate::OperationInfo)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingSources {
    /// Of `max_attempts`.
    pub max_attempts: SettingSource,
    /// Of the backoff's base (`base_ms`).
    pub base: SettingSource,
    /// Of the backoff's cap (`cap_ms`).
    pub cap: SettingSource,
    /// Of the backoff's growth (`factor`).
    pub factor: SettingSource,
    /// Of the jitter.
    pub jitter: SettingSource,
    /// Of the attempt timeout (`attempt_timeout_ms`).
    pub attempt_timeout: SettingSource,
    /// Of the deadline (`deadline_ms`).
    pub deadline: SettingSource,
    /// Of whether retries are paid from a budget (`budget`).
    pub budget: SettingSource,
    /// Of whether attempts ask a circuit breaker (`breaker`).
    pub breaker: SettingSource,
    /// Of the priority (`priority`).
    pub priority: SettingSource,
}

impl SettingSources {
    /// Every setting as compiled.
    pub const COMPILED: SettingSources = SettingSources {
        max_attempts: SettingSource::Compiled,
        base: SettingSource::Compiled,
        cap: SettingSource::Compiled,
        factor: SettingSource::Compiled,
        jitter: SettingSource::Compiled,
        attempt_timeout: SettingSource::Compiled,
        deadline: SettingSource::Compiled,
        budget: SettingSource::Compiled,
        breaker: SettingSource::Compiled,
        priority: SettingSource::Compiled,
    };
}

/// Hedging: when an attempt has not finished `after` it started, another
/// starts beside it (up to `max` more, one every `after`); the first
/// success wins and the others are dropped (cancelled).
///
/// A slow attempt is often slow for reasons of its own (a busy replica, a
/// lost packet, a garbage collection): a second one sent to another replica
/// usually answers first, which cuts the tail of the latency. Each hedge is
/// one more request to the dependency, so it is paid for like a retry: it
/// takes a budget token, and needs the breaker's, the throttle's, the rate
/// limit's and the bulkhead's leave without waiting for any of them. The
/// attempts of one round count as one attempt toward `max_attempts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hedge {
    /// How long an attempt runs alone before the next hedge starts.
    pub after: Duration,
    /// Hedges beyond the first attempt, 1..=3.
    pub max: u32,
}

/// The most hedges one attempt may have.
pub const MAX_HEDGES_LIMIT: u32 = 3;

impl Hedge {
    /// Checks the settings, naming the builder's field: `after` > 0 and
    /// `max` in 1..=3.
    pub fn validate(&self) -> Result<(), crate::config::ConfigError> {
        if self.after.is_zero() {
            return Err(crate::config::ConfigError::new("hedge_after", "must be greater than zero"));
        }
        if !(1..=MAX_HEDGES_LIMIT).contains(&self.max) {
            return Err(crate::config::ConfigError::new(
                "max_hedges",
                format!("must be in 1..={MAX_HEDGES_LIMIT}, got {}", self.max),
            ));
        }
        Ok(())
    }
}
