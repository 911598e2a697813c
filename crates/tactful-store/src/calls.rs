//! The agent-call log: one row per call an engine turn made (reply, gate,
//! ambient batch, schedule), with its latency, token counts and how it
//! ended. It is what the console's transcript and cost view read, so what a
//! room costs survives a restart and can be summed per day.
//!
//! A call is written when it starts ([`CallStart`]) and completed by every
//! later word about it ([`CallEnd`]): the agent's answer (latency, tokens,
//! error text) and then what the engine made of it (a reply, silence...).
//! The first value of each column wins, so a turn that answered three
//! questions is one call, ended when the agent answered.

use rusqlite::{Transaction, params};
use serde::Serialize;
use tactful_core::{PersonaId, RoomId, Timestamp, TurnId, TurnKind};

use crate::read::{MAX_PAGE, Reader};
use crate::{StoreError, ops::kind_name};

/// An agent call began.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallStart {
    /// The engine's turn id: one call per turn.
    pub turn: TurnId,
    /// What the call was for.
    pub kind: TurnKind,
    /// The room.
    pub room: RoomId,
    /// Whose call.
    pub persona: PersonaId,
    /// The `[agents]` key it went to.
    pub agent: String,
    /// The newest message it was about (none for a schedule's run).
    pub msg: Option<String>,
    /// When it started (not when it was decided: a queued turn waits).
    pub at: Timestamp,
}

/// More about a call: each field set here fills the column only if it is
/// still empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallEnd {
    /// The call.
    pub turn: TurnId,
    /// When the agent answered, failed or was stopped.
    pub at: Option<Timestamp>,
    /// `answered`, `reply`, `silent`, `withheld`, `error` or `cancelled`:
    /// a later, more precise word replaces `answered`.
    pub outcome: Option<&'static str>,
    /// The agent's error, secrets masked.
    pub error: Option<String>,
    /// Tokens in the prompt, as the provider reported them.
    pub prompt_tokens: Option<u64>,
    /// Tokens generated.
    pub completion_tokens: Option<u64>,
    /// Prompt tokens the provider served from its cache.
    pub cached_tokens: Option<u64>,
}

/// One call, as the console lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallRow {
    /// The turn.
    pub turn: i64,
    /// `reply`, `gate`, `ambient` or `schedule`.
    pub kind: String,
    /// Whose call.
    pub persona: String,
    /// The agent.
    pub agent: String,
    /// The newest message it was about.
    pub msg: Option<String>,
    /// When it started (Unix milliseconds).
    pub started: u64,
    /// How long the agent took, once it answered.
    pub latency_ms: Option<u64>,
    /// How it ended (none while it runs).
    pub outcome: Option<String>,
    /// The agent's error, secrets masked.
    pub error: Option<String>,
    /// Tokens in, out, and in from the provider's cache.
    pub prompt_tokens: Option<u64>,
    /// Tokens generated.
    pub completion_tokens: Option<u64>,
    /// Prompt tokens served from the provider's cache.
    pub cached_tokens: Option<u64>,
}

/// Calls of one room, persona, agent and kind on one UTC day.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CostRow {
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    /// The room.
    pub room: String,
    /// The persona.
    pub persona: String,
    /// The agent.
    pub agent: String,
    /// `reply`, `gate`, `ambient` or `schedule`.
    pub kind: String,
    /// Calls made.
    pub calls: u64,
    /// Of those, failed.
    pub errors: u64,
    /// Tokens in.
    pub prompt_tokens: u64,
    /// Tokens out.
    pub completion_tokens: u64,
    /// Tokens in served from the cache.
    pub cached_tokens: u64,
    /// The mean latency of the calls that answered.
    pub mean_latency_ms: Option<u64>,
}

/// The most rows [`Reader::costs`] returns.
pub const MAX_COST_ROWS: usize = 10_000;

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(crate) fn start(tx: &Transaction<'_>, c: &CallStart) -> Result<(), StoreError> {
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

pub(crate) fn end(tx: &Transaction<'_>, e: &CallEnd) -> Result<(), StoreError> {
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

/// Calls a previous run left without an end (it stopped or was killed while
/// they ran) are `interrupted`: at a start, nothing is running yet.
pub(crate) fn interrupted(tx: &Transaction<'_>) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE calls SET outcome = 'interrupted' WHERE ended IS NULL AND outcome IS NULL")?
        .execute([])?;
    Ok(())
}

fn count(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<u64>> {
    Ok(r.get::<_, Option<i64>>(i)?.map(|n| n.max(0) as u64))
}

impl Reader {
    /// `room`'s agent calls, newest first: at most `limit` (capped at
    /// [`MAX_PAGE`]) with turns before `before` (a `turn`; the newest when
    /// `None`). Turns are unique, so no page boundary falls between two
    /// calls started in the same millisecond.
    pub fn calls(&self, room: &str, before: Option<i64>, limit: usize) -> Result<Vec<CallRow>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT turn, kind, persona, agent, msg, started, ended - started, outcome, error,
                    prompt_tokens, completion_tokens, cached_tokens
             FROM calls WHERE room = ?1 AND turn < ?2 ORDER BY turn DESC LIMIT ?3",
        )?;
        let rows = stmt.query_map(
            params![room, before.unwrap_or(i64::MAX), limit.min(MAX_PAGE) as i64],
            |r| {
                Ok(CallRow {
                    turn: r.get(0)?,
                    kind: r.get(1)?,
                    persona: r.get(2)?,
                    agent: r.get(3)?,
                    msg: r.get(4)?,
                    started: count(r, 5)?.unwrap_or(0),
                    latency_ms: count(r, 6)?,
                    outcome: r.get(7)?,
                    error: r.get(8)?,
                    prompt_tokens: count(r, 9)?,
                    completion_tokens: count(r, 10)?,
                    cached_tokens: count(r, 11)?,
                })
            },
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Calls since `since` (Unix milliseconds), summed per UTC day, room,
    /// persona, agent and kind; the newest day first ([`MAX_COST_ROWS`] at
    /// most: as many means the oldest were left out).
    pub fn costs(&self, since: i64) -> Result<Vec<CostRow>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT date(started / 1000, 'unixepoch') AS day, room, persona, agent, kind, count(*),
                    sum(outcome = 'error'), total(prompt_tokens), total(completion_tokens),
                    total(cached_tokens), avg(ended - started)
             FROM calls WHERE started >= ?1
             GROUP BY day, room, persona, agent, kind
             ORDER BY day DESC, room, persona, agent, kind LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![since, MAX_COST_ROWS as i64], |r| {
            let float = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, f64>(i)?.max(0.0) as u64) };
            Ok(CostRow {
                day: r.get(0)?,
                room: r.get(1)?,
                persona: r.get(2)?,
                agent: r.get(3)?,
                kind: r.get(4)?,
                calls: count(r, 5)?.unwrap_or(0),
                errors: count(r, 6)?.unwrap_or(0),
                prompt_tokens: float(7)?,
                completion_tokens: float(8)?,
                cached_tokens: float(9)?,
                mean_latency_ms: r.get::<_, Option<f64>>(10)?.map(|v| v.max(0.0).round() as u64),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Messages heard in each room since `since` (not the personas' own):
    /// what "ambient calls per 100 messages" divides by.
    pub fn people_messages(&self, since: i64) -> Result<Vec<(String, u64)>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT room, count(*) FROM messages WHERE persona IS NULL AND time >= ?1
             GROUP BY room ORDER BY room LIMIT 10000",
        )?;
        let rows = stmt.query_map([since], |r| Ok((r.get(0)?, count(r, 1)?.unwrap_or(0))))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
