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
//! - the outbox: replies decided but not yet confirmed sent (and how many
//!   of their parts went out), so a restart sends the rest once;
//! - streaming placeholders still on screen, so a restart turns each into
//!   its reply or removes it;
//! - the web room's messages as shown ([`ShownMessage`]), written before
//!   anyone sees them;
//! - the agent-call log: each call's latency, tokens and end, for the
//!   console's transcript and costs.
//!
//! The file uses WAL with `synchronous = NORMAL`: a committed transaction
//! survives the process being killed at any instant; a power cut may lose
//! the last few. New files use 1 KiB pages (every commit writes the pages
//! it touched whole into the WAL). `:memory:` opens a private in-memory
//! store for tests.

mod calls;
mod claim;
mod load;
mod ops;
mod read;
mod schema;
mod shown;

use std::path::Path;

use rusqlite::{Connection, ErrorCode, OptionalExtension};
use tactful_core::RoomId;

pub use calls::{CallEnd, CallRow, CallStart, CostRow, MAX_COST_ROWS};
pub use claim::{Claim, ClaimError, claim};
pub use load::{LoadLimits, Pending, Placeholder, Restored, RestoredRoom, Unsent};
pub use ops::{Op, PendingTurn};
pub use read::{DecisionRow, MAX_PAGE, Reader, RoomSummary};
pub use shown::ShownMessage;

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
}

impl StoreError {
    /// Whether trying the same write again later may succeed: the disk is
    /// full or read-only for now, another process holds the lock, an I/O
    /// error. Anything else (a constraint, a bug) fails the same way again.
    pub fn is_transient(&self) -> bool {
        let StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) = self else {
            return false;
        };
        matches!(
            e.code,
            ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::DiskFull
                | ErrorCode::ReadOnly
                | ErrorCode::SystemIoFailure
                | ErrorCode::CannotOpen
                | ErrorCode::FileLockingProtocolFailed
                | ErrorCode::OutOfMemory
                | ErrorCode::OperationInterrupted
        )
    }
}

/// The SQLite store.
pub struct Store {
    pub(crate) conn: Connection,
}

/// The page size of a new store file, in bytes. Every commit writes each
/// page it touched whole into the WAL, and the live path commits a few
/// small rows at a time across several tables and indexes: with SQLite's
/// default 4 KiB pages that was some 160 MB of WAL a second at 1,000
/// messages a second, and its checkpoints' disk syncs were the slowest
/// replies (BENCHMARKS.md). Rows here are far smaller than 1 KiB.
const PAGE_SIZE: i64 = 1024;

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
        Ok(Store { conn })
    }

    /// Leaves WAL checkpoints to the caller ([`Store::checkpoint`]).
    ///
    /// SQLite checkpoints inside the `COMMIT` that fills 1,000 WAL pages,
    /// and a checkpoint syncs the WAL and the database to disk: that
    /// commit, and everyone waiting on it, waits for the disk too. The
    /// store's writer checkpoints after it has answered its waiters
    /// instead, when it has nothing queued (or the WAL grew too long).
    /// Durability is unchanged: with WAL and `synchronous = NORMAL` a
    /// commit survives a killed process either way.
    pub fn manual_checkpoints(&mut self) -> Result<(), StoreError> {
        self.conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        Ok(())
    }

    /// Copies the WAL into the database (PASSIVE: it never waits for
    /// another connection); the next write starts the WAL over.
    pub fn checkpoint(&mut self) -> Result<(), StoreError> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
        Ok(())
    }

    /// Saves a batch of changes in one transaction, in order.
    pub fn apply(&mut self, ops: &[Op]) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        for op in ops {
            ops::apply_one(&tx, op)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// This store's id: random, made when the file is first used and kept
    /// in it. It makes the delivery path's idempotency keys unique to the
    /// store, so a fresh store (`:memory:`, a new file) never reuses the key
    /// of a message another store's tactful sent.
    pub fn id(&mut self) -> Result<String, StoreError> {
        use std::hash::{BuildHasher, Hasher};
        const KEY: &str = "tactful:store_id";
        let found: Option<String> = self
            .conn
            .query_row("SELECT value FROM platform_state WHERE key = ?1", [KEY], |r| {
                r.get(0)
            })
            .optional()?;
        if let Some(id) = found {
            return Ok(id);
        }
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.write_u32(std::process::id());
        let id = format!("{:016x}", h.finish());
        self.conn.execute(
            "INSERT INTO platform_state (key, value) VALUES (?1, ?2)",
            rusqlite::params![KEY, id],
        )?;
        Ok(id)
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
