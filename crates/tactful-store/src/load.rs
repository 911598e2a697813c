//! Reading back what a restart needs, and rebuilding the engine from it.
//!
//! A row that does not parse (a hand-edited file, a bug in an older
//! version) must not keep the service from starting: it is skipped with a
//! warning naming it, and the rest is restored.

use std::sync::Arc;

use rusqlite::{OptionalExtension, params};
use tactful_core::{
    Counters, Engine, Mentions, Message, MsgId, Outgoing, PersonaId, RoomId, RoomSnapshot, Sender, ThreadId,
    Timestamp, TurnId, UserId,
};

use crate::ops::{PendingTurn, kind_from_name};
use crate::{Store, StoreError};

/// Everything needed to rebuild the engine, per room.
#[derive(Clone, Debug)]
pub struct RestoredRoom {
    /// The room.
    pub room: RoomId,
    /// Its most recent messages, oldest first.
    pub messages: Vec<Message>,
    /// Replies' platform ids: (engine id, platform id).
    pub aliases: Vec<(MsgId, MsgId)>,
    /// Own messages older than `messages`: (persona, id), platform ids
    /// included.
    pub older_own: Vec<(PersonaId, MsgId)>,
    /// The engine's snapshot, if one was saved (and readable).
    pub snapshot: Option<RoomSnapshot>,
}

/// A reply turn that was running, with the messages it answers as they
/// were stored (a trigger may have left the engine's history window while
/// the service was down or busy).
#[derive(Clone, Debug)]
pub struct Pending {
    /// The turn.
    pub turn: PendingTurn,
    /// Its triggers, oldest first; those the store no longer holds are
    /// missing.
    pub triggers: Vec<Message>,
}

/// A reply decided but not confirmed sent.
#[derive(Clone, Debug)]
pub struct Unsent {
    /// The reply.
    pub out: Outgoing,
    /// How many of its parts reached the platform already.
    pub parts_done: usize,
    /// The platform id of its first part, when that went out.
    pub first_id: Option<MsgId>,
}

/// A streaming placeholder still on screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placeholder {
    /// The turn it stands for.
    pub turn: TurnId,
    /// The room.
    pub room: RoomId,
    /// Who posted it.
    pub persona: PersonaId,
    /// Its platform id.
    pub id: MsgId,
}

/// What [`Store::load`] found.
#[derive(Clone, Debug, Default)]
pub struct Restored {
    /// The engine's id counters.
    pub counters: Option<Counters>,
    /// Every room with saved state.
    pub rooms: Vec<RestoredRoom>,
    /// Reply turns that were running, oldest first.
    pub pending: Vec<Pending>,
    /// Replies decided but not confirmed sent, oldest first.
    pub unsent: Vec<Unsent>,
    /// Streaming placeholders left on screen.
    pub placeholders: Vec<Placeholder>,
    /// Rows that could not be read and were skipped, described.
    pub skipped: Vec<String>,
}

impl Restored {
    /// Rebuilds `engine` (fresh from its config) from what was saved, in the
    /// order [`tactful_core::engine`]'s restore API asks for. Pending turns
    /// and unsent replies are left for the driver: resuming a turn calls an
    /// agent and sending a reply is the platform's business. Returns how many
    /// messages were restored.
    pub fn rebuild(&self, engine: &mut Engine, now: Timestamp) -> usize {
        if let Some(c) = &self.counters {
            engine.restore_counters(c);
        }
        let mut restored = 0;
        for room in &self.rooms {
            for (persona, id) in &room.older_own {
                engine.restore_own(&room.room, persona, id.clone());
            }
            for m in &room.messages {
                engine.restore_message(m.clone());
                restored += 1;
            }
            for (local, platform) in &room.aliases {
                engine.handle_sent(&room.room, local, platform.clone());
            }
            if let Some(s) = &room.snapshot {
                engine.restore_room(now, &room.room, s.clone());
            }
        }
        // Restoring is not news: nothing needs saving again.
        engine.take_changed_rooms();
        restored
    }
}

/// How much of each room [`Store::load`] reads back.
#[derive(Clone, Copy, Debug)]
pub struct LoadLimits {
    /// Messages per room (the engine's `history`).
    pub history: usize,
    /// Own message ids per (room, persona) (the engine's `own_ids`).
    pub own_ids: usize,
}

/// The columns [`message_from_row`] reads, in its order.
pub(crate) const MESSAGE_COLUMNS: &str =
    "id, sender_id, sender_name, is_bot, text, reply_to, thread, mentions, is_dm, dm_to, time, sender_handle";

/// A `messages` row (selected as [`MESSAGE_COLUMNS`], from column `at`) as
/// the engine's message; unreadable mentions become "none", with a note.
pub(crate) fn message_from_row(
    room: &RoomId,
    r: &rusqlite::Row<'_>,
    at: usize,
    skipped: &mut Vec<String>,
) -> rusqlite::Result<Message> {
    let id: String = r.get(at)?;
    let mentions: Option<String> = r.get(at + 7)?;
    let mentions = match mentions {
        None => Mentions::FromText,
        Some(j) => match serde_json::from_str::<Vec<String>>(&j) {
            Ok(ids) => Mentions::Explicit(ids.into_iter().map(UserId::new).collect()),
            Err(e) => {
                skipped.push(format!("the mentions of message {id} in room {room} ({e})"));
                Mentions::Explicit(Vec::new())
            }
        },
    };
    Ok(Message {
        id: MsgId::new(id),
        room: room.clone(),
        thread: r.get::<_, Option<String>>(at + 6)?.map(ThreadId::new),
        sender: Sender {
            id: UserId::new(r.get::<_, String>(at + 1)?),
            name: Arc::from(r.get::<_, String>(at + 2)?),
            is_bot: r.get(at + 3)?,
            handle: r.get::<_, Option<String>>(at + 11)?.map(Arc::from),
        },
        text: Arc::from(r.get::<_, String>(at + 4)?),
        mentions,
        reply_to: r.get::<_, Option<String>>(at + 5)?.map(MsgId::new),
        is_dm: r.get(at + 8)?,
        dm_to: r.get::<_, Option<String>>(at + 9)?.map(PersonaId::new),
        time: Timestamp::from_millis(r.get::<_, i64>(at + 10)?.max(0) as u64),
    })
}

impl Store {
    /// Reads back what the engine needs after a restart. Unreadable rows
    /// are skipped, each with a warning naming it (see
    /// [`Restored::skipped`]).
    pub fn load(&self, limits: LoadLimits) -> Result<Restored, StoreError> {
        let mut skipped = Vec::new();
        let counters = self
            .conn
            .query_row("SELECT json FROM counters WHERE id = 0", [], |r| {
                r.get::<_, String>(0)
            })
            .optional()?
            .and_then(|j| match serde_json::from_str(&j) {
                Ok(c) => Some(c),
                Err(e) => {
                    skipped.push(format!("the id counters ({e})"));
                    None
                }
            });
        let mut rooms = Vec::new();
        let mut stmt = self
            .conn
            .prepare_cached("SELECT room FROM messages UNION SELECT room FROM snapshots ORDER BY 1")?;
        let names: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        for name in names {
            rooms.push(self.load_room(RoomId::new(name), limits, &mut skipped)?);
        }
        let pending = self.pending_turns(&mut skipped)?;
        let restored = Restored {
            counters,
            rooms,
            pending,
            unsent: self.unsent()?,
            placeholders: self.placeholders()?,
            skipped,
        };
        for what in &restored.skipped {
            tracing::warn!("store: skipped {what}: it could not be read");
        }
        Ok(restored)
    }

    fn load_room(
        &self,
        room: RoomId,
        limits: LoadLimits,
        skipped: &mut Vec<String>,
    ) -> Result<RestoredRoom, StoreError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT seq, platform_id, persona, {MESSAGE_COLUMNS}
             FROM messages WHERE room = ?1 ORDER BY seq DESC LIMIT ?2"
        ))?;
        let mut rows: Vec<(i64, Message, Option<String>)> = Vec::new();
        let mut query = stmt.query(params![room.as_str(), limits.history as i64])?;
        while let Some(r) = query.next()? {
            rows.push((r.get(0)?, message_from_row(&room, r, 3, skipped)?, r.get(1)?));
        }
        rows.reverse();
        let oldest = rows.first().map_or(i64::MAX, |r| r.0);
        let aliases = rows
            .iter()
            .filter_map(|(_, m, platform)| platform.as_ref().map(|p| (m.id.clone(), MsgId::new(p.as_str()))))
            .collect();
        let mut older_own = Vec::new();
        let mut stmt = self.conn.prepare_cached(
            "SELECT persona, id, platform_id FROM (
                 SELECT persona, id, platform_id, seq,
                        row_number() OVER (PARTITION BY persona ORDER BY seq DESC) AS n
                 FROM messages WHERE room = ?1 AND persona IS NOT NULL AND seq < ?2)
             WHERE n <= ?3 ORDER BY seq",
        )?;
        let own = stmt.query_map(params![room.as_str(), oldest, limits.own_ids as i64], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
            ))
        })?;
        for row in own {
            let (persona, id, platform) = row?;
            let persona = PersonaId::new(persona);
            older_own.push((persona.clone(), MsgId::new(id)));
            if let Some(p) = platform {
                older_own.push((persona, MsgId::new(p)));
            }
        }
        let snapshot = self
            .conn
            .query_row(
                "SELECT json FROM snapshots WHERE room = ?1",
                [room.as_str()],
                |r| r.get::<_, String>(0),
            )
            .optional()?
            .and_then(|j| match serde_json::from_str(&j) {
                Ok(s) => Some(s),
                Err(e) => {
                    skipped.push(format!("the snapshot of room {room} ({e})"));
                    None
                }
            });
        Ok(RestoredRoom {
            room,
            messages: rows.into_iter().map(|(_, m, _)| m).collect(),
            aliases,
            older_own,
            snapshot,
        })
    }

    /// The stored message `id` of `room`, at any age.
    fn message(
        &self,
        room: &RoomId,
        id: &MsgId,
        skipped: &mut Vec<String>,
    ) -> Result<Option<Message>, StoreError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE room = ?1 AND id = ?2"
        ))?;
        let mut rows = stmt.query(params![room.as_str(), id.as_str()])?;
        match rows.next()? {
            Some(r) => Ok(Some(message_from_row(room, r, 0, skipped)?)),
            None => Ok(None),
        }
    }

    fn pending_turns(&self, skipped: &mut Vec<String>) -> Result<Vec<Pending>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT turn, kind, room, persona, msgs, addressed FROM pending_turns ORDER BY turn")?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, bool>(5)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let mut out = Vec::new();
        for (turn, kind, room, persona, msgs, addressed) in rows {
            let msgs: Vec<String> = match serde_json::from_str(&msgs) {
                Ok(m) => m,
                Err(e) => {
                    skipped.push(format!("pending turn {turn} in room {room} ({e})"));
                    continue;
                }
            };
            let room = RoomId::new(room);
            let msgs: Vec<MsgId> = msgs.into_iter().map(MsgId::new).collect();
            let mut triggers = Vec::new();
            for id in &msgs {
                triggers.extend(self.message(&room, id, skipped)?);
            }
            out.push(Pending {
                turn: PendingTurn {
                    turn: TurnId(turn.max(0) as u64),
                    kind: kind_from_name(&kind),
                    room,
                    persona: PersonaId::new(persona),
                    msgs,
                    addressed,
                },
                triggers,
            });
        }
        Ok(out)
    }

    fn unsent(&self) -> Result<Vec<Unsent>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT o.turn, o.kind, o.persona, o.room, m.thread, o.local_id, m.text, m.reply_to, o.notice,
                    m.is_dm, m.time, o.parts_done, m.platform_id
             FROM outbox o JOIN messages m ON m.room = o.room AND m.id = o.local_id
             WHERE o.delivered IS NULL ORDER BY m.seq",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(Unsent {
                out: Outgoing {
                    at: Timestamp::from_millis(r.get::<_, i64>(10)?.max(0) as u64),
                    turn: TurnId(r.get::<_, i64>(0)?.max(0) as u64),
                    kind: kind_from_name(&r.get::<_, String>(1)?),
                    persona: PersonaId::new(r.get::<_, String>(2)?),
                    room: RoomId::new(r.get::<_, String>(3)?),
                    thread: r.get::<_, Option<String>>(4)?.map(ThreadId::new),
                    id: MsgId::new(r.get::<_, String>(5)?),
                    text: r.get(6)?,
                    reply_to: r.get::<_, Option<String>>(7)?.map(MsgId::new),
                    dropped_reply_to: None,
                    invalid_reply_to: Vec::new(),
                    unknown_directives: Vec::new(),
                    msgs: Vec::new(),
                    notice: r.get(8)?,
                    is_dm: r.get(9)?,
                    truncated_from: None,
                    more_withheld: 0,
                    reasoning_chars: 0,
                },
                parts_done: r.get::<_, i64>(11)?.max(0) as usize,
                first_id: r.get::<_, Option<String>>(12)?.map(MsgId::new),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Streaming placeholders still on record (a platform that hands out
    /// its own ids must never give one of these to a new message: a
    /// restart deletes them).
    pub fn placeholders(&self) -> Result<Vec<Placeholder>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT turn, room, persona, platform_id FROM placeholders ORDER BY turn")?;
        let rows = stmt.query_map([], |r| {
            Ok(Placeholder {
                turn: TurnId(r.get::<_, i64>(0)?.max(0) as u64),
                room: RoomId::new(r.get::<_, String>(1)?),
                persona: PersonaId::new(r.get::<_, String>(2)?),
                id: MsgId::new(r.get::<_, String>(3)?),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
