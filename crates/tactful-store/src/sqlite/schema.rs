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
    // Delivery that survives a crash at any instant: how many parts of a
    // reply went out, the streaming placeholders still on screen, and the
    // web room's messages exactly as shown (with each part's idempotency
    // key), written before anyone sees them.
    r"
ALTER TABLE outbox ADD COLUMN parts_done INTEGER NOT NULL DEFAULT 0;

CREATE TABLE placeholders (
    turn        INTEGER PRIMARY KEY,
    room        TEXT NOT NULL,
    persona     TEXT NOT NULL,
    platform_id TEXT NOT NULL
);

CREATE TABLE shown (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    room        TEXT NOT NULL,
    id          TEXT NOT NULL,
    key         TEXT,
    sender_id   TEXT NOT NULL,
    sender_name TEXT NOT NULL,
    is_bot      INTEGER NOT NULL,
    text        TEXT NOT NULL,
    reply_to    TEXT,
    time        INTEGER NOT NULL,
    UNIQUE (room, id)
);
CREATE UNIQUE INDEX shown_by_key ON shown (key) WHERE key IS NOT NULL;
CREATE INDEX shown_by_room ON shown (room, seq);

INSERT OR IGNORE INTO shown (room, id, sender_id, sender_name, is_bot, text, reply_to, time)
SELECT m.room, coalesce(m.platform_id, m.id), m.sender_id, m.sender_name, m.is_bot, m.text,
       coalesce(r.platform_id, m.reply_to), m.time
FROM messages m
LEFT JOIN messages r ON r.room = m.room AND r.id = m.reply_to
WHERE m.persona IS NULL OR m.platform_id IS NOT NULL
ORDER BY m.seq;
",
    // The handle a platform vouches for (Telegram's @username), which
    // `allowed_users` may name: a message stored but not yet decided at a
    // crash is decided with it after the restart.
    r"
ALTER TABLE messages ADD COLUMN sender_handle TEXT;
",
    // The agent-call log the console's transcript and cost view read.
    r"
CREATE TABLE calls (
    turn              INTEGER PRIMARY KEY,
    kind              TEXT NOT NULL,
    room              TEXT NOT NULL,
    persona           TEXT NOT NULL,
    agent             TEXT NOT NULL,
    msg               TEXT,
    started           INTEGER NOT NULL,
    ended             INTEGER,
    outcome           TEXT,
    error             TEXT,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    cached_tokens     INTEGER
);
CREATE INDEX calls_by_room ON calls (room, turn);

-- Before this version a reply gate that had answered was never marked
-- ended, so every restart asked each one again as a reply (answering what
-- it had held back). Such rows are stale: drop them. (One still running at
-- the upgrade is lost with them: its messages go unanswered once.)
DELETE FROM pending_turns WHERE kind = 'gate';
",
    // Reactions on the web room's messages (a persona's 👀 when it chose
    // silence), as JSON: [[emoji, [names]], ...].
    r"
ALTER TABLE shown ADD COLUMN reactions TEXT;
",
    // The thread a streaming placeholder was posted in: a restart removes
    // or fills it there (Discord addresses a thread's messages through
    // the thread, not the room's channel).
    r"
ALTER TABLE placeholders ADD COLUMN thread TEXT;
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
