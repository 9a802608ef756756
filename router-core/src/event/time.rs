//! Time as EventBridge writes it and Go's `time.Time` JSON decoding reads it (RFC 3339): the
//! check that an event's `time` is one Karpenter could decode, its age when it is forwarded, and
//! the timestamps the router writes itself.

/// Whether `s` is a time Go's `time.Time` JSON decoding accepts (RFC3339, as EventBridge writes
/// `time`).
pub fn is_rfc3339(s: &str) -> bool {
    rfc3339_unix_millis(s).is_some()
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` into milliseconds since the Unix epoch, without a
/// date crate. Used to validate events and to measure how old an event is when it is forwarded.
pub fn rfc3339_unix_millis(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let digits = b.get(r)?;
        digits
            .iter()
            .all(u8::is_ascii_digit)
            .then(|| digits.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month) || day < 1 || day > month_days[(month - 1) as usize] {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &b[19..];
    let mut millis = 0;
    if let Some(frac) = rest.strip_prefix(b".") {
        let n = frac.iter().take_while(|d| d.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        millis = frac[..n.min(3)]
            .iter()
            .fold(0, |m, d| m * 10 + i64::from(d - b'0'))
            * 10_i64.pow(3 - n.min(3) as u32);
        rest = &frac[n..];
    }
    let offset_minutes = match rest {
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2]
            if [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit()) =>
        {
            let (h, m) = (
                i64::from((h1 - b'0') * 10 + (h2 - b'0')),
                i64::from((m1 - b'0') * 10 + (m2 - b'0')),
            );
            if h > 23 || m > 59 {
                return None;
            }
            if *sign == b'+' {
                h * 60 + m
            } else {
                -(h * 60 + m)
            }
        }
        _ => return None,
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

/// Milliseconds since the Unix epoch as RFC 3339 in UTC with milliseconds
/// (`2026-11-23T15:57:00.123Z`): the inverse of [`rfc3339_unix_millis`], for timestamps the
/// router writes itself (log lines and metric documents Lambda's log filter must accept).
pub fn unix_millis_rfc3339(ms: i64) -> String {
    let (days, ms_of_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (year, month, day) = civil_from_days(days);
    let (hour, minute) = (ms_of_day / 3_600_000, ms_of_day / 60_000 % 60);
    let (second, millis) = (ms_of_day / 1000 % 60, ms_of_day % 1000);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
}

/// (year, month, day) of a count of days since 1970-01-01: Howard Hinnant's "civil from days",
/// the inverse of the day count in [`rfc3339_unix_millis`].
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_matches_go_time_decoding() {
        for ok in [
            "2026-11-01T12:00:00Z",
            "2026-11-01T12:00:00.123456Z",
            "2026-11-01T12:00:00+05:30",
            "2016-12-31T23:59:60Z",
        ] {
            assert!(is_rfc3339(ok), "{ok}");
        }
        for bad in [
            "yyyy-mm-ddThh:mm:ssZ",
            "2026-11-01 12:00:00Z",
            "2026-11-01T12:00:00",
            "2026-13-01T12:00:00Z",
            "2026-11-01T24:00:00Z",
            "2026-11-01T12:00:00.Z",
            "2026-11-01T12:00:00+5:30",
            "Thu, 27 Aug 2026 13:19:03 GMT",
            "2026-11-01T12:00:00Zjunk",
            "२०२६-11-01T12:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
    }

    #[test]
    fn each_separator_field_and_leap_rule_is_checked_on_its_own() {
        // One defect each, everything else valid.
        for bad in [
            "2026x11-01T12:00:00Z",
            "2026-11x01T12:00:00Z",
            "2026-11-01T12x00:00Z",
            "2026-11-01T12:00x00Z",
            "2026-11-00T12:00:00Z",
            "2026-11-01T12:60:00Z",
            "2026-11-01T12:00:61Z",
            "2026-11-01T12:00:00+ab:30",
            "2026-11-01T12:00:00+24:00",
            "2026-11-01T12:00:00+05:60",
            "1900-02-29T00:00:00Z",
            "2100-02-29T00:00:00Z",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
        // Go's RFC 3339 parser takes offsets up to 23:59 either way.
        for ok in [
            "2000-02-29T00:00:00Z",
            "2026-11-01T12:00:00+23:59",
            "2026-11-01T12:00:00-23:59",
        ] {
            assert!(is_rfc3339(ok), "{ok}");
        }
    }

    #[test]
    fn days_around_century_years_read_back() {
        // Past a century of its 400-year era, `civil_from_days` counts the century days; every
        // day of 1896-1905 and 2096-2105 (1900 and 2100 are not leap years) reads back.
        assert_eq!(
            unix_millis_rfc3339(4_102_444_800_000),
            "2100-01-01T00:00:00.000Z"
        );
        for (from, to) in [
            (-2_335_219_200_000_i64, -2_019_686_400_000_i64),
            (3_976_214_400_000, 4_291_747_200_000),
        ] {
            for ms in (from..to).step_by(86_400_000) {
                assert_eq!(rfc3339_unix_millis(&unix_millis_rfc3339(ms)), Some(ms));
            }
        }
    }

    #[test]
    fn offsets_of_every_digit_count_toward_the_instant() {
        let noon = Some(1_793_534_400_000);
        assert_eq!(rfc3339_unix_millis("2026-11-01T22:30:00+10:30"), noon);
        assert_eq!(rfc3339_unix_millis("2026-11-01T17:45:00+05:45"), noon);
        assert_eq!(rfc3339_unix_millis("2026-11-01T02:15:00-09:45"), noon);
    }

    #[test]
    fn rfc3339_converts_to_unix_millis() {
        assert_eq!(rfc3339_unix_millis("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            rfc3339_unix_millis("2026-11-01T12:00:00Z"),
            Some(1_793_534_400_000)
        );
        assert_eq!(
            rfc3339_unix_millis("2026-11-01T12:00:00.25Z"),
            Some(1_793_534_400_250)
        );
        assert_eq!(
            rfc3339_unix_millis("2026-11-01T13:30:00.123456+01:30"),
            Some(1_793_534_400_123)
        );
        assert_eq!(
            rfc3339_unix_millis("2024-02-29T00:00:00Z"),
            Some(1_709_164_800_000)
        );
    }

    #[test]
    fn millis_format_as_rfc3339_and_read_back() {
        assert_eq!(unix_millis_rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            unix_millis_rfc3339(1_793_534_400_250),
            "2026-11-01T12:00:00.250Z"
        );
        assert_eq!(
            unix_millis_rfc3339(1_709_164_800_000),
            "2024-02-29T00:00:00.000Z"
        );
        // Every day of four years (a leap year and a century boundary's rules included) reads
        // back to the same instant.
        for ms in (946_684_800_000_i64..1_072_915_200_000).step_by(86_400_000 + 3_723_001) {
            assert_eq!(rfc3339_unix_millis(&unix_millis_rfc3339(ms)), Some(ms));
        }
    }
}
