//! The changes the runtime saves, and how each is written.

use rusqlite::{Transaction, params};
use tactful_core::{Counters, TurnId, TurnKind, UserId};
use tactful_core::{Decision, Mentions, Message, MsgId, Outgoing, PersonaId, RoomId, RoomSnapshot, ThreadId};

use crate::StoreError;
use crate::shown::ShownMessage;

/// One change to save. The runtime turns engine outputs into these and
/// saves them in batches with [`crate::Store::apply`].
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
    /// One part of a reply reached the platform: a restart resumes after
    /// it instead of posting the reply again from its first part.
    PartDelivered {
        /// The room.
        room: RoomId,
        /// The engine's `<persona>:<n>` id.
        local: MsgId,
        /// Which part (0 is the first).
        part: usize,
        /// The id the platform gave that part.
        platform: MsgId,
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
    /// A streaming placeholder was posted for a turn: after a crash it is
    /// turned into the turn's reply, or removed.
    Placeholder {
        /// The turn it stands for.
        turn: TurnId,
        /// The room.
        room: RoomId,
        /// Who posted it.
        persona: PersonaId,
        /// Its platform id.
        id: MsgId,
    },
    /// A turn's placeholder became its reply or was removed.
    PlaceholderGone(TurnId),
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
    /// A message as a platform that keeps its history here (the web room)
    /// shows it. Its room keeps the newest `keep`.
    Shown {
        /// The message.
        msg: ShownMessage,
        /// How many of the room's messages are kept.
        keep: usize,
    },
    /// A shown message's text changed.
    ShownEdit {
        /// The room.
        room: RoomId,
        /// The message's platform id.
        id: MsgId,
        /// The new text.
        text: String,
    },
    /// A shown message was deleted.
    ShownDelete {
        /// The room.
        room: RoomId,
        /// The message's platform id.
        id: MsgId,
    },
    /// Someone reacted to a shown message.
    ShownReact {
        /// The room.
        room: RoomId,
        /// The message's platform id.
        id: MsgId,
        /// The emoji.
        emoji: String,
        /// Who reacted (a display name).
        by: String,
    },
    /// An agent call started (the console's transcript and costs).
    CallStarted(crate::CallStart),
    /// More about an agent call: its answer, then what came of it.
    CallEnded(crate::CallEnd),
    /// The service starts: calls a previous run left running are marked
    /// `interrupted`.
    CallsInterrupted,
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

pub(crate) fn kind_name(kind: TurnKind) -> &'static str {
    kind.as_str()
}

/// The inverse of [`kind_name`]; anything else reads as a reply.
pub(crate) fn kind_from_name(name: &str) -> TurnKind {
    match name {
        "gate" => TurnKind::Gate,
        "ambient" => TurnKind::Ambient,
        "schedule" => TurnKind::Schedule,
        _ => TurnKind::Reply,
    }
}

fn insert_message(tx: &Transaction<'_>, m: &Message, persona: Option<&PersonaId>) -> rusqlite::Result<()> {
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
              dm_to, time, sender_handle)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
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
        m.sender.handle.as_deref(),
    ])?;
    Ok(())
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    // Snapshots and counters are plain data: serialising cannot fail.
    serde_json::to_string(v).unwrap_or_default()
}

pub(crate) fn apply_one(tx: &Transaction<'_>, op: &Op) -> Result<(), StoreError> {
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
        Op::PartDelivered {
            room,
            local,
            part,
            platform,
        } => {
            tx.prepare_cached(
                "UPDATE outbox SET parts_done = max(parts_done, ?3) WHERE room = ?1 AND local_id = ?2",
            )?
            .execute(params![room.as_str(), local.as_str(), *part as i64 + 1])?;
            if *part == 0 {
                tx.prepare_cached("UPDATE messages SET platform_id = ?3 WHERE room = ?1 AND id = ?2")?
                    .execute(params![room.as_str(), local.as_str(), platform.as_str()])?;
            }
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
        Op::Placeholder {
            turn,
            room,
            persona,
            id,
        } => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO placeholders (turn, room, persona, platform_id) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![turn.0 as i64, room.as_str(), persona.as_str(), id.as_str()])?;
        }
        Op::PlaceholderGone(turn) => {
            tx.prepare_cached("DELETE FROM placeholders WHERE turn = ?1")?
                .execute([turn.0 as i64])?;
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
        Op::Shown { msg, keep } => crate::shown::insert(tx, msg, *keep)?,
        Op::ShownEdit { room, id, text } => {
            tx.prepare_cached("UPDATE shown SET text = ?3 WHERE room = ?1 AND id = ?2")?
                .execute(params![room.as_str(), id.as_str(), text])?;
        }
        Op::ShownDelete { room, id } => {
            tx.prepare_cached("DELETE FROM shown WHERE room = ?1 AND id = ?2")?
                .execute(params![room.as_str(), id.as_str()])?;
        }
        Op::ShownReact { room, id, emoji, by } => {
            crate::shown::react(tx, room.as_str(), id.as_str(), emoji, by)?;
        }
        Op::CallStarted(c) => crate::calls::start(tx, c)?,
        Op::CallEnded(e) => crate::calls::end(tx, e)?,
        Op::CallsInterrupted => crate::calls::interrupted(tx)?,
    }
    Ok(())
}
