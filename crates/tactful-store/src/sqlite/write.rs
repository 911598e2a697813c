//! Each [`Op`] as SQLite statements, inside the batch's transaction.

use rusqlite::{OptionalExtension, Transaction, params};
use tactful_core::{Message, MsgId, PersonaId, ThreadId};

use crate::StoreError;
use crate::calls::{CallEnd, CallStart, to_i64};
use crate::ops::{Op, kind_name, mentions_json, to_json};
use crate::shown::{ShownMessage, add_reaction};

fn insert_message(tx: &Transaction<'_>, m: &Message, persona: Option<&PersonaId>) -> rusqlite::Result<()> {
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
        mentions_json(m),
        m.is_dm,
        m.dm_to.as_ref().map(PersonaId::as_str),
        m.time.as_millis() as i64,
        m.sender.handle.as_deref(),
    ])?;
    Ok(())
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
            thread,
            id,
        } => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO placeholders (turn, room, persona, platform_id, thread) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                turn.0 as i64,
                room.as_str(),
                persona.as_str(),
                id.as_str(),
                thread.as_ref().map(|t| t.as_str())
            ])?;
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
        // One process: nobody to announce a shared setting to.
        Op::PlatformState { key, value } | Op::SharedState { key, value } => {
            tx.prepare_cached("INSERT OR REPLACE INTO platform_state (key, value) VALUES (?1, ?2)")?
                .execute(params![key, value])?;
        }
        Op::ForgetState { key } => {
            tx.prepare_cached("DELETE FROM platform_state WHERE key = ?1")?
                .execute(params![key])?;
        }
        Op::Shown { msg, keep } => insert_shown(tx, msg, *keep)?,
        Op::ShownEdit { room, id, text } => {
            tx.prepare_cached("UPDATE shown SET text = ?3 WHERE room = ?1 AND id = ?2")?
                .execute(params![room.as_str(), id.as_str(), text])?;
        }
        Op::ShownDelete { room, id } => {
            tx.prepare_cached("DELETE FROM shown WHERE room = ?1 AND id = ?2")?
                .execute(params![room.as_str(), id.as_str()])?;
        }
        Op::ShownReact { room, id, emoji, by } => {
            react(tx, room.as_str(), id.as_str(), emoji, by)?;
        }
        // Announced to other processes' web rooms, counted for other
        // processes' budgets: one process has no others.
        Op::ShownNote { .. } | Op::Spent(_) => {}
        Op::CallStarted(c) => call_started(tx, c)?,
        Op::CallEnded(e) => call_ended(tx, e)?,
        Op::CallsInterrupted => calls_interrupted(tx)?,
        Op::Fence(_) | Op::Decided { .. } | Op::Inbox { .. } => {
            return Err(StoreError::NeedsPostgres("several processes"));
        }
    }
    Ok(())
}

/// Adds `by`'s `emoji` to message `id` of `room` (see [`add_reaction`]).
fn react(tx: &Transaction<'_>, room: &str, id: &str, emoji: &str, by: &str) -> Result<(), StoreError> {
    let stored: Option<Option<String>> = tx
        .prepare_cached("SELECT reactions FROM shown WHERE room = ?1 AND id = ?2")?
        .query_row(params![room, id], |r| r.get(0))
        .optional()?;
    let Some(stored) = stored else {
        return Ok(());
    };
    if let Some(json) = add_reaction(stored.as_deref(), emoji, by) {
        tx.prepare_cached("UPDATE shown SET reactions = ?3 WHERE room = ?1 AND id = ?2")?
            .execute(params![room, id, json])?;
    }
    Ok(())
}

/// Inserts `m` (once: the same id or key again changes nothing) and keeps
/// the room's newest `keep` messages.
fn insert_shown(tx: &Transaction<'_>, m: &ShownMessage, keep: usize) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO shown (room, id, key, sender_id, sender_name, is_bot, text, reply_to, time)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        m.room.as_str(),
        m.id.as_str(),
        m.key,
        m.sender.as_str(),
        m.sender_name,
        m.is_bot,
        m.text,
        m.reply_to.as_ref().map(MsgId::as_str),
        m.time.as_millis() as i64,
    ])?;
    tx.prepare_cached(
        "DELETE FROM shown WHERE room = ?1 AND seq <= (
             SELECT seq FROM shown WHERE room = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
    )?
    .execute(params![m.room.as_str(), keep.max(1) as i64])?;
    Ok(())
}

fn call_started(tx: &Transaction<'_>, c: &CallStart) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO calls (turn, kind, room, persona, agent, msg, started)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        c.turn.0 as i64,
        kind_name(c.kind),
        c.room.as_str(),
        c.persona.as_str(),
        c.agent,
        c.msg,
        c.at.as_millis() as i64,
    ])?;
    Ok(())
}

/// See [`CallEnd`]: each column keeps its first value, except that a more
/// precise outcome replaces `answered`.
fn call_ended(tx: &Transaction<'_>, e: &CallEnd) -> Result<(), StoreError> {
    tx.prepare_cached(
        "UPDATE calls SET
             ended = coalesce(ended, ?2),
             outcome = CASE WHEN outcome IS NULL OR outcome = 'answered' THEN coalesce(?3, outcome)
                            ELSE outcome END,
             error = coalesce(error, ?4),
             prompt_tokens = coalesce(prompt_tokens, ?5),
             completion_tokens = coalesce(completion_tokens, ?6),
             cached_tokens = coalesce(cached_tokens, ?7)
         WHERE turn = ?1",
    )?
    .execute(params![
        e.turn.0 as i64,
        e.at.map(|t| t.as_millis() as i64),
        e.outcome,
        e.error,
        e.prompt_tokens.map(to_i64),
        e.completion_tokens.map(to_i64),
        e.cached_tokens.map(to_i64),
    ])?;
    Ok(())
}

/// Calls a previous run left without an end are `interrupted`: at a start,
/// nothing is running yet.
fn calls_interrupted(tx: &Transaction<'_>) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE calls SET outcome = 'interrupted' WHERE ended IS NULL AND outcome IS NULL")?
        .execute([])?;
    Ok(())
}
