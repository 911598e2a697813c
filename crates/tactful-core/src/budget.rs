//! Spend budgets: how many model tokens a persona may use per window.
//!
//! A rate limit counts replies; a budget counts what they cost. Like a rate
//! limit, it is reserved *before* the call: the engine estimates the call's
//! tokens from what it is about to send ([`estimate_tokens`]), holds that
//! much, and settles the hold with the usage the backend reports when the
//! turn ends (or with the estimate, when the backend reports none). Turns
//! that start together see each other's holds, so a burst cannot spend the
//! same tokens twice; only a call that costs more than its estimate can end
//! a budget a little over.
//!
//! Spend is kept in buckets, a fixed number per window, so a ledger's size
//! does not grow with the number of calls: a bucket counts until its end
//! leaves the window, which errs on the side of spending less.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::time::Timestamp;

/// What a persona may spend: `tokens` per `per`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenBudget {
    /// Prompt and completion tokens, together.
    pub tokens: u64,
    /// The sliding window they are counted over.
    pub per: Duration,
    /// What an addressed message gets when the budget cannot pay for an
    /// answer: a person who asked should not be left wondering.
    pub notice: Arc<str>,
}

/// The notice an addressed message gets from a persona out of budget.
pub const DEFAULT_BUDGET_NOTICE: &str =
    "I have used up my budget for now and cannot answer until it frees up. Please ask again later.";

/// The fewest tokens one budget may hold: the smallest estimate of one
/// call (tactful's contract and a full answer, nothing else). A smaller
/// budget could never pay for a call.
pub const MIN_BUDGET_TOKENS: u64 = (CONTRACT_BYTES.div_ceil(3) + ESTIMATED_ANSWER_CHARS.div_ceil(3)) as u64;

/// Characters of answer an estimate counts on: a longer answer is settled
/// at its real cost.
pub const ESTIMATED_ANSWER_CHARS: usize = 2_000;

/// About how long the contract tactful adds to every prompt is, in bytes.
const CONTRACT_BYTES: usize = 1_600;

/// How many buckets a window holds.
const BUCKETS: u64 = 48;

/// A call's tokens, estimated before it is made: a third of the prompt's
/// bytes (English runs about four characters a token, most other scripts
/// fewer bytes per token than three) plus an answer of up to
/// [`ESTIMATED_ANSWER_CHARS`]. Errs high, so holds rarely fall short.
pub fn estimate_tokens(prompt_bytes: usize, max_reply_chars: usize) -> u64 {
    let answer = max_reply_chars.min(ESTIMATED_ANSWER_CHARS);
    ((prompt_bytes + CONTRACT_BYTES).div_ceil(3) + answer.div_ceil(3)) as u64
}

/// The end of the bucket that spend at `now` is counted in, for a window
/// of `per`: spend is recorded (and shared between processes) by it.
pub fn bucket_end(now: Timestamp, per: Duration) -> Timestamp {
    let width = (per.as_millis() as u64 / BUCKETS).max(1_000);
    Timestamp((now.as_millis() / width + 1) * width)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bucket {
    /// The bucket counts while its end is inside the window.
    end: Timestamp,
    tokens: u64,
}

/// Tokens spent in a window, in buckets, plus holds of turns running.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpendLedger {
    buckets: VecDeque<Bucket>,
    held: u64,
}

impl SpendLedger {
    /// Tokens spent inside the window ending at `now`, holds included.
    pub fn used(&mut self, now: Timestamp, per: Duration) -> u64 {
        self.prune(now, per);
        self.buckets.iter().map(|b| b.tokens).sum::<u64>() + self.held
    }

    /// What is left of `budget` at `now`.
    pub fn remaining(&mut self, now: Timestamp, budget: &TokenBudget) -> u64 {
        budget.tokens.saturating_sub(self.used(now, budget.per))
    }

    /// Whether `estimate` more tokens fit in `budget` at `now`.
    pub fn fits(&mut self, now: Timestamp, budget: &TokenBudget, estimate: u64) -> bool {
        self.used(now, budget.per).saturating_add(estimate) <= budget.tokens
    }

    /// Holds `estimate` tokens for a call about to be made.
    pub fn hold(&mut self, estimate: u64) {
        self.held = self.held.saturating_add(estimate);
    }

    /// Ends a hold of `estimate`: `spent` tokens (what the backend reported,
    /// or the estimate) are counted at `now`.
    pub fn settle(&mut self, now: Timestamp, per: Duration, estimate: u64, spent: u64) {
        self.held = self.held.saturating_sub(estimate);
        self.add(now, per, spent);
    }

    /// Counts `tokens` spent at `now`, with no hold.
    pub fn add(&mut self, now: Timestamp, per: Duration, tokens: u64) {
        if tokens == 0 {
            return;
        }
        let end = bucket_end(now, per);
        match self.buckets.back_mut() {
            Some(b) if b.end >= end => b.tokens = b.tokens.saturating_add(tokens),
            _ => self.buckets.push_back(Bucket { end, tokens }),
        }
        self.prune(now, per);
    }

    /// The spend still counted, as (bucket end, tokens), oldest first: what
    /// a restart gets back through [`SpendLedger::restore`].
    pub fn records(&self) -> Vec<(Timestamp, u64)> {
        self.buckets.iter().map(|b| (b.end, b.tokens)).collect()
    }

    /// Counts spend recorded before a restart.
    pub fn restore(&mut self, records: &[(Timestamp, u64)]) {
        for &(end, tokens) in records {
            match self.buckets.iter_mut().find(|b| b.end == end) {
                Some(b) => b.tokens = b.tokens.saturating_add(tokens),
                None => {
                    let at = self.buckets.partition_point(|b| b.end < end);
                    self.buckets.insert(at, Bucket { end, tokens });
                }
            }
        }
    }

    /// Takes back spend [`SpendLedger::restore`] or [`SpendLedger::add`]
    /// counted: a room's share of a persona's spend, when the room moves to
    /// another process (which counts it from then on).
    pub fn remove(&mut self, records: &[(Timestamp, u64)]) {
        for &(end, tokens) in records {
            if let Some(b) = self.buckets.iter_mut().find(|b| b.end == end) {
                b.tokens = b.tokens.saturating_sub(tokens);
            }
        }
        self.buckets.retain(|b| b.tokens > 0);
    }

    /// When the oldest spend leaves the window: the budget grows then.
    pub fn frees_at(&self, per: Duration) -> Option<Timestamp> {
        self.buckets.front().map(|b| b.end + per)
    }

    fn prune(&mut self, now: Timestamp, per: Duration) {
        while self
            .buckets
            .front()
            .is_some_and(|b| now.saturating_since(b.end) >= per)
        {
            self.buckets.pop_front();
        }
        // Never more buckets than a window holds (plus the one filling),
        // whatever the clock did.
        while self.buckets.len() as u64 > BUCKETS + 1 {
            self.buckets.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(tokens: u64, secs: u64) -> TokenBudget {
        TokenBudget {
            tokens,
            per: Duration::from_secs(secs),
            notice: DEFAULT_BUDGET_NOTICE.into(),
        }
    }

    #[test]
    fn holds_count_until_settled_and_spend_leaves_with_the_window() {
        let b = budget(1_000, 3_600);
        let mut l = SpendLedger::default();
        let t0 = Timestamp::from_millis(0);
        assert!(l.fits(t0, &b, 600));
        l.hold(600);
        // A second call arriving meanwhile sees the first one's hold.
        assert!(!l.fits(t0, &b, 600));
        assert!(l.fits(t0, &b, 400));
        // It cost less than its estimate: the difference is free again.
        l.settle(t0, b.per, 600, 250);
        assert_eq!(l.remaining(t0, &b), 750);
        // An hour and a bucket later it is all free.
        let later = Timestamp::from_millis(3_600_000 + 75_000);
        assert_eq!(l.remaining(later, &b), 1_000);
        assert!(l.records().is_empty());
    }

    #[test]
    fn spend_survives_a_restart_through_its_records() {
        let b = budget(10_000, 86_400);
        let mut l = SpendLedger::default();
        for i in 0..500 {
            l.add(Timestamp::from_millis(i * 60_000), b.per, 10);
        }
        let records = l.records();
        assert!(
            records.len() <= BUCKETS as usize + 1,
            "bounded: {}",
            records.len()
        );
        let now = Timestamp::from_millis(500 * 60_000);
        let mut again = SpendLedger::default();
        again.restore(&records);
        assert_eq!(again.remaining(now, &b), l.remaining(now, &b));
        assert_eq!(l.remaining(now, &b), 10_000 - 5_000);
    }

    #[test]
    fn a_rooms_share_taken_back_leaves_the_rest() {
        let b = budget(10_000, 3_600);
        let mut persona = SpendLedger::default();
        let mut room = SpendLedger::default();
        let t = Timestamp::from_millis(0);
        persona.add(t, b.per, 700);
        room.add(t, b.per, 300);
        persona.restore(&room.records());
        assert_eq!(persona.remaining(t, &b), 9_000);
        persona.remove(&room.records());
        assert_eq!(persona.remaining(t, &b), 9_300);
        // Taking back more than was counted leaves nothing, not a wrap.
        persona.remove(&[(bucket_end(t, b.per), 5_000)]);
        assert_eq!(persona.remaining(t, &b), 10_000);
        assert!(persona.records().is_empty());
    }

    #[test]
    fn a_clock_that_jumps_keeps_the_ledger_bounded() {
        let b = budget(u64::MAX, 60);
        let mut l = SpendLedger::default();
        for i in (0..10_000u64).rev() {
            l.add(Timestamp::from_millis(i * 1_000), b.per, 1);
        }
        assert!(l.records().len() <= BUCKETS as usize + 1);
    }

    #[test]
    fn a_broken_usage_report_cannot_overflow_the_ledger() {
        let b = budget(1_000, 60);
        let mut l = SpendLedger::default();
        let t = Timestamp::from_millis(0);
        l.hold(u64::MAX);
        l.hold(5);
        l.settle(t, b.per, u64::MAX, u64::MAX);
        l.add(t, b.per, u64::MAX);
        assert_eq!(l.remaining(t, &b), 0);
        assert!(!l.fits(t, &b, 1));
        // Once the window has passed, the budget is whole again.
        assert_eq!(l.remaining(Timestamp::from_millis(200_000), &b), 1_000);
    }

    #[test]
    fn estimates_lean_high_and_cap_the_answer() {
        assert!(estimate_tokens(4_000, 20_000) > 4_000 / 4 + 2_000 / 4);
        assert_eq!(
            estimate_tokens(0, 20_000),
            estimate_tokens(0, ESTIMATED_ANSWER_CHARS)
        );
    }
}
