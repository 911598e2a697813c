//! The store's tables, and migrations between versions of them.
//!
//! `PRAGMA user_version` holds the schema version. Each entry of
//! [`MIGRATIONS`] takes a file from the previous version to the next, inside
//! one transaction; a file from a newer tactful is refused rather than
//! misread.

use rusqlite::Connection;

use crate::StoreError;

/// Migration `i` takes a file from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    r"
CREATE TABLE messages (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    room        TEXT NOT NULL,
    id          TEXT NOT NULL,
    platform_id TEXT,
    sender_id   TEXT NOT NULL,
    sender_name TEXT NOT NULL,
    is_bot      INTEGER NOT NULL,
    persona     TEXT,
    text        TEXT NOT NULL,
    reply_to    TEXT,
    thread      TEXT,
    mentions    TEXT,
    is_dm       INTEGER NOT NULL,
    dm_to       TEXT,
    time        INTEGER NOT NULL,
    UNIQUE (room, id)
);
CREATE INDEX messages_by_room ON messages (room, seq);
CREATE INDEX messages_own ON messages (room, persona, seq) WHERE persona IS NOT NULL;

CREATE TABLE decisions (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL,
    room    TEXT NOT NULL,
    msg     TEXT NOT NULL,
    persona TEXT NOT NULL,
    outcome TEXT NOT NULL,
    reason  TEXT NOT NULL,
    turn    INTEGER
);
CREATE INDEX decisions_by_room ON decisions (room, seq);

CREATE TABLE snapshots (room TEXT PRIMARY KEY, json TEXT NOT NULL);
CREATE TABLE counters (id INTEGER PRIMARY KEY, json TEXT NOT NULL);

CREATE TABLE pending_turns (
    turn      INTEGER PRIMARY KEY,
    kind      TEXT NOT NULL,
    room      TEXT NOT NULL,
    persona   TEXT NOT NULL,
    msgs      TEXT NOT NULL,
    addressed INTEGER NOT NULL
);

CREATE TABLE outbox (
    room      TEXT NOT NULL,
    local_id  TEXT NOT NULL,
    turn      INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    persona   TEXT NOT NULL,
    notice    INTEGER NOT NULL,
    delivered INTEGER,
    PRIMARY KEY (room, local_id)
);
CREATE INDEX outbox_unsent ON outbox (delivered) WHERE delivered IS NULL;
",
    r"
CREATE TABLE platform_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
",
];

/// Brings the file at `path` to the current version.
pub(crate) fn migrate(conn: &Connection, path: &str) -> Result<(), StoreError> {
    let known = MIGRATIONS.len() as i64;
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > known {
        return Err(StoreError::TooNew {
            path: path.to_owned(),
            found,
            known,
        });
    }
    for (version, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let tx = conn.unchecked_transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version as i64 + 1)?;
        tx.commit()?;
    }
    Ok(())
}
