//! The store keeps what a restart needs, and gives it back in a form the
//! engine can be rebuilt from.

use std::time::Duration;

use tactful_core::{
    AgentResult, Engine, EngineConfig, Message, MsgId, Output, PersonaSpec, Timestamp, TurnKind,
};
use tactful_store::{LoadLimits, Op, PendingTurn, Store, StoreError};

const LIMITS: LoadLimits = LoadLimits {
    history: 3,
    own_ids: 10,
};

fn engine() -> Engine {
    Engine::new(EngineConfig {
        personas: vec![PersonaSpec::new("docs", "main")],
        ..EngineConfig::default()
    })
    .expect("valid config")
}

/// Runs `engine` on one message with an instant agent answering `answer`,
/// and returns the ops the runtime would save.
fn hear(engine: &mut Engine, msg: Message, answer: &str, confirm: bool) -> Vec<Op> {
    let now = msg.time;
    let mut ops = vec![Op::Heard(msg.clone())];
    engine.handle_message(now, msg);
    while let Some(out) = engine.poll_output() {
        match out {
            Output::Decision(d) => ops.push(Op::Decision(d)),
            Output::CallAgent(req) => {
                engine.handle_agent_result(now, req.turn, AgentResult::Output(answer.into()))
            }
            Output::Send(out) => {
                let heard = out.as_heard("Docs".into());
                ops.push(Op::Reply {
                    out: out.clone(),
                    heard,
                });
                if confirm {
                    let platform = MsgId::new(format!("p{}", out.id));
                    engine.handle_sent(&out.room, &out.id, platform.clone());
                    ops.push(Op::Delivered {
                        room: out.room.clone(),
                        local: out.id.clone(),
                        platform,
                    });
                }
            }
            _ => {}
        }
    }
    for room in engine.take_changed_rooms() {
        if let Some(s) = engine.snapshot_room(&room) {
            ops.push(Op::Snapshot(room, s));
        }
    }
    ops.push(Op::Counters(engine.counters()));
    ops
}

fn at(s: u64) -> Timestamp {
    Timestamp::from_millis(s * 1000)
}

#[test]
fn a_reopened_store_gives_back_the_transcript_outbox_and_turns() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tactful.db");
    let mut e = engine();
    {
        let mut store = Store::open(&path).expect("opens");
        let mut ops = hear(
            &mut e,
            Message::new("h1", "lobby", "alice", "@docs one", at(1)),
            "[[reply_to:h1]] first",
            true,
        );
        ops.extend(hear(
            &mut e,
            Message::new("h2", "lobby", "bob", "chatter", at(2)),
            "x",
            true,
        ));
        let mut reply = Message::new("h3", "lobby", "alice", "thanks", at(3));
        reply.reply_to = Some(MsgId::new("pdocs:1"));
        ops.extend(hear(&mut e, reply, "[[reply_to:h3]] second", false));
        ops.push(Op::TurnStarted(PendingTurn {
            turn: tactful_core::TurnId(9),
            kind: TurnKind::Reply,
            room: "lobby".into(),
            persona: "docs".into(),
            msgs: vec!["h3".into()],
            addressed: true,
        }));
        store.apply(&ops).expect("saved");
        store
            .apply(&[Op::TurnStarted(PendingTurn {
                turn: tactful_core::TurnId(10),
                kind: TurnKind::Reply,
                room: "lobby".into(),
                persona: "docs".into(),
                msgs: vec!["h2".into()],
                addressed: false,
            })])
            .expect("saved");
        store
            .apply(&[Op::TurnEnded(tactful_core::TurnId(10))])
            .expect("saved");
    }
    let store = Store::open(&path).expect("reopens");
    let restored = store.load(LIMITS).expect("loads");
    let room = &restored.rooms[0];
    let ids: Vec<&str> = room.messages.iter().map(|m| m.id.as_str()).collect();
    // h1 docs:1 h2 h3 docs:2: the last three, oldest first.
    assert_eq!(ids, ["h2", "h3", "docs:2"]);
    assert!(
        room.older_own
            .iter()
            .any(|(p, id)| p.as_str() == "docs" && id.as_str() == "docs:1")
            && room.older_own.iter().any(|(_, id)| id.as_str() == "pdocs:1"),
        "own messages older than the history are kept with their platform ids: {:?}",
        room.older_own
    );
    assert!(room.aliases.is_empty(), "docs:2 was never confirmed");
    let unsent: Vec<&str> = restored.unsent.iter().map(|u| u.id.as_str()).collect();
    assert_eq!(unsent, ["docs:2"]);
    assert_eq!(restored.unsent[0].text, "second");
    assert_eq!(
        restored.unsent[0].reply_to.as_ref().map(MsgId::as_str),
        Some("h3")
    );
    let pending: Vec<u64> = restored.pending.iter().map(|t| t.turn.0).collect();
    assert_eq!(pending, [9], "ended turns are forgotten");
    assert_eq!(store.decision_count(&"lobby".into()).expect("counts"), 5);

    // The people's view: platform ids, unconfirmed replies left out (they
    // will be sent again), reply targets by platform id.
    let shown = store.shown_history(10).expect("history");
    let shown_ids: Vec<&str> = shown.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(shown_ids, ["h1", "pdocs:1", "h2", "h3"]);
    assert_eq!(shown[1].reply_to.as_ref().map(MsgId::as_str), Some("h1"));
    assert!(shown[1].is_bot && shown[1].sender_name == "Docs");

    // A rebuilt engine knows its counters and its old message.
    let mut rebuilt = engine();
    assert_eq!(restored.rebuild(&mut rebuilt, at(10)), 3);
    assert_eq!(rebuilt.counters(), e.counters());
    let mut late = Message::new("h4", "lobby", "carol", "about that", at(11));
    late.reply_to = Some(MsgId::new("pdocs:1"));
    rebuilt.handle_message(at(11), late);
    let reasons: Vec<&str> = std::iter::from_fn(|| rebuilt.poll_output())
        .filter_map(|o| match o {
            Output::Decision(d) => Some(d.reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasons,
        ["reply_to_me"],
        "a reply to an old own message still addresses it"
    );
}

#[test]
fn a_pending_ambient_buffer_survives_and_flushes_after_its_deadline() {
    let mut policies = tactful_core::PolicyTable::default();
    policies.default.all.mode = Some(tactful_core::Mode::Ambient);
    policies.default.all.ambient.flush_after = Some(Duration::from_secs(30));
    let config = EngineConfig {
        personas: vec![PersonaSpec::new("docs", "main")],
        policies,
        ..EngineConfig::default()
    };
    let mut e = Engine::new(config.clone()).expect("valid");
    let mut store = Store::open(std::path::Path::new(":memory:")).expect("opens");
    let ops = hear(
        &mut e,
        Message::new("h1", "lobby", "alice", "anyone know how?", at(1)),
        "",
        true,
    );
    store.apply(&ops).expect("saved");
    let due = e.poll_timeout().expect("a flush is armed");

    let mut rebuilt = Engine::new(config).expect("valid");
    store.load(LIMITS).expect("loads").rebuild(&mut rebuilt, at(5));
    assert_eq!(rebuilt.poll_timeout(), Some(due), "the flush keeps its deadline");
    rebuilt.handle_timeout(due);
    let call = std::iter::from_fn(|| rebuilt.poll_output()).find_map(|o| match o {
        Output::CallAgent(req) => Some(req),
        _ => None,
    });
    let call = call.expect("the buffer flushed");
    assert_eq!(call.kind, TurnKind::Ambient);
    assert_eq!(call.triggers[0].id.as_str(), "h1");
}

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
    conn.execute_batch("DROP TABLE platform_state; PRAGMA user_version = 1;")
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
