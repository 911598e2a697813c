//! One way to read a result row, whichever backend returned it, so each
//! record is turned back into tactful's types once.
//!
//! The backends store the same columns with their own types (SQLite's
//! integers for flags, PostgreSQL's `BOOLEAN`; every number is a 64-bit
//! integer in both, every sum a float): [`Row`] asks for a column by what
//! tactful means by it, and each backend answers from its own row type.

use std::sync::Arc;

use tactful_core::{
    Mentions, Message, MsgId, Outgoing, PersonaId, RoomId, Sender, ThreadId, Timestamp, TurnId, UserId,
};

use crate::StoreError;
use crate::calls::{CallRow, CostRow};
use crate::ops::kind_from_name;
use crate::records::PendingRow;
use crate::records::{DecisionRow, RoomSummary};
use crate::records::{Placeholder, Unsent};
use crate::shown::{ShownMessage, parse_reactions};

/// A result row, read by column index.
pub(crate) trait Row {
    /// A text column that is never NULL.
    fn text(&self, i: usize) -> Result<String, StoreError>;
    /// A text column.
    fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError>;
    /// An integer column that is never NULL.
    fn int(&self, i: usize) -> Result<i64, StoreError>;
    /// An integer column.
    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError>;
    /// A flag.
    fn flag(&self, i: usize) -> Result<bool, StoreError>;
    /// A float (sums and averages).
    fn opt_float(&self, i: usize) -> Result<Option<f64>, StoreError>;

    /// A count or a millisecond time: never negative.
    fn count(&self, i: usize) -> Result<u64, StoreError> {
        Ok(self.int(i)?.max(0) as u64)
    }
    /// A count that may be missing.
    fn opt_count(&self, i: usize) -> Result<Option<u64>, StoreError> {
        Ok(self.opt_int(i)?.map(|n| n.max(0) as u64))
    }
    /// A time in Unix milliseconds.
    fn time(&self, i: usize) -> Result<Timestamp, StoreError> {
        Ok(Timestamp::from_millis(self.count(i)?))
    }
}

/// The columns [`message`] reads, in its order.
pub(crate) const MESSAGE_COLUMNS: &str =
    "id, sender_id, sender_name, is_bot, text, reply_to, thread, mentions, is_dm, dm_to, time, sender_handle";

/// A `messages` row (selected as [`MESSAGE_COLUMNS`], from column `at`) as
/// the engine's message; unreadable mentions become "none", with a note.
pub(crate) fn message(
    room: &RoomId,
    r: &impl Row,
    at: usize,
    skipped: &mut Vec<String>,
) -> Result<Message, StoreError> {
    let id = r.text(at)?;
    let mentions = match r.opt_text(at + 7)? {
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
        thread: r.opt_text(at + 6)?.map(ThreadId::new),
        sender: Sender {
            id: UserId::new(r.text(at + 1)?),
            name: Arc::from(r.text(at + 2)?),
            is_bot: r.flag(at + 3)?,
            handle: r.opt_text(at + 11)?.map(Arc::from),
        },
        text: Arc::from(r.text(at + 4)?),
        mentions,
        reply_to: r.opt_text(at + 5)?.map(MsgId::new),
        is_dm: r.flag(at + 8)?,
        dm_to: r.opt_text(at + 9)?.map(PersonaId::new),
        time: r.time(at + 10)?,
    })
}

/// The columns [`unsent`] reads: the outbox `o` joined to its message `m`.
pub(crate) const UNSENT_COLUMNS: &str = "o.turn, o.kind, o.persona, o.room, m.thread, o.local_id, m.text, \
     m.reply_to, o.notice, m.is_dm, m.time, o.parts_done, m.platform_id";

/// An outbox row joined to its message, as the reply to send again.
pub(crate) fn unsent(r: &impl Row) -> Result<Unsent, StoreError> {
    Ok(Unsent {
        out: Outgoing {
            at: r.time(10)?,
            turn: TurnId(r.count(0)?),
            kind: kind_from_name(&r.text(1)?),
            persona: PersonaId::new(r.text(2)?),
            room: RoomId::new(r.text(3)?),
            thread: r.opt_text(4)?.map(ThreadId::new),
            id: MsgId::new(r.text(5)?),
            text: r.text(6)?,
            reply_to: r.opt_text(7)?.map(MsgId::new),
            dropped_reply_to: None,
            invalid_reply_to: Vec::new(),
            unknown_directives: Vec::new(),
            msgs: Vec::new(),
            notice: r.flag(8)?,
            is_dm: r.flag(9)?,
            truncated_from: None,
            more_withheld: 0,
            reasoning_chars: 0,
        },
        parts_done: r.count(11)? as usize,
        first_id: r.opt_text(12)?.map(MsgId::new),
    })
}

/// The columns [`pending`] reads.
pub(crate) const PENDING_COLUMNS: &str = "turn, kind, room, persona, msgs, addressed";

/// A `pending_turns` row, its messages still to be looked up.
pub(crate) fn pending(r: &impl Row) -> Result<PendingRow, StoreError> {
    Ok(PendingRow {
        turn: r.int(0)?,
        kind: r.text(1)?,
        room: r.text(2)?,
        persona: r.text(3)?,
        msgs: r.text(4)?,
        addressed: r.flag(5)?,
    })
}

/// A `placeholders` row (`turn, room, persona, platform_id, thread`).
pub(crate) fn placeholder(r: &impl Row) -> Result<Placeholder, StoreError> {
    Ok(Placeholder {
        turn: TurnId(r.count(0)?),
        room: RoomId::new(r.text(1)?),
        persona: PersonaId::new(r.text(2)?),
        id: MsgId::new(r.text(3)?),
        thread: r.opt_text(4)?.map(ThreadId::new),
    })
}

/// The columns [`shown`] reads.
pub(crate) const SHOWN_COLUMNS: &str =
    "room, id, key, sender_id, sender_name, is_bot, text, reply_to, time, reactions";

/// A `shown` row.
pub(crate) fn shown(r: &impl Row) -> Result<ShownMessage, StoreError> {
    Ok(ShownMessage {
        room: RoomId::new(r.text(0)?),
        id: MsgId::new(r.text(1)?),
        key: r.opt_text(2)?,
        sender: UserId::new(r.text(3)?),
        sender_name: r.text(4)?,
        is_bot: r.flag(5)?,
        text: r.text(6)?,
        reply_to: r.opt_text(7)?.map(MsgId::new),
        time: r.time(8)?,
        reactions: parse_reactions(r.opt_text(9)?.as_deref()),
    })
}

/// A room as the console lists it (`room, messages, last time, decisions`).
pub(crate) fn room_summary(r: &impl Row) -> Result<RoomSummary, StoreError> {
    Ok(RoomSummary {
        room: r.text(0)?,
        messages: r.count(1)?,
        last_at: r.count(2)?,
        decisions: r.count(3)?,
    })
}

/// A decision with its message (`seq, at, msg, sender, text, persona,
/// outcome, reason, turn`).
pub(crate) fn decision(r: &impl Row) -> Result<DecisionRow, StoreError> {
    Ok(DecisionRow {
        seq: r.int(0)?,
        at: r.count(1)?,
        msg: r.text(2)?,
        sender: r.opt_text(3)?,
        text: r.opt_text(4)?,
        persona: r.text(5)?,
        outcome: r.text(6)?,
        reason: r.text(7)?,
        turn: r.opt_int(8)?,
    })
}

/// The columns [`call`] reads.
pub(crate) const CALL_COLUMNS: &str = "turn, kind, persona, agent, msg, started, ended - started, outcome, error, \
     prompt_tokens, completion_tokens, cached_tokens";

/// A `calls` row.
pub(crate) fn call(r: &impl Row) -> Result<CallRow, StoreError> {
    Ok(CallRow {
        turn: r.int(0)?,
        kind: r.text(1)?,
        persona: r.text(2)?,
        agent: r.text(3)?,
        msg: r.opt_text(4)?,
        started: r.opt_count(5)?.unwrap_or(0),
        latency_ms: r.opt_count(6)?,
        outcome: r.opt_text(7)?,
        error: r.opt_text(8)?,
        prompt_tokens: r.opt_count(9)?,
        completion_tokens: r.opt_count(10)?,
        cached_tokens: r.opt_count(11)?,
    })
}

/// One day's sums (`day, room, persona, agent, kind, calls, errors`, then
/// the token totals and the mean latency as floats).
pub(crate) fn cost(r: &impl Row) -> Result<CostRow, StoreError> {
    let float = |i: usize| -> Result<u64, StoreError> { Ok(r.opt_float(i)?.unwrap_or(0.0).max(0.0) as u64) };
    Ok(CostRow {
        day: r.text(0)?,
        room: r.text(1)?,
        persona: r.text(2)?,
        agent: r.text(3)?,
        kind: r.text(4)?,
        calls: r.opt_count(5)?.unwrap_or(0),
        errors: r.opt_count(6)?.unwrap_or(0),
        prompt_tokens: float(7)?,
        completion_tokens: float(8)?,
        cached_tokens: float(9)?,
        mean_latency_ms: r.opt_float(10)?.map(|v| v.max(0.0).round() as u64),
    })
}
