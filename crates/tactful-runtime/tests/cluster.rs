//! Several runtimes sharing one PostgreSQL store, as several processes
//! would: the rooms are spread over them, a message heard by all of them
//! is decided and answered once, and a process cut off past its lease
//! loses its rooms to the others, which answer there, while what it was
//! doing there is never posted. (`crates/tactful/tests/cluster.rs` does
//! the same with real processes, `kill -9` and `SIGSTOP`.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_agents::{Agent, AgentError, AgentReply, Deltas};
use tactful_core::{EngineConfig, Message, MsgId, PersonaSpec, RoomId, TurnRequest};
use tactful_runtime::{
    Capabilities, ClusterConfig, DeliveryConfig, OutMessage, Platform, Runtime, RuntimeConfig, Sent, Store,
    TraceEvent, wall_clock,
};
use tactful_store::testing::Schema;
use tactful_store::{Location, partition_of};
use tokio::sync::{mpsc, watch};

/// How long a test waits for what must happen before calling it a failure.
const PATIENCE: Duration = Duration::from_secs(60);
/// Short leases, so a takeover happens within the test.
const LEASE: Duration = Duration::from_secs(2);

/// Records what each process posted, by room.
#[derive(Debug, Default)]
struct Posts {
    sent: Mutex<Vec<(String, String)>>,
    next: AtomicU64,
}

impl Posts {
    fn in_room(&self, room: &str) -> Vec<String> {
        let sent = self.sent.lock().expect("lock");
        sent.iter()
            .filter(|(r, _)| r == room)
            .map(|(_, t)| t.clone())
            .collect()
    }

    fn rooms(&self) -> usize {
        let sent = self.sent.lock().expect("lock");
        let mut rooms: Vec<&String> = sent.iter().map(|(r, _)| r).collect();
        rooms.sort();
        rooms.dedup();
        rooms.len()
    }
}

impl Platform for Posts {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            native_replies: true,
            max_message_chars: 2000,
            ..Capabilities::PLAIN
        }
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async move {
            self.sent
                .lock()
                .expect("lock")
                .push((msg.room.to_string(), msg.text.to_owned()));
            Ok(MsgId::new(format!(
                "p{}",
                self.next.fetch_add(1, Ordering::SeqCst)
            )))
        })
    }
}

/// Answers "ok <trigger text>"; a message saying "slow" is answered only
/// once the test opens `gate`.
#[derive(Debug)]
struct Answers {
    gate: watch::Receiver<bool>,
    started: mpsc::UnboundedSender<String>,
}

impl Agent for Answers {
    fn run<'a>(
        &'a self,
        turn: &'a TurnRequest,
        _: &'a mut dyn Deltas,
    ) -> BoxFuture<'a, Result<AgentReply, AgentError>> {
        Box::pin(async move {
            let text = turn
                .triggers
                .last()
                .map(|e| e.text.to_string())
                .unwrap_or_default();
            let _ = self.started.send(text.clone());
            if text.contains("slow") {
                let mut gate = self.gate.clone();
                let _ = gate.wait_for(|open| *open).await;
            }
            Ok(AgentReply::text(format!("ok {text}")))
        })
    }
}

struct Process {
    runtime: Runtime,
    posts: Arc<Posts>,
    started: mpsc::UnboundedReceiver<String>,
}

/// Trace events of every process, tagged with its index.
type Traces = mpsc::UnboundedReceiver<(usize, TraceEvent)>;

fn start(
    at: &Location,
    i: usize,
    merged: &mpsc::UnboundedSender<(usize, TraceEvent)>,
    gate: &watch::Receiver<bool>,
) -> Process {
    let posts = Arc::new(Posts::default());
    let (started_tx, started) = mpsc::unbounded_channel();
    let mut agents: HashMap<String, Arc<dyn Agent>> = HashMap::new();
    agents.insert(
        "a".into(),
        Arc::new(Answers {
            gate: gate.clone(),
            started: started_tx,
        }),
    );
    let (trace_tx, mut trace) = mpsc::unbounded_channel();
    let merged = merged.clone();
    tokio::spawn(async move {
        while let Some(e) = trace.recv().await {
            let _ = merged.send((i, e));
        }
    });
    let runtime = Runtime::start(
        RuntimeConfig {
            engine: EngineConfig {
                personas: vec![PersonaSpec::new("docs", "a")],
                ..Default::default()
            },
            agents,
            delivery: DeliveryConfig {
                edit_interval: Duration::ZERO,
                placeholder: "…".into(),
            },
            shutdown_grace: Duration::from_secs(5),
            store: Some(Store::open_at(at).expect("store opens")),
            max_concurrent_turns: 16,
            hooks: Default::default(),
            cluster: Some(ClusterConfig {
                lease: LEASE,
                about: format!("p{i}"),
            }),
        },
        vec![posts.clone() as Arc<dyn Platform>],
        Some(trace_tx),
    )
    .expect("runtime starts");
    Process {
        runtime,
        posts,
        started,
    }
}

/// Reads traces until `done` says the state seen so far is the one
/// awaited: partitions held and replies delivered, per process.
async fn until(traces: &mut Traces, seen: &mut Seen, what: &str, done: impl Fn(&Seen) -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !done(seen) {
        match tokio::time::timeout_at(deadline, traces.recv()).await {
            Ok(Some((i, event))) => seen.note(i, event),
            _ => panic!("waited {PATIENCE:?} for {what}; saw {seen:?}"),
        }
    }
}

#[derive(Debug, Default)]
struct Seen {
    held: HashMap<usize, usize>,
    delivered: HashMap<usize, usize>,
    busy: HashMap<usize, usize>,
}

impl Seen {
    fn note(&mut self, i: usize, event: TraceEvent) {
        match event {
            TraceEvent::Partitions { held } => {
                self.held.insert(i, held);
            }
            TraceEvent::Delivered { .. } => *self.delivered.entry(i).or_default() += 1,
            TraceEvent::Busy { work } => {
                self.busy.insert(i, work);
            }
            _ => {}
        }
    }

    fn held(&self, i: usize) -> usize {
        self.held.get(&i).copied().unwrap_or(0)
    }

    /// Whether process `i` has no work in progress (it reports changes
    /// only: one that never had any never said so).
    fn idle(&self, i: usize) -> bool {
        self.busy.get(&i).copied().unwrap_or(0) == 0
    }

    fn delivered(&self) -> usize {
        self.delivered.values().sum()
    }

    fn settled(&self, n: usize) -> bool {
        let held: Vec<usize> = (0..n).map(|i| self.held(i)).collect();
        held.iter().sum::<usize>() == 256 && held.iter().all(|&h| h.abs_diff(256 / n) <= 1)
    }
}

fn ask(id: &str, room: &str, text: &str) -> Message {
    Message::new(id, room, "alice", text, wall_clock())
}

/// Which process (by its `about`) holds `room`'s partition.
fn owner(schema: &Schema, room: &str) -> String {
    let part = partition_of(&RoomId::new(room));
    schema
        .column(&format!(
            "SELECT m.about FROM leases l JOIN members m ON m.id = l.holder
             WHERE l.key = 'partition:{part}' AND l.expires_at > now()"
        ))
        .expect("asks")
        .into_iter()
        .flatten()
        .next()
        .unwrap_or_default()
}

fn count(schema: &Schema, sql: &str) -> i64 {
    schema.column(sql).expect("counts")[0]
        .as_deref()
        .unwrap_or("0")
        .parse()
        .expect("a number")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_share_the_rooms_and_decide_each_message_once() {
    let Some(schema) = Schema::new() else { return };
    let at = schema.location();
    let (merged, mut traces) = mpsc::unbounded_channel();
    let (_gate, closed) = watch::channel(false);
    let procs: Vec<Process> = (0..3).map(|i| start(&at, i, &merged, &closed)).collect();
    let mut seen = Seen::default();
    until(&mut traces, &mut seen, "the partitions shared out", |s| {
        s.settled(3)
    })
    .await;

    // Every process hears every message (one event seen three times, or a
    // platform's redelivery): each is decided and answered once.
    let rooms: Vec<String> = (0..30).map(|i| format!("room{i}")).collect();
    for (i, room) in rooms.iter().enumerate() {
        for p in &procs {
            assert!(
                p.runtime
                    .handle()
                    .inbound(ask(&format!("m{i}"), room, &format!("@docs question {i}")))
            );
        }
    }
    until(&mut traces, &mut seen, "30 replies", |s| s.delivered() >= 30).await;
    // Quiet everywhere: nothing more to come.
    until(&mut traces, &mut seen, "every process idle", |s| {
        (0..3).all(|i| s.idle(i))
    })
    .await;
    for (i, room) in rooms.iter().enumerate() {
        let posts: Vec<String> = procs.iter().flat_map(|p| p.posts.in_room(room)).collect();
        assert_eq!(posts, [format!("ok @docs question {i}")], "{room}: answered once");
    }
    let spread: Vec<usize> = procs.iter().map(|p| p.posts.rooms()).collect();
    assert!(
        spread.iter().all(|&n| n > 0),
        "every process answered in some room: {spread:?}"
    );
    assert_eq!(
        count(&schema, "SELECT count(*) FROM decisions WHERE msg LIKE 'm%'"),
        30,
        "one decision per message"
    );
    assert_eq!(count(&schema, "SELECT count(*) FROM inbox WHERE NOT decided"), 0);
    assert_eq!(
        count(
            &schema,
            "SELECT count(DISTINCT id) FROM messages WHERE persona = 'docs'"
        ),
        30,
        "reply ids never collide across processes"
    );
    for p in procs {
        p.runtime.shutdown().await;
    }
    assert_eq!(
        count(&schema, "SELECT count(*) FROM leases WHERE holder IS NOT NULL"),
        0,
        "stopping lets every lease go at once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_cut_off_past_its_lease_loses_its_rooms_and_posts_nothing_there() {
    let Some(schema) = Schema::new() else { return };
    let at = schema.location();
    let (merged, mut traces) = mpsc::unbounded_channel();
    let (gate, closed) = watch::channel(false);
    let mut procs: Vec<Process> = (0..2).map(|i| start(&at, i, &merged, &closed)).collect();
    let mut seen = Seen::default();
    until(&mut traces, &mut seen, "the partitions shared out", |s| {
        s.settled(2)
    })
    .await;
    let room = (0..)
        .map(|i| format!("team{i}"))
        .find(|r| owner(&schema, r) == "p0")
        .expect("some room is p0's");

    // Received by p1, decided and answered by p0, the owner.
    assert!(procs[1].runtime.handle().inbound(ask("a1", &room, "@docs hello")));
    until(&mut traces, &mut seen, "the first reply", |s| s.delivered() >= 1).await;
    assert_eq!(procs[0].posts.in_room(&room), ["ok @docs hello"]);
    assert_eq!(procs[0].started.recv().await.as_deref(), Some("@docs hello"));

    // p0 starts on a slow question, then is cut off past its lease (as a
    // stopped process or a network cut leaves it).
    assert!(
        procs[1]
            .runtime
            .handle()
            .inbound(ask("a2", &room, "@docs slow one"))
    );
    let started = tokio::time::timeout(PATIENCE, procs[0].started.recv()).await;
    assert_eq!(started.ok().flatten().as_deref(), Some("@docs slow one"));
    schema
        .exec(
            "UPDATE leases SET expires_at = now() - interval '1 second'
             WHERE holder = (SELECT id FROM members WHERE about = 'p0');
             UPDATE members SET seen_at = now() - interval '1 hour' WHERE about = 'p0'",
        )
        .expect("cut off");
    // p0 finds it lost its leases and hands the rooms over; whoever takes
    // the room next (p1, or p0 again under a new epoch) asks again.
    until(&mut traces, &mut seen, "p0 losing its rooms", |s| s.held(0) == 0).await;
    let (p0, p1) = procs.split_at_mut(1);
    let again = tokio::select! {
        a = p0[0].started.recv() => a,
        a = p1[0].started.recv() => a,
        () = tokio::time::sleep(PATIENCE) => None,
    };
    assert_eq!(
        again.as_deref(),
        Some("@docs slow one"),
        "the new owner asks again"
    );
    // Every call may end now, p0's first one included (if it were still
    // running): only the new owner's answer is posted.
    gate.send_replace(true);
    until(&mut traces, &mut seen, "the slow reply", |s| s.delivered() >= 2).await;

    // p0 is back among the members (its heartbeats go on): the rooms are
    // shared again, and the room goes on being answered once.
    until(&mut traces, &mut seen, "the partitions shared again", |s| {
        s.settled(2)
    })
    .await;
    assert!(
        procs[1]
            .runtime
            .handle()
            .inbound(ask("a3", &room, "@docs still there?"))
    );
    until(&mut traces, &mut seen, "the third reply", |s| s.delivered() >= 3).await;
    until(&mut traces, &mut seen, "every process idle", |s| {
        (0..2).all(|i| s.idle(i))
    })
    .await;
    let posts: Vec<String> = procs.iter().flat_map(|p| p.posts.in_room(&room)).collect();
    assert_eq!(posts.len(), 3, "each answered once: {posts:?}");
    assert_eq!(
        posts.iter().filter(|t| t.contains("slow")).count(),
        1,
        "{posts:?}"
    );
    assert_eq!(
        count(
            &schema,
            &format!("SELECT count(*) FROM decisions WHERE room = '{room}' AND msg LIKE 'a%'")
        ),
        3
    );
    for p in procs.drain(..) {
        p.runtime.shutdown().await;
    }
}

/// What a platform writes about a room (the web room's decision notes,
/// which the other processes' web rooms are told of) carries the room's
/// lease: once another process has taken the room's partition, a note this
/// process still makes there is refused, never announced. The runtime's
/// plain saver, which the notes went through before, writes it all the
/// same, and the other processes' people saw a decision the store refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_note_about_a_room_this_process_lost_is_refused_not_announced() {
    let Some(schema) = Schema::new() else { return };
    let at = schema.location();
    let (merged, mut traces) = mpsc::unbounded_channel();
    let (_gate, closed) = watch::channel(false);
    let p = start(&at, 0, &merged, &closed);
    let mut seen = Seen::default();
    until(&mut traces, &mut seen, "every partition held", |s| s.settled(1)).await;
    let h = p.runtime.handle();
    let room = RoomId::new("lobby");
    let note = || {
        vec![tactful_store::Op::ShownNote {
            room: room.clone(),
            id: MsgId::new("w1"),
            note: "{}".to_owned(),
        }]
    };
    let held = h.saver_for(&room).expect("the room's partition is held here");
    assert_eq!(held.save(note()).await, Ok(()), "written while the room is held");

    // Another process takes the partition over (its epoch moves on), before
    // this one has noticed.
    let part = partition_of(&room);
    schema
        .exec(&format!(
            "UPDATE leases SET holder = NULL, epoch = epoch + 1 WHERE key = 'partition:{part}'"
        ))
        .expect("the lease moves");
    // Refused, or (once the process has noticed) nothing to write with.
    if let Some(saver) = h.saver_for(&room) {
        let refused = saver.save(note()).await;
        assert!(
            matches!(refused, Err(tactful_runtime::NotSaved::Fenced(_))),
            "a note about a room lost is refused: {refused:?}"
        );
    }
    // What the notes used before: no fence, so it was written and announced.
    let unfenced = h.saver().expect("a store").clone();
    assert_eq!(unfenced.save(note()).await, Ok(()));
    p.runtime.shutdown().await;
}
