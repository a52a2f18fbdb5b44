//! How much a call matters when a dependency is saturated: priority-aware
//! shedding.
//!
//! Why: under overload something must be refused, and not every call is
//! worth the same. A checkout matters more than a recommendation; a
//! health check more than a prefetch. Google's request criticality, Envoy's
//! overload manager and failsafe-go's prioritizer let the callers say so,
//! so that the guards refuse the calls that can be lost first. Every
//! operation has a [`Priority`] (the attribute's `priority = "critical"`,
//! [`PolicyBuilder::priority`](crate::PolicyBuilder::priority), a
//! configuration file's `priority` key, or the `x-priority` header of a
//! request through the HTTP layers); a guard that is not saturated admits
//! every priority alike, and one that is refuses the sheddable first, then
//! the default, and the critical last:
//!
//! - a **bulkhead** (an adaptive limit too) gives a place that comes free
//!   to a waiting critical attempt before a waiting default one, and never
//!   lets a sheddable attempt wait: with no place free, it is refused at
//!   once;
//! - a **rate limit** never lets a sheddable attempt wait for a turn;
//! - an adaptive **throttle** judges each priority with its own multiplier
//!   of accepted requests (the SRE book's `K`): twice `K` for critical
//!   requests, `K` for default ones, half of `K` (at least 1) for
//!   sheddable ones, so that as the dependency rejects more, sheddable
//!   requests are refused locally first and critical ones last.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// How much a call matters when a guard is saturated (see the module
/// docs): the guards refuse [`Sheddable`](Priority::Sheddable) calls
/// first, then [`Default`](Priority::Default) ones, and
/// [`Critical`](Priority::Critical) ones last.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::Priority;
/// assert_eq!("sheddable".parse::<Priority>(), Ok(Priority::Sheddable));
/// assert_eq!(Priority::default(), Priority::Default);
/// assert!(Priority::Critical > Priority::Default && Priority::Default > Priority::Sheddable);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    /// Refused first: work that can be lost or done later (prefetches,
    /// recommendations, batch jobs).
    Sheddable,
    /// What an operation has unless it says otherwise.
    #[default]
    Default,
    /// Refused last: what the service exists for (a checkout, a login).
    Critical,
}

impl Priority {
    /// Every priority's name, as the attribute, the configuration file and
    /// the `x-priority` header write it.
    pub const NAMES: [&'static str; 3] = ["critical", "default", "sheddable"];

    /// Its name, as [`NAMES`](Self::NAMES) writes it.
    pub const fn name(self) -> &'static str {
        match self {
            Priority::Critical => "critical",
            Priority::Default => "default",
            Priority::Sheddable => "sheddable",
        }
    }

    /// The throttle's multiplier of accepted requests for this priority,
    /// from its `k` (see the module docs): `2k`, `k` or `k / 2`, but never
    /// below 1: under 1, a dependency that accepts everything would see
    /// requests refused.
    #[inline]
    pub(crate) fn k_of(self, k: f64) -> f64 {
        // The default first and alone: one comparison on the common path.
        if self == Priority::Default {
            return k;
        }
        if self == Priority::Critical { k * 2.0 } else { (k * 0.5).max(1.0) }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many attempts a guard refused, by the priority of their calls: what
/// shows that a saturated guard sheds the sheddable calls first. Kept by
/// the guards that shed by priority (a bulkhead, an adaptive throttle, a
/// rate limit), counted only when they refuse, shown on the dashboard's
/// cards.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::Priority;
/// use stormproof::bulkhead::{Bulkhead, BulkheadConfig};
///
/// let bulkhead = Bulkhead::new("search", BulkheadConfig::default()).unwrap();
/// assert_eq!(bulkhead.refusals().of(Priority::Sheddable), 0);
/// assert_eq!(bulkhead.refusals().total(), 0);
/// ```
#[derive(Debug, Default)]
pub struct Refusals {
    /// By priority, in the order of [`Priority`]'s variants.
    counts: [AtomicU64; 3],
}

impl Refusals {
    /// How many attempts of calls of `priority` were refused.
    pub fn of(&self, priority: Priority) -> u64 {
        self.counts[priority as usize].load(Ordering::Relaxed)
    }

    /// How many attempts were refused, whatever their priority.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|count| count.load(Ordering::Relaxed)).fold(0, u64::saturating_add)
    }

    /// One more refused attempt of a call of `priority`.
    #[cold]
    pub(crate) fn count(&self, priority: Priority) {
        self.counts[priority as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// A priority name that is none of [`Priority::NAMES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPriority(pub String);

impl fmt::Display for UnknownPriority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown priority `{}`: expected one of \"critical\", \"default\", \"sheddable\"", self.0)
    }
}

impl std::error::Error for UnknownPriority {}

impl std::str::FromStr for Priority {
    type Err = UnknownPriority;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "critical" => Ok(Priority::Critical),
            "default" => Ok(Priority::Default),
            "sheddable" => Ok(Priority::Sheddable),
            other => Err(UnknownPriority(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_counted_by_priority() {
        let refusals = Refusals::default();
        refusals.count(Priority::Sheddable);
        refusals.count(Priority::Sheddable);
        refusals.count(Priority::Critical);
        assert_eq!(
            [Priority::Critical, Priority::Default, Priority::Sheddable].map(|p| refusals.of(p)),
            [1, 0, 2]
        );
        assert_eq!(refusals.total(), 3);
    }

    #[test]
    fn every_name_reads_back_as_its_priority() {
        for name in Priority::NAMES {
            assert_eq!(name.parse::<Priority>().map(Priority::name), Ok(name));
        }
        let error = "urgent".parse::<Priority>().unwrap_err().to_string();
        assert!(error.contains("`urgent`") && error.contains("\"sheddable\""), "{error}");
    }
}
