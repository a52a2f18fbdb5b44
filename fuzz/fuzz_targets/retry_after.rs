//! Fuzzes HTTP classification and `Retry-After` parsing with arbitrary bytes:
//! they must never panic, and whether the class is retryable must depend on
//! the status alone (the header only sets a 429's or a 503's wait).
#![no_main]

use std::time::{Duration, SystemTime};

use libfuzzer_sys::fuzz_target;
use retry_runtime::{ErrorClass, parse_retry_after, parse_retry_after_at};

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
});
