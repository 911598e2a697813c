//! The per (room, persona) reply budget.
//!
//! A slot is reserved *before* the agent is called and either committed
//! (the turn sent a reply) or released (silence, error, skip). Counting
//! reservations as spent is what makes the cap hold under a burst: N
//! triggers that arrive together see each other's reservations, so at most
//! `replies` of them ever reach an agent.

use std::collections::VecDeque;

use crate::policy::RateLimit;
use crate::time::Timestamp;

/// Sent-reply times inside the window plus reservations in flight.
#[derive(Clone, Debug, Default)]
pub struct RateLedger {
    sent: VecDeque<Timestamp>,
    reserved: u32,
}

impl RateLedger {
    /// Reserves a slot if the budget allows one at `now`.
    pub fn try_reserve(&mut self, now: Timestamp, limit: &RateLimit) -> bool {
        while self
            .sent
            .front()
            .is_some_and(|&t| now.saturating_since(t) >= limit.per)
        {
            self.sent.pop_front();
        }
        if (self.sent.len() as u64 + u64::from(self.reserved)) < u64::from(limit.replies) {
            self.reserved += 1;
            true
        } else {
            false
        }
    }

    /// Turns a reservation into a sent reply at `now`.
    pub fn commit(&mut self, now: Timestamp) {
        self.reserved = self.reserved.saturating_sub(1);
        self.sent.push_back(now);
    }

    /// Gives a reservation back: the turn ended without a reply.
    pub fn release(&mut self) {
        self.reserved = self.reserved.saturating_sub(1);
    }

    /// A ledger holding these sent-reply times and no reservation: how a
    /// restart gets its budget back from the store.
    pub fn from_sent(sent: impl IntoIterator<Item = Timestamp>) -> RateLedger {
        RateLedger {
            sent: sent.into_iter().collect(),
            reserved: 0,
        }
    }

    /// The sent-reply times still remembered, oldest first.
    pub fn sent_times(&self) -> impl Iterator<Item = Timestamp> + '_ {
        self.sent.iter().copied()
    }

    /// Takes a slot whatever the budget says: a turn that had reserved one
    /// before a restart resumes with it.
    pub fn force_reserve(&mut self) {
        self.reserved += 1;
    }

    /// When a slot frees under `limit`: the oldest reply inside the window
    /// leaves it. `None` when no reply was sent in it (every slot is a
    /// reservation: one frees when its turn ends).
    pub fn frees_at(&self, limit: &RateLimit) -> Option<Timestamp> {
        self.sent.front().map(|&t| t + limit.per)
    }

    /// Replies sent inside the window (as of the last reservation) and
    /// reservations in flight.
    pub fn usage(&self) -> (usize, u32) {
        (self.sent.len(), self.reserved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limit(replies: u32, secs: u64) -> RateLimit {
        RateLimit {
            replies,
            per: Duration::from_secs(secs),
        }
    }

    #[test]
    fn reservations_count_against_the_budget() {
        let mut l = RateLedger::default();
        let rl = limit(2, 60);
        assert!(l.try_reserve(Timestamp(0), &rl));
        assert!(l.try_reserve(Timestamp(0), &rl));
        assert!(!l.try_reserve(Timestamp(0), &rl));
        l.release();
        assert!(l.try_reserve(Timestamp(0), &rl));
    }

    #[test]
    fn the_window_slides() {
        let mut l = RateLedger::default();
        let rl = limit(1, 60);
        assert!(l.try_reserve(Timestamp(1_000), &rl));
        l.commit(Timestamp(1_000));
        assert!(!l.try_reserve(Timestamp(60_999), &rl));
        assert!(l.try_reserve(Timestamp(61_000), &rl));
    }

    #[test]
    fn a_reply_at_time_zero_still_counts() {
        let mut l = RateLedger::default();
        let rl = limit(1, 60);
        assert!(l.try_reserve(Timestamp(0), &rl));
        l.commit(Timestamp(0));
        assert!(!l.try_reserve(Timestamp(30_000), &rl));
    }
}
