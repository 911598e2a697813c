//! Reading the store while the service writes it, for the operator
//! console: the rooms and their decisions, with the text they were about.
//!
//! A [`Reader`] is a second, read-only connection to the same file (WAL
//! lets it read while the writer thread commits), so the console never
//! waits on, nor slows, the live path's writer. Every query is bounded.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde::Serialize;

use crate::StoreError;

/// The most decisions one page returns.
pub const MAX_PAGE: usize = 500;

/// One room, as the console lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RoomSummary {
    /// The room id (`tg:-100…`, `lobby`).
    pub room: String,
    /// Messages stored.
    pub messages: u64,
    /// Decisions stored.
    pub decisions: u64,
    /// When the last message was sent (Unix milliseconds).
    pub last_at: u64,
}

/// One decision, with the message it was about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DecisionRow {
    /// Its place in the trace: pages go backwards from it.
    pub seq: i64,
    /// When it was decided (Unix milliseconds).
    pub at: u64,
    /// The message.
    pub msg: String,
    /// Who wrote it, when the message is stored (a schedule's run has no
    /// message).
    pub sender: Option<String>,
    /// What it said.
    pub text: Option<String>,
    /// The persona decided for.
    pub persona: String,
    /// `reply`, `record` or `skip`.
    pub outcome: String,
    /// Why, as the trace names it.
    pub reason: String,
    /// The turn started, if any.
    pub turn: Option<i64>,
}

/// A read-only view of a store file.
pub struct Reader {
    pub(crate) conn: Connection,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("path", &self.conn.path()).finish()
    }
}

impl Reader {
    /// Opens `path` read-only (it must exist: the service created it).
    pub fn open(path: &Path) -> Result<Reader, StoreError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| StoreError::Open {
            path: path.display().to_string(),
            source,
        })?;
        conn.busy_timeout(std::time::Duration::from_secs(2))?;
        Ok(Reader { conn })
    }

    /// Every room with a stored message, the most recently active first.
    pub fn rooms(&self) -> Result<Vec<RoomSummary>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT m.room, count(*), max(m.time),
                    (SELECT count(*) FROM decisions d WHERE d.room = m.room)
             FROM messages m GROUP BY m.room ORDER BY max(m.time) DESC LIMIT 10000",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(RoomSummary {
                room: r.get(0)?,
                messages: r.get::<_, i64>(1)?.max(0) as u64,
                last_at: r.get::<_, i64>(2)?.max(0) as u64,
                decisions: r.get::<_, i64>(3)?.max(0) as u64,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Whether the store has anything of `room`.
    pub fn has_room(&self, room: &str) -> Result<bool, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT 1 FROM messages WHERE room = ?1 LIMIT 1", [room], |_| {
                Ok(())
            })
            .optional()?
            .is_some())
    }

    /// `room`'s decisions, newest first: at most `limit` (capped at
    /// [`MAX_PAGE`]) before `before` (a `seq`; the newest when `None`).
    pub fn decisions(
        &self,
        room: &str,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<DecisionRow>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT d.seq, d.at, d.msg, m.sender_name, m.text, d.persona, d.outcome, d.reason, d.turn
             FROM decisions d LEFT JOIN messages m ON m.room = d.room AND m.id = d.msg
             WHERE d.room = ?1 AND d.seq < ?2 ORDER BY d.seq DESC LIMIT ?3",
        )?;
        let rows = stmt.query_map(
            rusqlite::params![room, before.unwrap_or(i64::MAX), limit.min(MAX_PAGE) as i64],
            |r| {
                Ok(DecisionRow {
                    seq: r.get(0)?,
                    at: r.get::<_, i64>(1)?.max(0) as u64,
                    msg: r.get(2)?,
                    sender: r.get(3)?,
                    text: r.get(4)?,
                    persona: r.get(5)?,
                    outcome: r.get(6)?,
                    reason: r.get(7)?,
                    turn: r.get(8)?,
                })
            },
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Saved state whose keys start with `prefix`, the greatest keys first,
    /// at most `limit` (capped at [`MAX_PAGE`]).
    pub fn state_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<(String, String)>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT key, value FROM platform_state WHERE substr(key, 1, length(?1)) = ?1 ORDER BY key DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(rusqlite::params![prefix, limit.min(MAX_PAGE) as i64], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The last `n` messages of `room` (at most [`MAX_PAGE`]), oldest
    /// first, as the engine heard them; unreadable rows are skipped.
    pub fn recent_messages(&self, room: &str, n: usize) -> Result<Vec<tactful_core::Message>, StoreError> {
        let sql = format!(
            "SELECT {} FROM (SELECT * FROM messages WHERE room = ?1 ORDER BY seq DESC LIMIT ?2) ORDER BY seq",
            crate::load::MESSAGE_COLUMNS
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let id = tactful_core::RoomId::new(room);
        let mut skipped = Vec::new();
        let rows = stmt.query_map(rusqlite::params![room, n.min(MAX_PAGE) as i64], |r| {
            crate::load::message_from_row(&id, r, 0, &mut skipped)
        })?;
        Ok(rows.filter_map(Result::ok).collect())
    }
}
