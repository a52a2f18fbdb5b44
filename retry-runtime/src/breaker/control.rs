//! Outside the breaker's own rules: a person holding it open or closed (the
//! admin routes), and a fleet's verdicts (feature `redis`). Each takes the
//! lock, applies the change to the core, publishes and reports the
//! transition as the breaker's own changes do.

use tokio::time::Instant;

use super::{BreakerConfig, BreakerState, CircuitBreaker};
use crate::config::ConfigError;

/// A fleet's rule for the settings of a breaker it shares: the whole
/// fleet sends at most `half_open_max_calls` probes per round, so a
/// `success_threshold` above it could never close the fleet's breaker.
/// The error names `half_open_max_calls` when `new` broke the rule by
/// moving only it from `old`, else `success_threshold`.
pub(super) fn fleet_rule(old: &BreakerConfig, new: &BreakerConfig) -> Result<(), ConfigError> {
    let (successes, probes) = (new.success_threshold, new.half_open_max_calls);
    if successes <= probes {
        return Ok(());
    }
    let shared = "while a fleet shares the breaker (the fleet's probes per round)";
    if successes == old.success_threshold && probes != old.half_open_max_calls {
        Err(ConfigError::new(
            "half_open_max_calls",
            format!(
                "must be at least success_threshold ({successes}) {shared}, got {probes}: raise it or lower success_threshold"
            ),
        ))
    } else {
        Err(ConfigError::new(
            "success_threshold",
            format!(
                "must be at most half_open_max_calls ({probes}) {shared}, got {successes}: lower it or raise half_open_max_calls"
            ),
        ))
    }
}

impl CircuitBreaker {
    /// The state it is held in by hand, if any.
    pub fn forced(&self) -> Option<BreakerState> {
        self.lock().forced()
    }

    /// Holds it open until [`reset`](Self::reset): every call fails fast.
    /// Held open already, it changes nothing and reports no transition (an
    /// open breaker not held is a transition: `open -> open`, forced).
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use stormproof::{breaker::{BreakerConfig, BreakerState, CircuitBreaker}};
    /// let breaker = CircuitBreaker::new("db", BreakerConfig::default()).unwrap();
    /// breaker.force_open();
    /// assert!(breaker.try_acquire().is_none());
    /// assert_eq!((breaker.state(), breaker.forced()), (BreakerState::Open, Some(BreakerState::Open)));
    /// breaker.reset();
    /// assert_eq!((breaker.state(), breaker.forced()), (BreakerState::Closed, None));
    /// # }
    /// ```
    pub fn force_open(&self) {
        self.force(Some(BreakerState::Open));
    }

    /// Holds it closed until [`reset`](Self::reset): every call runs and no
    /// failure counts. Held closed already, it changes nothing.
    pub fn force_closed(&self) {
        self.force(Some(BreakerState::Closed));
    }

    /// Ends a forced state, or any state: closed, with a clean history.
    pub fn reset(&self) {
        self.force(None);
    }

    /// Opens the breaker until `until`, or moves the end of its open
    /// period there, because someone who sees more than this process says
    /// the dependency is down (a fleet: see the `fleet` module, feature
    /// `redis`). When `until` comes, the half-open period admits at most
    /// `probes` probes in all (and never more than `half_open_max_calls` at
    /// once); `None` keeps the usual rule. A forced breaker ignores it.
    /// Transitions are reported as any other.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use stormproof::{breaker::{BreakerConfig, BreakerState, CircuitBreaker}};
    /// let breaker = CircuitBreaker::new("db", BreakerConfig::default()).unwrap();
    /// breaker.trip_until(Instant::now().checked_add(Duration::from_secs(3)).unwrap(), Some(1));
    /// assert_eq!(breaker.remaining_open(), Some(Duration::from_secs(3)));
    /// tokio::time::advance(Duration::from_secs(3)).await;
    /// let probe = breaker.try_acquire().expect("the one probe");
    /// assert!(breaker.try_acquire().is_none(), "no second probe in this period");
    /// # drop(probe);
    /// # }
    /// ```
    pub fn trip_until(&self, until: Instant, probes: Option<u32>) {
        let now = self.now();
        let until = until.saturating_duration_since(self.origin);
        let mut core = self.lock();
        let transition = core.trip(now, until, probes);
        self.publish(&core);
        self.release(core, transition);
    }

    /// Closes an open or half-open breaker with a clean history, because
    /// someone who sees more than this process says the dependency is back
    /// (a fleet whose probes succeeded). A closed or forced breaker is left
    /// as it is.
    pub fn close(&self) {
        let mut core = self.lock();
        let transition = core.close();
        self.publish(&core);
        self.release(core, transition);
    }

    /// Marks it shared by a fleet (feature `fleet`) if its settings keep
    /// the fleet's rule, `success_threshold <= half_open_max_calls` (the
    /// fleet's probes per round are `half_open_max_calls`, so more
    /// successes could never come), which every reconfiguration must keep
    /// from then on (a configuration file's too), until
    /// [`unshare`](Self::unshare); else the error names the setting, and it
    /// is not shared.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::breaker::{BreakerConfig, CircuitBreaker};
    /// let breaker = CircuitBreaker::new("payment", BreakerConfig::default()).unwrap();
    /// breaker.share().unwrap();
    /// let more = BreakerConfig { success_threshold: 3, ..breaker.config() };
    /// assert_eq!(breaker.reconfigure(more).unwrap_err().field, "success_threshold");
    /// breaker.unshare();
    /// breaker.reconfigure(more).unwrap();
    /// ```
    #[cfg(feature = "fleet")]
    pub fn share(&self) -> Result<(), ConfigError> {
        let core = self.lock();
        fleet_rule(core.config(), core.config())?;
        self.shared.store(true, super::Ordering::Relaxed);
        Ok(())
    }

    /// Whether [`reconfigure`](Self::reconfigure) would take `config` as
    /// far as the fleet's rule goes (see [`fleet_rule`]): always, unless a
    /// fleet shares it. What a configuration file checks before applying
    /// anything, its join waiting for the file (see `the fleet's join`).
    #[cfg(all(feature = "fleet", feature = "config"))]
    pub(crate) fn check_fleet_rule(&self, config: &BreakerConfig) -> Result<(), ConfigError> {
        let core = self.lock();
        if self.shared.load(super::Ordering::Relaxed) {
            fleet_rule(core.config(), config)?;
        }
        Ok(())
    }

    /// No fleet shares it any more (feature `fleet`): its settings are its
    /// own again.
    #[cfg(feature = "fleet")]
    pub fn unshare(&self) {
        let _core = self.lock();
        self.shared.store(false, super::Ordering::Relaxed);
    }

    /// The breaker a call asks in its breaker's place when its operation's
    /// override (a configuration file's `breaker = "none"`) turned the
    /// breaker off but its function was compiled with one (the compiled
    /// shape has a breaker slot): forced closed, so it admits every
    /// attempt and is never judged; in no registry, so nothing reports it.
    /// One for the process, made at first use.
    pub(crate) fn off() -> std::sync::Arc<CircuitBreaker> {
        static OFF: std::sync::OnceLock<std::sync::Arc<CircuitBreaker>> = std::sync::OnceLock::new();
        let off = OFF.get_or_init(|| {
            let breaker = CircuitBreaker::unmeasured(super::NO_BREAKER, BreakerConfig::default())
                .unwrap_or_else(|_| unreachable!("the default settings are valid"));
            {
                // Forced without announcing it: no one named this breaker.
                let mut core = breaker.lock();
                let _ = core.force(Some(BreakerState::Closed));
                breaker.publish(&core);
            }
            std::sync::Arc::new(breaker)
        });
        std::sync::Arc::clone(off)
    }

    fn force(&self, state: Option<BreakerState>) {
        let mut core = self.lock();
        let transition = core.force(state);
        self.publish(&core);
        self.release(core, transition);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use crate::breaker::{BreakerConfig, BreakerState, CircuitBreaker, Outcome};

    #[tokio::test(start_paused = true)]
    async fn a_probe_of_a_round_a_fleet_ended_is_not_counted_as_one() {
        // A fleet counts a replica's probe totals toward closing the round
        // the replica last saw: a probe of an earlier round that reports
        // late must not count, or a round could close with no probe of its own.
        let config = BreakerConfig { half_open_max_calls: 2, success_threshold: 1, ..Default::default() };
        let breaker = CircuitBreaker::new("db", config).unwrap();
        breaker.trip_until(Instant::now(), Some(2));
        let (ok, failed) = (breaker.try_acquire().unwrap(), breaker.try_acquire().unwrap());
        assert!(ok.is_probe() && failed.is_probe());
        // Another replica's probe failed: the fleet opened again.
        breaker.trip_until(Instant::now().checked_add(Duration::from_secs(30)).unwrap(), None);
        ok.record(Outcome::Success);
        failed.record(Outcome::Failure);
        assert_eq!(breaker.state(), BreakerState::Open);
        let totals = breaker.totals();
        assert_eq!((totals.calls, totals.failures), (2, 1), "they ran all the same");
        assert_eq!(
            (totals.probe_successes, totals.probe_failures),
            (0, 0),
            "probes of an ended round counted as probes"
        );
    }
}
