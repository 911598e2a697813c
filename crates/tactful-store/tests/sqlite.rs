//! What only the SQLite store does: its file, its migrations from older
//! tactful versions, its locks.

use crate::support;

use tactful_core::{Message, MsgId, TurnKind};
use tactful_store::{Op, PendingTurn, Store, StoreError};

use support::{LIMITS, at, engine, hear};

#[test]
fn a_store_from_a_newer_tactful_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("future.db");
    drop(Store::open(&path).expect("opens"));
    let conn = rusqlite::Connection::open(&path).expect("opens");
    conn.pragma_update(None, "user_version", 99).expect("set");
    drop(conn);
    let err = Store::open(&path).expect_err("refused");
    assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
    assert!(err.to_string().contains("upgrade tactful"), "{err}");
}

#[test]
fn an_unwritable_path_names_the_file() {
    let err = Store::open(std::path::Path::new("/nonexistent-dir/sub/tactful.db")).expect_err("fails");
    assert!(
        err.to_string().contains("/nonexistent-dir/sub/tactful.db"),
        "{err}"
    );
}

#[test]
fn a_store_from_the_first_schema_is_migrated() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("old.db");
    drop(Store::open(&path).expect("opens"));
    // Make it look like a file written before schema 2.
    let conn = rusqlite::Connection::open(&path).expect("opens");
    conn.execute_batch(
        "DROP TABLE calls; DROP TABLE platform_state; DROP TABLE shown; DROP TABLE placeholders;
         ALTER TABLE outbox DROP COLUMN parts_done; ALTER TABLE messages DROP COLUMN sender_handle;
         PRAGMA user_version = 1;",
    )
    .expect("downgraded");
    drop(conn);
    let mut store = Store::open(&path).expect("migrates");
    store
        .apply(&[Op::PlatformState {
            key: "matrix:sync:docs".into(),
            value: "s72_1".into(),
        }])
        .expect("saved");
    assert_eq!(
        store.platform_state().expect("reads")["matrix:sync:docs"],
        "s72_1"
    );
}

/// A store from before the call log kept every reply gate that had
/// answered as a turn still running; the upgrade drops those (a restart
/// would answer what they held back) and keeps the reply turns.
#[test]
fn upgrading_drops_the_gates_an_older_tactful_never_ended() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("old.db");
    let pending = |turn: u64, kind: TurnKind| {
        Op::TurnStarted(PendingTurn {
            turn: tactful_core::TurnId(turn),
            kind,
            room: "lobby".into(),
            persona: "docs".into(),
            msgs: vec![MsgId::new("m1")],
            addressed: false,
        })
    };
    let mut store = Store::open(&path).expect("opens");
    store
        .apply(&[
            Op::Heard(Message::new("m1", "lobby", "alice", "hi", at(1))),
            pending(1, TurnKind::Gate),
            pending(2, TurnKind::Reply),
            pending(3, TurnKind::Gate),
        ])
        .expect("saved");
    drop(store);
    let conn = rusqlite::Connection::open(&path).expect("opens");
    conn.execute_batch(
        "DROP TABLE calls; ALTER TABLE shown DROP COLUMN reactions; \
         ALTER TABLE placeholders DROP COLUMN thread; PRAGMA user_version = 4;",
    )
    .expect("downgraded");
    drop(conn);
    let restored = Store::open(&path).expect("migrates").load(LIMITS).expect("loads");
    let kinds: Vec<(u64, TurnKind)> = restored
        .pending
        .iter()
        .map(|p| (p.turn.turn.0, p.turn.kind))
        .collect();
    assert_eq!(kinds, [(2, TurnKind::Reply)]);
}

/// A store at schema 2 (before per-part delivery and the shown table) with
/// the given messages, as an older tactful left it.
fn schema_2_store(path: &std::path::Path, ops: &[Op]) {
    let mut store = Store::open(path).expect("opens");
    store.apply(ops).expect("saved");
    drop(store);
    let conn = rusqlite::Connection::open(path).expect("opens");
    conn.execute_batch(
        "DROP TABLE calls; DROP TABLE shown; DROP TABLE placeholders; ALTER TABLE outbox DROP COLUMN parts_done;
         ALTER TABLE messages DROP COLUMN sender_handle; PRAGMA user_version = 2;",
    )
    .expect("downgraded");
}

#[test]
fn upgrading_keeps_what_people_saw() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("old.db");
    let mut e = engine();
    let mut ops = hear(
        &mut e,
        Message::new("h1", "lobby", "alice", "@docs one", at(1)),
        "[[reply_to:h1]] first",
        true,
    );
    ops.extend(hear(
        &mut e,
        Message::new("h2", "lobby", "alice", "@docs two", at(2)),
        "second",
        false,
    ));
    schema_2_store(&path, &ops);
    let mut store = Store::open(&path).expect("migrates");
    // Platform ids, unconfirmed replies left out (they are sent again and
    // shown then), reply targets by platform id.
    let shown = store.shown(10).expect("history");
    let ids: Vec<&str> = shown.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["h1", "pdocs:1", "h2"]);
    assert_eq!(shown[1].reply_to.as_ref().map(MsgId::as_str), Some("h1"));
    assert!(shown[1].is_bot && shown[1].sender_name == "Docs");
}

#[test]
fn a_locked_store_is_a_transient_failure() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("locked.db");
    let mut store = Store::open(&path).expect("opens");
    let other = rusqlite::Connection::open(&path).expect("opens");
    other.busy_timeout(std::time::Duration::ZERO).expect("set");
    other.execute_batch("BEGIN IMMEDIATE").expect("locks");
    let err = store
        .apply(&[Op::PlatformState {
            key: "k".into(),
            value: "v".into(),
        }])
        .expect_err("locked");
    assert!(err.is_transient(), "{err}");
    other.execute_batch("COMMIT").expect("unlocks");
    store
        .apply(&[Op::PlatformState {
            key: "k".into(),
            value: "v".into(),
        }])
        .expect("writes again");
}
