//! RFC 3339 UTC timestamps (`2024-02-29T12:34:56.789Z`) for `created_at`
//! columns, formatted from `SystemTime` without a date-time crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// The current time as RFC 3339 UTC with millisecond precision.
pub fn now_rfc3339() -> String {
    format_rfc3339(SystemTime::now())
}

/// Formats `time` as RFC 3339 UTC with millisecond precision. Times before
/// the Unix epoch (a badly set clock) are clamped to the epoch.
pub fn format_rfc3339(time: SystemTime) -> String {
    let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since_epoch.as_secs();
    let millis = since_epoch.subsec_millis();
    let days = secs / 86_400;
    let secs_of_day = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        secs_of_day / 3600,
        secs_of_day % 3600 / 60,
        secs_of_day % 60,
    )
}

/// Converts days since 1970-01-01 to a (year, month, day) in the proleptic
/// Gregorian calendar (Howard Hinnant's `civil_from_days`, for non-negative
/// day counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Shift the epoch to 0000-03-01 so that leap days fall at the end of a
    // 400-year era: 719_468 days separate 0000-03-01 from 1970-01-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64, millis: u64) -> String {
        format_rfc3339(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis))
    }

    #[test]
    fn formats_known_instants() {
        // Expected values from `date -u -d @<secs> +%FT%T.%3NZ`.
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 123), "2000-02-29T00:00:00.123Z");
        assert_eq!(at(1_709_210_096, 7), "2024-02-29T12:34:56.007Z");
        assert_eq!(at(4_102_444_799, 999), "2099-12-31T23:59:59.999Z");
        // 2100 is not a leap year: the day after Feb 28 is Mar 1.
        assert_eq!(at(4_107_456_000, 0), "2100-02-28T00:00:00.000Z");
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000Z");
    }

    #[test]
    fn clamps_times_before_the_epoch() {
        let before = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(format_rfc3339(before), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn every_day_of_a_leap_cycle_is_valid_and_consecutive() {
        // Walk 400 years day by day: dates must strictly increase and each
        // month must have the Gregorian number of days.
        let mut previous = civil_from_days(0);
        for days in 1..146_097 {
            let (y, m, d) = civil_from_days(days);
            let (py, pm, pd) = previous;
            let leap = (py % 4 == 0 && py % 100 != 0) || py % 400 == 0;
            let month_len = match pm {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            if pd < month_len {
                assert_eq!((y, m, d), (py, pm, pd + 1));
            } else if pm < 12 {
                assert_eq!((y, m, d), (py, pm + 1, 1));
            } else {
                assert_eq!((y, m, d), (py + 1, 1, 1));
            }
            previous = (y, m, d);
        }
    }
}
