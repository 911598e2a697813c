//! Passing the floor: one model call per unaddressed question.
//!
//! When several personas could answer one unaddressed message (`all` mode)
//! and the room's `floor.strategy` is `pass`, only one is asked at first;
//! the others wait in a queue, their rate-limit slots given back and their
//! decisions not yet made. The order: a persona behind a reply gate first
//! (its gate's REPLY is the strongest signal), then whoever spoke least
//! recently in the room, then config order. The floor passes to the next
//! when the one asked declines (`NO_REPLY`), fails, its gate says SKIP, or
//! it is still writing after `floor.pass_timeout_ms` (it goes on; if it
//! answers first after all, the later reply is withheld as `floor_taken`).
//! Once `floor.max_speakers` replies went out, everyone still waiting is
//! decided `skip` / `floor_taken` without a call. Each offer is traced as
//! [`Output::Floor`].

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::policy::FloorStrategy;

/// One message's floor being passed.
#[derive(Debug)]
pub(super) struct Pass {
    /// The message.
    entry: Arc<Entry>,
    /// Whether a bot wrote it.
    is_bot: bool,
    /// Who is still to be asked, in order, and how (a reply turn, or
    /// their gate first).
    queue: VecDeque<(PersonaIdx, Action)>,
    /// The turn of the offer outstanding (a gate's, then its reply's).
    current: Option<TurnId>,
    /// Its timeout timer.
    timer: Option<(Timestamp, u64)>,
    /// How many may answer (the room's `floor.max_speakers`).
    max: u32,
}

impl Pass {
    /// Removes its timeout timer (the pass is dropped).
    pub(super) fn disarm(&mut self, timers: &mut BTreeMap<(Timestamp, u64), Timer>) {
        if let Some(key) = self.timer.take() {
            timers.remove(&key);
        }
    }
}

/// Why a persona was offered the floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorWhy {
    /// The first in order.
    First,
    /// The one before declined, failed, or its gate said SKIP.
    Declined,
    /// The one before is still writing after the pass timeout.
    Timeout,
    /// The one before answered and more speakers are allowed.
    Shared,
}

impl FloorWhy {
    /// The stable name used in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            FloorWhy::First => "first",
            FloorWhy::Declined => "declined",
            FloorWhy::Timeout => "timeout",
            FloorWhy::Shared => "shared",
        }
    }
}

/// A persona offered the floor of one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FloorNote {
    /// When.
    pub at: Timestamp,
    /// The room.
    pub room: RoomId,
    /// The message.
    pub msg: MsgId,
    /// Who is asked now.
    pub persona: PersonaId,
    /// Why now.
    pub why: FloorWhy,
    /// Who waits after it, in order.
    pub waiting: Vec<PersonaId>,
}

impl Engine {
    /// Splits the verdicts of one message: with `pass` and two or more
    /// personas eligible to answer it unaddressed, all but the first in
    /// order are taken out (their slots given back) into the room's pass
    /// queue. Returns the personas taken out, and the first one's offer
    /// for the trace (after the decisions).
    pub(super) fn hold_floor(
        &mut self,
        now: Timestamp,
        room_id: &RoomId,
        entry: &Arc<Entry>,
        is_bot: bool,
        verdicts: &[(PersonaIdx, Verdict)],
    ) -> (PersonaSet, Option<FloorNote>) {
        // The common case, on every message: nobody or one could answer it
        // unaddressed. Decided without touching the room.
        let unaddressed =
            |v: &Verdict| v.reason == Reason::All && matches!(v.action, Action::Turn | Action::Gate);
        if verdicts.iter().filter(|(_, v)| unaddressed(v)).nth(1).is_none() {
            return (PersonaSet::default(), None);
        }
        let room = self.rooms.get_mut(room_id).expect("room exists");
        let mut eligible: Vec<(PersonaIdx, Action)> = verdicts
            .iter()
            .filter(|(p, v)| {
                v.reason == Reason::All
                    && matches!(v.action, Action::Turn | Action::Gate)
                    && room.policies[p.0 as usize].floor_strategy == FloorStrategy::Pass
            })
            .map(|(p, v)| (*p, v.action))
            .collect();
        let mut held = PersonaSet::default();
        if eligible.len() < 2 {
            return (held, None);
        }
        // Gated first, then the longest silent (never is longest), then
        // config order (the sort is stable).
        eligible.sort_by_key(|&(p, a)| (a != Action::Gate, room.members[p.0 as usize].last_spoke));
        let first = eligible.remove(0).0;
        for &(p, _) in &eligible {
            held.insert(p);
            if verdicts.iter().any(|(q, v)| *q == p && v.reserved) {
                room.members[p.0 as usize].rate.release();
            }
            if verdicts.iter().any(|(q, v)| *q == p && v.unprompted) {
                room.unprompted.release();
            }
        }
        let max = room.policies[first.0 as usize].floor_max_speakers;
        let waiting = eligible
            .iter()
            .map(|(p, _)| self.personas[p.0 as usize].id.clone())
            .collect();
        room.passes.insert(
            entry.id.clone(),
            Pass {
                entry: entry.clone(),
                is_bot,
                queue: eligible.into(),
                current: None,
                timer: None,
                max,
            },
        );
        let note = FloorNote {
            at: now,
            room: room_id.clone(),
            msg: entry.id.clone(),
            persona: self.personas[first.0 as usize].id.clone(),
            why: FloorWhy::First,
            waiting,
        };
        (held, Some(note))
    }

    /// The first offer's turn started: it holds the floor.
    pub(super) fn floor_offered(&mut self, now: Timestamp, room_id: &RoomId, msg: &MsgId, turn: TurnId) {
        let Some(room) = self.rooms.get(room_id).filter(|r| r.passes.contains_key(msg)) else {
            return;
        };
        let timeout = room.policies[self.turns[&turn].persona.0 as usize].floor_pass_timeout;
        let key = self.arm(now + timeout, Timer::FloorPass(room_id.clone(), msg.clone()));
        if let Some(pass) = self.rooms.get_mut(room_id).and_then(|r| r.passes.get_mut(msg)) {
            pass.timer = Some(key);
        }
        self.floor_moved(room_id, msg, turn);
    }

    /// Turn `turn` holds the floor of `msg` now (an offer, or the reply
    /// turn of an offered gate that said REPLY).
    pub(super) fn floor_moved(&mut self, room_id: &RoomId, msg: &MsgId, turn: TurnId) {
        if let Some(pass) = self.rooms.get_mut(room_id).and_then(|r| r.passes.get_mut(msg)) {
            pass.current = Some(turn);
        }
        if let Some(t) = self.turns.get_mut(&turn) {
            t.floor_pass = true;
        }
    }

    /// A turn holding (or having held) an offer ended; `sent` when it
    /// replied.
    pub(super) fn floor_turn_ended(&mut self, now: Timestamp, turn_id: TurnId, turn: &Turn, sent: bool) {
        let msg = turn.triggers[0].id.clone();
        let Some(pass) = self.rooms.get(&turn.room).and_then(|r| r.passes.get(&msg)) else {
            return;
        };
        // An offer the timeout already passed on: only its reply matters
        // (it took the floor, which the next offer finds).
        if !sent && pass.current != Some(turn_id) {
            return;
        }
        let why = if sent {
            FloorWhy::Shared
        } else {
            FloorWhy::Declined
        };
        self.offer_next(now, &turn.room.clone(), &msg, why);
    }

    /// The pass timeout of `msg` fired.
    pub(super) fn floor_timeout(&mut self, now: Timestamp, room_id: &RoomId, msg: &MsgId) {
        if let Some(pass) = self.rooms.get_mut(room_id).and_then(|r| r.passes.get_mut(msg)) {
            pass.timer = None;
            self.offer_next(now, room_id, msg, FloorWhy::Timeout);
        }
    }

    /// Offers the floor of `msg` to the next persona who may take it; when
    /// it is taken, or nobody is left, the rest are decided without a call.
    fn offer_next(&mut self, now: Timestamp, room_id: &RoomId, msg: &MsgId, why: FloorWhy) {
        let Some(room) = self.rooms.get_mut(room_id) else {
            return;
        };
        let Some(mut pass) = room.passes.remove(msg) else {
            return;
        };
        pass.disarm(&mut self.timers);
        let taken = room.floor_taken(std::slice::from_ref(&pass.entry), pass.max);
        while let Some((p, action)) = pass.queue.pop_front() {
            if self.retired.contains(p) {
                continue;
            }
            let persona = self.personas[p.0 as usize].id.clone();
            let decision = |outcome, reason, turn| {
                Output::Decision(Decision {
                    at: now,
                    room: room_id.clone(),
                    msg: msg.clone(),
                    persona: persona.clone(),
                    outcome,
                    reason,
                    turn,
                })
            };
            if taken {
                self.out
                    .push_back(decision(Outcome::Skip, Reason::FloorTaken, None));
                continue;
            }
            if !self.affords(now, room_id, p, pass.entry.text.len()) {
                self.out
                    .push_back(decision(Outcome::Skip, Reason::BudgetExhausted, None));
                if let Some(note) = self.budget_note(now, room_id, p, msg.clone(), pass.entry.text.len()) {
                    self.out.push_back(Output::OverBudget(note));
                }
                continue;
            }
            let room = self.rooms.get_mut(room_id).expect("room exists");
            let limit = room.policies[p.0 as usize].rate_limit;
            let member = &mut room.members[p.0 as usize];
            let reserved = match &limit {
                Some(limit) if !member.rate.try_reserve(now, limit) => {
                    let note = LimitNote::of(
                        now,
                        persona.clone(),
                        room_id.clone(),
                        msg.clone(),
                        limit,
                        &member.rate,
                    );
                    self.out
                        .push_back(decision(Outcome::Skip, Reason::RateLimited, None));
                    self.out.push_back(Output::Limited(note));
                    continue;
                }
                Some(_) => true,
                None => false,
            };
            let Ok(unprompted) = room.reserve_unprompted(now, p, reserved) else {
                self.out
                    .push_back(decision(Outcome::Skip, Reason::UnpromptedBudget, None));
                continue;
            };
            self.out.push_back(Output::Floor(FloorNote {
                at: now,
                room: room_id.clone(),
                msg: msg.clone(),
                persona: persona.clone(),
                why,
                waiting: pass
                    .queue
                    .iter()
                    .map(|(q, _)| self.personas[q.0 as usize].id.clone())
                    .collect(),
            }));
            let turn = self.new_turn_id();
            let kind = if action == Action::Gate {
                TurnKind::Gate
            } else {
                self.out
                    .push_back(decision(Outcome::Reply, Reason::All, Some(turn)));
                TurnKind::Reply
            };
            let (entry, is_bot) = (pass.entry.clone(), pass.is_bot);
            self.rooms
                .get_mut(room_id)
                .expect("room exists")
                .passes
                .insert(msg.clone(), pass);
            self.start_turn(
                now,
                turn,
                room_id,
                p,
                kind,
                vec![entry],
                reserved,
                true,
                is_bot,
                None,
            );
            if unprompted {
                self.hold_unprompted(turn);
            }
            self.floor_offered(now, room_id, msg, turn);
            return;
        }
    }
}
