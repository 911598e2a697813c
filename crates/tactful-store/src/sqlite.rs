//! The embedded default: one SQLite file (rusqlite, bundled).
//!
//! The file uses WAL with `synchronous = NORMAL`: a committed transaction
//! survives the process being killed at any instant; a power cut may lose
//! the last few. New files use 1 KiB pages (every commit writes the pages
//! it touched whole into the WAL). `:memory:` opens a private in-memory
//! store for tests.

mod read;
mod schema;
mod write;

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, Params, params};
use tactful_core::{Message, MsgId, RoomId};

pub(crate) use read::Reader;

use crate::backend::Backend;
use crate::records::{PendingRow, StoredMessage};
use crate::records::{Placeholder, Unsent};
use crate::row::{self, MESSAGE_COLUMNS, PENDING_COLUMNS, Row, SHOWN_COLUMNS, UNSENT_COLUMNS};
use crate::{Op, ShownMessage, StoreError};

/// The page size of a new store file, in bytes. Every commit writes each
/// page it touched whole into the WAL, and the live path commits a few
/// small rows at a time across several tables and indexes: with SQLite's
/// default 4 KiB pages that was some 160 MB of WAL a second at 1,000
/// messages a second, and its checkpoints' disk syncs were the slowest
/// replies (BENCHMARKS.md). Rows here are far smaller than 1 KiB.
const PAGE_SIZE: i64 = 1024;

/// A SQLite store file (or a private in-memory one).
pub(crate) struct Sqlite {
    conn: Connection,
}

impl Row for rusqlite::Row<'_> {
    fn text(&self, i: usize) -> Result<String, StoreError> {
        Ok(self.get(i)?)
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        Ok(self.get(i)?)
    }
    fn int(&self, i: usize) -> Result<i64, StoreError> {
        Ok(self.get(i)?)
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        Ok(self.get(i)?)
    }
    fn flag(&self, i: usize) -> Result<bool, StoreError> {
        Ok(self.get(i)?)
    }
    fn opt_float(&self, i: usize) -> Result<Option<f64>, StoreError> {
        Ok(self.get(i)?)
    }
}

/// Runs `sql` and reads every row with `f`.
pub(crate) fn rows<T>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
    mut f: impl FnMut(&rusqlite::Row<'_>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut query = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(r) = query.next()? {
        out.push(f(r)?);
    }
    Ok(out)
}

impl Sqlite {
    /// Opens (creating if needed) the store at `path`; `:memory:` is a
    /// private in-memory store.
    pub(crate) fn open(path: &Path) -> Result<Sqlite, StoreError> {
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
        // Before anything is written: a new file gets small pages (an
        // existing one keeps its own).
        conn.pragma_update(None, "page_size", PAGE_SIZE)
            .map_err(open_err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(open_err)?;
        schema::migrate(&conn, &shown)?;
        Ok(Sqlite { conn })
    }
}

impl Backend for Sqlite {
    fn apply(&mut self, ops: &[Op]) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        for op in ops {
            write::apply_one(&tx, op)?;
        }
        tx.commit()?;
        Ok(())
    }

    fn state(&mut self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT value FROM platform_state WHERE key = ?1", [key], |r| {
                r.get(0)
            })
            .optional()?)
    }

    fn state_insert_new(&mut self, key: &str, value: &str) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT OR IGNORE INTO platform_state (key, value) VALUES (?1, ?2)",
            params![key, value],
        )?;
        Ok(())
    }

    fn platform_state(&mut self) -> Result<BTreeMap<String, String>, StoreError> {
        Ok(
            rows(&self.conn, "SELECT key, value FROM platform_state", [], |r| {
                Ok((r.text(0)?, r.text(1)?))
            })?
            .into_iter()
            .collect(),
        )
    }

    fn shown(&mut self, limit: usize) -> Result<Vec<ShownMessage>, StoreError> {
        rows(
            &self.conn,
            &format!(
                "SELECT {SHOWN_COLUMNS} FROM (
                     SELECT *, row_number() OVER (PARTITION BY room ORDER BY seq DESC) AS n FROM shown)
                 WHERE n <= ?1 ORDER BY seq"
            ),
            [limit as i64],
            |r| row::shown(r),
        )
    }

    fn decision_count(&mut self, room: &RoomId) -> Result<u64, StoreError> {
        Ok(self.conn.query_row(
            "SELECT count(*) FROM decisions WHERE room = ?1",
            [room.as_str()],
            |r| r.get::<_, i64>(0),
        )? as u64)
    }

    fn counters_json(&mut self) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT json FROM counters WHERE id = 0", [], |r| r.get(0))
            .optional()?)
    }

    fn room_names(&mut self) -> Result<Vec<String>, StoreError> {
        rows(
            &self.conn,
            "SELECT room FROM messages UNION SELECT room FROM snapshots ORDER BY 1",
            [],
            |r| r.text(0),
        )
    }

    fn recent(
        &mut self,
        room: &RoomId,
        limit: usize,
        skipped: &mut Vec<String>,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        rows(
            &self.conn,
            &format!(
                "SELECT seq, platform_id, persona, {MESSAGE_COLUMNS}
                 FROM messages WHERE room = ?1 ORDER BY seq DESC LIMIT ?2"
            ),
            params![room.as_str(), limit as i64],
            |r| {
                Ok(StoredMessage {
                    seq: r.int(0)?,
                    platform_id: r.opt_text(1)?,
                    msg: row::message(room, r, 3, skipped)?,
                })
            },
        )
    }

    fn older_own(
        &mut self,
        room: &RoomId,
        before: i64,
        per_persona: usize,
    ) -> Result<Vec<(String, String, Option<String>)>, StoreError> {
        rows(
            &self.conn,
            "SELECT persona, id, platform_id FROM (
                 SELECT persona, id, platform_id, seq,
                        row_number() OVER (PARTITION BY persona ORDER BY seq DESC) AS n
                 FROM messages WHERE room = ?1 AND persona IS NOT NULL AND seq < ?2)
             WHERE n <= ?3 ORDER BY seq",
            params![room.as_str(), before, per_persona as i64],
            |r| Ok((r.text(0)?, r.text(1)?, r.opt_text(2)?)),
        )
    }

    fn snapshot_json(&mut self, room: &RoomId) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT json FROM snapshots WHERE room = ?1",
                [room.as_str()],
                |r| r.get(0),
            )
            .optional()?)
    }

    fn pending_rows(&mut self) -> Result<Vec<PendingRow>, StoreError> {
        rows(
            &self.conn,
            &format!("SELECT {PENDING_COLUMNS} FROM pending_turns ORDER BY turn"),
            [],
            |r| row::pending(r),
        )
    }

    fn message(
        &mut self,
        room: &RoomId,
        id: &MsgId,
        skipped: &mut Vec<String>,
    ) -> Result<Option<Message>, StoreError> {
        Ok(rows(
            &self.conn,
            &format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE room = ?1 AND id = ?2"),
            params![room.as_str(), id.as_str()],
            |r| row::message(room, r, 0, skipped),
        )?
        .pop())
    }

    fn unsent(&mut self) -> Result<Vec<Unsent>, StoreError> {
        rows(
            &self.conn,
            &format!(
                "SELECT {UNSENT_COLUMNS}
                 FROM outbox o JOIN messages m ON m.room = o.room AND m.id = o.local_id
                 WHERE o.delivered IS NULL ORDER BY m.seq"
            ),
            [],
            |r| row::unsent(r),
        )
    }

    fn placeholders(&mut self) -> Result<Vec<Placeholder>, StoreError> {
        rows(
            &self.conn,
            "SELECT turn, room, persona, platform_id, thread FROM placeholders ORDER BY turn",
            [],
            |r| row::placeholder(r),
        )
    }

    /// SQLite checkpoints inside the `COMMIT` that fills 1,000 WAL pages,
    /// and a checkpoint syncs the WAL and the database to disk: that
    /// commit, and everyone waiting on it, waits for the disk too. The
    /// store's writer checkpoints after it has answered its waiters
    /// instead, when it has nothing queued (or the WAL grew too long).
    /// Durability is unchanged: with WAL and `synchronous = NORMAL` a
    /// commit survives a killed process either way.
    fn writer_upkeep(&mut self) -> Result<(), StoreError> {
        self.conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        Ok(())
    }

    /// Copies the WAL into the database (PASSIVE: it never waits for
    /// another connection); the next write starts the WAL over.
    fn idle(&mut self) -> Result<(), StoreError> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
        Ok(())
    }
}
