//! Engine time.
//!
//! The engine never reads a clock: every entry point takes the current time
//! as an argument. The live runtime passes wall-clock milliseconds since the
//! Unix epoch; `tactful replay` passes a virtual clock that starts at zero.
//! Both drive the same code, which is why a replay decides what the service
//! would have decided.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// A point in time, in milliseconds since an epoch chosen by the driver.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// The driver's epoch (zero).
    pub const ZERO: Timestamp = Timestamp(0);

    /// Builds a timestamp from milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Timestamp(ms)
    }

    /// Milliseconds since the driver's epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// Seconds since the driver's epoch, for human-facing output.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// Time elapsed since `earlier`, zero when `earlier` is later.
    pub fn saturating_since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// RFC 3339 rendering in UTC, reading the timestamp as Unix milliseconds.
    ///
    /// Agents get message times in this form; computing it here (instead of
    /// asking a date library for "now") keeps the engine free of clock reads.
    pub fn to_rfc3339(self) -> String {
        let ms = self.0 % 1000;
        let seconds = self.to_rfc3339_seconds();
        format!("{}.{ms:03}Z", seconds.trim_end_matches('Z'))
    }

    /// The same to the second (`2026-03-29T10:00:16Z`): what a person in a
    /// chat goes by, and what a prompt says (each character of a prompt's
    /// uncached end is paid for on every call).
    pub fn to_rfc3339_seconds(self) -> String {
        let secs = self.0 / 1000;
        let days = (secs / 86_400) as i64;
        let rem = secs % 86_400;
        let (y, m, d) = civil_from_days(days);
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
            rem / 3600,
            (rem % 3600) / 60,
            rem % 60
        )
    }
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(d.as_millis().min(u64::MAX as u128) as u64))
    }
}

impl Sub<Duration> for Timestamp {
    type Output = Timestamp;
    fn sub(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_sub(d.as_millis().min(u64::MAX as u128) as u64))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}s", self.as_secs_f64())
    }
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_renders_known_instants() {
        assert_eq!(Timestamp(0).to_rfc3339(), "1970-01-01T00:00:00.000Z");
        assert_eq!(Timestamp(1_500).to_rfc3339(), "1970-01-01T00:00:01.500Z");
        // 2024-02-29T12:34:56.789Z, a leap day.
        assert_eq!(
            Timestamp(1_709_210_096_789).to_rfc3339(),
            "2024-02-29T12:34:56.789Z"
        );
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Timestamp(5) - Duration::from_millis(10), Timestamp(0));
        assert_eq!(Timestamp(10).saturating_since(Timestamp(20)), Duration::ZERO);
    }
}
