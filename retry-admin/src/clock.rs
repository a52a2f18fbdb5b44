//! Durations and instants as the snapshot's JSON carries them: whole
//! milliseconds, and Unix time in milliseconds.

use std::time::{Duration, SystemTime};

/// Whole milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Unix time now, in milliseconds (0 on a clock set before 1970).
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(millis).unwrap_or(0)
}
