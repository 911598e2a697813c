//! The one clock tactful's decision path reads.

use std::time::{SystemTime, UNIX_EPOCH};

use tactful_core::Timestamp;

/// Wall-clock time as the engine counts it: milliseconds since the Unix
/// epoch. The only clock read in tactful's decision path.
pub fn wall_clock() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis().min(u64::MAX as u128) as u64);
    Timestamp::from_millis(ms)
}
