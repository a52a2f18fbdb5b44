//! Instants from durations that come from configuration or the network.
//!
//! `Instant + Duration` panics on overflow, and tokio's timer adds a little
//! more to every deadline it arms, so a deadline near the end of time panics
//! inside tokio even when our own addition did not. A server's `Retry-After`
//! or a configured deadline can be any size, so every instant the runtime
//! arms is made here: a duration beyond [`HORIZON`] means "never".

use std::time::Duration;

use tokio::time::Instant;

/// Durations longer than this (about 30 years, tokio's own horizon for
/// `sleep`) never end: no deadline or timer is armed for them.
pub const HORIZON: Duration = Duration::from_secs(86_400 * 365 * 30);

/// The instant `after` from now, or `None` when that is beyond the horizon.
#[inline]
pub(crate) fn instant_after(after: Duration) -> Option<Instant> {
    if after > HORIZON { None } else { Instant::now().checked_add(after) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn durations_past_the_horizon_never_end() {
        assert_eq!(instant_after(Duration::MAX), None);
        assert_eq!(instant_after(HORIZON + Duration::from_nanos(1)), None);
        assert_eq!(instant_after(Duration::from_secs(1)), Instant::now().checked_add(Duration::from_secs(1)));
        assert!(instant_after(HORIZON).is_some());
    }
}
