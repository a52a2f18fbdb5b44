//! Fuzzes HTTP classification and `Retry-After` parsing with arbitrary bytes:
//! they must never panic, whether the class is retryable must depend on the
//! status alone (the header only sets a 429's or a 503's wait), and the
//! reading of a date must hold at any "now": before 1970, where an
//! rfc850-date's two-digit year turns a century, and at the format's end.
#![no_main]

use std::time::{Duration, SystemTime};

use libfuzzer_sys::fuzz_target;
use stormproof_runtime::{ErrorClass, classify::{parse_retry_after, parse_retry_after_at}};

/// 2026-12-05; two seconds before 2050 (where 00-49 and 50-99 read in
/// other centuries), before 10000 and before 1970: no year ends in the
/// second after any of them.
const NOWS: [i64; 4] = [1_796_428_800, 2_524_607_998, 253_402_300_798, -2];

fuzz_target!(|data: &[u8]| {
    let Some((status, header)) = data.split_first_chunk::<2>() else { return };
    let status = u16::from_le_bytes(*status);
    let header = String::from_utf8_lossy(header);
    let class = ErrorClass::from_http(status, Some(&header));
    assert_eq!(class.is_retryable(), matches!(status, 408 | 429 | 500..=599));
    if let ErrorClass::Throttled { retry_after: Some(after) } = class {
        assert!(matches!(status, 429 | 503) && after <= Duration::MAX);
    }
    let _ = parse_retry_after(&header);
    let _ = parse_retry_after_at(&header, SystemTime::UNIX_EPOCH);
    for secs in NOWS {
        let now = match u64::try_from(secs) {
            Ok(after) => SystemTime::UNIX_EPOCH + Duration::from_secs(after),
            Err(_) => SystemTime::UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()),
        };
        let wait = parse_retry_after_at(&header, now);
        // Read a second later, within the same year (an rfc850-date's
        // two-digit window moves only when the year does), it waits no longer.
        let later = parse_retry_after_at(&header, now + Duration::from_secs(1));
        if let (Some(wait), Some(later)) = (wait, later) {
            assert!(later <= wait, "{header:?}: {later:?} a second after {wait:?}");
        }
    }
});
