//! A store that cannot write is not hidden behind a green `/healthz`:
//! while another process holds the file's write lock, the service reports
//! unhealthy, refuses new messages (giving them back to the sender), keeps
//! trying what it already accepted, and loses none of it once the lock is
//! released.

use crate::common;

use std::io::BufRead;
use std::time::Duration;

use common::{Socket, enter, get, say, spawn};
use futures::StreamExt;
use serde_json::{Value, json};
use tactful_store::Store;
use tokio_tungstenite::tungstenite::Message as Ws;

const CONFIG: &str = r#"
[store]
path = "state.db"

[[persona]]
id = "docs"
name = "Docs"
agent = "main"

[agents.main]
kind = "script"
rules = [{ when = "never-matches-anything", reply = "x" }]

[platforms.web]
listen = "127.0.0.1:0"

[server]
listen = "127.0.0.1:0"
"#;

/// The next event `pick` accepts (20 s at most).
async fn next(ws: &mut Socket, pick: impl Fn(&Value) -> bool) -> Value {
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Some(Ok(Ws::Text(t))) = ws.next().await {
                let v: Value = serde_json::from_str(&t).expect("json");
                if pick(&v) {
                    return v;
                }
            }
        }
    })
    .await
    .expect("the event arrives")
}

fn said(text: &'static str) -> impl Fn(&Value) -> bool {
    move |v| v["type"] == "message" && v["message"]["text"] == text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_write_is_reported_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = dir.path().join("tactful.toml");
    std::fs::write(&cfg, CONFIG).expect("config");
    let mut svc = spawn(&["run", "-c", cfg.to_str().expect("utf-8")]);
    let mut line = String::new();
    svc.out.read_line(&mut line).expect("the health line");
    let server = line
        .split_whitespace()
        .find_map(|w| {
            w.strip_prefix("http://")
                .and_then(|a| a.strip_suffix("/healthz,"))
        })
        .expect("a health URL")
        .to_owned();
    let mut alice = enter(&svc.ws_url, "Alice").await;
    let mut bob = enter(&svc.ws_url, "Bob").await;
    // Bob is in the room (his join, on a socket of its own, may come after
    // Alice's first line: then it is in his history, not said to him).
    next(&mut bob, |v| v["type"] == "history").await;
    say(
        &mut alice,
        json!({ "type": "say", "room": "lobby", "text": "one" }),
    )
    .await;
    next(&mut bob, said("one")).await;
    assert_eq!(get(&server, "/healthz").await, "ok\n");

    // Another process takes the write lock and keeps it.
    let db = dir.path().join("state.db");
    let lock = rusqlite::Connection::open(&db).expect("opens");
    lock.execute_batch("BEGIN IMMEDIATE").expect("locks");
    say(
        &mut alice,
        json!({ "type": "say", "room": "lobby", "text": "two" }),
    )
    .await;
    let mut health = String::new();
    for _ in 0..400 {
        health = get(&server, "/healthz").await;
        if health.starts_with("unhealthy") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(health.contains("the store cannot write"), "{health}");

    // New messages are refused and given back; the one waiting is not shown.
    say(
        &mut alice,
        json!({ "type": "say", "room": "lobby", "text": "three" }),
    )
    .await;
    let refused = next(&mut alice, |v| v["type"] == "error").await;
    assert_eq!(refused["text"], "three", "{refused}");
    assert!(
        refused["message"].as_str().unwrap_or("").contains("cannot save"),
        "{refused}"
    );
    let carol = enter(&svc.ws_url, "Carol").await;
    let history = history_of(carol).await;
    assert_eq!(texts(&history), ["one"], "nothing unsaved is shown");

    // The lock goes: what was accepted is saved and shown, once.
    lock.execute_batch("ROLLBACK").expect("unlocks");
    drop(lock);
    next(&mut bob, said("two")).await;
    for _ in 0..400 {
        if get(&server, "/healthz").await == "ok\n" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(get(&server, "/healthz").await, "ok\n");
    let metrics = get(&server, "/metrics").await;
    assert!(metrics.contains("tactful_refused_total 1"), "{metrics}");
    assert!(metrics.contains("tactful_store_healthy 1"), "{metrics}");
    svc.stop().await;
    let shown = Store::open(&db).expect("opens").shown(10).expect("reads");
    let stored: Vec<&str> = shown.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(stored, ["one", "two"], "accepted means stored; refused means not");
}

async fn history_of(mut ws: Socket) -> Value {
    next(&mut ws, |v| v["type"] == "history").await
}

fn texts(history: &Value) -> Vec<String> {
    history["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter_map(|m| m["text"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
