//! The PostgreSQL tables, and migrations between versions of them.
//!
//! `tactful_schema` holds the version. Migrations run at start, in one
//! transaction, under a transaction-level advisory lock: several processes
//! starting at once on one database migrate it once, the others wait and
//! find it done. A database from a newer tactful is refused rather than
//! misread. The tables are those of the SQLite store, with PostgreSQL's
//! types (`BIGINT` identities, `BOOLEAN` flags); they are made in the first
//! schema of the connection's `search_path`.

use tokio_postgres::Client;

use super::wait;
use crate::StoreError;

/// The advisory lock migrations take (any constant: "tactful" in ASCII).
const MIGRATION_LOCK: i64 = 0x7461_6374_6675_6c00;

/// Migration `i` takes a database from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    r"
CREATE TABLE messages (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    room          TEXT NOT NULL,
    id            TEXT NOT NULL,
    platform_id   TEXT,
    sender_id     TEXT NOT NULL,
    sender_name   TEXT NOT NULL,
    is_bot        BOOLEAN NOT NULL,
    persona       TEXT,
    text          TEXT NOT NULL,
    reply_to      TEXT,
    thread        TEXT,
    mentions      TEXT,
    is_dm         BOOLEAN NOT NULL,
    dm_to         TEXT,
    time          BIGINT NOT NULL,
    sender_handle TEXT,
    UNIQUE (room, id)
);
CREATE INDEX messages_by_room ON messages (room, seq);
CREATE INDEX messages_own ON messages (room, persona, seq) WHERE persona IS NOT NULL;

CREATE TABLE decisions (
    seq     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      BIGINT NOT NULL,
    room    TEXT NOT NULL,
    msg     TEXT NOT NULL,
    persona TEXT NOT NULL,
    outcome TEXT NOT NULL,
    reason  TEXT NOT NULL,
    turn    BIGINT
);
CREATE INDEX decisions_by_room ON decisions (room, seq);

CREATE TABLE snapshots (room TEXT PRIMARY KEY, json TEXT NOT NULL);
CREATE TABLE counters (id BIGINT PRIMARY KEY, json TEXT NOT NULL);

CREATE TABLE pending_turns (
    turn      BIGINT PRIMARY KEY,
    kind      TEXT NOT NULL,
    room      TEXT NOT NULL,
    persona   TEXT NOT NULL,
    msgs      TEXT NOT NULL,
    addressed BOOLEAN NOT NULL
);

CREATE TABLE outbox (
    room       TEXT NOT NULL,
    local_id   TEXT NOT NULL,
    turn       BIGINT NOT NULL,
    kind       TEXT NOT NULL,
    persona    TEXT NOT NULL,
    notice     BOOLEAN NOT NULL,
    delivered  BOOLEAN,
    parts_done BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (room, local_id)
);
CREATE INDEX outbox_unsent ON outbox (room) WHERE delivered IS NULL;

CREATE TABLE platform_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE placeholders (
    turn        BIGINT PRIMARY KEY,
    room        TEXT NOT NULL,
    persona     TEXT NOT NULL,
    platform_id TEXT NOT NULL
);

CREATE TABLE shown (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    room        TEXT NOT NULL,
    id          TEXT NOT NULL,
    key         TEXT,
    sender_id   TEXT NOT NULL,
    sender_name TEXT NOT NULL,
    is_bot      BOOLEAN NOT NULL,
    text        TEXT NOT NULL,
    reply_to    TEXT,
    time        BIGINT NOT NULL,
    reactions   TEXT,
    UNIQUE (room, id)
);
CREATE UNIQUE INDEX shown_by_key ON shown (key) WHERE key IS NOT NULL;
CREATE INDEX shown_by_room ON shown (room, seq);

CREATE TABLE calls (
    turn              BIGINT PRIMARY KEY,
    kind              TEXT NOT NULL,
    room              TEXT NOT NULL,
    persona           TEXT NOT NULL,
    agent             TEXT NOT NULL,
    msg               TEXT,
    started           BIGINT NOT NULL,
    ended             BIGINT,
    outcome           TEXT,
    error             TEXT,
    prompt_tokens     BIGINT,
    completion_tokens BIGINT,
    cached_tokens     BIGINT
);
CREATE INDEX calls_by_room ON calls (room, turn);
",
    // Several processes on one database: who is there (`members`, a
    // heartbeat each), who holds what (`leases`: a room partition, a bot
    // account's connection; `epoch` goes up at every change of holder and
    // fences every write), and what was received but not yet decided
    // (`inbox`, once per (room, message id), whichever process heard it).
    r"
CREATE TABLE members (
    id         TEXT PRIMARY KEY,
    about      TEXT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    seen_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE leases (
    key        TEXT PRIMARY KEY,
    holder     TEXT,
    epoch      BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX leases_by_holder ON leases (holder);

CREATE TABLE inbox (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    part          BIGINT NOT NULL,
    received_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    decided       BOOLEAN NOT NULL DEFAULT false,
    room          TEXT NOT NULL,
    id            TEXT NOT NULL,
    sender_id     TEXT NOT NULL,
    sender_name   TEXT NOT NULL,
    is_bot        BOOLEAN NOT NULL,
    persona       TEXT,
    text          TEXT NOT NULL,
    reply_to      TEXT,
    thread        TEXT,
    mentions      TEXT,
    is_dm         BOOLEAN NOT NULL,
    dm_to         TEXT,
    time          BIGINT NOT NULL,
    sender_handle TEXT,
    UNIQUE (room, id)
);
CREATE INDEX inbox_waiting ON inbox (part, seq) WHERE NOT decided;
-- What the heartbeats purge (decided a day ago): found without reading
-- the whole inbox every few seconds.
CREATE INDEX inbox_decided ON inbox (received_at) WHERE decided;

-- A batch written under a lease starts here: the lease row is locked for
-- the batch (a takeover waits for it to end), and a lease that is not the
-- writer's, unexpired, with this epoch aborts the batch (SQLSTATE TF001).
CREATE FUNCTION tactful_fence(lease TEXT, writer TEXT, at_epoch BIGINT) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM leases
    WHERE key = lease AND holder = writer AND epoch = at_epoch AND expires_at > now()
    FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the lease % is no longer held at epoch %', lease, at_epoch
            USING ERRCODE = 'TF001';
    END IF;
END
$$;

-- Each process's engine numbers its turns and replies from a block of its
-- own, so two processes never hand out the same id.
CREATE SEQUENCE id_blocks START 1;
",
    // A message from before a platform's first sync goes through the inbox
    // too (its room's owner records it as context, answering nothing).
    r"
ALTER TABLE inbox ADD COLUMN context BOOLEAN NOT NULL DEFAULT false;
",
    // What each partition's rooms spent of their personas' own budgets, in
    // the buckets the engine counts them in: every process adds the others'
    // to its own, so a persona's budget is one across processes. A row
    // counts until `bucket_end + per_ms`, and is purged after.
    r"
CREATE TABLE spend (
    persona    TEXT NOT NULL,
    part       BIGINT NOT NULL,
    bucket_end BIGINT NOT NULL,
    per_ms     BIGINT NOT NULL,
    tokens     BIGINT NOT NULL,
    PRIMARY KEY (persona, part, bucket_end)
);
",
    // The thread a streaming placeholder was posted in: the next owner
    // removes or fills it there (Discord addresses a thread's messages
    // through the thread, not the room's channel).
    r"
ALTER TABLE placeholders ADD COLUMN thread TEXT;
",
    // When each lease's holder took it: the console says which process
    // owns a room and since when. Kept while the holder renews, set again
    // at every change of holder.
    r"
ALTER TABLE leases ADD COLUMN held_since TIMESTAMPTZ;
",
];

/// The schema version this build writes.
pub(crate) const VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database to the current version (`shown` names it in
/// errors, without its password).
pub(crate) fn migrate(client: &mut Client, shown: &str) -> Result<(), StoreError> {
    wait(async {
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS tactful_schema (version BIGINT NOT NULL)")
            .await?;
        let found: i64 = match tx.query_opt("SELECT version FROM tactful_schema", &[]).await? {
            Some(row) => row.try_get(0)?,
            None => {
                tx.execute("INSERT INTO tactful_schema (version) VALUES (0)", &[])
                    .await?;
                0
            }
        };
        if found > VERSION {
            return Err(StoreError::TooNew {
                path: shown.to_owned(),
                found,
                known: VERSION,
            });
        }
        for sql in MIGRATIONS.iter().skip(found as usize) {
            tx.batch_execute(sql).await?;
        }
        tx.execute("UPDATE tactful_schema SET version = $1", &[&VERSION])
            .await?;
        tx.commit().await?;
        Ok(())
    })
}
