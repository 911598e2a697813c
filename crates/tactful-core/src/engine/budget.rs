//! Spend budgets in the engine (the ledger is [`crate::budget`]): which
//! ledger pays for a persona's call in a room, the check before a turn is
//! decided, the hold when its call starts, and the settlement when it ends.
//!
//! The engine checks and holds in the same call, so turns decided together
//! see each other's holds. A gated message is checked when it is decided
//! and again when its gate lets the reply through (other turns may have
//! spent the budget while the gate ran); the gate's own call holds nothing
//! and is counted as reported.
//!
//! A persona's own budget is spent in all its rooms. When several
//! processes share the rooms, each engine counts the spend of the rooms it
//! holds and is told what the others' rooms spent
//! ([`Engine::spent_elsewhere`]); it hands out what its own rooms spend
//! ([`Engine::take_spent`]) for the others to read.

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::budget::{SpendLedger, TokenBudget, bucket_end, estimate_tokens};
use crate::policy::BudgetScope;

/// How long a persona out of budget waits before it tells a room so again:
/// a person asking twice in a minute needs one notice, not two.
pub const BUDGET_NOTICE_GAP: Duration = Duration::from_secs(600);

/// Whether any spend budget is configured, on a persona or a room.
pub(super) fn in_use(personas: &[PersonaSpec], policies: &PolicyTable) -> bool {
    personas.iter().any(|p| p.budget.is_some()) || policies.any_room_budget()
}

/// A persona's spend shared with other processes (see the module doc).
#[derive(Debug, Default)]
pub(super) struct Shared {
    /// Whether other processes count this engine's spend.
    on: bool,
    /// Per persona slot: what rooms held elsewhere spent.
    elsewhere: Vec<SpendLedger>,
    /// Spend settled since the driver last took it.
    spent: Vec<Spent>,
}

impl Shared {
    fn elsewhere(&mut self, p: PersonaIdx) -> Option<&mut SpendLedger> {
        self.elsewhere.get_mut(p.0 as usize)
    }
}

/// Tokens a room spent or holds from its persona's own budget, in the
/// bucket that counts them: what a process sharing its rooms with others
/// records for them ([`Engine::take_spent`]). A call's estimate is handed
/// out when it starts, and the difference to what it cost when it ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spent {
    /// The room that spent them (its owner records them).
    pub room: RoomId,
    /// Whose budget.
    pub persona: PersonaId,
    /// The end of the bucket they count in ([`bucket_end`]).
    pub bucket_end: Timestamp,
    /// The budget's window: the spend counts until `bucket_end + per`.
    pub per: Duration,
    /// How many: negative when a call cost less than its hold.
    pub tokens: i64,
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
        // What the other processes spent weighs on the check like more
        // of this call's estimate.
        let elsewhere = self.used_elsewhere(now, p, room_scoped, budget.per);
        self.ledger(room_id, p, room_scoped)
            .fits(now, &budget, estimate.saturating_add(elsewhere))
    }

    /// What rooms other processes hold spent of `p`'s own budget (none of
    /// a room's own budget: the room is counted where it is held).
    fn used_elsewhere(&mut self, now: Timestamp, p: PersonaIdx, room_scoped: bool, per: Duration) -> u64 {
        if room_scoped {
            return 0;
        }
        self.shared.elsewhere(p).map_or(0, |l| l.used(now, per))
    }

    /// Counts this engine's spend for other processes sharing its rooms:
    /// from now on [`Engine::take_spent`] hands it out. Off by default,
    /// so an engine alone (or a replay) keeps nothing of it.
    pub fn share_spend(&mut self) {
        self.shared.on = true;
    }

    /// Spend settled from personas' own budgets since the last call, for a
    /// driver sharing the rooms with other processes to record.
    pub fn take_spent(&mut self) -> Vec<Spent> {
        std::mem::take(&mut self.shared.spent)
    }

    /// What rooms held by other processes spent of each persona's own
    /// budget, as (persona, bucket end, tokens): replaces what was said
    /// before. Checks from now on count it with this engine's own spend
    /// (budget notes say how much of it was spent elsewhere). Unknown
    /// personas are ignored.
    pub fn spent_elsewhere(&mut self, spend: &[(PersonaId, Timestamp, u64)]) {
        let n = self.personas.len();
        self.shared.elsewhere = vec![SpendLedger::default(); n];
        for (persona, end, tokens) in spend {
            if let Some(p) = self.persona_index(persona.as_str()) {
                self.shared.elsewhere[p.0 as usize].restore(&[(*end, *tokens)]);
            }
        }
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
        let elsewhere = self.used_elsewhere(now, p, room_scoped, budget.per);
        let ledger = self.ledger(room_id, p, room_scoped);
        Some(BudgetNote {
            at: now,
            persona,
            room: room_id.clone(),
            msg,
            room_budget: room_scoped,
            used: ledger.used(now, budget.per).saturating_add(elsewhere),
            elsewhere,
            tokens: budget.tokens,
            per: budget.per,
            estimate,
            frees_at: ledger.frees_at(budget.per),
        })
    }

    /// Holds what a call starting now is estimated to cost; `None` when no
    /// budget applies. A hold on the persona's own budget is handed out
    /// for the other processes too, so calls running at once in several
    /// of them see each other.
    pub(super) fn hold_budget(
        &mut self,
        now: Timestamp,
        room_id: &RoomId,
        p: PersonaIdx,
        trigger_bytes: usize,
    ) -> Option<Hold> {
        let (budget, room_scoped, estimate) = self.priced(room_id, p, trigger_bytes)?;
        self.ledger(room_id, p, room_scoped).hold(estimate);
        if !room_scoped {
            self.share(
                room_id,
                p,
                now,
                budget.per,
                i64::try_from(estimate).unwrap_or(i64::MAX),
            );
        }
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
        let payer = self.rooms.get(&turn.room).and_then(|r| self.payer(r, p));
        let (estimate, room_scoped, per) = match (turn.budget, payer) {
            (Some(h), Some((b, _))) => (h.estimate, h.room_scoped, b.per),
            // The room was handed over while the call ran: a hold on the
            // persona's budget is still given back (a room's own budget
            // went with the room).
            (Some(h), None) if !h.room_scoped => match &self.personas[p.0 as usize].budget {
                Some(b) => (h.estimate, false, b.per),
                None => (h.estimate, false, Duration::from_secs(86_400)),
            },
            (Some(_), None) => return,
            (None, Some((b, room_scoped))) => (0, room_scoped, b.per),
            (None, None) => return,
        };
        let spent = turn.used.unwrap_or(if turn.answered { estimate } else { 0 });
        self.ledger(&turn.room, p, room_scoped)
            .settle(now, per, estimate, spent);
        if room_scoped {
            return;
        }
        if let Some(room) = self.rooms.get_mut(&turn.room) {
            // The room keeps its share of the persona's spend: a restart
            // gets the persona's budget back from its rooms' snapshots.
            room.members[p.0 as usize].budget().spend.add(now, per, spent);
        }
        // The others counted the hold: they count what it cost instead.
        let delta = i64::try_from(spent).unwrap_or(i64::MAX) - i64::try_from(estimate).unwrap_or(i64::MAX);
        self.share(&turn.room, p, now, per, delta);
    }

    /// Hands `tokens` (negative: a hold given back) spent by `p` in `room`
    /// out for the other processes, when they count this engine's spend.
    fn share(&mut self, room: &RoomId, p: PersonaIdx, now: Timestamp, per: Duration, tokens: i64) {
        if self.shared.on && tokens != 0 {
            self.shared.spent.push(Spent {
                room: room.clone(),
                persona: self.personas[p.0 as usize].id.clone(),
                bucket_end: bucket_end(now, per),
                per,
                tokens,
            });
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
                let elsewhere = self
                    .shared
                    .elsewhere(PersonaIdx(i as u8))
                    .map_or(0, |l| l.used(now, b.per));
                out.push(BudgetLeft {
                    persona: spec.id.clone(),
                    remaining: self.spend[i].remaining(now, b).saturating_sub(elsewhere),
                    tokens: b.tokens,
                });
            }
        }
        out
    }

    /// Takes a room's share of its personas' own budgets out of this
    /// engine's count: the room is handed to another process, which counts
    /// it from now on (and says so through [`Engine::spent_elsewhere`]).
    pub(super) fn hand_over_spend(&mut self, room: &Room) {
        for (i, m) in room.members.iter().enumerate() {
            let persona_wide = room.policies[i].budget == BudgetScope::Persona;
            if let (true, Some(b)) = (persona_wide, m.budget.as_ref()) {
                self.spend[i].remove(&b.spend.records());
            }
        }
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
