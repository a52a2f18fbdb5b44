//! Which failures are worth retrying.
//!
//! Retrying only helps when the next attempt can succeed: a timeout, a reset
//! connection or a 503 may clear up; a 404 or a rejected card will not, and
//! retrying them only adds load and latency. Every error that reaches the
//! retry loop is therefore classified first. Throttling is its own class
//! because the server often says how long to wait (`Retry-After`), and that
//! wait outranks our own backoff.

use std::time::{Duration, SystemTime};

/// What kind of failure an error is, and so whether to retry it.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::ErrorClass;
///
/// assert_eq!(ErrorClass::from_http(503, None), ErrorClass::Transient);
/// assert_eq!(ErrorClass::from_http(404, None), ErrorClass::Permanent);
/// assert_eq!(
///     ErrorClass::from_http(429, Some("2")),
///     ErrorClass::Throttled { retry_after: Some(Duration::from_secs(2)) },
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// May succeed if tried again: timeouts, resets, 5xx. Retried; counts as a breaker failure.
    Transient,
    /// The dependency asked us to slow down (HTTP 429). Retried after at least
    /// `retry_after` when the server gave one; counts as a breaker failure.
    Throttled {
        /// The server's `Retry-After`, if it sent a valid one.
        retry_after: Option<Duration>,
    },
    /// An optimistic-concurrency clash (a stale version, gRPC `ABORTED`, an
    /// HTTP 409 where your API means that): retried with backoff and paid
    /// for from the budget like any retry, but neutral to the breaker, since
    /// it says nothing about the dependency's health.
    Conflict,
    /// Will fail the same way again: bad request, not found, business rule.
    /// Returned at once; never counts against a breaker.
    Permanent,
}

impl ErrorClass {
    /// Whether the retry loop may try again after an error of this class.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// assert!(stormproof::ErrorClass::Transient.is_retryable());
    /// assert!(!stormproof::ErrorClass::Permanent.is_retryable());
    /// ```
    pub fn is_retryable(self) -> bool {
        !matches!(self, ErrorClass::Permanent)
    }

    /// Whether an attempt that failed with this class counts as a failure
    /// of the dependency (for a breaker): transient and throttled errors
    /// do; conflicts and permanent errors are neutral.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::ErrorClass;
    /// assert!(ErrorClass::Transient.is_failure());
    /// assert!(ErrorClass::Conflict.is_retryable() && !ErrorClass::Conflict.is_failure());
    /// ```
    pub fn is_failure(self) -> bool {
        matches!(self, ErrorClass::Transient | ErrorClass::Throttled { .. })
    }

    /// A short label for traces and metrics: `transient`, `throttled`,
    /// `conflict` or `permanent`.
    pub fn label(self) -> &'static str {
        match self {
            ErrorClass::Transient => "transient",
            ErrorClass::Throttled { .. } => "throttled",
            ErrorClass::Conflict => "conflict",
            ErrorClass::Permanent => "permanent",
        }
    }

    /// Classifies an HTTP status, with the response's `Retry-After` header if any.
    ///
    /// 408 and 5xx are transient, 429 is throttled, every other 4xx is
    /// permanent. A status that is not an error (1xx-3xx) or not a valid
    /// status at all is permanent: retrying cannot change it.
    /// `Retry-After` may be delta-seconds or an HTTP-date (a date in the past
    /// means zero), or a list of them as a proxy merges a repeated field (the
    /// longest wait: see [`parse_retry_after`]); an unparseable value is ignored.
    ///
    /// A 503 that says when to come back (a `Retry-After` that parses) is
    /// throttled with that wait: RFC 9110 gives the header that meaning on
    /// a 503 too, and urllib3 and .NET's HTTP resilience honour it there.
    /// Retried and counted by a breaker as a transient error is; only the
    /// wait differs. Any other status ignores the header.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::time::Duration;
    /// use stormproof::ErrorClass;
    /// assert_eq!(ErrorClass::from_http(408, None), ErrorClass::Transient);
    /// assert_eq!(
    ///     ErrorClass::from_http(429, Some("Wed, 21 Oct 2015 07:28:00 GMT")),
    ///     ErrorClass::Throttled { retry_after: Some(Duration::ZERO) },
    /// );
    /// assert_eq!(ErrorClass::from_http(429, Some("soon")), ErrorClass::Throttled { retry_after: None });
    /// assert_eq!(
    ///     ErrorClass::from_http(503, Some("120")),
    ///     ErrorClass::Throttled { retry_after: Some(Duration::from_secs(120)) },
    /// );
    /// assert_eq!(ErrorClass::from_http(503, Some("soon")), ErrorClass::Transient);
    /// ```
    pub fn from_http(status: u16, retry_after: Option<&str>) -> ErrorClass {
        match status {
            429 => ErrorClass::Throttled { retry_after: retry_after.and_then(parse_retry_after) },
            503 => match retry_after.and_then(parse_retry_after) {
                Some(after) => ErrorClass::Throttled { retry_after: Some(after) },
                None => ErrorClass::Transient,
            },
            408 | 500..=599 => ErrorClass::Transient,
            _ => ErrorClass::Permanent,
        }
    }
}

/// Parses a `Retry-After` header value: delta-seconds (`"120"`) or an
/// HTTP-date (`"Wed, 21 Oct 2015 07:28:00 GMT"`), measured from the wall clock.
///
/// A date in the past gives zero, a date before 1970 included; anything
/// else unparseable gives `None`. Never panics, whatever the input. The
/// three forms of RFC 9110 (section 5.6.7) are read, and an rfc850-date's
/// two-digit year as the RFC asks: the year with those digits that is not
/// more than 50 years ahead (read in 2026, `01-Jan-75` is 2075 and
/// `01-Jan-77` is 1977).
///
/// **A list** (`"120, 120"`: what a proxy makes of a repeated field, RFC
/// 9110 section 5.3, though the field is a singleton) gives the longest of
/// its waits, when every member parses: each member is a wait some hop
/// asked for, and retrying before the longest would ignore one of them
/// (a list that only agreeing members could pass would, on a disagreement,
/// leave the backoff to retry sooner than any of them). A list with a
/// member that does not parse is unparseable as a whole; empty members are
/// skipped (RFC 9110 section 5.6.1). An HTTP-date's own comma is not a
/// separator: a value that parses whole is one value.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::classify::parse_retry_after;
/// assert_eq!(parse_retry_after(" 120 "), Some(Duration::from_secs(120)));
/// assert_eq!(parse_retry_after("120, 120"), Some(Duration::from_secs(120)));
/// assert_eq!(parse_retry_after("5, 120"), Some(Duration::from_secs(120)), "the longest");
/// assert_eq!(parse_retry_after("120, soon"), None);
/// assert_eq!(parse_retry_after("-1"), None);
/// assert_eq!(parse_retry_after(""), None);
/// ```
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    parse_retry_after_at(value, SystemTime::now())
}

/// [`parse_retry_after`] against a given "now", so dates can be tested exactly.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::{Duration, SystemTime};
/// use stormproof::classify::parse_retry_after_at;
/// let now = httpdate_now();
/// # fn httpdate_now() -> SystemTime { SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_470) }
/// // 2015-10-21 07:28:00 GMT is 10 s after `now`.
/// assert_eq!(parse_retry_after_at("Wed, 21 Oct 2015 07:28:00 GMT", now), Some(Duration::from_secs(10)));
/// ```
pub fn parse_retry_after_at(value: &str, now: SystemTime) -> Option<Duration> {
    one_retry_after(value, now).or_else(|| longest_listed(value, now))
}

/// One value: delta-seconds or an HTTP-date.
fn one_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Delta-seconds too large for u64 saturate rather than being dropped.
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let date = crate::http_date::parse(value, now)?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The longest wait of a comma-separated list of values, `None` unless
/// every member parses. A piece that does not parse alone is tried with
/// the next one: the comma between them is an HTTP-date's own (after its
/// day name). Each piece is read at most twice: linear in the value.
fn longest_listed(value: &str, now: SystemTime) -> Option<Duration> {
    let mut longest = None;
    let mut rest = value.contains(',').then_some(value);
    while let Some(list) = rest {
        let (piece, after) = match list.split_once(',') {
            Some((piece, after)) => (piece, Some(after)),
            None => (list, None),
        };
        if piece.trim().is_empty() {
            rest = after;
            continue;
        }
        let (wait, end) = match one_retry_after(piece, now) {
            Some(wait) => (wait, piece.len()),
            None => {
                let after = after?;
                let end = piece.len() + 1 + after.find(',').unwrap_or(after.len());
                (one_retry_after(&list[..end], now)?, end)
            }
        };
        longest = longest.max(Some(wait));
        // Past the comma that ended the member; none when the list ended.
        rest = list.get(end + 1..);
    }
    longest
}

/// Every `Retry-After` field line of a response as one value, joined with
/// commas as RFC 9110 (section 5.3) combines a repeated field, so that two
/// lines mean what a proxy's merge of them means. `None` without a line,
/// or when one is not text (it could not be read, as one line alone).
#[cfg(any(feature = "reqwest", feature = "tower"))]
pub(crate) fn retry_after_lines<'a>(
    mut lines: impl Iterator<Item = Option<&'a str>>,
) -> Option<std::borrow::Cow<'a, str>> {
    use std::borrow::Cow;
    let first = lines.next()??;
    let Some(second) = lines.next() else { return Some(Cow::Borrowed(first)) };
    let mut joined = String::from(first);
    for line in std::iter::once(second).chain(lines) {
        joined.push_str(", ");
        joined.push_str(line?);
    }
    Some(Cow::Owned(joined))
}

/// Says how an error should be treated by the retry loop.
///
/// Implement it for your error type (the attribute requires it, together
/// with `From<Rejection>`):
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{Classify, ErrorClass};
///
/// enum ApiError { Timeout, Status(u16), CardDeclined }
///
/// impl Classify for ApiError {
///     fn classify(&self) -> ErrorClass {
///         match self {
///             ApiError::Timeout => ErrorClass::Transient,
///             ApiError::Status(code) => ErrorClass::from_http(*code, None),
///             ApiError::CardDeclined => ErrorClass::Permanent,
///         }
///     }
/// }
/// assert_eq!(ApiError::Status(502).classify(), ErrorClass::Transient);
/// ```
pub trait Classify {
    /// The class of this error.
    fn classify(&self) -> ErrorClass;

    /// This error, the last attempt's, marked with why a guard or the
    /// deadline stopped the retries (see [`Stopped`](crate::stop::Stopped)),
    /// once, as such a call ends. Unchanged by default; an `anyhow::Error`
    /// gains a `Stopped` context layer. (A `stormproof::Error<E>` becomes
    /// its `Stopped` variant.)
    fn mark_stopped(self, stopped: crate::stop::Stopped) -> Self
    where
        Self: Sized,
    {
        let _ = stopped;
        self
    }

    /// This error as a `std::error::Error`, when it is one: what the
    /// `on_retry` hook's [`RetryEvent::error`](crate::hooks::RetryEvent::error)
    /// shows. `None` by default; the error types the library knows
    /// (`anyhow::Error`, boxed errors, `io::Error`, `reqwest::Error`,
    /// `tonic::Status`, ...) return themselves. Return `Some(self)` from
    /// your own error type's implementation to show it there.
    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        None
    }
}

impl Classify for ErrorClass {
    fn classify(&self) -> ErrorClass {
        *self
    }
}

impl<T: Classify + ?Sized> Classify for &T {
    fn classify(&self) -> ErrorClass {
        (**self).classify()
    }

    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        (**self).as_error()
    }
}

impl<T: Classify + ?Sized> Classify for Box<T> {
    fn classify(&self) -> ErrorClass {
        (**self).classify()
    }

    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        (**self).as_error()
    }
}

impl<T: Classify + ?Sized> Classify for std::sync::Arc<T> {
    fn classify(&self) -> ErrorClass {
        (**self).classify()
    }

    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        (**self).as_error()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn http_statuses_fall_into_the_contracts_classes() {
        for status in [408, 500, 502, 503, 504, 599] {
            assert_eq!(ErrorClass::from_http(status, None), ErrorClass::Transient, "{status}");
        }
        for status in [400, 401, 403, 404, 409, 422, 499, 200, 302, 0, 999] {
            assert_eq!(ErrorClass::from_http(status, None), ErrorClass::Permanent, "{status}");
        }
        assert_eq!(ErrorClass::from_http(429, None), ErrorClass::Throttled { retry_after: None });
    }

    /// A 503 that says when to come back is waited for; one that does not
    /// (or says it in a way that does not parse) is transient, and no other
    /// status takes the header.
    #[test]
    fn a_503_with_a_retry_after_is_throttled_for_that_long() {
        let after = |seconds| ErrorClass::Throttled { retry_after: Some(Duration::from_secs(seconds)) };
        assert_eq!(ErrorClass::from_http(503, Some("7")), after(7));
        assert_eq!(ErrorClass::from_http(503, Some("Wed, 21 Oct 2015 07:28:00 GMT")), after(0), "past");
        for junk in [None, Some("soon"), Some("-1"), Some("")] {
            assert_eq!(ErrorClass::from_http(503, junk), ErrorClass::Transient, "{junk:?}");
        }
        for status in [408, 500, 502, 504] {
            assert_eq!(ErrorClass::from_http(status, Some("7")), ErrorClass::Transient, "{status}");
        }
        assert_eq!(ErrorClass::from_http(404, Some("7")), ErrorClass::Permanent);
    }

    #[test]
    fn retry_after_accepts_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_470);
        assert_eq!(parse_retry_after_at("0", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after_at("30", now), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after_at("99999999999999999999999", now), Some(Duration::from_secs(u64::MAX)));
        assert_eq!(parse_retry_after_at("Wed, 21 Oct 2015 07:28:00 GMT", now), Some(Duration::from_secs(10)));
        // The obsolete RFC 850 and asctime forms are HTTP-dates too.
        assert_eq!(
            parse_retry_after_at("Wednesday, 21-Oct-15 07:28:00 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after_at("Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO),
            "a date in the past means zero"
        );
    }

    /// RFC 9110 section 5.6.7: a two-digit year more than 50 years ahead is
    /// the past's, and a valid date before 1970 is in the past (zero).
    #[test]
    fn retry_after_dates_follow_the_rfcs_year_rules() {
        // 2026-12-05 00:00:00 GMT.
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_428_800);
        let until_2075 = Duration::from_secs(3_313_526_400 - 1_796_428_800);
        assert_eq!(
            parse_retry_after_at("Tuesday, 01-Jan-75 00:00:00 GMT", now),
            Some(until_2075),
            "49 years ahead"
        );
        assert_eq!(
            parse_retry_after_at("Saturday, 01-Jan-77 00:00:00 GMT", now),
            Some(Duration::ZERO),
            "1977: past"
        );
        assert_eq!(parse_retry_after_at("Fri, 01 Jan 1960 00:00:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after_at("Fri Jan  1 00:00:00 1960", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after_at("Sat, 01 Jan 1960 00:00:00 GMT", now), None, "a Friday in 1960");
    }

    /// What a proxy makes of a repeated `Retry-After`: the members joined
    /// with commas, HTTP-dates holding a comma of their own. The longest
    /// wait, when every member parses; nothing when one does not.
    #[test]
    fn a_merged_retry_after_gives_the_longest_wait_when_every_member_parses() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_470);
        let secs = |n| Some(Duration::from_secs(n));
        let date = "Wed, 21 Oct 2015 07:28:00 GMT"; // 10 s after `now`
        let cases = [
            ("120, 120".to_owned(), secs(120)),
            ("120,120".to_owned(), secs(120)),
            (" 120 ,\t120 ".to_owned(), secs(120)),
            ("5, 120, 30".to_owned(), secs(120)),
            (format!("{date}, {date}"), secs(10)),
            (format!("{date},{date}"), secs(10)),
            (format!("30, {date}"), secs(30)),
            (format!("{date}, 3"), secs(10)),
            ("Wednesday, 21-Oct-15 07:28:00 GMT, 4".to_owned(), secs(10)),
            (format!("Wed, 21 Oct 2015 07:27:00 GMT, {date}"), secs(10)),
            ("120,, 120,".to_owned(), secs(120)),
            ("1, 99999999999999999999999".to_owned(), secs(u64::MAX)),
        ];
        for (value, wait) in &cases {
            assert_eq!(parse_retry_after_at(value, now), *wait, "{value:?}");
        }
        let garbage = [
            "120, soon".to_owned(),
            "soon, 120".to_owned(),
            "120, -1".to_owned(),
            "120, Wed".to_owned(),
            "Wed, 120".to_owned(),
            format!("{date}, Wed"),
            format!("Wed, 32 Oct 2015 07:28:00 GMT, {date}"),
            "21 Oct 2015 07:28:00 GMT, 120".to_owned(),
            ",".to_owned(),
            " , ,".to_owned(),
            ",,,,".to_owned(),
        ];
        for value in &garbage {
            assert_eq!(parse_retry_after_at(value, now), None, "{value:?}");
        }
    }

    #[cfg(any(feature = "reqwest", feature = "tower"))]
    #[test]
    fn retry_after_lines_read_as_their_merge() {
        let joined = |lines: &[Option<&str>]| retry_after_lines(lines.iter().copied()).map(String::from);
        assert_eq!(joined(&[]), None);
        assert_eq!(joined(&[Some("120")]), Some("120".into()));
        assert_eq!(joined(&[Some("5"), Some("120"), Some("7")]), Some("5, 120, 7".into()));
        assert_eq!(joined(&[None]), None, "not text");
        assert_eq!(joined(&[Some("5"), None]), None, "a line that is not text spoils the list");
    }

    #[test]
    fn unparseable_retry_after_is_ignored() {
        for bad in ["", " ", "-5", "1.5", "+3", "soon", "Wed, 32 Oct 2015 07:28:00 GMT", "١٢"] {
            assert_eq!(parse_retry_after(bad), None, "{bad:?}");
        }
    }

    /// The last second an HTTP-date can name: 9999-12-31 23:59:59 GMT.
    const LAST_HTTP_DATE: u64 = 253_402_300_799;

    /// Seconds since the epoch of an HTTP-date, weighted toward both ends
    /// of the format's range (1970 to 9999).
    fn http_date_secs() -> impl Strategy<Value = u64> {
        prop_oneof![0..=172_800u64, LAST_HTTP_DATE - 172_800..=LAST_HTTP_DATE, 0..=LAST_HTTP_DATE]
    }

    /// "Now" at the limits of `SystemTime` and of the HTTP-date range.
    fn extreme_nows() -> impl Strategy<Value = SystemTime> {
        let epoch = SystemTime::UNIX_EPOCH;
        let nows: Vec<SystemTime> = [
            Some(epoch),
            epoch.checked_sub(Duration::from_secs(1)),
            epoch.checked_sub(Duration::from_secs(i64::MAX as u64)),
            epoch.checked_add(Duration::from_secs(LAST_HTTP_DATE)),
            epoch.checked_add(Duration::from_secs(LAST_HTTP_DATE + 1)),
            epoch.checked_add(Duration::from_secs(i64::MAX as u64)),
            Some(SystemTime::now()),
        ]
        .into_iter()
        .flatten()
        .collect();
        proptest::sample::select(nows)
    }

    /// `Retry-After` values weighted toward the parser's edges: huge, signed
    /// and non-ASCII digits, dates at the limits of the format, date-shaped
    /// strings with out-of-range fields (all three date forms), arbitrary
    /// text; each padded with whitespace some of the time.
    fn retry_after_header() -> impl Strategy<Value = String> {
        let body = prop_oneof![
            ".*",
            proptest::collection::vec(any::<u8>(), 0..40)
                .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            "[+-]?[0-9]{1,40}",
            any::<u64>().prop_map(|n| n.to_string()),
            Just(u64::MAX.to_string() + "0"),
            r"[0-9\x{660}-\x{669}\x{FF10}-\x{FF19}]{1,8}",
            http_date_secs()
                .prop_map(|secs| httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))),
            "(Mon|Fri|Sun|Xyz), [0-9]{1,3} (Jan|Feb|Dec|Foo) [0-9]{1,6} [0-9]{1,3}:[0-9]{1,3}:[0-9]{1,3} (GMT|UTC|)",
            "(Monday|Sunday|Xyzday), [0-9]{1,3}-(Jan|Dec|Foo)-[0-9]{1,4} [0-9]{1,3}:[0-9]{1,3}:[0-9]{1,3} GMT",
            "(Mon|Sun) (Jan|Dec) [ 0-9]{1,3} [0-9]{1,3}:[0-9]{1,3}:[0-9]{1,3} [0-9]{1,6}",
        ];
        ("[ \t]{0,2}", body, "[ \t\r\n]{0,2}").prop_map(|(before, body, after)| before + &body + &after)
    }

    #[test]
    fn the_generated_headers_reach_every_branch_of_the_parser() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::TestRunner;
        let mut runner = TestRunner::deterministic();
        let strategy = retry_after_header();
        let now = SystemTime::now();
        let (mut seconds, mut huge, mut dates, mut past, mut non_ascii, mut unparsed) = (0, 0, 0, 0, 0, 0);
        let samples = 2_000;
        for _ in 0..samples {
            let header = strategy.new_tree(&mut runner).unwrap().current();
            let digits = header.trim();
            let is_delta = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
            seconds += usize::from(is_delta);
            huge += usize::from(is_delta && digits.parse::<u64>().is_err());
            non_ascii += usize::from(!header.is_ascii());
            match (is_delta, parse_retry_after_at(&header, now)) {
                (true, _) => {}
                (false, Some(Duration::ZERO)) => past += 1,
                (false, Some(_)) => dates += 1,
                (false, None) => unparsed += 1,
            }
        }
        let counts = [seconds, huge, dates, past, non_ascii, unparsed];
        // Each region gets at least 2% of the cases.
        assert!(
            counts.iter().all(|&n| n * 50 >= samples),
            "seconds, huge, future dates, past dates, non-ASCII, unparseable: {counts:?}"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// The CI twin of `fuzz/fuzz_targets/retry_after.rs`: most cases are
        /// 429 or 503 (whose `Retry-After` is parsed); a uniform `u16`
        /// covers every other status.
        #[test]
        fn from_http_never_panics_on_any_input(
            status in prop_oneof![3 => Just(429u16), 1 => Just(503u16), 2 => any::<u16>()],
            header in proptest::option::of(retry_after_header()),
        ) {
            let class = ErrorClass::from_http(status, header.as_deref());
            prop_assert_eq!(class.is_retryable(), status == 408 || status == 429 || (500..600).contains(&status));
            let parsed = header.as_deref().and_then(parse_retry_after);
            let throttled = status == 429 || (status == 503 && parsed.is_some());
            prop_assert_eq!(matches!(class, ErrorClass::Throttled { .. }), throttled);
            if let (ErrorClass::Throttled { retry_after }, Some(header)) = (class, &header) {
                let delta = header.trim();
                if !delta.is_empty() && delta.bytes().all(|b| b.is_ascii_digit()) {
                    let secs = delta.parse().unwrap_or(u64::MAX);
                    prop_assert_eq!(retry_after, Some(Duration::from_secs(secs)), "delta-seconds saturate");
                }
            }
        }

        #[test]
        fn retry_after_never_panics_at_the_limits_of_time(header in retry_after_header(), now in extreme_nows()) {
            let _ = parse_retry_after_at(&header, now);
        }

        #[test]
        fn http_dates_at_the_limits_of_the_format_parse_exactly(secs in http_date_secs(), now in extreme_nows()) {
            let date = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
            prop_assert_eq!(
                parse_retry_after_at(&httpdate::fmt_http_date(date), now),
                Some(date.duration_since(now).unwrap_or(Duration::ZERO))
            );
        }

        #[test]
        fn parse_retry_after_never_panics_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse_retry_after(&text);
        }

        /// A list of valid values, dates and delta-seconds, reads as its
        /// longest wait, however its members are spaced.
        #[test]
        fn a_list_of_valid_values_gives_its_longest_wait(
            members in proptest::collection::vec(
                prop_oneof![
                    any::<u64>().prop_map(|n| n.to_string()),
                    http_date_secs().prop_map(|secs| httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))),
                ],
                1..5,
            ),
            separator in "[ \t]{0,2},[ \t]{0,2}",
            now in extreme_nows(),
        ) {
            let longest = members.iter().map(|m| parse_retry_after_at(m, now)).max().flatten();
            prop_assert!(longest.is_some());
            prop_assert_eq!(parse_retry_after_at(&members.join(&separator), now), longest);
        }

        /// Lists of hostile members, and of arbitrary text and commas.
        #[test]
        fn a_list_of_anything_never_panics(
            members in proptest::collection::vec(retry_after_header(), 0..6),
            noise in "[, 0-9A-Za-z:-]{0,80}",
            now in extreme_nows(),
        ) {
            let _ = parse_retry_after_at(&members.join(","), now);
            let _ = parse_retry_after_at(&noise, now);
        }

        #[test]
        fn delta_seconds_round_trip(secs: u64) {
            prop_assert_eq!(parse_retry_after(&secs.to_string()), Some(Duration::from_secs(secs)));
        }
    }
}
