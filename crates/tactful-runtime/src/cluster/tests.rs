//! The coordinator's rounds against a real database: what is handed to
//! the engine when a partition moves, and how the bot accounts follow
//! their leases.

use tactful_core::Message;
use tactful_store::Op;

use super::*;
use std::sync::Arc;

/// A coordinator's state on the database at `at`, not running.
fn state(at: &Location, engine: mpsc::UnboundedSender<Event>) -> State {
    let (tenure, _) = watch::channel(None);
    State::new(
        Cluster::join(at, "t", Duration::from_secs(10)).expect("joins"),
        Store::open_at(at).expect("opens"),
        LoadLimits {
            history: 10,
            own_ids: 10,
        },
        engine,
        tenure,
        Duration::from_secs(10),
    )
}

/// A coordinator's state on a schema of its own (`None`: no PostgreSQL
/// here), with the events it sends the engine.
fn on_a_schema() -> Option<(
    tactful_store::testing::Schema,
    Location,
    State,
    mpsc::UnboundedReceiver<Event>,
)> {
    let schema = tactful_store::testing::Schema::new()?;
    let at = schema.location();
    let (engine, events) = mpsc::unbounded_channel();
    let state = state(&at, engine);
    Some((schema, at, state, events))
}

/// What a leased connection's `connect` was asked, in order.
type Asked = Arc<std::sync::Mutex<Vec<Option<Held>>>>;

/// Telegram accounts of `personas` as a leased connection of `state`,
/// whose `connect` notes each call in the returned log and answers
/// `works()`.
fn telegram_accounts(
    state: &mut State,
    personas: &[PersonaId],
    works: impl Fn() -> bool + Send + 'static,
) -> Asked {
    holding_telegram(&state.connections, personas, works)
}

/// [`telegram_accounts`], in `holding`.
fn holding_telegram(
    holding: &Holding,
    personas: &[PersonaId],
    works: impl Fn() -> bool + Send + 'static,
) -> Asked {
    let asked: Asked = Arc::default();
    let log = asked.clone();
    lock(holding).push((
        Leased {
            held_by: HeldBy::Accounts {
                platform: "telegram".into(),
                personas: personas.to_vec(),
            },
            connect: Box::new(move |held| {
                log.lock().expect("log").push(held.map(|(h, _)| h));
                works()
            }),
        },
        BTreeMap::new(),
    ));
    asked
}

/// `tokens` spent by docs in `room`, recorded as its owner would.
fn spent(at: &Location, room: RoomId, tokens: i64) {
    Store::open_at(at)
        .expect("opens")
        .apply(&[Op::Spent(tactful_core::Spent {
            room,
            persona: PersonaId::new("docs"),
            bucket_end: crate::clock::wall_clock(),
            per: Duration::from_secs(3600),
            tokens,
        })])
        .expect("spent");
}

/// A platform whose reconnection fails (its saved state could not be
/// read) keeps what it had: the accounts it still listens with are not
/// let go to another process, one it gained is asked for again at the
/// next round, and once it connects the surplus goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_a_platform_could_not_reconnect_without_stay_until_it_can() {
    let Some((schema, at, mut state, _events)) = on_a_schema() else {
        return;
    };
    let works = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ok = works.clone();
    let personas = vec![PersonaId::new("chef"), PersonaId::new("docs")];
    let asked = telegram_accounts(&mut state, &personas, move || {
        ok.load(std::sync::atomic::Ordering::SeqCst)
    });
    let every = Held::Only(personas.iter().cloned().collect());
    let holder = |key: &str| {
        schema
            .column(&format!(
                "SELECT holder FROM leases WHERE key = '{key}' AND expires_at > now()"
            ))
            .expect("reads")
            .into_iter()
            .flatten()
            .next()
    };
    let me = state.cluster.id().to_owned();

    // Alone: both accounts taken; connecting fails, so it is asked
    // again next round, and then works.
    state.round().expect("a round");
    state.round().expect("a round");
    works.store(true, std::sync::atomic::Ordering::SeqCst);
    state.round().expect("a round");
    state.round().expect("a round");
    assert_eq!(
        *asked.lock().expect("log"),
        [Some(every.clone()), Some(every.clone()), Some(every.clone())],
        "asked until connected, then left alone"
    );

    // Another process joins: docs is above this one's share, but the
    // platform cannot reconnect without it, so docs is kept.
    let _other = Cluster::join(&at, "other", Duration::from_secs(10)).expect("joins");
    works.store(false, std::sync::atomic::Ordering::SeqCst);
    state.round().expect("a round");
    assert_eq!(holder("account:telegram:docs"), Some(me.clone()), "not let go");
    let chef_only = Held::Only([PersonaId::new("chef")].into_iter().collect());
    assert_eq!(asked.lock().expect("log").last(), Some(&Some(chef_only.clone())));
    works.store(true, std::sync::atomic::Ordering::SeqCst);
    state.round().expect("a round");
    assert_eq!(
        holder("account:telegram:docs"),
        None,
        "let go once chef alone is connected"
    );
    assert_eq!(holder("account:telegram:chef"), Some(me));
    assert_eq!(asked.lock().expect("log").len(), 5);
}

/// The rows notifications name are read by their key and handed once;
/// a named row of a partition this process does not hold is not handed
/// (its owner reads it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_a_notification_names_is_handed_once_and_only_by_its_partition_s_owner() {
    let Some((schema, at, mut state, mut events)) = on_a_schema() else {
        return;
    };
    state.round().expect("a round");
    let _ = std::iter::from_fn(|| events.try_recv().ok()).count();
    let msg = Message::new("m1", "lobby", "alice", "@docs hi", Timestamp::from_millis(1));
    assert!(state.cluster.put(&msg).expect("put"));
    let seq_of = |id: &str| -> i64 {
        schema
            .column(&format!("SELECT seq::text FROM inbox WHERE id = '{id}'"))
            .expect("reads")
            .into_iter()
            .flatten()
            .next()
            .and_then(|s| s.parse().ok())
            .expect("a row")
    };
    let seq = seq_of("m1");
    state.read_named(&[seq]).expect("reads");
    assert!(
        matches!(events.try_recv(), Ok(Event::FromInbox(w)) if w.len() == 1 && w[0].msg == msg),
        "handed"
    );
    state.read_named(&[seq]).expect("reads");
    state.read_inbox().expect("reads");
    assert!(events.try_recv().is_err(), "not again while in hand");

    // Another process holds the partition now.
    let part = partition_of(&msg.room);
    let mut other = Cluster::join(&at, "other", Duration::from_secs(10)).expect("joins");
    schema
        .exec(&format!(
            "UPDATE leases SET expires_at = now() - interval '1 second' WHERE key = 'partition:{part}'"
        ))
        .expect("runs out");
    other.acquire(&partition_key(part)).expect("asks").expect("free");
    state.round().expect("a round");
    let _ = std::iter::from_fn(|| events.try_recv().ok()).count();
    let later = Message::new("m2", "lobby", "alice", "@docs again", Timestamp::from_millis(2));
    assert!(state.cluster.put(&later).expect("put"));
    state.read_named(&[seq_of("m2")]).expect("reads");
    assert!(events.try_recv().is_err(), "not this process's to decide");
}

/// A message handed to the engine whose decision was then refused
/// (the partition's lease ran out first) waits in the inbox: when this
/// process takes the partition anew, it is handed again, not taken for
/// one already in hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_in_hand_when_its_partition_was_lost_is_handed_again_when_retaken() {
    let Some((schema, _at, mut state, mut events)) = on_a_schema() else {
        return;
    };
    let msg = Message::new("m1", "lobby", "alice", "@docs hi", Timestamp::from_millis(1));
    let part = partition_of(&msg.room);
    assert!(state.cluster.put(&msg).expect("put"));
    state.round().expect("a round");
    state.read_inbox().expect("reads");
    let mut handed = 0;
    while let Ok(event) = events.try_recv() {
        if let Event::FromInbox(w) = event {
            handed += w.len();
        }
    }
    assert_eq!(handed, 1, "handed once");
    state.read_inbox().expect("reads");
    assert!(events.try_recv().is_err(), "not again while in hand");

    // The engine task could not take it (the store could not write):
    // given back, it is handed again at the next read.
    let seq = state.handed.keys().copied().next().expect("in hand");
    state.untaken(&[seq]);
    state.read_inbox().expect("reads");
    assert!(
        matches!(events.try_recv(), Ok(Event::FromInbox(w)) if w.len() == 1 && w[0].seq == seq),
        "handed again"
    );

    // The lease runs out before the decision is written: refused.
    schema
        .exec(&format!(
            "UPDATE leases SET expires_at = now() - interval '1 second' WHERE key = 'partition:{part}'"
        ))
        .expect("runs out");
    state.round().expect("a round");
    state.read_inbox().expect("reads");
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(match event {
            Event::Release(parts, None) if parts.contains(&part) => "lost".to_owned(),
            Event::Adopt(a) if a.leases.iter().any(|(p, _)| *p == part) => "adopted".to_owned(),
            Event::FromInbox(w) => format!("{} waiting", w.len()),
            _ => "other".to_owned(),
        });
    }
    assert_eq!(seen, ["lost", "adopted", "1 waiting"]);
}

/// Past the tenure the coordinator connects nothing, even what it still
/// takes for its own (a round that finished late, a hand-over between
/// rounds): the watchdog may have let it go already, and nothing would let
/// it go again. What it was connected with is let go instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_connects_once_the_tenure_has_passed() {
    let Some((_schema, _at, mut state, _events)) = on_a_schema() else {
        return;
    };
    let personas = vec![PersonaId::new("docs")];
    let asked = telegram_accounts(&mut state, &personas, || true);
    state.round().expect("a round");
    let docs = Some(Held::Only(personas.iter().cloned().collect()));
    assert_eq!(*asked.lock().expect("log"), std::slice::from_ref(&docs));
    let lease = lock(&state.connections)[0].1.clone();

    // The tenure passes; the coordinator would follow the same leases.
    state.tenure.send_replace(Some(Instant::now()));
    state.follow_all(vec![Some(lease.clone())]);
    assert_eq!(
        *asked.lock().expect("log"),
        [docs.clone(), None],
        "let go, not kept"
    );
    state.follow_all(vec![Some(lease)]);
    assert_eq!(asked.lock().expect("log").len(), 2, "and not connected again");
}

/// Connections the watchdog let go (the tenure ran out) are connected
/// again by the first round that reaches the store, while they are still
/// this process's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_let_go_past_the_tenure_are_taken_back_by_the_next_round() {
    let Some((_schema, _at, mut state, _events)) = on_a_schema() else {
        return;
    };
    let personas = vec![PersonaId::new("docs")];
    let asked = telegram_accounts(&mut state, &personas, || true);
    let docs = Some(Held::Only(personas.iter().cloned().collect()));
    state.round().expect("a round");
    assert_eq!(*asked.lock().expect("log"), std::slice::from_ref(&docs));

    // The tenure ran out: disconnected, once however often it is told.
    hold::let_go_all(&state.connections);
    hold::let_go_all(&state.connections);
    assert_eq!(*asked.lock().expect("log"), [docs.clone(), None]);
    assert!(lock(&state.connections)[0].1.is_empty());
    // A failed call to the store changes nothing more.
    state.failed(&StoreError::Tls {
        url: "postgres://db".into(),
        why: "the network is cut".into(),
    });
    assert_eq!(asked.lock().expect("log").len(), 2);

    // The store answers again and the account is still this process's:
    // connected again.
    state.round().expect("a round");
    assert_eq!(*asked.lock().expect("log"), [docs.clone(), None, docs]);
}

/// The watchdog disconnects the connections when the tenure passes
/// without a renewal, not before (a renewal moves it), whatever the
/// coordinator is doing (here: nothing at all, as when its call to the
/// store hangs on a cut network); it does so again after the next
/// renewal runs out, and ends with the coordinator. Virtual time.
#[tokio::test(start_paused = true)]
async fn the_watchdog_disconnects_when_the_tenure_passes_unrenewed() {
    use tokio::time::{Instant as Virtual, advance};
    let holding = Holding::default();
    let personas = vec![PersonaId::new("docs")];
    let asked = holding_telegram(&holding, &personas, || true);
    let key = account_key("telegram", &personas[0]);
    let lease = Lease {
        key: key.clone(),
        holder: "me".into(),
        epoch: 1,
    };
    let connected = || lock(&holding)[0].1 = BTreeMap::from([(key.clone(), lease.clone())]);
    connected();
    let until = |secs| Some(Virtual::now().into_std() + Duration::from_secs(secs));
    let (tenure, rx) = watch::channel(until(10));
    let watchdog = tokio::spawn(hold::watch_tenure(rx, holding.clone()));
    let begun = Virtual::now();

    // Renewed at 5 s (until 15 s): still connected at 14 s, past the
    // first tenure.
    advance(Duration::from_secs(5)).await;
    tenure.send_replace(until(10));
    advance(Duration::from_secs(9)).await;
    tokio::task::yield_now().await;
    assert!(
        asked.lock().expect("log").is_empty(),
        "disconnected under a renewed tenure"
    );

    // Past 15 s: disconnected.
    advance(Duration::from_secs(2)).await;
    let log = &asked;
    let disconnected = |n: usize| async move {
        for _ in 0..10_000 {
            if log.lock().expect("log").len() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("never disconnected");
    };
    disconnected(1).await;
    assert!(begun.elapsed() >= Duration::from_secs(15));
    assert_eq!(*asked.lock().expect("log"), [None]);
    assert!(lock(&holding)[0].1.is_empty());

    // Connected again by a round that renewed; that tenure running out
    // disconnects again.
    connected();
    tenure.send_replace(until(10));
    advance(Duration::from_secs(11)).await;
    disconnected(2).await;
    assert_eq!(*asked.lock().expect("log"), [None, None]);

    // The coordinator ends: so does the watchdog.
    drop(tenure);
    tokio::time::timeout(Duration::from_secs(1), watchdog)
        .await
        .expect("the watchdog ended")
        .expect("it did not panic");
}

/// A partition taken over brings its rooms' spend with their snapshots:
/// the adoption itself carries what the others spent without it, so no
/// message is decided between the two with that spend counted twice
/// (once from the rooms, once from the store), which refused a call the
/// budget still allowed (seen in CI: `cluster_budget`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_taken_over_comes_with_the_spend_of_the_others_without_it() {
    let Some((schema, at, mut state, mut events)) = on_a_schema() else {
        return;
    };
    let lobby = RoomId::new("lobby");
    let part = partition_of(&lobby);
    // Another process holds lobby's partition, and lobby spent 700.
    schema
        .exec(&format!(
            "INSERT INTO leases (key, holder, epoch, expires_at)
             VALUES ('partition:{part}', 'ghost', 1, now() + interval '1 hour')"
        ))
        .expect("a lease of another's");
    spent(&at, lobby.clone(), 700);
    state.round().expect("a round");
    let told = |events: &mut mpsc::UnboundedReceiver<Event>| {
        let mut seen = Vec::new();
        while let Ok(event) = events.try_recv() {
            match event {
                Event::Adopt(a) => seen.push(format!(
                    "adopt {} with {:?}",
                    a.leases.iter().any(|(p, _)| *p == part),
                    a.spent_elsewhere
                        .iter()
                        .flatten()
                        .map(|s| s.2)
                        .collect::<Vec<_>>()
                )),
                Event::SpentElsewhere(s) => seen.push(format!(
                    "elsewhere {:?}",
                    s.iter().map(|s| s.2).collect::<Vec<_>>()
                )),
                _ => {}
            }
        }
        seen
    };
    assert_eq!(told(&mut events), ["adopt false with [700]"]);

    // Its holder dies: lobby's partition comes with the spend of the
    // others without lobby's, in one event.
    schema
        .exec(&format!(
            "UPDATE leases SET expires_at = now() - interval '1 second' WHERE key = 'partition:{part}'"
        ))
        .expect("runs out");
    state.round().expect("a round");
    assert_eq!(told(&mut events), ["adopt true with []"]);
}

/// A partition handed over takes its rooms' spend to the next holder
/// the moment the engine lets the rooms go (with the `Release`): what the
/// store says they spent is told as another's before that, never after
/// (which left a moment where nobody's count had it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_handed_over_is_counted_as_spent_elsewhere_before_its_rooms_go() {
    let Some((_schema, at, mut state, mut events)) = on_a_schema() else {
        return;
    };
    state.round().expect("a round");
    // A token spent in every partition.
    let mut rooms: BTreeMap<u32, RoomId> = BTreeMap::new();
    for i in 0.. {
        let room = RoomId::new(format!("room{i}"));
        rooms.entry(partition_of(&room)).or_insert(room);
        if rooms.len() == PARTITIONS as usize {
            break;
        }
    }
    for room in rooms.into_values() {
        spent(&at, room, 1);
    }
    while events.try_recv().is_ok() {}
    // Another process joins: half the partitions are handed over.
    let _other = Cluster::join(&at, "other", Duration::from_secs(10)).expect("joins");
    state.round().expect("a round");
    let handed = state.releasing.len() as u64;
    assert!(handed > 0);
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        match event {
            Event::Release(parts, Some(_)) => seen.push(format!("release {}", parts.len())),
            Event::SpentElsewhere(s) => {
                seen.push(format!("elsewhere {}", s.iter().map(|s| s.2).sum::<u64>()))
            }
            _ => {}
        }
    }
    assert_eq!(seen, [format!("elsewhere {handed}"), format!("release {handed}")]);
}

/// A partition lost (this process was stopped or cut off past its
/// lease) takes its rooms' spend to the new holder: this engine is told
/// the others spent it before it lets the rooms go, never after (which
/// left a moment where nobody's count had it, and a call could overspend
/// the budget).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_lost_is_counted_as_spent_elsewhere_before_its_rooms_go() {
    let Some((schema, at, mut state, mut events)) = on_a_schema() else {
        return;
    };
    state.round().expect("a round");
    let lobby = RoomId::new("lobby");
    let part = partition_of(&lobby);
    spent(&at, lobby, 700);
    while events.try_recv().is_ok() {}
    // Another process took lobby's partition while this one was away.
    schema
        .exec(&format!(
            "UPDATE leases SET holder = 'ghost', epoch = epoch + 1, expires_at = now() + interval '1 hour'
             WHERE key = 'partition:{part}'"
        ))
        .expect("taken");
    state.round().expect("a round");
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        match event {
            Event::Release(parts, None) if parts.contains(&part) => seen.push("released".to_owned()),
            Event::SpentElsewhere(s) => {
                seen.push(format!("elsewhere {}", s.iter().map(|s| s.2).sum::<u64>()))
            }
            _ => {}
        }
    }
    assert_eq!(seen, ["elsewhere 700", "released"]);
}
