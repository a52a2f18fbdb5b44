//! The phases of the breaker's state machine: the three states of the
//! contract, with what each holds, and the two forced by hand.

use std::time::Duration;

/// Where a [`BreakerCore`](super::BreakerCore) is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Phase {
    Closed,
    /// Opened at `since`; admits probes from `until = since + open_for`
    /// (or from an `until` given by [`BreakerCore::trip`](super::BreakerCore::trip)). `probes` is the
    /// half-open period's allowance given with a trip, if any.
    Open {
        since: Duration,
        until: Duration,
        probes: Option<u32>,
    },
    /// Held open by hand until reset: every call is refused.
    ForcedOpen,
    /// Held closed by hand until reset: every call runs, nothing is counted.
    ForcedClosed,
    HalfOpen {
        in_flight: u32,
        successes: u32,
        /// Probes still allowed in this period, in all (not only at once),
        /// when a trip said so; `None`: only `half_open_max_calls` at once.
        allowance: Option<u32>,
    },
}
