//! tactful's durable state: one SQLite file by default, or a PostgreSQL
//! database when several processes share it.
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
//!   console's transcript and costs;
//! - platforms' own bookkeeping (sync tokens, cursors), schedules' last
//!   runs, the console's policy layers and its marks on decisions, as keyed
//!   values (a mark cleared is forgotten: `Op::ForgetState`).
//!
//! Where it is kept is a [`Location`]; both backends answer the same trait
//! (`backend::Backend`) and pass the same conformance tests.

mod backend;
mod calls;
mod claim;
pub mod fan_out;
mod load;
mod location;
mod ops;
mod postgres;
mod read;
mod records;
mod row;
mod shown;
mod sqlite;
#[cfg(feature = "testing")]
pub mod testing;

use tactful_core::RoomId;

pub use calls::{CallEnd, CallRow, CallStart, CostRow, MAX_COST_ROWS};
pub use claim::{Claim, ClaimError, claim};
pub use fan_out::{LIVE_CHANNEL, LiveNote, STATE_CHANNEL, ShownChange, ShownKind, WEB_CHANNEL};
pub use load::{LoadLimits, Pending, Restored, RestoredRoom};
pub use location::{BadUrl, Location};
pub use ops::{Op, PendingTurn};
pub use postgres::announce::Announcer;
pub use postgres::cluster::{
    Balance, CONNECTION_BOUND, Cluster, INBOX_CHANNEL, InboxWake, Lease, Member, Notification, PARTITIONS,
    SPEND_CHANNEL, Waiting, account_key, connection_partition, listen, partition_key, partition_of,
};
pub use read::{MAX_PAGE, Reader};
pub use records::{DecisionRow, PartitionOwner, Placeholder, RoomSummary, Unsent};
pub use shown::ShownMessage;

use backend::Backend;

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
    /// The database does not answer, or refuses us.
    #[error("cannot connect to the store {url}: {}", postgres::tls::explain(source))]
    Connect {
        /// The URL as configured, without its password.
        url: String,
        /// What the driver or the server said.
        source: tokio_postgres::Error,
    },
    /// The URL's TLS settings cannot be used (see `sslmode`).
    #[error("the store {url} cannot be reached as its TLS settings ask: {why}")]
    Tls {
        /// The URL as configured, without its password.
        url: String,
        /// Which setting, and what is wrong with it.
        why: String,
    },
    /// A newer tactful wrote the store; this one would misread it.
    #[error("the store {path} has schema version {found}; this tactful knows up to {known}: upgrade tactful")]
    TooNew {
        /// The store as configured (a URL without its password).
        path: String,
        /// The store's version.
        found: i64,
        /// This build's version.
        known: i64,
    },
    /// A private in-memory store cannot be reached from a second
    /// connection.
    #[error("the store is kept in memory (`:memory:`): nothing else can read it")]
    NotShared,
    /// A query failed.
    #[error("store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A PostgreSQL query failed.
    #[error("store: {}", postgres_error(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// A write was fenced out: the lease it was made under is no longer
    /// this process's (taken over, or expired while the process was
    /// stopped). Nothing of the batch was written.
    #[error("the lease {key} is no longer held by this process (epoch {epoch}): nothing was written")]
    Fenced {
        /// The lease.
        key: String,
        /// The epoch the write carried.
        epoch: i64,
    },
    /// What was asked needs a PostgreSQL store.
    #[error("{0} needs a PostgreSQL store (`[store] url`)")]
    NeedsPostgres(&'static str),
    /// A thread or runtime for the connection could not be made.
    #[error("store: {0}")]
    Io(#[from] std::io::Error),
}

impl StoreError {
    /// Whether trying the same write again later may succeed: the disk is
    /// full or read-only for now, another process holds the lock, an I/O
    /// error; the database's connection is lost or it is shutting down.
    /// Anything else (a constraint, a bug) fails the same way again.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy
                    | rusqlite::ErrorCode::DatabaseLocked
                    | rusqlite::ErrorCode::DiskFull
                    | rusqlite::ErrorCode::ReadOnly
                    | rusqlite::ErrorCode::SystemIoFailure
                    | rusqlite::ErrorCode::CannotOpen
                    | rusqlite::ErrorCode::FileLockingProtocolFailed
                    | rusqlite::ErrorCode::OutOfMemory
                    | rusqlite::ErrorCode::OperationInterrupted
            ),
            StoreError::Postgres(e) | StoreError::Connect { source: e, .. } => postgres::is_transient(e),
            _ => false,
        }
    }
}

impl StoreError {
    /// Whether the store answers but has no tables yet: the service's first
    /// start makes them.
    pub fn is_not_set_up(&self) -> bool {
        match self {
            StoreError::Postgres(e) => e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE),
            StoreError::Sqlite(e) => e.to_string().starts_with("no such table"),
            _ => false,
        }
    }
}

/// What went wrong in PostgreSQL's own words ("deadlock detected
/// (40P01)"): the driver's display says only "db error". The server's
/// message names what failed, never a row's values (those are in its
/// detail, which is left out).
fn postgres_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

/// 16 hex digits no other store or process is likely to have: the
/// standard library's random hasher keys, the time and the process id.
pub(crate) fn random_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

/// Where the service keeps its state, opened for writing.
pub struct Store {
    inner: Box<dyn Backend>,
    at: Location,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("at", &self.at.to_string()).finish()
    }
}

impl Store {
    /// Opens (creating if needed) the SQLite store at `path`; `:memory:` is
    /// a private in-memory store.
    pub fn open(path: &std::path::Path) -> Result<Store, StoreError> {
        Store::open_at(&Location::from_path(path))
    }

    /// Opens the store at `at`, bringing its schema up to date (a
    /// PostgreSQL database is migrated by one process at a time).
    pub fn open_at(at: &Location) -> Result<Store, StoreError> {
        let inner: Box<dyn Backend> = match at {
            Location::Memory => Box::new(sqlite::Sqlite::open(std::path::Path::new(":memory:"))?),
            Location::File(path) => Box::new(sqlite::Sqlite::open(path)?),
            Location::Postgres(url) => Box::new(postgres::Postgres::open(url)?),
        };
        Ok(Store {
            inner,
            at: at.clone(),
        })
    }

    /// Where this store is.
    pub fn location(&self) -> &Location {
        &self.at
    }

    /// The writer thread takes over upkeep the backend would otherwise do
    /// inside a commit, making that commit's waiters wait (SQLite's WAL
    /// checkpoints); see [`Store::idle`].
    pub fn writer_upkeep(&mut self) -> Result<(), StoreError> {
        self.inner.writer_upkeep()
    }

    /// The writer has nothing queued: the moment for that upkeep (a
    /// PASSIVE WAL checkpoint on SQLite; nothing on PostgreSQL, whose
    /// server checkpoints by itself).
    pub fn idle(&mut self) -> Result<(), StoreError> {
        self.inner.idle()
    }

    /// Saves a batch of changes in one transaction, in order.
    pub fn apply(&mut self, ops: &[Op]) -> Result<(), StoreError> {
        self.inner.apply(ops)
    }

    /// Reads back what the engine needs after a restart. Unreadable rows
    /// are skipped, each with a warning naming it (see
    /// [`Restored::skipped`]).
    pub fn load(&mut self, limits: LoadLimits) -> Result<Restored, StoreError> {
        Restored::read(self.inner.as_mut(), limits, &|_| true)
    }

    /// [`Store::load`] for the rooms `wanted` keeps only: what a process
    /// that takes over some partitions of a shared database reads back
    /// (their rooms, turns, unsent replies and placeholders).
    pub fn load_rooms(
        &mut self,
        limits: LoadLimits,
        wanted: &dyn Fn(&RoomId) -> bool,
    ) -> Result<Restored, StoreError> {
        Restored::read(self.inner.as_mut(), limits, wanted)
    }

    /// Streaming placeholders still on record (a platform that hands out
    /// its own ids must never give one of these to a new message: a
    /// restart deletes them).
    pub fn placeholders(&mut self) -> Result<Vec<Placeholder>, StoreError> {
        self.inner.placeholders()
    }

    /// The newest `limit` shown messages of every room, oldest first.
    pub fn shown(&mut self, limit: usize) -> Result<Vec<ShownMessage>, StoreError> {
        self.inner.shown(limit)
    }

    /// This store's id: random, made when the store is first used and kept
    /// in it. It makes the delivery path's idempotency keys unique to the
    /// store, so a fresh store (`:memory:`, a new file) never reuses the key
    /// of a message another store's tactful sent.
    pub fn id(&mut self) -> Result<String, StoreError> {
        const KEY: &str = "tactful:store_id";
        if let Some(id) = self.inner.state(KEY)? {
            return Ok(id);
        }
        // Two processes starting at once on one database: the first id
        // written is everyone's.
        self.inner.state_insert_new(KEY, &random_id())?;
        Ok(self.inner.state(KEY)?.unwrap_or_default())
    }

    /// Every saved platform state value, by key.
    pub fn platform_state(&mut self) -> Result<std::collections::BTreeMap<String, String>, StoreError> {
        self.inner.platform_state()
    }

    /// How many decisions the trace holds for `room` (for tests and the
    /// console).
    pub fn decision_count(&mut self, room: &RoomId) -> Result<u64, StoreError> {
        self.inner.decision_count(room)
    }
}
