//! Restoring the engine after a restart.
//!
//! The engine stays sans-I/O: it never reads a store. Instead it says which
//! rooms changed ([`Engine::take_changed_rooms`]) and exports what it keeps
//! about each beyond the transcript ([`Engine::snapshot_room`]); a driver
//! with a store saves that, and on start hands everything back in this
//! order:
//! 1. [`Engine::restore_counters`], so new turn and reply ids never repeat
//!    old ones;
//! 2. the transcript, oldest first, through [`Engine::restore_message`]
//!    (recorded exactly as it was heard, without deciding anything again),
//!    then [`Engine::handle_sent`] for the platform ids replies got, and
//!    [`Engine::restore_own`] for own messages older than the history;
//! 3. each room's [`RoomSnapshot`] through [`Engine::restore_room`]: rate
//!    budgets, cooldowns, bot streaks and ambient buffers (whose flush timer
//!    is re-armed at its old deadline, or at once if that has passed);
//! 4. [`Engine::resume_turn`] for reply turns that were running when the
//!    process stopped: they are asked again, so a decided reply is not lost.
//!
//! Floor counts and turns in flight are not snapshotted: an ambient batch
//! that was being flushed is in the snapshot's buffer and flushes again.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Engine, Room, Timer, WaitReason, persona_of};
use crate::ids::{MsgId, PersonaId, RoomId, TurnId, UserId};
use crate::message::Message;
use crate::rate_limit::RateLedger;
use crate::time::Timestamp;
use crate::transcript::Entry;
use crate::turn::{FlushTrigger, TurnKind};

/// Why a turn that was running before a restart cannot be asked again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotResumed {
    /// The persona is no longer in the config.
    #[error("its persona is no longer configured")]
    UnknownPersona,
    /// None of the messages it answered can be found.
    #[error("none of the messages it answered were kept")]
    NoTriggers,
}

/// What the engine keeps about one room beyond its transcript.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomSnapshot {
    /// Consecutive bot messages since the last human one.
    pub bot_streak: u32,
    /// Other bots seen in the room: (account id, display name).
    pub bots: Vec<(UserId, Arc<str>)>,
    /// Whether the room is a direct conversation.
    pub is_dm: bool,
    /// How many personas answered each recent unaddressed message (floor
    /// control).
    pub floor: Vec<(MsgId, u32)>,
    /// Personas with state in the room.
    pub members: Vec<MemberSnapshot>,
    /// When the replies the room's unprompted budget still counts were
    /// sent (absent in snapshots from before the budget existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unprompted: Vec<Timestamp>,
}

/// What the engine keeps about one persona in one room.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberSnapshot {
    /// The persona.
    pub persona: PersonaId,
    /// When it sent the replies its rate limit still counts.
    pub sent: Vec<Timestamp>,
    /// When it last spoke (for the ambient cooldown).
    pub last_spoke: Option<Timestamp>,
    /// Messages waiting in its ambient buffer, including a batch whose
    /// flush was running: after a restart they flush again.
    pub ambient: Vec<MsgId>,
    /// When the buffer's flush timer fires.
    pub ambient_due: Option<Timestamp>,
    /// A flush that was due but waits for the cooldown to end: what made it
    /// due, and when the cooldown ends.
    pub ambient_cooldown: Option<(FlushTrigger, Timestamp)>,
    /// Tokens it spent here that a spend budget still counts, as (end of
    /// the bucket, tokens) (absent in snapshots from before budgets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spend: Vec<(Timestamp, u64)>,
}

/// The engine's id counters, saved so a restarted engine never reuses a
/// turn id or a `<persona>:<n>` reply id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// The next turn id.
    pub next_turn: u64,
    /// Replies sent so far, per persona.
    pub sent: Vec<(PersonaId, u64)>,
    /// The ambient jitter generator's state.
    pub rng: u64,
}

impl Engine {
    /// The rooms whose snapshot, counters or transcript may have changed
    /// since the last call. A driver with a store saves these after each
    /// event.
    pub fn take_changed_rooms(&mut self) -> Vec<RoomId> {
        self.dirty.drain().collect()
    }

    /// What the engine keeps about `room` beyond the transcript, or `None`
    /// for a room it has never heard of.
    pub fn snapshot_room(&self, room: &RoomId) -> Option<RoomSnapshot> {
        let r = self.rooms.get(room)?;
        let members = r
            .members
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                let mut ambient = Vec::new();
                let mut ambient_due = None;
                let mut ambient_cooldown = None;
                if let Some(st) = m.ambient.as_deref() {
                    for t in &st.in_flight {
                        if let Some(turn) = self.turns.get(t) {
                            ambient.extend(turn.triggers.iter().map(|e| e.id.clone()));
                        }
                    }
                    ambient.extend(st.buffer.iter().map(|e| e.id.clone()));
                    ambient_due = st.due.map(|(t, _)| t);
                    ambient_cooldown = match (st.waiting, st.wake) {
                        (Some((trigger, WaitReason::Cooldown)), Some(end)) => Some((trigger, end)),
                        _ => None,
                    };
                }
                let sent: Vec<Timestamp> = m.rate.sent_times().collect();
                let spend = m.budget.as_ref().map(|b| b.spend.records()).unwrap_or_default();
                if sent.is_empty() && m.last_spoke.is_none() && ambient.is_empty() && spend.is_empty() {
                    return None;
                }
                Some(MemberSnapshot {
                    persona: self.personas[i].id.clone(),
                    sent,
                    last_spoke: m.last_spoke,
                    ambient,
                    ambient_due,
                    ambient_cooldown,
                    spend,
                })
            })
            .collect();
        Some(RoomSnapshot {
            bot_streak: r.bot_streak,
            bots: r.bots.clone(),
            is_dm: r.is_dm,
            floor: r.floor.iter().map(|(id, n)| (id.clone(), *n)).collect(),
            members,
            unprompted: r.unprompted.sent_times().collect(),
        })
    }

    /// The id counters, to save alongside the snapshots.
    pub fn counters(&self) -> Counters {
        Counters {
            next_turn: self.next_turn,
            sent: self
                .personas
                .iter()
                .zip(&self.sent_count)
                .map(|(p, n)| (p.id.clone(), *n))
                .collect(),
            rng: self.rng.state(),
        }
    }

    /// Continues counting from saved counters. Counters never go back, and
    /// personas no longer configured are ignored.
    pub fn restore_counters(&mut self, counters: &Counters) {
        self.next_turn = self.next_turn.max(counters.next_turn);
        self.rng = crate::rng::Rng::new(counters.rng);
        for (id, n) in &counters.sent {
            if let Some(p) = self.persona_index(id.as_str()) {
                let count = &mut self.sent_count[p.0 as usize];
                *count = (*count).max(*n);
            }
        }
    }

    /// Records a stored message as it was heard before the restart: the
    /// transcript, the author's own ids, the bot streak. Decides nothing and
    /// emits nothing. Messages must come oldest first; repeats are ignored.
    pub fn restore_message(&mut self, msg: Message) {
        let author = persona_of(&self.personas, msg.sender.id.as_str());
        let is_bot = msg.sender.is_bot || author.is_some();
        let room = self.room_entry(&msg.room);
        if room.history.contains(msg.id.as_str()) {
            return;
        }
        room.note_author(&msg, author, is_bot);
        // The same rule as live: a DM for another persona is not recorded.
        let personas = &self.personas;
        let recorded = author.is_some()
            || !msg.is_dm
            || personas
                .iter()
                .any(|s| msg.dm_to.as_ref().is_none_or(|to| s.answers_to(to.as_str())));
        let room = self.rooms.get_mut(&msg.room).expect("room_entry created it");
        if recorded {
            room.history.push(Arc::new(Entry::of(&msg, author, is_bot)));
        }
        if let Some(a) = author {
            room.members[a.0 as usize].remember_own(msg.id.clone(), self.limits.own_ids);
        }
    }

    /// Remembers `id` as a message `persona` wrote in `room`, for own
    /// messages older than the restored history: a reply to one still
    /// addresses the persona.
    pub fn restore_own(&mut self, room: &RoomId, persona: &PersonaId, id: MsgId) {
        let Some(p) = self.persona_index(persona.as_str()) else {
            return;
        };
        let own_ids = self.limits.own_ids;
        self.room_entry(room).members[p.0 as usize].remember_own(id, own_ids);
    }

    /// Puts back what a room kept beyond its transcript. Call after its
    /// messages are restored: ambient buffers name messages by id, and ids
    /// the transcript no longer holds are dropped. A buffer whose deadline
    /// passed while the process was down flushes at the next
    /// [`Engine::handle_timeout`].
    pub fn restore_room(&mut self, now: Timestamp, room_id: &RoomId, snapshot: RoomSnapshot) {
        let room = self.room_entry(room_id);
        room.bot_streak = snapshot.bot_streak;
        room.bots = snapshot.bots;
        room.is_dm = snapshot.is_dm;
        room.unprompted = RateLedger::from_sent(snapshot.unprompted);
        room.floor = snapshot
            .floor
            .into_iter()
            .filter(|(id, _)| room.history.contains(id.as_str()))
            .collect();
        let mut timers = Vec::new();
        for m in snapshot.members {
            let Some(p) = self.persona_index(m.persona.as_str()) else {
                continue;
            };
            let room = self.rooms.get_mut(room_id).expect("room_entry created it");
            let entries: Vec<Arc<Entry>> = m
                .ambient
                .iter()
                .filter_map(|id| room.history.get(id.as_str()).cloned())
                .collect();
            // The room's share of a persona-wide budget adds up again.
            let persona_wide = room.policies[p.0 as usize].budget == crate::policy::BudgetScope::Persona;
            if persona_wide {
                self.spend[p.0 as usize].restore(&m.spend);
            }
            let room = self.rooms.get_mut(room_id).expect("room_entry created it");
            let member = &mut room.members[p.0 as usize];
            member.rate = RateLedger::from_sent(m.sent);
            member.last_spoke = m.last_spoke;
            member.budget = None;
            if !m.spend.is_empty() {
                member.budget().spend.restore(&m.spend);
            }
            if entries.is_empty() {
                continue;
            }
            member.ambient().buffer = entries;
            self.ambient_touched.push((room_id.clone(), p));
            // A flush that waited on the concurrency bound or on a flush in
            // flight (neither survives a restart) becomes due at once.
            let due = match (m.ambient_due, m.ambient_cooldown) {
                (None, None) => Some(now),
                (due, _) => due,
            };
            timers.push((p, due, m.ambient_cooldown));
        }
        for (p, due, cooldown) in timers {
            let due = due.map(|t| self.arm(t, Timer::Ambient(room_id.clone(), p)));
            if let Some((_, end)) = cooldown {
                self.arm(end, Timer::Ambient(room_id.clone(), p));
            }
            let room = self.rooms.get_mut(room_id).expect("room exists");
            let st = room.members[p.0 as usize].ambient();
            st.due = due;
            st.waiting = cooldown.map(|(trigger, _)| (trigger, WaitReason::Cooldown));
            st.wake = cooldown.map(|(_, end)| end);
        }
    }

    /// Asks again for a reply turn that was running when the process
    /// stopped, so a reply the engine had decided on is not lost. `msgs` are
    /// the turn's triggers: each is taken from the room's history, else
    /// from `stored` (the messages as the store kept them: a trigger may
    /// have left the history window while the turn waited). `addressed` is
    /// the old request's flag, which decides whether floor control applies.
    /// The turn keeps the rate-limit slot it had reserved.
    pub fn resume_turn(
        &mut self,
        now: Timestamp,
        room_id: &RoomId,
        persona: &PersonaId,
        msgs: &[MsgId],
        stored: &[Message],
        addressed: bool,
    ) -> Result<TurnId, NotResumed> {
        let p = self
            .persona_index(persona.as_str())
            .ok_or(NotResumed::UnknownPersona)?;
        let personas = self.personas.clone();
        let room = self.room_entry(room_id);
        let triggers: Vec<Arc<Entry>> = msgs
            .iter()
            .filter_map(|id| {
                room.history.get(id.as_str()).cloned().or_else(|| {
                    stored.iter().find(|m| m.id == *id).map(|m| {
                        let author = persona_of(&personas, m.sender.id.as_str());
                        Arc::new(Entry::of(m, author, m.sender.is_bot || author.is_some()))
                    })
                })
            })
            .collect();
        if triggers.is_empty() {
            return Err(NotResumed::NoTriggers);
        }
        let reserved = room.policies[p.0 as usize].rate_limit.is_some();
        if reserved {
            room.members[p.0 as usize].rate.force_reserve();
        }
        let answers_bot = triggers.iter().any(|e| e.is_bot);
        let turn = self.new_turn_id();
        self.start_turn(
            now,
            turn,
            room_id,
            p,
            TurnKind::Reply,
            triggers,
            reserved,
            !addressed,
            answers_bot,
            None,
        );
        Ok(turn)
    }

    /// The room's state, created on first use.
    fn room_entry(&mut self, room: &RoomId) -> &mut Room {
        let Engine {
            personas,
            policies,
            shared_policies,
            limits,
            rooms,
            dirty,
            ..
        } = self;
        dirty.insert(room.clone());
        Room::entry(rooms, personas, policies, shared_policies, limits, room)
    }
}
