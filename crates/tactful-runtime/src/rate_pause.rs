//! What a platform account does with a 429: no request of the account
//! before the reset the server named. Platforms whose HTTP client does
//! not wait by itself (Mattermost, Zulip) share it: the pause, and how
//! long a refusal's headers say to wait.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// The pause after a 429 that names none.
pub const DEFAULT_PAUSE: Duration = Duration::from_secs(1);

/// The longest pause a 429 is taken at its word for: a reset further off
/// is read as this (a broken header must not silence a bot for a day).
pub const LONGEST_PAUSE: Duration = Duration::from_secs(300);

/// One account's pause: every call waits for it, a 429 extends it.
#[derive(Debug, Default)]
pub struct RatePause {
    until: Mutex<Option<Instant>>,
}

impl RatePause {
    /// Waits until no pause is in force.
    pub async fn wait(&self) {
        let until = self.until.lock().ok().and_then(|u| *u);
        if let Some(at) = until {
            tokio::time::sleep_until(at).await;
        }
    }

    /// No call before `pause` from now (or a later pause already set).
    pub fn hold(&self, pause: Duration) {
        let until = Instant::now() + pause;
        if let Ok(mut u) = self.until.lock() {
            *u = Some(u.map_or(until, |u| u.max(until)));
        }
    }
}

/// How long a 429 says to wait: the later of `X-RateLimit-Reset` and
/// `Retry-After`, each whole or fractional seconds from now, or, for a
/// reset past 10⁹, a Unix time (Zulip writes it so; Mattermost writes
/// seconds); at least 100 ms, at most [`LONGEST_PAUSE`];
/// [`DEFAULT_PAUSE`] when neither header says. `header` looks a header
/// up by name.
pub fn pause_of<'h>(header: impl Fn(&str) -> Option<&'h str>, now_unix: f64) -> Duration {
    let seconds = |name: &str| {
        header(name)
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let reset = seconds("x-ratelimit-reset").map(|r| if r > 1e9 { (r - now_unix).max(0.0) } else { r });
    let retry = seconds("retry-after");
    let wait = match (reset, retry) {
        (None, None) => return DEFAULT_PAUSE,
        (a, b) => a.unwrap_or(0.0).max(b.unwrap_or(0.0)),
    };
    Duration::from_secs_f64(wait.min(LONGEST_PAUSE.as_secs_f64())).max(Duration::from_millis(100))
}

/// Seconds since the Unix epoch, for [`pause_of`].
pub fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pause(pairs: &[(&str, &str)]) -> Duration {
        pause_of(
            |name| {
                pairs
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| *v)
            },
            1_800_000_000.0,
        )
    }

    #[test]
    fn a_429_waits_for_the_later_of_its_reset_and_retry_after() {
        assert_eq!(pause(&[("X-RateLimit-Reset", "3")]), Duration::from_secs(3));
        assert_eq!(
            pause(&[("X-RateLimit-Reset", "2"), ("Retry-After", "5")]),
            Duration::from_secs(5)
        );
        assert_eq!(pause(&[("Retry-After", "1.5")]), Duration::from_millis(1500));
        assert_eq!(pause(&[]), DEFAULT_PAUSE);
        // A reset written as a Unix time, ten seconds ahead.
        assert_eq!(
            pause(&[("X-RateLimit-Reset", "1800000010")]),
            Duration::from_secs(10)
        );
        // Nonsense is neither obeyed for ever nor turned into no wait.
        assert_eq!(pause(&[("Retry-After", "99999999")]), LONGEST_PAUSE);
        assert_eq!(pause(&[("Retry-After", "-4")]), DEFAULT_PAUSE);
        assert_eq!(pause(&[("Retry-After", "NaN")]), DEFAULT_PAUSE);
        assert_eq!(pause(&[("Retry-After", "0")]), Duration::from_millis(100));
        // A reset already past.
        assert_eq!(
            pause(&[("X-RateLimit-Reset", "1700000000")]),
            Duration::from_millis(100)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn calls_wait_for_the_latest_pause() {
        let p = RatePause::default();
        let start = Instant::now();
        p.wait().await;
        assert_eq!(start.elapsed(), Duration::ZERO, "no pause, no wait");
        p.hold(Duration::from_secs(3));
        p.hold(Duration::from_secs(1));
        p.wait().await;
        assert_eq!(start.elapsed(), Duration::from_secs(3), "the later pause holds");
    }
}
