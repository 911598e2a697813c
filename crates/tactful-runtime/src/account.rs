//! What every platform does for each persona's account: connect, and when
//! the connection drops or cannot be made, try again after a pause that
//! doubles up to a cap, until the service stops.
//!
//! Written once here so IRC, Matrix and the platforms after them retry the
//! same way and say so the same way in the log.

use std::time::Duration;

/// The first pause after a failure.
pub const FIRST_RETRY: Duration = Duration::from_millis(500);

/// Capped exponential backoff for one account's connection.
#[derive(Clone, Debug)]
pub struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    /// Starts at [`FIRST_RETRY`], doubling up to `max`.
    pub fn new(max: Duration) -> Backoff {
        Backoff {
            next: FIRST_RETRY.min(max),
            max,
        }
    }

    /// Back to the first pause, after a success.
    pub fn reset(&mut self) {
        self.next = FIRST_RETRY.min(self.max);
    }

    /// The pause the next [`Backoff::wait`] takes.
    pub fn next(&self) -> Duration {
        self.next
    }

    /// Logs why `platform` must wait for `persona`, waits, and doubles the
    /// next pause (up to the cap).
    pub async fn wait(&mut self, platform: &str, persona: &str, why: &(dyn std::fmt::Display + Sync)) {
        let pause = self.next;
        tracing::warn!(%persona, "{platform}: {why}; retrying in {pause:?}");
        tokio::time::sleep(pause).await;
        self.next = (self.next * 2).min(self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn pauses_double_up_to_the_cap_and_reset_after_success() {
        let mut b = Backoff::new(Duration::from_secs(3));
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(b.next());
            let before = tokio::time::Instant::now();
            b.wait("test", "docs", &"down").await;
            assert_eq!(before.elapsed(), *seen.last().expect("a pause"));
        }
        assert_eq!(
            seen,
            [500, 1000, 2000, 3000, 3000].map(Duration::from_millis),
            "doubling, capped"
        );
        b.reset();
        assert_eq!(b.next(), FIRST_RETRY);
        assert_eq!(
            Backoff::new(Duration::from_millis(100)).next(),
            Duration::from_millis(100)
        );
    }
}
