//! How a herd's calls are split by priority (see `stormproof::Priority`):
//! the model of priority shedding, where a saturated bulkhead or throttle
//! refuses sheddable calls first and critical ones last, as the library's
//! do.

use stormproof_runtime::{ConfigError, Priority};

/// Of every hundred clients (client `i` by `i % 100`), the first
/// `critical` are critical and the last `sheddable` sheddable; the rest
/// have the default priority. Default: every client default. A herd
/// arriving in order over [`HerdConfig::arrivals`](super::HerdConfig::arrivals)
/// then mixes them evenly over time.
///
/// ```
/// # mod stormproof { pub use stormproof_runtime::*; pub use stormproof_sim as sim; }
/// use stormproof::{Priority, sim::PriorityMix};
/// let mix = PriorityMix { critical: 20, sheddable: 50 };
/// assert_eq!((mix.of(0), mix.of(20), mix.of(50), mix.of(119)), (Priority::Critical, Priority::Default, Priority::Sheddable, Priority::Critical));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PriorityMix {
    /// Critical clients per hundred.
    pub critical: u8,
    /// Sheddable clients per hundred; with `critical`, at most 100.
    pub sheddable: u8,
}

impl PriorityMix {
    /// Client `client`'s priority.
    pub fn of(&self, client: u32) -> Priority {
        let place = client % 100;
        if place < u32::from(self.critical) {
            Priority::Critical
        } else if place >= 100 - u32::from(self.sheddable).min(100) {
            Priority::Sheddable
        } else {
            Priority::Default
        }
    }

    /// Checks that the shares fit in a hundred.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let (critical, sheddable) = (u32::from(self.critical), u32::from(self.sheddable));
        if critical + sheddable > 100 {
            let problem =
                format!("critical ({critical}) and sheddable ({sheddable}) must add up to at most 100");
            return Err(ConfigError::new("priorities", problem));
        }
        Ok(())
    }
}

/// The clients of one priority, and those that got their success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PriorityTally {
    /// Clients of this priority.
    pub clients: u32,
    /// Those that succeeded.
    pub succeeded: u32,
}

impl PriorityTally {
    /// The share that succeeded (1 for none at all: nothing was lost).
    pub fn success(&self) -> f64 {
        if self.clients == 0 { 1.0 } else { f64::from(self.succeeded) / f64::from(self.clients) }
    }
}

/// A tally's place in [`HerdReport::by_priority`](super::HerdReport::by_priority):
/// sheddable, default, critical.
pub(super) fn index(priority: Priority) -> usize {
    match priority {
        Priority::Sheddable => 0,
        Priority::Default => 1,
        Priority::Critical => 2,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::herd::{HerdConfig, Strategy, simulate};

    /// Three times what the dependency serves: the overload model's 1,000
    /// requests a second (10 per 10 ms tick), 15,000 clients arriving
    /// evenly over 5 s, of every hundred 20 critical, 30 default and 50
    /// sheddable, under the adaptive strategy (its limit, its budget, and
    /// a bulkhead wait of at most a second, the library's default).
    fn three_times_overloaded(priorities: PriorityMix) -> HerdConfig {
        let mut config = HerdConfig {
            clients: 15_000,
            arrivals: Duration::from_secs(5),
            priorities,
            ..HerdConfig::overload()
        };
        config.bulkhead.max_wait = Some(Duration::from_secs(1));
        config
    }

    /// Critical calls keep succeeding (at least 99 in 100) while the
    /// sheddable ones absorb the refusals; without priorities, the same
    /// clients succeed as often as any other.
    #[test]
    fn under_three_times_overload_critical_calls_succeed_and_sheddable_ones_absorb_the_refusals() {
        let mix = PriorityMix { critical: 20, sheddable: 50 };
        let report = simulate(&three_times_overloaded(mix), Strategy::Adaptive).unwrap();
        let [sheddable, default, critical] = report.by_priority;
        assert_eq!((critical.clients, default.clients, sheddable.clients), (3_000, 4_500, 7_500));
        assert!(
            critical.success() >= 0.99,
            "critical: {:.3} of {} succeeded",
            critical.success(),
            critical.clients
        );
        assert!(sheddable.success() < default.success(), "sheddable {sheddable:?}, default {default:?}");
        let refused = |tally: PriorityTally| tally.clients - tally.succeeded;
        let all_refused = refused(sheddable) + refused(default) + refused(critical);
        assert!(
            refused(sheddable) * 2 > all_refused,
            "sheddable calls took {} of {all_refused} refusals",
            refused(sheddable)
        );

        let flat = simulate(&three_times_overloaded(PriorityMix::default()), Strategy::Adaptive).unwrap();
        let [_, everyone, _] = flat.by_priority;
        assert!(
            everyone.success() < 0.3,
            "without priorities, {:.3} of all calls succeeded",
            everyone.success()
        );
    }

    #[test]
    fn shares_over_a_hundred_are_an_error_naming_priorities() {
        let config =
            HerdConfig { priorities: PriorityMix { critical: 60, sheddable: 41 }, ..Default::default() };
        assert_eq!(config.validate().unwrap_err().field, "priorities");
        let mix = PriorityMix { critical: 60, sheddable: 40 };
        assert_eq!((0..100).filter(|&i| mix.of(i) == Priority::Default).count(), 0);
    }
}
