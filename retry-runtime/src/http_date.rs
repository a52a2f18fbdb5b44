//! An HTTP-date as RFC 9110 (section 5.6.7) reads it, for `Retry-After`.
//!
//! `httpdate` parses the three forms and checks every field, the weekday
//! included, but it reads an rfc850-date's two-digit year with a fixed
//! pivot (`70`-`99` as 19xx, the rest as 20xx) and refuses years before
//! 1970. The RFC asks otherwise on both counts, so this module applies its
//! rules around `httpdate` instead of parsing by hand:
//! - a two-digit year names the year with those digits that does not
//!   appear more than 50 years in the future (read in 2026, `75` is 2075
//!   and `77` is 1977);
//! - a valid date before 1970 is a date like any other: in the past, so
//!   `Retry-After` means "now".
//!
//! Both work by rewriting the value into a form `httpdate` checks: the
//! rfc850-date into an IMF-fixdate with its four-digit year, and a year
//! before 1970 moved forward by whole 400-year cycles (the Gregorian
//! calendar repeats its dates and weekdays every 146,097 days), then moved
//! back once parsed.

use std::time::{Duration, SystemTime};

/// Days in the Gregorian calendar's 400-year cycle: dates and weekdays repeat after it.
const DAYS_PER_400_YEARS: u64 = 146_097;
const SECS_PER_DAY: u64 = 86_400;

/// The first year `httpdate` accepts.
const FIRST_YEAR: u16 = 1970;

/// The instant `value` names, if it is an HTTP-date in any of the three
/// forms; `now` places an rfc850-date's two-digit year.
pub(crate) fn parse(value: &str, now: SystemTime) -> Option<SystemTime> {
    let value = value.trim();
    if !value.is_ascii() {
        return None;
    }
    match rfc850_as_imf(value, now) {
        Some(imf) => four_digit_year(&imf),
        None => four_digit_year(value),
    }
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) or asctime date
/// (`Sun Nov  6 08:49:37 1994`), whatever its year (0000 to 9999).
fn four_digit_year(value: &str) -> Option<SystemTime> {
    if let Ok(date) = httpdate::parse_http_date(value) {
        return Some(date);
    }
    let digits = year_digits(value)?;
    let year: u16 = value.get(digits.clone())?.parse().ok()?;
    if year >= FIRST_YEAR {
        return None;
    }
    // Whole cycles that bring the year to 1970 or later: at most 5 (year 0).
    let cycles = (FIRST_YEAR - year).div_ceil(400);
    let moved = format!("{}{:04}{}", &value[..digits.start], year + cycles * 400, &value[digits.end..]);
    let date = httpdate::parse_http_date(&moved).ok()?;
    let shift = Duration::from_secs(u64::from(cycles) * DAYS_PER_400_YEARS * SECS_PER_DAY);
    // Before what `SystemTime` can hold is still a date in the past.
    Some(date.checked_sub(shift).unwrap_or(SystemTime::UNIX_EPOCH - Duration::from_secs(i32::MAX as u64)))
}

/// Where the four-digit year is in a value shaped as an IMF-fixdate or an
/// asctime date (the fields themselves are `httpdate`'s to check).
fn year_digits(value: &str) -> Option<std::ops::Range<usize>> {
    let bytes = value.as_bytes();
    match bytes.len() {
        29 if value.ends_with(" GMT") => Some(12..16),
        24 if bytes[3] == b' ' => Some(20..24),
        _ => None,
    }
}

/// An rfc850-date (`Sunday, 06-Nov-94 08:49:37 GMT`) as the IMF-fixdate
/// of the year RFC 9110 gives its two digits; `None` for any other shape.
fn rfc850_as_imf(value: &str, now: SystemTime) -> Option<String> {
    let (weekday, rest) = value.split_once(", ")?;
    let short = FULL_WEEKDAYS.iter().find(|(full, _)| *full == weekday)?.1;
    let bytes = rest.as_bytes();
    if bytes.len() != 22 || bytes[2] != b'-' || bytes[6] != b'-' || !rest.ends_with(" GMT") {
        return None;
    }
    let two_digits = rest.get(7..9).filter(|d| d.bytes().all(|b| b.is_ascii_digit()))?;
    let year = year_of_two_digits(two_digits.parse().ok()?, year_of(now))?;
    // `06-Nov-94 08:49:37 GMT` -> `06 Nov 1994 08:49:37 GMT`
    Some(format!("{short}, {} {} {year:04}{}", &rest[..2], &rest[3..6], &rest[9..]))
}

const FULL_WEEKDAYS: [(&str, &str); 7] = [
    ("Monday", "Mon"),
    ("Tuesday", "Tue"),
    ("Wednesday", "Wed"),
    ("Thursday", "Thu"),
    ("Friday", "Fri"),
    ("Saturday", "Sat"),
    ("Sunday", "Sun"),
];

/// The year ending in `two_digits` that is at most 50 years after
/// `this_year` and less than 50 before it; `None` outside 0 to 9999.
fn year_of_two_digits(two_digits: i64, this_year: i64) -> Option<u16> {
    // The hundred years from 49 before this year to 50 after it hold one
    // year with those digits.
    let first = this_year - 49;
    let year = first + (two_digits - first).rem_euclid(100);
    u16::try_from(year).ok().filter(|&year| year <= 9999)
}

/// The Gregorian year `now` falls in (UTC), for any `SystemTime`.
fn year_of(now: SystemTime) -> i64 {
    let secs: i64 = match now.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_secs()).map_or(i64::MIN, |s| -s),
    };
    civil_year(secs.div_euclid(SECS_PER_DAY as i64))
}

/// The year of the day `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, year only), for any `i64` the caller gives.
fn civil_year(days: i64) -> i64 {
    let z = days.saturating_add(719_468);
    let era = z.div_euclid(DAYS_PER_400_YEARS as i64);
    let day_of_era = z.rem_euclid(DAYS_PER_400_YEARS as i64);
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let march_based_month = (5 * day_of_year + 2) / 153;
    // Years begin in March here: January and February belong to the next.
    let january_or_february = i64::from(march_based_month >= 10);
    era.saturating_mul(400).saturating_add(year_of_era).saturating_add(january_or_february)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> SystemTime {
        if secs >= 0 {
            SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64)
        } else {
            SystemTime::UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
        }
    }

    fn imf(value: &str) -> SystemTime {
        httpdate::parse_http_date(value).unwrap()
    }

    /// 2026-12-05 00:00:00 GMT.
    const IN_2026: i64 = 1_796_428_800;

    #[test]
    fn years_of_instants_match_the_calendar() {
        assert_eq!(year_of(at(0)), 1970);
        assert_eq!(year_of(at(-1)), 1969);
        assert_eq!(year_of(at(IN_2026)), 2026);
        assert_eq!(year_of(imf("Sat, 01 Jan 2000 00:00:00 GMT")), 2000);
        assert_eq!(year_of(imf("Fri, 31 Dec 1999 23:59:59 GMT")), 1999);
        assert_eq!(year_of(imf("Fri, 31 Dec 9999 23:59:59 GMT")), 9999);
        // Before the epoch: 1900-01-01 is 25,567 days before it.
        assert_eq!(year_of(at(-25_567 * 86_400)), 1900);
        assert_eq!(year_of(at(-25_567 * 86_400 - 1)), 1899);
    }

    #[test]
    fn a_two_digit_year_is_the_one_at_most_fifty_years_ahead() {
        assert_eq!(year_of_two_digits(75, 2026), Some(2075), "49 years ahead");
        assert_eq!(year_of_two_digits(76, 2026), Some(2076), "50 years ahead is not more than 50");
        assert_eq!(year_of_two_digits(77, 2026), Some(1977), "51 years ahead: the past's");
        assert_eq!(year_of_two_digits(26, 2026), Some(2026));
        assert_eq!(year_of_two_digits(0, 2026), Some(2000));
        assert_eq!(year_of_two_digits(99, 1999), Some(1999));
        assert_eq!(year_of_two_digits(49, 1999), Some(2049));
        assert_eq!(year_of_two_digits(50, 1999), Some(1950));
        assert_eq!(year_of_two_digits(10, 9990), None, "10010 has no HTTP-date");
    }

    #[test]
    fn an_rfc850_date_is_read_in_the_rfcs_century() {
        let now = at(IN_2026);
        // 2075-01-01 was a Tuesday; 1975-01-01 a Wednesday.
        assert_eq!(parse("Tuesday, 01-Jan-75 00:00:00 GMT", now), Some(imf("Tue, 01 Jan 2075 00:00:00 GMT")));
        assert_eq!(parse("Wednesday, 01-Jan-75 00:00:00 GMT", now), None, "the weekday of 1975, not 2075");
        assert_eq!(
            parse("Saturday, 01-Jan-77 00:00:00 GMT", now),
            Some(imf("Sat, 01 Jan 1977 00:00:00 GMT"))
        );
        assert_eq!(parse("Sunday, 06-Nov-94 08:49:37 GMT", now), Some(imf("Sun, 06 Nov 1994 08:49:37 GMT")));
    }

    #[test]
    fn a_date_before_1970_is_a_date() {
        let now = at(IN_2026);
        let cases = [
            ("Fri, 01 Jan 1960 00:00:00 GMT", -315_619_200),
            ("Wed, 31 Dec 1969 23:59:59 GMT", -1),
            ("Mon, 01 Jan 1900 00:00:00 GMT", -2_208_988_800),
            ("Sat, 01 Jan 0000 00:00:00 GMT", -62_167_219_200),
            ("Fri Jan  1 00:00:00 1960", -315_619_200),
        ];
        for (value, secs) in cases {
            assert_eq!(parse(value, now), Some(at(secs)), "{value}");
        }
        assert_eq!(parse("Sat, 01 Jan 1960 00:00:00 GMT", now), None, "1960-01-01 was a Friday");
        assert_eq!(parse("Thu, 29 Feb 1900 00:00:00 GMT", now), None, "1900 had no 29 February");
    }

    /// The rfc850-date of `date`, through the IMF-fixdate `httpdate` writes.
    fn rfc850(date: SystemTime) -> String {
        let imf = httpdate::fmt_http_date(date); // `Sun, 06 Nov 1994 08:49:37 GMT`
        let full = FULL_WEEKDAYS.iter().find(|(_, short)| imf.starts_with(short)).unwrap().0;
        format!("{full}, {}-{}-{}{}", &imf[5..7], &imf[8..11], &imf[14..16], &imf[16..])
    }

    proptest::proptest! {
        /// Any instant within 49 years of `now`, either way, written as an
        /// rfc850-date, reads back as itself: the two digits lose nothing
        /// inside the RFC's window.
        #[test]
        fn an_rfc850_date_near_now_reads_back_exactly(
            now_secs in 49 * 366 * 86_400u64..253_402_300_799 - 50 * 366 * 86_400,
            offset in -49 * 365 * 86_400i64..49 * 365 * 86_400,
        ) {
            let now = at(now_secs as i64);
            let date = at(now_secs as i64 + offset);
            proptest::prop_assert_eq!(parse(&rfc850(date), now), Some(date));
        }

        /// A date in any year from 0000 to 1969 reads as the instant it names.
        #[test]
        fn a_date_before_1970_reads_exactly(days_before in 1u64..719_528, second in 0u64..86_400) {
            let date = at(-((days_before * 86_400) as i64) + second as i64);
            // The same day 400 years on (dates and weekdays repeat), written
            // by `httpdate`, with the year put back.
            let later = date + Duration::from_secs(5 * DAYS_PER_400_YEARS * SECS_PER_DAY);
            let imf = httpdate::fmt_http_date(later);
            let year: u16 = imf[12..16].parse().unwrap();
            let value = format!("{}{:04}{}", &imf[..12], year - 2000, &imf[16..]);
            proptest::prop_assert_eq!(parse(&value, at(IN_2026)), Some(date), "{}", value);
        }
    }

    #[test]
    fn other_shapes_are_no_date() {
        let now = at(IN_2026);
        for value in [
            "",
            "120",
            "Sunday, 06-Nov-9x 08:49:37 GMT",
            "Someday, 06-Nov-94 08:49:37 GMT",
            "Sun, 06 Nov 1994",
        ] {
            assert_eq!(parse(value, now), None, "{value:?}");
        }
    }
}
