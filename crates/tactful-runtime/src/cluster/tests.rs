//! The coordinator's rounds against a real database: what is handed to
//! the engine when a partition moves, and how the bot accounts follow
//! their leases.

use tactful_core::Message;

use super::*;

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

/// A platform whose reconnection fails (its saved state could not be
/// read) keeps what it had: the accounts it still listens with are not
/// let go to another process, one it gained is asked for again at the
/// next round, and once it connects the surplus goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_a_platform_could_not_reconnect_without_stay_until_it_can() {
    let Some(schema) = tactful_store::testing::Schema::new() else {
        return;
    };
    let at = schema.location();
    let (engine, _events) = mpsc::unbounded_channel();
    let mut state = state(&at, engine);
    let asked = Arc::new(std::sync::Mutex::new(Vec::<Option<Held>>::new()));
    let works = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (log, ok) = (asked.clone(), works.clone());
    let personas = vec![PersonaId::new("chef"), PersonaId::new("docs")];
    state.connections.push((
        Leased {
            held_by: HeldBy::Accounts {
                platform: "telegram".into(),
                personas: personas.clone(),
            },
            connect: Box::new(move |held| {
                log.lock().expect("log").push(held);
                ok.load(std::sync::atomic::Ordering::SeqCst)
            }),
        },
        BTreeMap::new(),
    ));
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

/// A message handed to the engine whose decision was then refused
/// (the partition's lease ran out first) waits in the inbox: when this
/// process takes the partition anew, it is handed again, not taken for
/// one already in hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_in_hand_when_its_partition_was_lost_is_handed_again_when_retaken() {
    let Some(schema) = tactful_store::testing::Schema::new() else {
        return;
    };
    let at = schema.location();
    let (engine, mut events) = mpsc::unbounded_channel();
    let mut state = state(&at, engine);
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
