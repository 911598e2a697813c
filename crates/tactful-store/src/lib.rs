//! tactful's durable state, in one SQLite file.
//!
//! The engine is sans-I/O and never touches this crate; the runtime writes
//! what the engine did ([`Op`]) in batches, one transaction each, and on
//! start reads it back ([`Store::load`]) to rebuild the engine. What is
//! kept:
//! - the transcript: every message heard or sent, with author, bot flag,
//!   `reply_to`, thread, and the platform id a reply got;
//! - the decision trace, one row per (message, persona);
//! - per-room engine snapshots (rate ledgers, cooldowns, ambient buffers)
//!   and the engine's id counters;
//! - reply turns started but not ended, so a restart asks again;
//! - the outbox: replies decided but not yet confirmed sent, so a restart
//!   sends them once.
//!
//! The file uses WAL with `synchronous = NORMAL`: a committed transaction
//! survives the process being killed at any instant; a power cut may lose
//! the last few. `:memory:` opens a private in-memory store for tests.

mod schema;

use std::path::Path;
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, params};
use tactful_core::{
    Counters, Decision, Engine, Mentions, Message, MsgId, Outgoing, PersonaId, RoomId, RoomSnapshot, Sender,
    ThreadId, Timestamp, TurnId, TurnKind, UserId,
};

/// A store that cannot be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file cannot be opened or set up.
    #[error("cannot open the store {path}: {source}")]
    Open {
        /// The path as configured.
        path: String,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// A newer tactful wrote the file; this one would misread it.
    #[error("the store {path} has schema version {found}; this tactful knows up to {known}: upgrade tactful")]
    TooNew {
        /// The path as configured.
        path: String,
        /// The file's version.
        found: i64,
        /// This build's version.
        known: i64,
    },
    /// A query failed.
    #[error("store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A saved value does not parse.
    #[error("store: a saved {what} is unreadable: {source}")]
    Corrupt {
        /// What was being read.
        what: &'static str,
        /// Why it does not parse.
        source: serde_json::Error,
    },
}

/// One change to save. The runtime turns engine outputs into these and
/// saves them in batches with [`Store::apply`].
#[derive(Clone, Debug)]
pub enum Op {
    /// A message was heard from a platform.
    Heard(Message),
    /// A persona's reply was decided: the transcript gets the message as
    /// the room heard it, and the outbox holds it until [`Op::Delivered`].
    Reply {
        /// The reply.
        out: Box<Outgoing>,
        /// It as the room heard it (author name included).
        heard: Message,
    },
    /// The platform confirmed a reply and gave it this id.
    Delivered {
        /// The room.
        room: RoomId,
        /// The engine's `<persona>:<n>` id.
        local: MsgId,
        /// The platform's id.
        platform: MsgId,
    },
    /// A decision for one (message, persona) pair.
    Decision(Decision),
    /// The engine's view of a room changed.
    Snapshot(RoomId, RoomSnapshot),
    /// The engine's id counters moved.
    Counters(Counters),
    /// A reply turn started (kept until it ends, to resume it after a
    /// restart).
    TurnStarted(PendingTurn),
    /// A turn ended, whatever the outcome.
    TurnEnded(TurnId),
    /// A platform's own bookkeeping, e.g. a Matrix sync token: saved in
    /// order with the messages it covers, so a restart resumes exactly
    /// after what was saved.
    PlatformState {
        /// The platform's key, e.g. `matrix:sync:docs`.
        key: String,
        /// The value.
        value: String,
    },
}

/// A reply turn that was running.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingTurn {
    /// Its id before the restart.
    pub turn: TurnId,
    /// What kind of turn.
    pub kind: TurnKind,
    /// The room.
    pub room: RoomId,
    /// The persona.
    pub persona: PersonaId,
    /// The messages it answers.
    pub msgs: Vec<MsgId>,
    /// Whether the persona was addressed.
    pub addressed: bool,
}

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
    /// The engine's snapshot, if one was saved.
    pub snapshot: Option<RoomSnapshot>,
}

/// What [`Store::load`] found.
#[derive(Clone, Debug, Default)]
pub struct Restored {
    /// The engine's id counters.
    pub counters: Option<Counters>,
    /// Every room with saved state.
    pub rooms: Vec<RestoredRoom>,
    /// Reply turns that were running, oldest first.
    pub pending: Vec<PendingTurn>,
    /// Replies decided but not confirmed sent, oldest first.
    pub unsent: Vec<Outgoing>,
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

/// A message as a room shows it: for platforms (the web room) that show
/// history after a restart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShownMessage {
    /// The id the platform knows it by.
    pub id: MsgId,
    /// The room.
    pub room: RoomId,
    /// The author's account id (a persona's id for replies).
    pub sender: UserId,
    /// The author's display name.
    pub sender_name: String,
    /// Whether the author is a bot.
    pub is_bot: bool,
    /// The text.
    pub text: String,
    /// What it replies to, by platform id.
    pub reply_to: Option<MsgId>,
    /// When.
    pub time: Timestamp,
}

/// How much of each room [`Store::load`] reads back.
#[derive(Clone, Copy, Debug)]
pub struct LoadLimits {
    /// Messages per room (the engine's `history`).
    pub history: usize,
    /// Own message ids per (room, persona) (the engine's `own_ids`).
    pub own_ids: usize,
}

/// The SQLite store.
pub struct Store {
    conn: Connection,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.conn.path()).finish()
    }
}

impl Store {
    /// Opens (creating if needed) the store at `path`; `:memory:` is a
    /// private in-memory store.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let shown = path.display().to_string();
        let open_err = |source| StoreError::Open {
            path: shown.clone(),
            source,
        };
        let conn = if path.as_os_str() == ":memory:" {
            Connection::open_in_memory().map_err(open_err)?
        } else {
            Connection::open(path).map_err(open_err)?
        };
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(open_err)?;
        schema::migrate(&conn, &shown)?;
        Ok(Store { conn })
    }

    /// Saves a batch of changes in one transaction, in order.
    pub fn apply(&mut self, ops: &[Op]) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        for op in ops {
            apply_one(&tx, op)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Reads back what the engine needs after a restart.
    pub fn load(&self, limits: LoadLimits) -> Result<Restored, StoreError> {
        let counters = self
            .conn
            .query_row("SELECT json FROM counters WHERE id = 0", [], |r| {
                r.get::<_, String>(0)
            })
            .optional()?
            .map(|j| {
                serde_json::from_str(&j).map_err(|source| StoreError::Corrupt {
                    what: "counters",
                    source,
                })
            })
            .transpose()?;
        let mut rooms = Vec::new();
        let mut stmt = self
            .conn
            .prepare_cached("SELECT room FROM messages UNION SELECT room FROM snapshots ORDER BY 1")?;
        let names: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        for name in names {
            rooms.push(self.load_room(RoomId::new(name), limits)?);
        }
        Ok(Restored {
            counters,
            rooms,
            pending: self.pending_turns()?,
            unsent: self.unsent()?,
        })
    }

    fn load_room(&self, room: RoomId, limits: LoadLimits) -> Result<RestoredRoom, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, id, platform_id, sender_id, sender_name, is_bot, persona, text, reply_to, thread,
                    mentions, is_dm, dm_to, time
             FROM messages WHERE room = ?1 ORDER BY seq DESC LIMIT ?2",
        )?;
        let mut rows: Vec<(i64, Message, Option<String>, Option<String>)> = stmt
            .query_map(params![room.as_str(), limits.history as i64], |r| {
                let mentions: Option<String> = r.get(10)?;
                Ok((
                    r.get::<_, i64>(0)?,
                    Message {
                        id: MsgId::new(r.get::<_, String>(1)?),
                        room: room.clone(),
                        thread: r.get::<_, Option<String>>(9)?.map(ThreadId::new),
                        sender: Sender {
                            id: UserId::new(r.get::<_, String>(3)?),
                            name: Arc::from(r.get::<_, String>(4)?),
                            is_bot: r.get(5)?,
                        },
                        text: Arc::from(r.get::<_, String>(7)?),
                        mentions: match mentions {
                            None => Mentions::FromText,
                            Some(j) => Mentions::Explicit(
                                serde_json::from_str::<Vec<String>>(&j)
                                    .unwrap_or_default()
                                    .into_iter()
                                    .map(UserId::new)
                                    .collect(),
                            ),
                        },
                        reply_to: r.get::<_, Option<String>>(8)?.map(MsgId::new),
                        is_dm: r.get(11)?,
                        dm_to: r.get::<_, Option<String>>(12)?.map(PersonaId::new),
                        time: Timestamp::from_millis(r.get::<_, i64>(13)?.max(0) as u64),
                    },
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, Option<String>>(6)?,
                ))
            })?
            .collect::<Result<_, _>>()?;
        rows.reverse();
        let oldest = rows.first().map_or(i64::MAX, |r| r.0);
        let aliases = rows
            .iter()
            .filter_map(|(_, m, platform, _)| {
                platform.as_ref().map(|p| (m.id.clone(), MsgId::new(p.as_str())))
            })
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
            .map(|j| {
                serde_json::from_str(&j).map_err(|source| StoreError::Corrupt {
                    what: "room snapshot",
                    source,
                })
            })
            .transpose()?;
        Ok(RestoredRoom {
            room,
            messages: rows.into_iter().map(|(_, m, _, _)| m).collect(),
            aliases,
            older_own,
            snapshot,
        })
    }

    fn pending_turns(&self) -> Result<Vec<PendingTurn>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT turn, kind, room, persona, msgs, addressed FROM pending_turns ORDER BY turn")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, bool>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (turn, kind, room, persona, msgs, addressed) = row?;
            let msgs: Vec<String> = serde_json::from_str(&msgs).map_err(|source| StoreError::Corrupt {
                what: "pending turn",
                source,
            })?;
            out.push(PendingTurn {
                turn: TurnId(turn.max(0) as u64),
                kind: kind_from_name(&kind),
                room: RoomId::new(room),
                persona: PersonaId::new(persona),
                msgs: msgs.into_iter().map(MsgId::new).collect(),
                addressed,
            });
        }
        Ok(out)
    }

    fn unsent(&self) -> Result<Vec<Outgoing>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT o.turn, o.kind, o.persona, o.room, m.thread, o.local_id, m.text, m.reply_to, o.notice,
                    m.is_dm, m.time
             FROM outbox o JOIN messages m ON m.room = o.room AND m.id = o.local_id
             WHERE o.delivered IS NULL ORDER BY m.seq",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(Outgoing {
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
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The last `limit` messages of every room as people saw them, oldest
    /// first, by the ids the platform knows: replies not yet confirmed are
    /// left out (they are sent again, and appear then).
    pub fn shown_history(&self, limit: usize) -> Result<Vec<ShownMessage>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT room, shown_id, sender_id, sender_name, is_bot, text, reply_to, time FROM (
                 SELECT m.room, coalesce(m.platform_id, m.id) AS shown_id, m.sender_id, m.sender_name,
                        m.is_bot, m.text, coalesce(r.platform_id, m.reply_to) AS reply_to, m.time, m.seq,
                        row_number() OVER (PARTITION BY m.room ORDER BY m.seq DESC) AS n
                 FROM messages m
                 LEFT JOIN messages r ON r.room = m.room AND r.id = m.reply_to
                 WHERE m.persona IS NULL OR m.platform_id IS NOT NULL)
             WHERE n <= ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([limit as i64], |r| {
            Ok(ShownMessage {
                room: RoomId::new(r.get::<_, String>(0)?),
                id: MsgId::new(r.get::<_, String>(1)?),
                sender: UserId::new(r.get::<_, String>(2)?),
                sender_name: r.get(3)?,
                is_bot: r.get(4)?,
                text: r.get(5)?,
                reply_to: r.get::<_, Option<String>>(6)?.map(MsgId::new),
                time: Timestamp::from_millis(r.get::<_, i64>(7)?.max(0) as u64),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every saved platform state value, by key.
    pub fn platform_state(&self) -> Result<std::collections::BTreeMap<String, String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT key, value FROM platform_state")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// How many decisions the trace holds for `room` (for tests and the
    /// console).
    pub fn decision_count(&self, room: &RoomId) -> Result<u64, StoreError> {
        Ok(self.conn.query_row(
            "SELECT count(*) FROM decisions WHERE room = ?1",
            [room.as_str()],
            |r| r.get::<_, i64>(0),
        )? as u64)
    }
}

fn kind_name(kind: TurnKind) -> &'static str {
    match kind {
        TurnKind::Reply => "reply",
        TurnKind::Ambient => "ambient",
        TurnKind::Gate => "gate",
    }
}

/// The inverse of [`kind_name`]; anything else reads as a reply.
fn kind_from_name(name: &str) -> TurnKind {
    match name {
        "gate" => TurnKind::Gate,
        "ambient" => TurnKind::Ambient,
        _ => TurnKind::Reply,
    }
}

fn insert_message(
    tx: &rusqlite::Transaction<'_>,
    m: &Message,
    persona: Option<&PersonaId>,
) -> rusqlite::Result<()> {
    let mentions = match &m.mentions {
        Mentions::FromText => None,
        Mentions::Explicit(ids) => Some(
            serde_json::to_string(&ids.iter().map(UserId::as_str).collect::<Vec<_>>())
                .unwrap_or_else(|_| "[]".to_owned()),
        ),
    };
    tx.prepare_cached(
        "INSERT OR IGNORE INTO messages
             (room, id, sender_id, sender_name, is_bot, persona, text, reply_to, thread, mentions, is_dm,
              dm_to, time)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?
    .execute(params![
        m.room.as_str(),
        m.id.as_str(),
        m.sender.id.as_str(),
        &*m.sender.name,
        m.sender.is_bot,
        persona.map(PersonaId::as_str),
        &*m.text,
        m.reply_to.as_ref().map(MsgId::as_str),
        m.thread.as_ref().map(ThreadId::as_str),
        mentions,
        m.is_dm,
        m.dm_to.as_ref().map(PersonaId::as_str),
        m.time.as_millis() as i64,
    ])?;
    Ok(())
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    // Snapshots and counters are plain data: serialising cannot fail.
    serde_json::to_string(v).unwrap_or_default()
}

fn apply_one(tx: &rusqlite::Transaction<'_>, op: &Op) -> Result<(), StoreError> {
    match op {
        Op::Heard(m) => insert_message(tx, m, None)?,
        Op::Reply { out, heard } => {
            insert_message(tx, heard, Some(&out.persona))?;
            tx.prepare_cached(
                "INSERT OR IGNORE INTO outbox (room, local_id, turn, kind, persona, notice)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                out.room.as_str(),
                out.id.as_str(),
                out.turn.0 as i64,
                kind_name(out.kind),
                out.persona.as_str(),
                out.notice,
            ])?;
        }
        Op::Delivered {
            room,
            local,
            platform,
        } => {
            tx.prepare_cached("UPDATE outbox SET delivered = 1 WHERE room = ?1 AND local_id = ?2")?
                .execute(params![room.as_str(), local.as_str()])?;
            tx.prepare_cached("UPDATE messages SET platform_id = ?3 WHERE room = ?1 AND id = ?2")?
                .execute(params![room.as_str(), local.as_str(), platform.as_str()])?;
        }
        Op::Decision(d) => {
            tx.prepare_cached(
                "INSERT INTO decisions (at, room, msg, persona, outcome, reason, turn)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                d.at.as_millis() as i64,
                d.room.as_str(),
                d.msg.as_str(),
                d.persona.as_str(),
                d.outcome.as_str(),
                d.reason.as_str(),
                d.turn.map(|t| t.0 as i64),
            ])?;
        }
        Op::Snapshot(room, snapshot) => {
            tx.prepare_cached("INSERT OR REPLACE INTO snapshots (room, json) VALUES (?1, ?2)")?
                .execute(params![room.as_str(), to_json(snapshot)])?;
        }
        Op::Counters(c) => {
            tx.prepare_cached("INSERT OR REPLACE INTO counters (id, json) VALUES (0, ?1)")?
                .execute([to_json(c)])?;
        }
        Op::TurnStarted(t) => {
            let msgs: Vec<&str> = t.msgs.iter().map(MsgId::as_str).collect();
            tx.prepare_cached(
                "INSERT OR REPLACE INTO pending_turns (turn, kind, room, persona, msgs, addressed)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                t.turn.0 as i64,
                kind_name(t.kind),
                t.room.as_str(),
                t.persona.as_str(),
                to_json(&msgs),
                t.addressed,
            ])?;
        }
        Op::TurnEnded(turn) => {
            tx.prepare_cached("DELETE FROM pending_turns WHERE turn = ?1")?
                .execute([turn.0 as i64])?;
        }
        Op::PlatformState { key, value } => {
            tx.prepare_cached("INSERT OR REPLACE INTO platform_state (key, value) VALUES (?1, ?2)")?
                .execute(params![key, value])?;
        }
    }
    Ok(())
}
