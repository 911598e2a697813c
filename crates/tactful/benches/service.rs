//! The whole service under load: web room → engine → an instant agent →
//! web room, over real WebSockets, with the SQLite store on.
//!
//! `cargo bench -p tactful --bench service` measures:
//! - reply latency as a person sees it (from sending `@Docs ping N` to the
//!   reply's text arriving), p50/p99/max, at 1,000 messages/s spread over
//!   20 rooms;
//! - the floor this machine allows for the same: a bare WebSocket server
//!   on the same stack (axum, tokio-tungstenite, TCP_NODELAY, the same JSON
//!   frames) that answers each `say` with its `message` at once, driven by
//!   the same 20 clients at the same rate in the same run, and tactful's
//!   p50/p99 as a multiple of its;
//! - a durable floor: the same bare server, but each `say` committed to
//!   SQLite (WAL, `synchronous = NORMAL`, says that queue up merged into
//!   one transaction, checkpoints when idle, as tactful's writer does)
//!   before it is answered: the least a service that keeps what it is told
//!   must do, and tactful's ratio to it;
//! - resident memory per idle room, after 10,000 rooms each heard one
//!   message (handed in twenty chunks, each heard before the next).
//!
//! Under `cargo test`/`cargo nextest` the same code runs as a small smoke
//! test (a few hundred messages, 500 rooms), so the benchmark cannot rot.
//!
//! `TACTFUL_BENCH_STORE_URL=postgres://…` runs it on a PostgreSQL store
//! instead of the SQLite file (a schema of its own in that database is
//! best: `?options=-csearch_path%3Dbench`; the bench's rows stay there).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tactful::config::Config;
use tactful::live::Service;
use tactful_core::Message;
use tokio_tungstenite::tungstenite::Message as Ws;

const CONFIG: &str = r#"
[store]
path = "bench.db"

[[persona]]
id = "docs"
name = "Docs"
agent = "instant"

[agents.instant]
kind = "script"
rules = [{ when = "ping", reply = "pong {text}" }]

[rooms.default]
mode = "mention"
rate_limit = "off"

[platforms.web]
listen = "127.0.0.1:0"
history = 200

[server]
listen = "127.0.0.1:0"
"#;

struct Load {
    rate: u32,
    seconds: u32,
    rooms: usize,
    idle_rooms: usize,
}

mod harness;

fn main() {
    let Some(bench) = harness::mode() else {
        return;
    };
    let load = if bench {
        Load {
            rate: 1_000,
            seconds: 10,
            rooms: 20,
            idle_rooms: 10_000,
        }
    } else {
        Load {
            rate: 200,
            seconds: 2,
            rooms: 5,
            idle_rooms: 500,
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(measure(load, bench));
}

/// One client per room: a socket that joined, and the pings in flight.
type Pending = Arc<Mutex<HashMap<u64, Instant>>>;

async fn measure(load: Load, bench: bool) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tactful.toml");
    let text = match std::env::var("TACTFUL_BENCH_STORE_URL") {
        Ok(url) => CONFIG.replace("path = \"bench.db\"", &format!("url = {url:?}")),
        Err(_) => CONFIG.to_owned(),
    };
    std::fs::write(&path, &text).expect("config");
    let config = Config::parse(&text, &path, &|_| None).expect("valid config");
    let service = Service::start(&config).await.expect("the service starts");
    let web = service.listening.web.expect("the bench config has a web room");
    let ws_url = format!("ws://{web}/ws");

    // -- Latency at a steady rate, against the floor --------------------
    let floor_url = echo_server(None).await;
    let floor = latency(&floor_url, &load, bench).await;
    floor.print("floor (bare echo)", &load);
    let durable_url = echo_server(Some(durable_writer(&dir.path().join("floor.db")))).await;
    let durable = latency(&durable_url, &load, bench).await;
    durable.print("durable floor (one commit a say)", &load);
    let server = service
        .listening
        .server
        .expect("the bench config serves /metrics");
    let before = commits(server).await;
    let tactful = latency(&ws_url, &load, bench).await;
    let after = commits(server).await;
    tactful.print("latency", &load);
    // What each reply waits for a few times: the store's commits.
    let (n, secs) = (after.0 - before.0, after.1 - before.1);
    println!(
        "store: {n:.0} commits while measuring, {:.2} a ping, {:.3} ms each on average",
        n / tactful.total as f64,
        if n > 0.0 { secs * 1000.0 / n } else { 0.0 }
    );
    println!(
        "tactful / floor: p50 {:.1}x, p99 {:.1}x",
        tactful.p50 / floor.p50,
        tactful.p99 / floor.p99
    );
    println!(
        "tactful / durable floor: p50 {:.1}x, p99 {:.1}x",
        tactful.p50 / durable.p50,
        tactful.p99 / durable.p99
    );
    // The memory part asks in room0 (its reader below listens there).
    let (mut tx, mut rx) = connect(&ws_url).await.split();
    let room = "room0".to_owned();
    joined(&mut tx, &mut rx, "asker", &room).await;
    drop(rx);

    // -- Memory per idle room ------------------------------------------
    // Handed in chunks, each heard (a probe after it answered) before the
    // next: handed all at once, the writer's batches in flight at the
    // burst's peak stay in the allocator after they are written, and RSS
    // counted them as rooms (BENCHMARKS.md, 2026-11-26).
    let before = rss_kib();
    let handle = service.handle();
    let ws = connect(&ws_url).await;
    let (mut wtx, mut wrx) = ws.split();
    for v in [
        json!({"type": "hello", "name": "probe"}),
        json!({"type": "join", "room": room.as_str()}),
    ] {
        wtx.send(Ws::Text(v.to_string().into())).await.expect("send");
    }
    let chunk = (load.idle_rooms / 20).max(1);
    for (i, first) in (0..load.idle_rooms).step_by(chunk).enumerate() {
        for r in first..(first + chunk).min(load.idle_rooms) {
            let now = tactful_runtime::wall_clock();
            let m = Message::new(
                format!("idle{r}"),
                format!("idle-room-{r}").as_str(),
                "someone",
                "just chatting",
                now,
            );
            assert!(handle.inbound(m));
        }
        // The engine decides in arrival order: once a ping sent after them
        // is answered, every idle room so far has been heard.
        let n = u64::MAX - 1 - i as u64;
        let say = json!({"type": "say", "room": room.as_str(), "text": format!("@Docs ping {n}"), "mentions": ["docs"]});
        tx.send(Ws::Text(say.to_string().into())).await.expect("send");
        tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(Ok(Ws::Text(t))) = wrx.next().await {
                if t.contains(&format!("pong @Docs ping {n}")) {
                    return;
                }
            }
        })
        .await
        .expect("the probe is answered after the idle rooms");
    }
    let after = rss_kib();
    let per_room = (after.saturating_sub(before)) as f64 * 1024.0 / load.idle_rooms as f64;
    println!(
        "memory: {} idle rooms: RSS {before} KiB -> {after} KiB, {per_room:.0} bytes per room",
        load.idle_rooms
    );
    if bench {
        println!("(store: {})", config.store);
    }
    service.stop().await;
}

/// Reply latencies of one run, in milliseconds.
struct Latency {
    total: u64,
    offered: f64,
    p50: f64,
    p99: f64,
    max: f64,
    /// The worst reply of each second, when measured.
    worst: Vec<f64>,
}

impl Latency {
    fn print(&self, what: &str, load: &Load) {
        println!(
            "{what}: {} pings over {} rooms at {:.0} msg/s: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            self.total, load.rooms, self.offered, self.p50, self.p99, self.max
        );
        if !self.worst.is_empty() {
            let worst: Vec<String> = self.worst.iter().map(|w| format!("{w:.0}")).collect();
            println!("{what}: worst reply each second (ms): {}", worst.join(" "));
        }
    }
}

/// Says hello as `name` and joins `room`; back once the history came.
async fn joined<S, R>(tx: &mut S, rx: &mut R, name: &str, room: &str)
where
    S: futures::Sink<Ws> + Unpin,
    S::Error: std::fmt::Debug,
    R: futures::Stream<Item = Result<Ws, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    for v in [
        json!({"type": "hello", "name": name}),
        json!({"type": "join", "room": room}),
    ] {
        tx.send(Ws::Text(v.to_string().into())).await.expect("send");
    }
    loop {
        let Some(Ok(Ws::Text(t))) = rx.next().await else {
            panic!("the server closed the connection");
        };
        let v: Value = serde_json::from_str(&t).expect("json");
        if v["type"] == "history" {
            break;
        }
    }
}

/// `load.rate` pings a second for `load.seconds` over `load.rooms`
/// clients of the web room at `ws_url`, each timed until its `pong`.
async fn latency(ws_url: &str, load: &Load, bench: bool) -> Latency {
    let pending: Pending = Arc::default();
    // (ping number, latency): the number says when in the run it was sent.
    let latencies: Arc<Mutex<Vec<(u64, Duration)>>> = Arc::default();
    let mut senders = Vec::new();
    let mut readers = Vec::new();
    for r in 0..load.rooms {
        let ws = connect(ws_url).await;
        let (mut tx, mut rx) = ws.split();
        let room = format!("room{r}");
        joined(&mut tx, &mut rx, &format!("load{r}"), &room).await;
        let (pending, latencies) = (pending.clone(), latencies.clone());
        readers.push(tokio::spawn(async move {
            while let Some(Ok(Ws::Text(t))) = rx.next().await {
                let v: Value = serde_json::from_str(&t).expect("json");
                let text = match v["type"].as_str() {
                    Some("message") => v["message"]["text"].as_str(),
                    Some("edit") => v["text"].as_str(),
                    _ => None,
                };
                let Some(n) = text
                    .and_then(|t| t.strip_prefix("pong "))
                    .and_then(|t| t.rsplit(' ').next())
                    .and_then(|n| n.parse::<u64>().ok())
                else {
                    continue;
                };
                if let Some(sent) = pending.lock().expect("lock").remove(&n) {
                    latencies.lock().expect("lock").push((n, sent.elapsed()));
                }
            }
        }));
        senders.push((tx, room));
    }
    let total = u64::from(load.rate) * u64::from(load.seconds);
    let mut tick = tokio::time::interval(Duration::from_secs(1) / load.rate);
    let started = Instant::now();
    for n in 0..total {
        tick.tick().await;
        let (tx, room) = &mut senders[n as usize % load.rooms];
        let say =
            json!({"type": "say", "room": room, "text": format!("@Docs ping {n}"), "mentions": ["docs"]});
        pending.lock().expect("lock").insert(n, Instant::now());
        tx.send(Ws::Text(say.to_string().into())).await.expect("send");
    }
    let sending = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pending.lock().expect("lock").is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let missing = pending.lock().expect("lock").len();
    assert_eq!(missing, 0, "{missing} of {total} pings got no reply within 30 s");
    for r in readers {
        r.abort();
    }
    let by_ping = latencies.lock().expect("lock").clone();
    let mut lat: Vec<Duration> = by_ping.iter().map(|(_, d)| *d).collect();
    lat.sort();
    let pct = |p: f64| ms(lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)]);
    // Where in the run the slow replies were: the worst of each second.
    let worst = if bench {
        (0..load.seconds)
            .map(|sec| {
                let in_second = |(n, _): &&(u64, Duration)| *n / u64::from(load.rate) == u64::from(sec);
                by_ping
                    .iter()
                    .filter(in_second)
                    .map(|(_, d)| ms(*d))
                    .fold(0.0, f64::max)
            })
            .collect()
    } else {
        Vec::new()
    };
    Latency {
        total,
        offered: total as f64 / sending.as_secs_f64(),
        p50: pct(0.50),
        p99: pct(0.99),
        max: ms(*lat.last().expect("replies")),
        worst,
    }
}

/// The floor: a WebSocket server on the web room's own stack (axum's
/// WebSocket over tokio-tungstenite, TCP_NODELAY on), reading each frame
/// as JSON and answering a `join` with a `history` and a `say` with the
/// `message` tactful would send, at once: the JSON, framing and scheduling
/// every reply pays, without deciding anything. Its URL.
/// Where the durable floor's says are committed; each is answered once
/// its transaction is.
type Writer = std::sync::mpsc::Sender<(String, tokio::sync::oneshot::Sender<()>)>;

async fn echo_server(durable: Option<Writer>) -> String {
    use axum::extract::ws::{Message as AxumWs, WebSocket, WebSocketUpgrade};
    use axum::serve::ListenerExt as _;
    async fn session(mut socket: WebSocket, durable: Option<Writer>) {
        while let Some(Ok(AxumWs::Text(t))) = socket.recv().await {
            let Ok(v) = serde_json::from_str::<Value>(&t) else {
                continue;
            };
            let text = v["text"].as_str().unwrap_or_default();
            let answer = match v["type"].as_str() {
                Some("join") => json!({"type": "history", "room": v["room"], "members": [], "messages": []}),
                Some("say") => json!({"type": "message", "room": v["room"], "message": {
                    "id": "w1", "sender": {"id": "docs", "name": "Docs", "bot": true},
                    "text": format!("pong {text}"),
                    "reply_to": null, "time": 0}}),
                _ => continue,
            };
            if let Some(writer) = durable.as_ref().filter(|_| v["type"] == "say") {
                let (done, committed) = tokio::sync::oneshot::channel();
                writer.send((text.to_owned(), done)).expect("the floor's writer");
                committed.await.expect("committed");
            }
            if socket
                .send(AxumWs::Text(answer.to_string().into()))
                .await
                .is_err()
            {
                return;
            }
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let app = axum::Router::new().route(
        "/ws",
        axum::routing::get(move |ws: WebSocketUpgrade| async move {
            ws.read_buffer_size(tactful_web::READ_BUFFER)
                .on_upgrade(move |socket| session(socket, durable))
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("ws://{addr}/ws")
}

/// The durable floor's writer: a thread that commits what queued up in
/// one transaction and answers each say after, on a SQLite file set up as
/// tactful's store is (1 KiB pages, WAL, `synchronous = NORMAL`, the
/// checkpoints run by the writer when nothing waits, at least every 1,024
/// commits).
fn durable_writer(path: &std::path::Path) -> Writer {
    let mut conn = rusqlite::Connection::open(path).expect("the floor's file");
    conn.execute_batch(
        "PRAGMA page_size = 1024; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         PRAGMA wal_autocheckpoint = 0; CREATE TABLE said (text TEXT NOT NULL);",
    )
    .expect("the floor's schema");
    let (tx, rx) = std::sync::mpsc::channel::<(String, tokio::sync::oneshot::Sender<()>)>();
    std::thread::spawn(move || {
        let mut commits = 0u32;
        let mut next = None;
        while let Some(first) = next.take().or_else(|| rx.recv().ok()) {
            let mut batch = vec![first];
            batch.extend(rx.try_iter());
            let t = conn.transaction().expect("begin");
            for (text, _) in &batch {
                t.execute("INSERT INTO said (text) VALUES (?1)", [text])
                    .expect("insert");
            }
            t.commit().expect("commit");
            for (_, done) in batch {
                let _ = done.send(());
            }
            commits += 1;
            if commits >= 64 {
                next = rx.try_recv().ok();
                if next.is_none() || commits >= 1024 {
                    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                    commits = 0;
                }
            }
        }
    });
    tx
}

/// `tactful_store_commits_total` and `tactful_store_commit_seconds_total`
/// from the service's `/metrics`.
async fn commits(server: std::net::SocketAddr) -> (f64, f64) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(server).await.expect("/metrics");
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        .await
        .expect("ask /metrics");
    let mut text = String::new();
    conn.read_to_string(&mut text).await.expect("read /metrics");
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics"))
    };
    (
        value("tactful_store_commits_total"),
        value("tactful_store_commit_seconds_total"),
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Resident set size of this process, from `/proc/self/status`.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Opens the room's WebSocket as its page would (with its origin), Nagle
/// off as the room itself has it.
async fn connect(
    ws_url: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = ws_url.into_client_request().expect("a ws:// URL");
    let origin = ws_url
        .replacen("ws://", "http://", 1)
        .trim_end_matches("/ws")
        .to_owned();
    req.headers_mut()
        .insert("origin", origin.parse().expect("header"));
    // The clients read as the web room does (its read buffer): at
    // tungstenite's default every read zero-fills 128 KiB, and the clients'
    // memsets took the cores the service and the floor are measured on.
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(tactful_web::READ_BUFFER);
    tokio_tungstenite::connect_async_with_config(req, Some(config), true)
        .await
        .expect("connect")
        .0
}
