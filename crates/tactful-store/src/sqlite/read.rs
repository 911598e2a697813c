//! The console's queries against a SQLite file, on a read-only connection.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, params};
use tactful_core::{Message, RoomId};

use super::rows;
use crate::StoreError;
use crate::backend::ReadBackend;
use crate::calls::{CallRow, CostRow};
use crate::records::{DecisionRow, RoomSummary};
use crate::row::{self, CALL_COLUMNS, MESSAGE_COLUMNS, Row, SHOWN_COLUMNS};

/// A read-only connection to a store file.
pub(crate) struct Reader {
    conn: Connection,
}

impl Reader {
    /// Opens `path` read-only (it must exist: the service created it).
    pub(crate) fn open(path: &Path) -> Result<Reader, StoreError> {
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
}

impl ReadBackend for Reader {
    fn rooms(&self) -> Result<Vec<RoomSummary>, StoreError> {
        rows(
            &self.conn,
            "SELECT m.room, count(*), max(m.time),
                    (SELECT count(*) FROM decisions d WHERE d.room = m.room)
             FROM messages m GROUP BY m.room ORDER BY max(m.time) DESC LIMIT 10000",
            [],
            |r| row::room_summary(r),
        )
    }

    fn has_room(&self, room: &str) -> Result<bool, StoreError> {
        Ok(!rows(
            &self.conn,
            "SELECT 1 FROM messages WHERE room = ?1 LIMIT 1",
            [room],
            |_| Ok(()),
        )?
        .is_empty())
    }

    fn decisions(&self, room: &str, before: i64, limit: usize) -> Result<Vec<DecisionRow>, StoreError> {
        rows(
            &self.conn,
            "SELECT d.seq, d.at, d.msg, m.sender_name, m.text, d.persona, d.outcome, d.reason, d.turn
             FROM decisions d LEFT JOIN messages m ON m.room = d.room AND m.id = d.msg
             WHERE d.room = ?1 AND d.seq < ?2 ORDER BY d.seq DESC LIMIT ?3",
            params![room, before, limit as i64],
            |r| row::decision(r),
        )
    }

    fn state_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<(String, String)>, StoreError> {
        rows(
            &self.conn,
            "SELECT key, value FROM platform_state WHERE substr(key, 1, length(?1)) = ?1
             ORDER BY key DESC LIMIT ?2",
            params![prefix, limit as i64],
            |r| Ok((r.text(0)?, r.text(1)?)),
        )
    }

    fn recent_messages(&self, room: &str, n: usize) -> Result<Vec<Message>, StoreError> {
        let id = RoomId::new(room);
        let mut skipped = Vec::new();
        let read = rows(
            &self.conn,
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM (
                     SELECT * FROM messages WHERE room = ?1 ORDER BY seq DESC LIMIT ?2) ORDER BY seq"
            ),
            params![room, n as i64],
            |r| Ok(row::message(&id, r, 0, &mut skipped).ok()),
        )?;
        Ok(read.into_iter().flatten().collect())
    }

    fn calls(&self, room: &str, before: i64, limit: usize) -> Result<Vec<CallRow>, StoreError> {
        rows(
            &self.conn,
            &format!(
                "SELECT {CALL_COLUMNS} FROM calls WHERE room = ?1 AND turn < ?2 ORDER BY turn DESC LIMIT ?3"
            ),
            params![room, before, limit as i64],
            |r| row::call(r),
        )
    }

    fn costs(&self, since: i64, limit: usize) -> Result<Vec<CostRow>, StoreError> {
        rows(
            &self.conn,
            "SELECT date(started / 1000, 'unixepoch') AS day, room, persona, agent, kind, count(*),
                    sum(outcome = 'error'), total(prompt_tokens), total(completion_tokens),
                    total(cached_tokens), avg(ended - started)
             FROM calls WHERE started >= ?1
             GROUP BY day, room, persona, agent, kind
             ORDER BY day DESC, room, persona, agent, kind LIMIT ?2",
            params![since, limit as i64],
            |r| row::cost(r),
        )
    }

    fn people_messages(&self, since: i64) -> Result<Vec<(String, u64)>, StoreError> {
        rows(
            &self.conn,
            "SELECT room, count(*) FROM messages WHERE persona IS NULL AND time >= ?1
             GROUP BY room ORDER BY room LIMIT 10000",
            [since],
            |r| Ok((r.text(0)?, r.count(1)?)),
        )
    }

    fn shown_message(&self, room: &str, id: &str) -> Result<Option<crate::ShownMessage>, StoreError> {
        Ok(rows(
            &self.conn,
            &format!("SELECT {SHOWN_COLUMNS} FROM shown WHERE room = ?1 AND id = ?2"),
            [room, id],
            |r| row::shown(r),
        )?
        .pop())
    }
}
