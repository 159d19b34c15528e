//! Dates in UTC for signatures, logs and timestamps: `der`'s `DateTime`
//! (the calendar certificates use), for what a registry, a bundle or a
//! trusted root says — no calendar arithmetic of our own on their bytes.

use std::time::Duration;

/// `secs` after the epoch as RFC 3339 (`2023-07-12T15:56:36Z`); a time
/// before 1970 or after 9999 is written as its seconds.
pub fn rfc3339(secs: i64) -> String {
    u64::try_from(secs)
        .ok()
        .and_then(|s| der::DateTime::from_unix_duration(Duration::from_secs(s)).ok())
        .map(|t| t.to_string())
        .unwrap_or_else(|| format!("{secs} s after the epoch"))
}

/// Seconds since the epoch of a civil date and time (UTC), or `None` when
/// it is no such date (a month of 13, February 30, a leap second, a year
/// before 1970 or after 9999).
pub fn seconds_from_civil(
    (year, month, day): (i64, i64, i64),
    (hour, minute, second): (i64, i64, i64),
) -> Option<i64> {
    let t = der::DateTime::new(
        u16::try_from(year).ok()?,
        u8::try_from(month).ok()?,
        u8::try_from(day).ok()?,
        u8::try_from(hour).ok()?,
        u8::try_from(minute).ok()?,
        u8::try_from(second).ok()?,
    )
    .ok()?;
    i64::try_from(t.unix_duration().as_secs()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_and_impossible_ones_are_none() {
        assert_eq!(rfc3339(1_689_177_396), "2023-07-12T15:56:36Z");
        assert_eq!(
            seconds_from_civil((2023, 7, 12), (15, 56, 36)),
            Some(1_689_177_396)
        );
        assert_eq!(seconds_from_civil((2023, 2, 30), (0, 0, 0)), None);
        assert_eq!(seconds_from_civil((2023, 13, 1), (0, 0, 0)), None);
        assert_eq!(seconds_from_civil((1969, 12, 31), (23, 59, 59)), None);
        assert_eq!(rfc3339(-1), "-1 s after the epoch");
    }
}
