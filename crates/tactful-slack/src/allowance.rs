//! How long an app's envelopes may wait for `users.info` between them.
//!
//! slack-morphism hands one socket's envelopes to tactful one after
//! another and acknowledges each when tactful returns, so every moment one
//! envelope waits for a name, every envelope queued behind it waits too,
//! and Slack's 3 s start from each one's arrival, not from its turn. A
//! burst of people tactful has not seen before would make each wait in
//! turn, and the last ones be acknowledged late (and delivered again).
//!
//! So the waits share one allowance per app, a token bucket: at most
//! [`WaitAllowance::new`]'s `burst` at once, refilled at `burst` per
//! `period`. Whatever was queued, the time spent waiting for names while
//! an envelope stood in line is at most `burst` plus the refill over the
//! time it stood, which keeps it well inside Slack's deadline. Once the
//! allowance is spent, messages are stored with the names already known
//! (an id for someone new); the lookups go on in the background and fill
//! the cache for the next message.

use std::time::Duration;

use tokio::time::Instant;

/// A token bucket of waiting time.
#[derive(Debug)]
pub struct WaitAllowance {
    burst: Duration,
    period: Duration,
    left: Duration,
    at: Instant,
}

impl WaitAllowance {
    /// Full: `burst` of waiting at once, `burst` more every `period`.
    pub fn new(burst: Duration, period: Duration, now: Instant) -> WaitAllowance {
        WaitAllowance {
            burst,
            period,
            left: burst,
            at: now,
        }
    }

    /// How long the next wait may be, at `now`.
    pub fn available(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.at);
        if !self.period.is_zero() {
            let refill = self
                .burst
                .mul_f64(elapsed.as_secs_f64() / self.period.as_secs_f64());
            self.left = (self.left + refill).min(self.burst);
        }
        self.at = now;
        self.left
    }

    /// Takes `waited` off the allowance.
    pub fn spend(&mut self, waited: Duration) {
        self.left = self.left.saturating_sub(waited);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn a_burst_of_waits_spends_the_allowance_then_it_refills() {
        let t0 = Instant::now();
        let mut a = WaitAllowance::new(MS(600), MS(2500), t0);
        assert_eq!(a.available(t0), MS(600));
        a.spend(MS(250));
        a.spend(MS(250));
        assert_eq!(a.available(t0), MS(100));
        a.spend(MS(250));
        assert_eq!(a.available(t0), Duration::ZERO, "spent, never below zero");
        // A quarter of the period later, a quarter of the burst is back.
        assert_eq!(a.available(t0 + MS(625)), MS(150));
        // Never more than the burst, however long it rests.
        assert_eq!(a.available(t0 + Duration::from_secs(3600)), MS(600));
    }

    #[test]
    fn the_time_spent_waiting_in_any_line_stays_inside_the_deadline() {
        // Envelopes queued back to back, each wanting the whole 600 ms and
        // taking 5 ms to store: the last of 50 is done about 1.1 s after
        // the first one's start, well inside Slack's 3 s.
        let t0 = Instant::now();
        let mut a = WaitAllowance::new(MS(600), MS(2500), t0);
        let mut now = t0;
        for _ in 0..50 {
            let wait = a.available(now).min(MS(600));
            a.spend(wait);
            now += wait + MS(5);
        }
        assert!(now - t0 < MS(1500), "{:?}", now - t0);
    }
}
