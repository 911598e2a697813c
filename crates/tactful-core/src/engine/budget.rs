//! Spend budgets in the engine (the ledger is [`crate::budget`]): which
//! ledger pays for a persona's call in a room, the check before a turn is
//! decided, the hold when its call starts, and the settlement when it ends.
//!
//! The engine checks and holds in the same call, so turns decided together
//! see each other's holds. A gated message is checked when it is decided
//! and again when its gate lets the reply through (other turns may have
//! spent the budget while the gate ran); the gate's own call holds nothing
//! and is counted as reported.

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::budget::{SpendLedger, TokenBudget, estimate_tokens};
use crate::policy::BudgetScope;

/// How long a persona out of budget waits before it tells a room so again:
/// a person asking twice in a minute needs one notice, not two.
pub const BUDGET_NOTICE_GAP: Duration = Duration::from_secs(600);

/// Whether any spend budget is configured, on a persona or a room.
pub(super) fn in_use(personas: &[PersonaSpec], policies: &PolicyTable) -> bool {
    personas.iter().any(|p| p.budget.is_some()) || policies.any_room_budget()
}

/// A turn's hold on a spend budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hold {
    /// The tokens held.
    pub(super) estimate: u64,
    /// Whether the room's budget pays (else the persona's).
    pub(super) room_scoped: bool,
}

/// What is left of one budget, for metrics and the console.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetLeft {
    /// Whose budget.
    pub persona: PersonaId,
    /// Tokens left now, holds of running calls taken off.
    pub remaining: u64,
    /// The budget's size.
    pub tokens: u64,
}

impl Engine {
    /// The budget that pays for `p`'s calls in `room`, and whether it is
    /// the room's own.
    pub(super) fn payer(&self, room: &Room, p: PersonaIdx) -> Option<(TokenBudget, bool)> {
        match &room.policies[p.0 as usize].budget {
            BudgetScope::Off => None,
            BudgetScope::Room(b) => Some((b.clone(), true)),
            BudgetScope::Persona => self.personas[p.0 as usize].budget.clone().map(|b| (b, false)),
        }
    }

    /// The tokens a call of `p` in `room` about `trigger_bytes` of new
    /// messages is held for: its prompt, history window and all.
    fn estimate(&self, room: &Room, p: PersonaIdx, trigger_bytes: usize) -> u64 {
        let history: usize = room
            .history
            .last(self.limits.max_turns)
            .map(|e| e.text.len() + e.author_name.len() + 12)
            .sum();
        let prompt = self.personas[p.0 as usize].prompt.len();
        estimate_tokens(
            prompt + history.min(self.limits.max_chars * 4) + trigger_bytes,
            room.policies[p.0 as usize].max_reply_chars,
        )
    }

    /// What pays for a call of `p` in `room_id` about `trigger_bytes`, and
    /// its estimate: (the budget, whether it is the room's own, the
    /// estimate); `None` when no budget applies.
    fn priced(
        &self,
        room_id: &RoomId,
        p: PersonaIdx,
        trigger_bytes: usize,
    ) -> Option<(TokenBudget, bool, u64)> {
        let room = self.rooms.get(room_id)?;
        let (budget, room_scoped) = self.payer(room, p)?;
        Some((budget, room_scoped, self.estimate(room, p, trigger_bytes)))
    }

    fn ledger(&mut self, room_id: &RoomId, p: PersonaIdx, room_scoped: bool) -> &mut SpendLedger {
        if room_scoped {
            let room = self.rooms.get_mut(room_id).expect("room exists");
            &mut room.members[p.0 as usize].budget().spend
        } else {
            &mut self.spend[p.0 as usize]
        }
    }

    /// Whether `p` can pay for a call in `room_id` about `trigger_bytes`
    /// of new messages now; true when no budget applies.
    pub(super) fn affords(
        &mut self,
        now: Timestamp,
        room_id: &RoomId,
        p: PersonaIdx,
        trigger_bytes: usize,
    ) -> bool {
        if !self.budgets {
            return true;
        }
        let Some((budget, room_scoped, estimate)) = self.priced(room_id, p, trigger_bytes) else {
            return true;
        };
        self.ledger(room_id, p, room_scoped).fits(now, &budget, estimate)
    }

    /// The note for a call of `p` about `trigger_bytes` that `msg` would
    /// have started, had the budget paid for it.
    pub(super) fn budget_note(
        &mut self,
        now: Timestamp,
        room_id: &RoomId,
        p: PersonaIdx,
        msg: MsgId,
        trigger_bytes: usize,
    ) -> Option<BudgetNote> {
        let (budget, room_scoped, estimate) = self.priced(room_id, p, trigger_bytes)?;
        let persona = self.personas[p.0 as usize].id.clone();
        let ledger = self.ledger(room_id, p, room_scoped);
        Some(BudgetNote {
            at: now,
            persona,
            room: room_id.clone(),
            msg,
            room_budget: room_scoped,
            used: ledger.used(now, budget.per),
            tokens: budget.tokens,
            per: budget.per,
            estimate,
            frees_at: ledger.frees_at(budget.per),
        })
    }

    /// Holds what a call starting now is estimated to cost; `None` when no
    /// budget applies.
    pub(super) fn hold_budget(
        &mut self,
        room_id: &RoomId,
        p: PersonaIdx,
        trigger_bytes: usize,
    ) -> Option<Hold> {
        let (_, room_scoped, estimate) = self.priced(room_id, p, trigger_bytes)?;
        self.ledger(room_id, p, room_scoped).hold(estimate);
        Some(Hold {
            estimate,
            room_scoped,
        })
    }

    /// Settles an ended turn: what the backend reported, else the
    /// estimate when the agent answered (it was paid for), else nothing.
    /// A gate's call holds nothing but is counted when reported.
    pub(super) fn settle_budget(&mut self, now: Timestamp, turn: &Turn) {
        let p = turn.persona;
        let (estimate, room_scoped, per) = match turn.budget {
            Some(h) => {
                let Some(room) = self.rooms.get(&turn.room) else {
                    return;
                };
                let per = self
                    .payer(room, p)
                    .map_or(Duration::from_secs(86_400), |(b, _)| b.per);
                (h.estimate, h.room_scoped, per)
            }
            None => {
                let Some((b, room_scoped)) = self.rooms.get(&turn.room).and_then(|r| self.payer(r, p)) else {
                    return;
                };
                (0, room_scoped, b.per)
            }
        };
        let spent = turn.used.unwrap_or(if turn.answered { estimate } else { 0 });
        self.ledger(&turn.room, p, room_scoped)
            .settle(now, per, estimate, spent);
        if !room_scoped && let Some(room) = self.rooms.get_mut(&turn.room) {
            // The room keeps its share of the persona's spend: a restart
            // gets the persona's budget back from its rooms' snapshots.
            room.members[p.0 as usize].budget().spend.add(now, per, spent);
        }
    }

    /// Reports the tokens (prompt and completion) a turn's call used, as
    /// its backend counted them; its budget is settled with them instead
    /// of the estimate when the turn ends. Unknown turns are ignored.
    pub fn handle_usage(&mut self, turn: TurnId, tokens: u64) {
        if let Some(t) = self.turns.get_mut(&turn) {
            t.used = Some(t.used.unwrap_or(0).saturating_add(tokens));
        }
    }

    /// What is left of each persona's own budget at `now` (a room's own
    /// budgets are not listed: there may be one per room, and rooms are
    /// many).
    pub fn budgets_left(&mut self, now: Timestamp) -> Vec<BudgetLeft> {
        let mut out = Vec::new();
        for (i, spec) in self.personas.iter().enumerate() {
            if let Some(b) = &spec.budget
                && !self.retired.contains(PersonaIdx(i as u8))
            {
                out.push(BudgetLeft {
                    persona: spec.id.clone(),
                    remaining: self.spend[i].remaining(now, b),
                    tokens: b.tokens,
                });
            }
        }
        out
    }

    /// The verdict on a message `p` cannot pay to answer, in place of `v`:
    /// what `v` reserved is given back, and an addressed message gets the
    /// budget's notice unless the room had one in the last
    /// [`BUDGET_NOTICE_GAP`].
    pub(super) fn out_of_budget(
        &mut self,
        now: Timestamp,
        room_id: &RoomId,
        p: PersonaIdx,
        v: &Verdict,
    ) -> Verdict {
        let room = self.rooms.get_mut(room_id).expect("room exists");
        let member = &mut room.members[p.0 as usize];
        if v.reserved {
            member.rate.release();
        }
        let noticed_lately = member
            .budget
            .as_ref()
            .and_then(|b| b.noticed)
            .is_some_and(|t| now.saturating_since(t) < BUDGET_NOTICE_GAP);
        if v.unprompted {
            room.unprompted.release();
        }
        let mut out = Verdict::new(Outcome::Skip, Reason::BudgetExhausted);
        if v.reason != Reason::All && !noticed_lately {
            out.action = Action::Notice;
        }
        out
    }
}
