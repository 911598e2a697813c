//! The store conformance suite: every test here runs against SQLite and
//! against PostgreSQL (`support::Place`), so both backends keep what a
//! restart needs and give it back the same way: messages, decisions,
//! engine snapshots (rate ledgers, cooldowns, ambient buffers), turns in
//! progress, the outbox, placeholders, platform state (schedules' last
//! runs, the console's policy layers), the web room's history and the
//! agent-call log.

use crate::support;

use std::time::Duration;

use tactful_core::{Engine, EngineConfig, Message, MsgId, Output, PersonaSpec, TurnKind};
use tactful_store::{Op, PendingTurn};

use support::{LIMITS, Place, at, call, ended, engine, hear, shown};

fn a_reopened_store_gives_back_the_transcript_outbox_and_turns(place: &Place) {
    let mut e = engine();
    {
        let mut store = place.open();
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
    let mut store = place.open();
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
    let unsent: Vec<&str> = restored.unsent.iter().map(|u| u.out.id.as_str()).collect();
    assert_eq!(unsent, ["docs:2"]);
    assert_eq!(restored.unsent[0].out.text, "second");
    assert_eq!(
        restored.unsent[0].out.reply_to.as_ref().map(MsgId::as_str),
        Some("h3")
    );
    assert_eq!(restored.unsent[0].parts_done, 0);
    let pending: Vec<u64> = restored.pending.iter().map(|t| t.turn.turn.0).collect();
    assert_eq!(pending, [9], "ended turns are forgotten");
    let triggers: Vec<&str> = restored.pending[0]
        .triggers
        .iter()
        .map(|m| m.id.as_str())
        .collect();
    assert_eq!(triggers, ["h3"], "a pending turn comes with its trigger");
    assert_eq!(store.decision_count(&"lobby".into()).expect("counts"), 5);

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

fn a_pending_ambient_buffer_survives_and_flushes_after_its_deadline(place: &Place) {
    let mut policies = tactful_core::PolicyTable::default();
    policies.default.all.mode = Some(tactful_core::Mode::Ambient);
    policies.default.all.ambient.flush_after = Some(Duration::from_secs(30));
    let config = EngineConfig {
        personas: vec![PersonaSpec::new("docs", "main")],
        policies,
        ..EngineConfig::default()
    };
    let mut e = Engine::new(config.clone()).expect("valid");
    let mut store = place.open();
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

fn reactions_on_shown_messages_are_kept_once_each_and_bounded(place: &Place) {
    let mut store = place.open();
    let react = |id: &str, emoji: &str, by: &str| Op::ShownReact {
        room: "lobby".into(),
        id: id.into(),
        emoji: emoji.into(),
        by: by.into(),
    };
    let mut ops = vec![
        Op::Shown {
            msg: shown("w1", None, "@Docs thanks"),
            keep: 10,
        },
        react("w1", "👀", "Docs"),
        // The same reaction again (a resend) is not a second one.
        react("w1", "👀", "Docs"),
        react("w1", "👀", "Chef"),
        // A message the room no longer keeps: nothing, no error.
        react("w404", "👀", "Docs"),
    ];
    // More kinds than a message keeps: the rest are left out.
    ops.extend((0..30).map(|i| react("w1", &format!("e{i}"), "Docs")));
    store.apply(&ops).expect("saved");
    let shown = store.shown(10).expect("reads");
    assert_eq!(shown.len(), 1);
    let r = &shown[0].reactions;
    assert_eq!(
        r[0],
        ("👀".to_owned(), vec!["Docs".to_owned(), "Chef".to_owned()])
    );
    assert_eq!(r.len(), 20, "bounded: {r:?}");
}

fn shown_messages_are_kept_once_per_key_and_bounded_per_room(place: &Place) {
    let mut store = place.open();
    let keep = 3;
    store
        .apply(&[
            Op::Shown {
                msg: shown("w1", Some("k:1:0"), "part one"),
                keep,
            },
            // The same part again (a resend after a crash) is not a second row.
            Op::Shown {
                msg: shown("w2", Some("k:1:0"), "part one"),
                keep,
            },
            Op::Shown {
                msg: shown("w3", None, "…"),
                keep,
            },
            Op::ShownEdit {
                room: "lobby".into(),
                id: "w3".into(),
                text: "grown".into(),
            },
            Op::Shown {
                msg: shown("w4", None, "x"),
                keep,
            },
            Op::ShownDelete {
                room: "lobby".into(),
                id: "w4".into(),
            },
            Op::Shown {
                msg: shown("w5", None, "y"),
                keep,
            },
            Op::Shown {
                msg: shown("w6", None, "z"),
                keep,
            },
        ])
        .expect("saved");
    let rows: Vec<(String, String)> = store
        .shown(10)
        .expect("reads")
        .into_iter()
        .map(|m| (m.id.to_string(), m.text))
        .collect();
    let expected = [("w3", "grown"), ("w5", "y"), ("w6", "z")].map(|(a, b)| (a.to_owned(), b.to_owned()));
    assert_eq!(rows, expected, "the newest 3, edits applied, deletes gone");
}

fn a_reply_resumes_after_its_delivered_parts_and_keeps_its_placeholder(place: &Place) {
    let mut store = place.open();
    let mut e = engine();
    let ops = hear(
        &mut e,
        Message::new("h1", "lobby", "alice", "@docs long please", at(1)),
        "a long answer",
        false,
    );
    let turn = ops
        .iter()
        .find_map(|op| match op {
            Op::Reply { out, .. } => Some(out.turn),
            _ => None,
        })
        .expect("a reply");
    store.apply(&ops).expect("saved");
    store
        .apply(&[
            Op::Placeholder {
                turn,
                room: "lobby".into(),
                persona: "docs".into(),
                thread: None,
                id: "p9".into(),
            },
            Op::Placeholder {
                turn: tactful_core::TurnId(99),
                room: "lobby".into(),
                persona: "docs".into(),
                thread: Some("t7".into()),
                id: "p10".into(),
            },
            Op::PartDelivered {
                room: "lobby".into(),
                local: "docs:1".into(),
                part: 0,
                platform: "p9".into(),
            },
            Op::PartDelivered {
                room: "lobby".into(),
                local: "docs:1".into(),
                part: 1,
                platform: "p11".into(),
            },
            // Reported twice or out of order: the count only grows.
            Op::PartDelivered {
                room: "lobby".into(),
                local: "docs:1".into(),
                part: 0,
                platform: "p9".into(),
            },
        ])
        .expect("saved");
    let r = store.load(LIMITS).expect("loads");
    assert_eq!(r.unsent.len(), 1);
    assert_eq!(r.unsent[0].parts_done, 2);
    assert_eq!(r.unsent[0].first_id.as_ref().map(MsgId::as_str), Some("p9"));
    let placeholders: Vec<(&str, Option<&str>)> = r
        .placeholders
        .iter()
        .map(|p| (p.id.as_str(), p.thread.as_ref().map(|t| t.as_str())))
        .collect();
    assert_eq!(
        placeholders,
        [("p9", None), ("p10", Some("t7"))],
        "with their threads"
    );
    store.apply(&[Op::PlaceholderGone(turn)]).expect("saved");
    assert_eq!(store.load(LIMITS).expect("loads").placeholders.len(), 1);
}

fn unreadable_rows_are_skipped_with_a_note_instead_of_stopping_the_start(place: &Place) {
    let mut e = engine();
    let mut store = place.open();
    let mut ops = hear(
        &mut e,
        Message::new("h1", "lobby", "alice", "@docs hi", at(1)),
        "hello",
        true,
    );
    ops.push(Op::TurnStarted(PendingTurn {
        turn: tactful_core::TurnId(7),
        kind: TurnKind::Reply,
        room: "lobby".into(),
        persona: "docs".into(),
        msgs: vec!["h1".into()],
        addressed: true,
    }));
    store.apply(&ops).expect("saved");
    drop(store);
    place.exec(
        "UPDATE snapshots SET json = '{not json';
         UPDATE counters SET json = '[]';
         INSERT INTO pending_turns (turn, kind, room, persona, msgs, addressed)
             VALUES (8, 'reply', 'lobby', 'docs', 'oops', 1 = 1);
         UPDATE messages SET mentions = '{' WHERE id = 'h1';",
    );
    let r = place.open().load(LIMITS).expect("loads anyway");
    assert_eq!(r.skipped.len(), 5, "{:#?}", r.skipped);
    assert!(
        r.skipped.iter().any(|s| s.contains("snapshot of room lobby")),
        "{:?}",
        r.skipped
    );
    assert!(
        r.skipped.iter().any(|s| s.contains("pending turn 8")),
        "{:?}",
        r.skipped
    );
    assert!(r.rooms[0].snapshot.is_none() && r.counters.is_none());
    let pending: Vec<u64> = r.pending.iter().map(|p| p.turn.turn.0).collect();
    assert_eq!(pending, [7], "the readable turn is kept");
    assert_eq!(r.rooms[0].messages.len(), 2, "the messages are kept");
}

fn a_senders_handle_survives_a_restart(place: &Place) {
    // `allowed_users` may name a Telegram @username: a message stored but
    // not yet decided at a crash must come back with it.
    let mut msg = Message::new("h1", "tg:-100", "tg:42", "hello", at(1));
    msg.sender.handle = Some("@alice".into());
    let plain = Message::new("h2", "tg:-100", "tg:43", "hi", at(2));
    {
        let mut store = place.open();
        store
            .apply(&[Op::Heard(msg.clone()), Op::Heard(plain.clone())])
            .expect("saved");
    }
    let mut store = place.open();
    let restored = store.load(LIMITS).expect("loads");
    let room = restored
        .rooms
        .iter()
        .find(|r| r.room.as_str() == "tg:-100")
        .expect("room");
    assert_eq!(room.messages, [msg, plain]);
}

/// The call log: the first word on each column wins, except that the
/// engine's word on how a call ended replaces the agent's "answered";
/// what it costs is summed per day and kind, and read back after a
/// reopen.
fn agent_calls_are_logged_once_and_summed_per_day(place: &Place) {
    let mut store = place.open();
    let day = 86_400;
    let m = |id: &str, s: u64| Message::new(id, "lobby", "alice", "hi", at(s));
    store
        .apply(&[
            Op::Heard(m("m1", 10)),
            Op::Heard(m("m2", 20)),
            call(1, TurnKind::Reply, 10),
            ended(1, Some(11), "answered", Some((100, 5, 80))),
            // A turn that answered two questions: the second send changes
            // nothing, nor does a late, different word.
            ended(1, None, "reply", None),
            ended(1, None, "reply", None),
            ended(1, Some(99), "silent", Some((1, 1, 1))),
            call(2, TurnKind::Ambient, 20),
            ended(2, Some(23), "error", None),
            ended(2, None, "error", None),
            call(3, TurnKind::Gate, 30),
            ended(3, Some(30), "answered", Some((10, 1, 0))),
            // Cancelled before the agent answered.
            call(4, TurnKind::Reply, 40),
            ended(4, Some(45), "cancelled", None),
            // Yesterday's call, and an end for a call never logged.
            call(5, TurnKind::Reply, day + 10),
            ended(77, Some(1), "reply", None),
        ])
        .expect("applies");
    drop(store);
    let reader = place.reader();
    let calls = reader.calls("lobby", None, 10).expect("calls");
    let by_turn = |t: i64| calls.iter().find(|c| c.turn == t).expect("logged");
    assert_eq!(calls.len(), 5, "{calls:#?}");
    assert_eq!(calls[0].turn, 5, "newest first");
    let first = by_turn(1);
    assert_eq!(first.outcome.as_deref(), Some("reply"));
    assert_eq!(first.latency_ms, Some(1000));
    assert_eq!(
        (first.prompt_tokens, first.completion_tokens, first.cached_tokens),
        (Some(100), Some(5), Some(80))
    );
    assert_eq!(by_turn(2).outcome.as_deref(), Some("error"));
    assert_eq!(
        by_turn(2).error.as_deref(),
        Some("exit status 3: the tool crashed")
    );
    assert_eq!(by_turn(3).outcome.as_deref(), Some("answered"));
    assert_eq!(by_turn(4).outcome.as_deref(), Some("cancelled"));
    assert_eq!(by_turn(5).outcome, None, "still running");
    assert_eq!(by_turn(5).latency_ms, None);
    // Paging: before the second-newest call's turn.
    let older = reader.calls("lobby", Some(calls[1].turn), 2).expect("page");
    assert_eq!(older.iter().map(|c| c.turn).collect::<Vec<_>>(), [3, 2]);
    assert!(reader.calls("elsewhere", None, 10).expect("calls").is_empty());

    // Since the first day: two days; since the second: one call.
    let costs = reader.costs(0).expect("costs");
    assert_eq!(costs[0].day, "1970-01-02", "newest day first");
    assert_eq!(costs[0].calls, 1);
    let reply = costs
        .iter()
        .find(|r| r.day == "1970-01-01" && r.kind == "reply")
        .expect("day one's replies");
    assert_eq!((reply.calls, reply.errors), (2, 0));
    assert_eq!(reply.prompt_tokens, 100);
    assert_eq!(reply.cached_tokens, 80);
    assert_eq!(reply.mean_latency_ms, Some(3000), "(1 s + 5 s) / 2");
    let ambient = costs.iter().find(|r| r.kind == "ambient").expect("ambient");
    assert_eq!((ambient.calls, ambient.errors), (1, 1));
    assert_eq!(reader.costs(day as i64 * 1000).expect("costs").len(), 1);
    assert_eq!(
        reader.people_messages(0).expect("heard"),
        [("lobby".to_owned(), 2)]
    );

    // The next start: the call still running then was interrupted; the
    // others keep how they ended.
    drop(reader);
    let mut store = place.open();
    store.apply(&[Op::CallsInterrupted]).expect("applies");
    drop(store);
    let calls = place.reader().calls("lobby", None, 10).expect("calls");
    let outcomes: Vec<(i64, Option<&str>)> = calls.iter().map(|c| (c.turn, c.outcome.as_deref())).collect();
    assert_eq!(
        outcomes,
        [
            (5, Some("interrupted")),
            (4, Some("cancelled")),
            (3, Some("answered")),
            (2, Some("error")),
            (1, Some("reply"))
        ]
    );
}

/// The store's id is made once and kept; platform state (sync tokens,
/// schedules' last runs, the console's layers) is replaced by key.
fn the_store_id_and_platform_state_are_kept(place: &Place) {
    let first = place.open().id().expect("an id");
    assert_eq!(first.len(), 16, "{first}");
    let mut store = place.open();
    assert_eq!(store.id().expect("the same id"), first);
    let state = |key: &str, value: &str| Op::PlatformState {
        key: key.into(),
        value: value.into(),
    };
    store
        .apply(&[
            state("matrix:sync:docs", "s1"),
            state("schedule:standup", "1000"),
            state("console:layer:lobby", "mode = \"mention\""),
            state("matrix:sync:docs", "s2"),
            // A setting every process follows is kept the same way.
            Op::SharedState {
                key: "console:policy:lobby".into(),
                value: "mode = \"all\"".into(),
            },
        ])
        .expect("saved");
    let saved = place.open().platform_state().expect("reads");
    assert_eq!(saved["matrix:sync:docs"], "s2", "the newest value wins");
    assert_eq!(saved["schedule:standup"], "1000");
    let layers = place.reader().state_with_prefix("console:", 10).expect("reads");
    assert_eq!(
        layers,
        [
            ("console:policy:lobby".to_owned(), "mode = \"all\"".to_owned()),
            ("console:layer:lobby".to_owned(), "mode = \"mention\"".to_owned())
        ]
    );
    // A key forgotten is gone, for the writer and for readers; forgetting
    // one that is not there is no error.
    store
        .apply(&[
            Op::ForgetState {
                key: "console:layer:lobby".into(),
            },
            Op::ForgetState {
                key: "console:never-set".into(),
            },
        ])
        .expect("saved");
    let layers = place.reader().state_with_prefix("console:", 10).expect("reads");
    assert_eq!(layers.len(), 1, "{layers:?}");
    assert!(
        !place
            .open()
            .platform_state()
            .expect("reads")
            .contains_key("console:layer:lobby")
    );
}

/// A platform that delivers a message twice (a redelivery, two accounts in
/// one room), and a reply decided twice, are each stored once.
fn a_message_or_reply_saved_twice_is_kept_once(place: &Place) {
    let mut e = engine();
    let ops = hear(
        &mut e,
        Message::new("h1", "lobby", "alice", "@docs hi", at(1)),
        "hello",
        false,
    );
    let mut store = place.open();
    store.apply(&ops).expect("saved");
    store.apply(&ops).expect("saved again");
    let r = store.load(LIMITS).expect("loads");
    let ids: Vec<&str> = r.rooms[0].messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["h1", "docs:1"]);
    assert_eq!(r.unsent.len(), 1, "one reply to send: {:?}", r.unsent);
}

/// What the console reads: rooms, a room's decisions with the message
/// each was about (paged backwards), its recent messages.
fn the_console_reads_rooms_decisions_and_messages(place: &Place) {
    let mut e = engine();
    let mut store = place.open();
    for i in 1..=4 {
        let ops = hear(
            &mut e,
            Message::new(format!("h{i}"), "lobby", "alice", &format!("@docs q{i}"), at(i)),
            "a",
            true,
        );
        store.apply(&ops).expect("saved");
    }
    store
        .apply(&hear(
            &mut e,
            Message::new("k1", "kitchen", "bob", "hello", at(9)),
            "a",
            true,
        ))
        .expect("saved");
    let reader = place.reader();
    let rooms = reader.rooms().expect("rooms");
    let names: Vec<&str> = rooms.iter().map(|r| r.room.as_str()).collect();
    assert_eq!(names, ["kitchen", "lobby"], "most recently active first");
    // Each question and each reply (the persona hearing its own) decided.
    assert_eq!((rooms[1].messages, rooms[1].decisions), (8, 8));
    assert!(reader.has_room("lobby").expect("reads"));
    assert!(!reader.has_room("attic").expect("reads"));
    let page = reader.decisions("lobby", None, 3).expect("decisions");
    let msgs: Vec<&str> = page.iter().map(|d| d.msg.as_str()).collect();
    assert_eq!(msgs, ["docs:4", "h4", "docs:3"], "newest first");
    assert_eq!(page[1].text.as_deref(), Some("@docs q4"));
    assert_eq!(page[1].sender.as_deref(), Some("alice"));
    assert_eq!(
        (page[1].outcome.as_str(), page[1].reason.as_str()),
        ("reply", "mention")
    );
    let older = reader
        .decisions("lobby", Some(page[2].seq), 10)
        .expect("decisions");
    let msgs: Vec<&str> = older.iter().map(|d| d.msg.as_str()).collect();
    assert_eq!(msgs, ["h3", "docs:2", "h2", "docs:1", "h1"]);
    let recent = reader.recent_messages("lobby", 3).expect("messages");
    let ids: Vec<&str> = recent.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["docs:3", "h4", "docs:4"], "the last three, oldest first");
}

/// A process that takes over some rooms reads back those rooms only:
/// their messages, running turns and unsent replies.
fn some_rooms_are_read_back_without_the_others(place: &Place) {
    let mut e = engine();
    let mut store = place.open();
    for room in ["lobby", "kitchen"] {
        let mut ops = hear(
            &mut e,
            Message::new(format!("{room}-1"), room, "alice", "@docs hi", at(1)),
            "hello",
            false,
        );
        ops.push(Op::TurnStarted(PendingTurn {
            turn: tactful_core::TurnId(if room == "lobby" { 40 } else { 41 }),
            kind: TurnKind::Reply,
            room: room.into(),
            persona: "docs".into(),
            msgs: vec![MsgId::new(format!("{room}-1"))],
            addressed: true,
        }));
        store.apply(&ops).expect("saved");
    }
    let kitchen = store
        .load_rooms(LIMITS, &|r| r.as_str() == "kitchen")
        .expect("loads");
    let rooms: Vec<&str> = kitchen.rooms.iter().map(|r| r.room.as_str()).collect();
    assert_eq!(rooms, ["kitchen"]);
    assert_eq!(kitchen.pending.len(), 1);
    assert_eq!(kitchen.pending[0].turn.turn.0, 41);
    assert!(kitchen.unsent.iter().all(|u| u.out.room.as_str() == "kitchen"));
    assert_eq!(kitchen.unsent.len(), 1);
    assert_eq!(store.load(LIMITS).expect("loads").rooms.len(), 2);
}

/// One batch is applied in order, however long: a turn started and ended
/// in it is not left running, an edit lands on the message inserted just
/// before it, a delivery on the reply saved before it.
fn a_long_batch_is_applied_in_order(place: &Place) {
    let mut ops = Vec::new();
    for n in 0..150u64 {
        ops.push(Op::TurnStarted(PendingTurn {
            turn: tactful_core::TurnId(n),
            kind: TurnKind::Reply,
            room: "lobby".into(),
            persona: "docs".into(),
            msgs: vec![MsgId::new("h1")],
            addressed: true,
        }));
        if n % 3 != 0 {
            ops.push(Op::TurnEnded(tactful_core::TurnId(n)));
        }
        let id = format!("w{n}");
        ops.push(Op::Shown {
            msg: shown(&id, None, "…"),
            keep: 1000,
        });
        ops.push(Op::ShownEdit {
            room: "lobby".into(),
            id: MsgId::new(id.as_str()),
            text: format!("text {n}"),
        });
        if n % 2 == 0 {
            ops.push(Op::ShownDelete {
                room: "lobby".into(),
                id: MsgId::new(id.as_str()),
            });
        }
    }
    let mut e = engine();
    ops.extend(hear(
        &mut e,
        Message::new("h1", "lobby", "alice", "@docs hi", at(1)),
        "hello",
        true,
    ));
    let mut store = place.open();
    store.apply(&ops).expect("saved");
    let r = store.load(LIMITS).expect("loads");
    assert_eq!(r.pending.len(), 50, "turns 0, 3, 6… still run; the others ended");
    assert!(r.unsent.is_empty(), "the reply's delivery came after it");
    let shown = store.shown(1000).expect("reads");
    assert_eq!(shown.len(), 75, "the odd ones are left");
    assert!(
        shown
            .iter()
            .all(|m| m.text == format!("text {}", &m.id.as_str()[1..])),
        "each edit landed"
    );
}

/// In one batch, however many rooms and messages: decisions read back in
/// the order they were made, and a room's last snapshot is the one kept
/// (a backend that wrote a batch's rows of one kind together would have
/// to keep both).
fn a_batch_keeps_its_decisions_in_order_and_each_rooms_last_snapshot(place: &Place) {
    let mut e = engine();
    let mut ops = Vec::new();
    for i in 1..=6 {
        let room = if i % 2 == 0 { "lobby" } else { "kitchen" };
        ops.extend(hear(
            &mut e,
            Message::new(format!("h{i}"), room, "alice", &format!("@docs q{i}"), at(i)),
            "a",
            true,
        ));
        if let Some(mut snapshot) = e.snapshot_room(&room.into()) {
            // A streak that names the message: the last one must win.
            snapshot.bot_streak = i as u32;
            ops.push(Op::Snapshot(room.into(), snapshot));
        }
    }
    let mut store = place.open();
    store.apply(&ops).expect("saved");
    let reader = place.reader();
    let page = reader.decisions("lobby", None, 10).expect("decisions");
    let msgs: Vec<&str> = page.iter().map(|d| d.msg.as_str()).collect();
    assert_eq!(
        msgs,
        ["docs:6", "h6", "docs:4", "h4", "docs:2", "h2"],
        "newest first"
    );
    let r = store.load(LIMITS).expect("loads");
    let streak = |room: &str| {
        r.rooms
            .iter()
            .find(|x| x.room.as_str() == room)
            .and_then(|x| x.snapshot.as_ref())
            .map(|s| s.bot_streak)
    };
    assert_eq!((streak("lobby"), streak("kitchen")), (Some(6), Some(5)));
}

conformance!(
    a_reopened_store_gives_back_the_transcript_outbox_and_turns,
    a_pending_ambient_buffer_survives_and_flushes_after_its_deadline,
    reactions_on_shown_messages_are_kept_once_each_and_bounded,
    shown_messages_are_kept_once_per_key_and_bounded_per_room,
    a_reply_resumes_after_its_delivered_parts_and_keeps_its_placeholder,
    unreadable_rows_are_skipped_with_a_note_instead_of_stopping_the_start,
    a_senders_handle_survives_a_restart,
    agent_calls_are_logged_once_and_summed_per_day,
    the_store_id_and_platform_state_are_kept,
    a_message_or_reply_saved_twice_is_kept_once,
    the_console_reads_rooms_decisions_and_messages,
    some_rooms_are_read_back_without_the_others,
    a_long_batch_is_applied_in_order,
    a_batch_keeps_its_decisions_in_order_and_each_rooms_last_snapshot,
);
