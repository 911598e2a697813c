//! Several processes on one PostgreSQL database (each a `Cluster` on a
//! connection of its own, as separate processes would be): leases held by
//! one at a time and fenced by their epoch, shares balanced as processes
//! come and go, an inbox that takes each message once and wakes its owner.
//!
//! Time passing is the database's: a lease "running out" is written as an
//! operator would (`expires_at` moved into the past), not slept for.

use std::time::{Duration, Instant};

use tactful_core::{Message, RoomId};
use tactful_store::testing::Schema;
use tactful_store::{
    Announcer, Cluster, INBOX_CHANNEL, InboxWake, LIVE_CHANNEL, LoadLimits, Op, Reader, SPEND_CHANNEL,
    STATE_CHANNEL, ShownChange, ShownKind, ShownMessage, Store, StoreError, WEB_CHANNEL, account_key,
    partition_key, partition_of,
};

const TTL: Duration = Duration::from_secs(10);

fn join(schema: &Schema, about: &str) -> Cluster {
    Cluster::join(&schema.location(), about, TTL).expect("joins")
}

/// What `kill -9` or a long `SIGSTOP` leaves: the process's leases and
/// membership run out.
fn run_out(schema: &Schema, holder: &str) {
    schema
        .exec(&format!(
            "UPDATE leases SET expires_at = now() - interval '1 second' WHERE holder = '{holder}';
             UPDATE members SET seen_at = now() - interval '1 hour' WHERE id = '{holder}';"
        ))
        .expect("ran out");
}

fn msg(id: &str, room: &str) -> Message {
    Message::new(
        id,
        room,
        "alice",
        "hello",
        tactful_core::Timestamp::from_millis(1_000),
    )
}

#[test]
fn a_lease_has_one_holder_until_it_runs_out_and_then_moves_with_a_new_epoch() {
    let Some(schema) = Schema::new() else { return };
    let (mut a, mut b) = (join(&schema, "a"), join(&schema, "b"));
    let first = a.acquire("partition:7").expect("asks").expect("free");
    assert_eq!((first.epoch, first.holder.as_str()), (1, a.id()));
    assert_eq!(b.acquire("partition:7").expect("asks"), None, "held by a");
    let again = a.acquire("partition:7").expect("asks").expect("a's own");
    assert_eq!(again.epoch, 1, "renewing is not a change of holder");

    run_out(&schema, a.id());
    let taken = b.acquire("partition:7").expect("asks").expect("ran out");
    assert_eq!((taken.epoch, taken.holder.as_str()), (2, b.id()));
    assert_eq!(a.heartbeat().expect("beats"), [], "a learns it holds nothing");
    assert_eq!(a.acquire("partition:7").expect("asks"), None, "b holds it now");

    b.release(&taken).expect("released");
    let back = a.acquire("partition:7").expect("asks").expect("let go");
    assert_eq!(back.epoch, 3);
}

/// A process whose lease was taken over (it was stopped past its expiry,
/// or cut off from the database) writes nothing more under it, even
/// though it does not know yet; a lease that ran out with nobody taking
/// it refuses its old holder too, until asked for again.
#[test]
fn a_fenced_out_process_cannot_write_under_its_old_epoch() {
    let Some(schema) = Schema::new() else { return };
    let (mut a, mut b) = (join(&schema, "a"), join(&schema, "b"));
    let mut store_a = Store::open_at(&schema.location()).expect("opens");
    let mut store_b = Store::open_at(&schema.location()).expect("opens");
    let old = a.acquire("partition:1").expect("asks").expect("free");
    store_a
        .apply(&[Op::Fence(old.clone()), Op::Heard(msg("m1", "lobby"))])
        .expect("a writes while it holds the lease");

    run_out(&schema, a.id());
    let err = store_a
        .apply(&[Op::Fence(old.clone()), Op::Heard(msg("m2", "lobby"))])
        .expect_err("ran out: refused");
    assert!(matches!(err, StoreError::Fenced { epoch: 1, .. }), "{err}");
    assert!(!err.is_transient(), "trying again cannot help: {err}");

    let new = b.acquire("partition:1").expect("asks").expect("ran out");
    store_b
        .apply(&[
            Op::Fence(new.clone()),
            Op::Heard(msg("m3", "lobby")),
            Op::Fence(new.clone()),
            Op::Heard(msg("m3b", "lobby")),
        ])
        .expect("the new holder writes, its fence repeated (checked once)");
    // A fence repeated is skipped, another lease's is not: the stale one
    // refuses the whole batch.
    let err = store_b
        .apply(&[
            Op::Fence(new),
            Op::Heard(msg("m5", "lobby")),
            Op::Fence(old.clone()),
            Op::Heard(msg("m6", "lobby")),
        ])
        .expect_err("a stale fence after a good one: refused");
    assert!(matches!(err, StoreError::Fenced { epoch: 1, .. }), "{err}");
    let err = store_a
        .apply(&[Op::Fence(old), Op::Heard(msg("m4", "lobby"))])
        .expect_err("taken over: refused");
    assert!(matches!(err, StoreError::Fenced { .. }), "{err}");
    // The refused batch was rolled back: the connection goes on.
    store_a
        .apply(&[Op::PlatformState {
            key: "k".into(),
            value: "v".into(),
        }])
        .expect("a write under no lease still goes through");

    let limits = LoadLimits {
        history: 10,
        own_ids: 10,
    };
    let kept: Vec<String> = store_b.load(limits).expect("loads").rooms[0]
        .messages
        .iter()
        .map(|m| m.id.to_string())
        .collect();
    assert_eq!(
        kept,
        ["m1", "m3", "m3b"],
        "nothing of a refused batch was written"
    );
}

#[test]
fn partitions_are_shared_out_and_shared_again_when_a_process_goes() {
    let Some(schema) = Schema::new() else { return };
    let keys: Vec<String> = (0..12).map(partition_key).collect();
    let mut all: Vec<Cluster> = (0..3).map(|i| join(&schema, &format!("p{i}"))).collect();
    let settle = |all: &mut [Cluster]| -> Vec<Vec<String>> {
        let mut last = Vec::new();
        for _ in 0..6 {
            last = all
                .iter_mut()
                .map(|c| {
                    let b = c.balance(&keys).expect("balances");
                    for extra in &b.surplus {
                        c.release(extra).expect("lets go");
                    }
                    b.held
                        .into_iter()
                        .filter(|l| !b.surplus.contains(l))
                        .map(|l| l.key)
                        .collect::<Vec<_>>()
                })
                .collect();
        }
        last
    };
    let held = settle(&mut all);
    let counts: Vec<usize> = held.iter().map(Vec::len).collect();
    assert_eq!(counts, [4, 4, 4], "{held:?}");
    let mut every: Vec<&String> = held.iter().flatten().collect();
    every.sort();
    every.dedup();
    assert_eq!(every.len(), 12, "each partition held once: {held:?}");

    // The third is killed: its leases run out and the two others take them.
    let gone = all.pop().expect("three");
    run_out(&schema, gone.id());
    let held = settle(&mut all);
    let counts: Vec<usize> = held.iter().map(Vec::len).collect();
    assert_eq!(counts, [6, 6], "{held:?}");

    // A newcomer gets its share as the others let some go.
    all.push(join(&schema, "p3"));
    let held = settle(&mut all);
    let counts: Vec<usize> = held.iter().map(Vec::len).collect();
    assert_eq!(counts, [4, 4, 4], "{held:?}");

    // Leaving lets go at once.
    let mut leaving = all.pop().expect("three");
    leaving.leave().expect("leaves");
    let held = settle(&mut all);
    assert_eq!(held.iter().map(Vec::len).collect::<Vec<_>>(), [6, 6]);
}

/// The bot accounts are a second set shared out on its own, with the
/// leases the round's one heartbeat renewed: a process holding more than
/// its share of partitions still gets its share of the accounts, and
/// neither set counts against the other.
#[test]
fn accounts_are_shared_out_apart_from_the_partitions() {
    let Some(schema) = Schema::new() else { return };
    let parts: Vec<String> = (0..4).map(partition_key).collect();
    let docs = tactful_core::PersonaId::new("docs");
    let chef = tactful_core::PersonaId::new("chef");
    let accounts = vec![account_key("telegram", &docs), account_key("telegram", &chef)];
    assert_eq!(accounts[0], "account:telegram:docs");
    let mut a = join(&schema, "a");
    // Alone: a takes every partition and both accounts.
    let renewed = a.heartbeat().expect("beats");
    assert_eq!(
        a.balance_with(&parts, &renewed).expect("balances").gained.len(),
        4
    );
    let renewed = a.heartbeat().expect("beats");
    let mine = a.balance_with(&accounts, &renewed).expect("balances");
    assert_eq!(mine.gained.len(), 2);
    assert!(mine.surplus.is_empty());

    // b joins: a's second account (the greatest key) is above its share;
    // once a lets it go, b takes it, and nothing of the partitions moves
    // in this account round.
    let mut b = join(&schema, "b");
    let renewed = a.heartbeat().expect("beats");
    assert_eq!(renewed.len(), 6, "one heartbeat renews both sets");
    let mine = a.balance_with(&accounts, &renewed).expect("balances");
    assert_eq!(
        mine.surplus.iter().map(|l| l.key.as_str()).collect::<Vec<_>>(),
        ["account:telegram:docs"]
    );
    for l in &mine.surplus {
        a.release(l).expect("lets go");
    }
    let renewed = b.heartbeat().expect("beats");
    let theirs = b.balance_with(&accounts, &renewed).expect("balances");
    assert_eq!(
        theirs.gained.iter().map(|l| l.key.as_str()).collect::<Vec<_>>(),
        ["account:telegram:docs"]
    );
    assert_eq!(theirs.held.len(), 1, "no partition among b's accounts");

    // a dies: b takes its account too once the lease runs out.
    run_out(&schema, a.id());
    let renewed = b.heartbeat().expect("beats");
    let theirs = b.balance_with(&accounts, &renewed).expect("balances");
    assert_eq!(theirs.held.len(), 2);
    assert_eq!(
        theirs
            .gained
            .iter()
            .map(|l| (l.key.as_str(), l.epoch))
            .collect::<Vec<_>>(),
        [("account:telegram:chef", 2)],
        "a new epoch for the new holder"
    );
}

#[test]
fn the_inbox_takes_a_message_once_wakes_its_owner_and_forgets_it_once_decided() {
    let Some(schema) = Schema::new() else { return };
    let mut wake = tactful_store::listen(&schema.location(), INBOX_CHANNEL).expect("listens");
    let (mut a, mut b) = (join(&schema, "a"), join(&schema, "b"));
    let room = RoomId::new("tg:-100777");
    let part = partition_of(&room);
    let m = msg("tg:55", room.as_str());
    assert!(a.put(&m).expect("put"), "new");
    assert!(
        !b.put(&m).expect("put"),
        "heard by a second process: already there"
    );
    assert!(!a.put(&m).expect("put"), "redelivered: already there");

    let deadline = Instant::now() + Duration::from_secs(10);
    let woken = loop {
        match wake.try_recv() {
            Ok(n) => break n,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("no notification: {e}"),
        }
    };
    let named = InboxWake::parse(&woken.payload).expect("a wake");
    assert_eq!(named.part, part, "the partition is named");
    assert!(wake.try_recv().is_err(), "woken once, for the one new message");

    let waiting = b.waiting(&[part], 10).expect("reads");
    assert_eq!(waiting.len(), 1);
    assert_eq!(named.seq, Some(waiting[0].seq), "and its row");
    // The row named, read by its key: the same message; rows that do not
    // exist are no error.
    assert_eq!(b.waiting_at(&[waiting[0].seq, 999_999]).expect("reads"), waiting);
    assert_eq!(
        (&waiting[0].msg, waiting[0].context),
        (&m, false),
        "the message as heard"
    );
    assert!(b.waiting(&[(part + 1) % 256], 10).expect("reads").is_empty());

    let owner = b.acquire(&partition_key(part)).expect("asks").expect("free");
    let mut store = Store::open_at(&schema.location()).expect("opens");
    store
        .apply(&[
            Op::Fence(owner),
            Op::Heard(m.clone()),
            Op::Decided {
                room: room.clone(),
                id: m.id.clone(),
            },
        ])
        .expect("decided");
    assert!(b.waiting(&[part], 10).expect("reads").is_empty(), "decided once");
    assert!(
        b.waiting_at(&[waiting[0].seq]).expect("reads").is_empty(),
        "decided: not named as waiting"
    );
    assert!(
        !a.put(&m).expect("put"),
        "a redelivery after the decision is still known"
    );
}

/// The next `n` notifications of `rx` (10 s at most).
fn next_notes(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<tactful_store::Notification>,
    n: usize,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    while got.len() < n {
        match rx.try_recv() {
            Ok(note) => got.push(note.payload),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("{} of {n} notifications: {e}", got.len()),
        }
    }
    got
}

/// What is announced outside any batch (the consoles' live lines) goes
/// out in order; with a database that does not answer, announcing neither
/// blocks nor grows: past the queue, announcements are dropped, and said
/// so.
#[test]
fn announcements_go_out_in_order_and_a_dead_database_drops_them() {
    let Some(schema) = Schema::new() else { return };
    let mut rx = tactful_store::listen(&schema.location(), LIVE_CHANNEL).expect("listens");
    let live = Announcer::start(&schema.location()).expect("starts");
    for i in 0..3 {
        assert!(live.announce(LIVE_CHANNEL, format!("n{i}")));
    }
    assert_eq!(next_notes(&mut rx, 3), ["n0", "n1", "n2"]);

    let nowhere = tactful_store::Location::postgres("postgres://tactful@127.0.0.1:1/none").expect("a URL");
    let dead = Announcer::start(&nowhere).expect("connects only when it has something to send");
    // A blocking send would hang here for good.
    let taken = (0..5_000)
        .filter(|i| dead.announce(LIVE_CHANNEL, format!("{i}")))
        .count();
    assert!(
        (1_024..1_100).contains(&taken),
        "the queue's 1,024 (and what the sender took meanwhile): {taken}"
    );
}

/// A shared setting (a room policy set in a console) is announced with
/// its key at commit, and the others read its value back; a rolled-back
/// one is never announced.
#[test]
fn a_shared_setting_is_announced_at_commit_with_its_key() {
    let Some(schema) = Schema::new() else { return };
    let mut rx = tactful_store::listen(&schema.location(), STATE_CHANNEL).expect("listens");
    let mut store = Store::open_at(&schema.location()).expect("opens");
    let shared = |room: &str, value: &str| Op::SharedState {
        key: format!("console:policy:{room}"),
        value: value.into(),
    };
    let fenced = Op::Fence(tactful_store::Lease {
        key: partition_key(1),
        holder: "nobody".into(),
        epoch: 99,
    });
    assert!(store.apply(&[fenced, shared("ops", "mode = \"all\"")]).is_err());
    store
        .apply(&[
            shared("lobby", "mode = \"all\""),
            Op::PlatformState {
                key: "matrix:sync:docs".into(),
                value: "s1".into(),
            },
        ])
        .expect("applied");
    assert_eq!(
        next_notes(&mut rx, 1),
        ["console:policy:lobby"],
        "the key, once: the refused change and the platform's bookkeeping are not announced"
    );
    let reader = Reader::open(&schema.location()).expect("reads");
    assert_eq!(
        reader.state_with_prefix("console:policy:", 10).expect("reads"),
        [("console:policy:lobby".to_owned(), "mode = \"all\"".to_owned())]
    );
}

#[test]
fn each_change_to_the_web_room_is_announced_at_commit_and_readable_by_the_others() {
    let Some(schema) = Schema::new() else { return };
    let mut rx = tactful_store::listen(&schema.location(), WEB_CHANNEL).expect("listens");
    let mut store = Store::open_at(&schema.location()).expect("opens");
    let room = tactful_core::RoomId::new("lobby");
    let id = tactful_core::MsgId::new("w42");
    let long = "é".repeat(4_000); // 8,000 bytes: more than a notification holds
    let shown = ShownMessage {
        id: id.clone(),
        room: room.clone(),
        key: None,
        sender: tactful_core::UserId::new("web:Alice"),
        sender_name: "Alice".into(),
        is_bot: false,
        text: long.clone(),
        reply_to: None,
        time: tactful_core::Timestamp::from_millis(5_000),
        reactions: Vec::new(),
    };
    store
        .apply(&[
            Op::Shown { msg: shown, keep: 10 },
            Op::ShownEdit {
                room: room.clone(),
                id: id.clone(),
                text: "edited".into(),
            },
            Op::ShownReact {
                room: room.clone(),
                id: id.clone(),
                emoji: "👍".into(),
                by: "Docs".into(),
            },
            // Already there: nothing changes, nothing is announced.
            Op::ShownReact {
                room: room.clone(),
                id: id.clone(),
                emoji: "👍".into(),
                by: "Docs".into(),
            },
            Op::ShownNote {
                room: room.clone(),
                id: id.clone(),
                note: r#"{"persona":"docs","state":"answered"}"#.into(),
            },
        ])
        .expect("applied");
    let changes: Vec<ShownChange> = next_notes(&mut rx, 4)
        .iter()
        .map(|p| ShownChange::parse(p).expect("readable"))
        .collect();
    let kinds: Vec<ShownKind> = changes.iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        [ShownKind::New, ShownKind::Edit, ShownKind::React, ShownKind::Note],
        "in the order made, the repeated reaction not at all"
    );
    assert!(
        changes
            .iter()
            .all(|c| c.room == "lobby" && c.id == "w42" && c.is_own())
    );
    assert_eq!(
        changes[3].note.as_deref(),
        Some(r#"{"persona":"docs","state":"answered"}"#)
    );
    let reader = Reader::open(&schema.location()).expect("reads");
    let now = reader
        .shown_message("lobby", "w42")
        .expect("reads")
        .expect("there");
    assert_eq!(now.text, "edited", "the others read the latest text");
    assert_eq!(now.reactions, [("👍".to_owned(), vec!["Docs".to_owned()])]);

    // A change rolled back is never announced.
    let fenced = Op::Fence(tactful_store::Lease {
        key: partition_key(1),
        holder: "nobody".into(),
        epoch: 99,
    });
    let refused = store.apply(&[
        fenced,
        Op::ShownDelete {
            room: room.clone(),
            id: id.clone(),
        },
    ]);
    assert!(matches!(refused, Err(StoreError::Fenced { .. })), "{refused:?}");
    store
        .apply(&[
            Op::ShownDelete {
                room: room.clone(),
                id: id.clone(),
            },
            Op::ShownNote {
                room,
                id,
                note: "{}".into(),
            },
        ])
        .expect("deleted");
    let after: Vec<ShownKind> = next_notes(&mut rx, 2)
        .iter()
        .map(|p| ShownChange::parse(p).expect("readable").kind)
        .collect();
    assert_eq!(
        after,
        [ShownKind::Delete, ShownKind::Note],
        "the refused deletion was never announced"
    );
    assert_eq!(reader.shown_message("lobby", "w42").expect("reads"), None, "gone");
}

/// A batch fenced by several leases (merged batches of several
/// partitions, fenced in whatever order they came) and the renewal of
/// those leases lock the rows in one order, so neither ever waits for the
/// other in a cycle. Here the other transaction plays a renewal that has
/// locked `partition:1` and will want `partition:2`; the batch is fenced
/// by 2, then 1. Locked in the batch's order, the batch would hold 2 while
/// waiting for 1, and the renewal's lock of 2 would wait for it: a
/// deadlock (found by the load benchmark: renewals failing, leases lost).
#[test]
fn a_batch_fenced_by_several_leases_never_deadlocks_with_their_renewal() {
    let Some(schema) = Schema::new() else { return };
    let mut a = join(&schema, "a");
    let one = a.acquire(&partition_key(1)).expect("asks").expect("free");
    let two = a.acquire(&partition_key(2)).expect("asks").expect("free");
    let renewal = schema.session().expect("connects");
    renewal
        .run("BEGIN; SELECT 1 FROM leases WHERE key = 'partition:1' FOR NO KEY UPDATE")
        .expect("locks 1");
    let at = schema.location();
    let writer = std::thread::spawn(move || {
        let mut store = Store::open_at(&at).expect("opens");
        let state = |key: &str| Op::PlatformState {
            key: key.into(),
            value: "x".into(),
        };
        store.apply(&[Op::Fence(two), state("b"), Op::Fence(one), state("a")])
    });
    // The batch waits for the renewal's lock of 1.
    let deadline = Instant::now() + Duration::from_secs(10);
    while schema
        .column(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{}' AND wait_event_type = 'Lock'",
            schema.name
        ))
        .expect("reads")
        != [Some("1".to_owned())]
    {
        assert!(Instant::now() < deadline, "the batch never waited for the renewal");
        std::thread::sleep(Duration::from_millis(10));
    }
    // It holds nothing meanwhile: the renewal takes 2 at once (well before
    // PostgreSQL would look for a deadlock, after a second).
    renewal
        .run("SET LOCAL lock_timeout = '500ms'; SELECT 1 FROM leases WHERE key = 'partition:2' FOR NO KEY UPDATE")
        .expect("the renewal is not held up by the batch");
    renewal.run("COMMIT").expect("commits");
    writer.join().expect("the writer").expect("the batch is written");
    assert_eq!(
        schema
            .column("SELECT count(*) FROM platform_state WHERE key IN ('a', 'b')")
            .expect("reads"),
        [Some("2".to_owned())]
    );
    // And the renewal itself, as the heartbeat runs it, renews both.
    assert_eq!(a.heartbeat().expect("renews").len(), 2);
}

fn spent(room: &str, persona: &str, end_ms: u64, tokens: i64) -> Op {
    Op::Spent(tactful_core::Spent {
        room: RoomId::new(room),
        persona: persona.into(),
        bucket_end: tactful_core::Timestamp::from_millis(end_ms),
        per: Duration::from_secs(3_600),
        tokens,
    })
}

/// What a partition's rooms spent (or hold) of a persona's own budget is
/// summed for every other process, never for the one holding it, and
/// announced at commit; a batch refused by its fence counts nothing and
/// announces nothing; a hold given back (a negative count) leaves what the
/// call cost; spend out of every window is purged; a broken usage report
/// (u64::MAX tokens, twice) neither fails the batch nor wraps.
#[test]
fn a_persona_s_spend_is_summed_for_the_other_processes() {
    let Some(schema) = Schema::new() else { return };
    let mut a = join(&schema, "a");
    let mut rx = tactful_store::listen(&schema.location(), SPEND_CHANNEL).expect("listens");
    let mut store = Store::open_at(&schema.location()).expect("opens");
    // Two rooms in different partitions.
    let (lobby, ops) = ("lobby", "tg:-1001");
    let (p_lobby, p_ops) = (partition_of(&RoomId::new(lobby)), partition_of(&RoomId::new(ops)));
    assert_ne!(p_lobby, p_ops);
    let hour = 3_600_000;
    let fenced = Op::Fence(tactful_store::Lease {
        key: partition_key(p_ops),
        holder: "nobody".into(),
        epoch: 99,
    });
    assert!(
        store
            .apply(&[fenced, spent(ops, "docs", 60_000, 10_000)])
            .is_err()
    );
    store
        .apply(&[
            spent(lobby, "docs", 60_000, 1_200),
            spent(lobby, "docs", 60_000, -500),
            spent(ops, "docs", 60_000, 300),
            spent(ops, "docs", 120_000, 40),
            spent(ops, "chef", 60_000, 9),
            // A hold given back in a bucket of its own: nothing to count.
            spent(ops, "chef", 120_000, -9),
        ])
        .expect("applied");
    let mut notes = next_notes(&mut rx, 2);
    notes.sort();
    let mut parts = vec![p_lobby.to_string(), p_ops.to_string()];
    parts.sort();
    assert_eq!(notes, parts, "once per partition of the batch");
    let at = |ms: u64| tactful_core::Timestamp::from_millis(ms);
    let read = |a: &mut Cluster, held: &[u32], now: u64| -> Vec<(String, u64, u64)> {
        a.spent_elsewhere(held, at(now))
            .expect("reads")
            .into_iter()
            .map(|(p, end, t)| (p.to_string(), end.as_millis(), t))
            .collect()
    };
    assert_eq!(
        read(&mut a, &[], 100_000),
        [
            ("chef".to_owned(), 60_000, 9),
            ("docs".to_owned(), 60_000, 1_000),
            ("docs".to_owned(), 120_000, 40)
        ],
        "summed over partitions, the refused batch left out"
    );
    assert_eq!(
        read(&mut a, &[p_ops], 100_000),
        [("docs".to_owned(), 60_000, 700)],
        "what this process holds it counts itself"
    );
    // An hour after the first bucket's end it counts no more, and is gone.
    assert_eq!(
        read(&mut a, &[], 60_000 + hour),
        [("docs".to_owned(), 120_000, 40)]
    );
    assert_eq!(
        schema.column("SELECT count(*) FROM spend").expect("counts"),
        [Some("2".to_owned())]
    );
    store
        .apply(&[spent(lobby, "docs", 120_000, i64::MAX)])
        .expect("a broken report is capped");
    store
        .apply(&[spent(lobby, "docs", 120_000, i64::MAX)])
        .expect("and its sum too");
    let big = read(&mut a, &[], 100_000 + hour);
    assert_eq!(big.len(), 1);
    assert!(big[0].2 > 1 << 60, "{big:?}");
    // Awaited: a notification arrives after its commit, not with it.
    assert_eq!(
        next_notes(&mut rx, 2),
        [p_lobby.to_string(), p_lobby.to_string()],
        "each batch announced"
    );
}

#[test]
fn each_process_numbers_from_a_block_of_its_own() {
    let Some(schema) = Schema::new() else { return };
    let (mut a, mut b) = (join(&schema, "a"), join(&schema, "b"));
    let blocks = [
        a.id_block().expect("a block"),
        b.id_block().expect("a block"),
        a.id_block().expect("a block"),
    ];
    assert!(blocks.iter().all(|&n| n > 0), "{blocks:?}");
    let mut distinct = blocks.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "never the same block twice: {blocks:?}");
    assert!(
        blocks.windows(2).all(|w| w[0].abs_diff(w[1]) >= 1 << 40),
        "{blocks:?}"
    );
}

/// `members` lists the processes running, not every one that ever ran (it
/// kept 7 rows after 4 kills): a process gone for longer than a lease
/// (killed, or stopped and not back) leaves it at the next heartbeat of
/// any other, one merely late within its lease stays, and one that comes
/// back after its row went (a stop past its lease) is a member again at
/// its own next heartbeat, under the same id and with what it said of
/// itself (the console names owners by it).
#[test]
fn members_gone_longer_than_a_lease_are_removed_and_one_that_returns_joins_again() {
    let Some(schema) = Schema::new() else { return };
    let mut live = join(&schema, "host pid 1");
    let late = join(&schema, "host pid 2");
    let mut gone: Vec<Cluster> = (3..7)
        .map(|pid| join(&schema, &format!("host pid {pid}")))
        .collect();
    let rows = || {
        schema
            .column("SELECT about FROM members ORDER BY about")
            .expect("reads")
            .into_iter()
            .flatten()
            .collect::<Vec<String>>()
    };
    assert_eq!(rows().len(), 6, "{:?}", rows());
    for g in &gone {
        run_out(&schema, g.id());
    }
    schema
        .exec(&format!(
            "UPDATE members SET seen_at = now() - interval '5 seconds' WHERE id = '{}'",
            late.id()
        ))
        .expect("late, within its lease");
    live.heartbeat().expect("beats");
    assert_eq!(rows(), ["host pid 1", "host pid 2"], "the gone are removed");

    let mut back = gone.remove(0);
    back.heartbeat().expect("beats");
    assert_eq!(
        rows(),
        ["host pid 1", "host pid 2", "host pid 3"],
        "back under its own name"
    );
    let ids: Vec<String> = live.members().expect("reads").into_iter().map(|m| m.id).collect();
    assert!(ids.contains(&back.id().to_owned()), "{ids:?}");
}

#[test]
fn the_cluster_needs_postgres() {
    let dir = tempfile::tempdir().expect("dir");
    let at = tactful_store::Location::File(dir.path().join("t.db"));
    let err = Cluster::join(&at, "x", TTL).expect_err("SQLite");
    assert!(err.to_string().contains("needs a PostgreSQL store"), "{err}");
    let mut store = Store::open_at(&at).expect("opens");
    let err = store
        .apply(&[Op::Decided {
            room: "lobby".into(),
            id: "m1".into(),
        }])
        .expect_err("no inbox in SQLite");
    assert!(matches!(err, StoreError::NeedsPostgres(_)), "{err}");
}

/// An inbox notification names a partition and a row; one from a process
/// of an earlier version, the partition alone; anything else is no wake
/// (the next round reads everything anyway).
#[test]
fn an_inbox_notification_names_a_partition_and_maybe_a_row() {
    assert_eq!(
        InboxWake::parse("17:4242"),
        Some(InboxWake {
            part: 17,
            seq: Some(4242)
        })
    );
    assert_eq!(InboxWake::parse("17"), Some(InboxWake { part: 17, seq: None }));
    for junk in ["", "x", "256", "-1", "17:", "17:x", ":5", "17:5:6"] {
        assert_eq!(InboxWake::parse(junk), None, "{junk:?}");
    }
}
