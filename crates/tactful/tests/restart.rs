//! `tactful run` killed with SIGKILL in the middle of a conversation and
//! started again on the same store: the transcript is intact, no reply is
//! lost or sent twice, and an ambient buffer that was waiting still
//! flushes.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{Socket, bot_messages, enter, id_of, say, spawn};
use futures::StreamExt;
use serde_json::{Value, json};
use tactful_store::{LoadLimits, Location, Restored, Store};
use tokio_tungstenite::tungstenite::Message as Ws;

/// Host answers at once; Slow thinks for `{SLOW}` ms; Guide listens in
/// ambient mode and answers questions in a batch 5 s after the first.
const CONFIG: &str = r#"
[store]
{STORE}

[[persona]]
id = "host"
name = "Host"
agent = "host"

[[persona]]
id = "slow"
name = "Slow"
agent = "slow"

[[persona]]
id = "guide"
name = "Guide"
agent = "guide"

[agents.host]
kind = "script"
rules = [{ when = "", reply = "[[reply_to:{msg_id}]]\nHost answers {msg_id}." }]

[agents.slow]
kind = "script"
rules = [{ when = "", reply = "[[reply_to:{msg_id}]]\nSlow answers {msg_id}.", delay_ms = {SLOW} }]

[agents.guide]
kind = "script"
rules = [{ when = "\\?", reply = "[[reply_to:{msg_id}]]\nGuide answers {msg_id}." }]

[rooms.default]
mode = "mention"

[rooms.default.personas.guide]
mode = "ambient"

[rooms.default.personas.guide.ambient]
flush_seconds = 5
jitter = 0

[platforms.web]
listen = "127.0.0.1:0"
"#;

/// The config with its store at `at`.
fn write_config(dir: &Path, name: &str, slow_ms: u64, at: &Location) -> String {
    let store = match at {
        Location::Postgres(url) => format!("url = {url:?}"),
        _ => format!("path = {:?}", at.to_string()),
    };
    let path = dir.join(name);
    std::fs::write(
        &path,
        CONFIG
            .replace("{SLOW}", &slow_ms.to_string())
            .replace("{STORE}", &store),
    )
    .expect("config");
    path.to_str().expect("utf-8").to_owned()
}

/// Reads the store (from outside the process, as WAL allows) until `ready`
/// holds: 10 s at most.
async fn store_until(at: &Location, what: &str, ready: impl Fn(&Restored) -> bool) {
    let limits = LoadLimits {
        history: 50,
        own_ids: 50,
    };
    for _ in 0..200 {
        if let Ok(restored) = Store::open_at(at).and_then(|mut s| s.load(limits))
            && ready(&restored)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the store never showed {what}");
}

/// The `history` a join answers with.
async fn history(ws_url: &str) -> Vec<Value> {
    let mut ws: Socket = enter(ws_url, "Reader").await;
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(Ok(Ws::Text(t))) = ws.next().await {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "history" {
                    return v["messages"].as_array().cloned().unwrap_or_default();
                }
            }
        }
    })
    .await
    .expect("a history event")
}

fn by(messages: &[Value], name: &str) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["sender"]["name"] == name)
        .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_service_restarts_with_nothing_lost_or_doubled() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = Location::File(dir.path().join("state.db"));
    killed_and_restarted(dir.path(), &db).await;
}

/// The same on PostgreSQL: what a restart needs is in the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_service_restarts_from_postgres_with_nothing_lost_or_doubled() {
    let Some(schema) = tactful_store::testing::Schema::new() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    killed_and_restarted(dir.path(), &schema.location()).await;
}

async fn killed_and_restarted(dir: &Path, db: &Location) {
    let first = write_config(dir, "first.toml", 600_000, db);
    let mut svc = spawn(&["run", "-c", &first]);
    let mut ws = enter(&svc.ws_url, "Alice").await;

    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Host hello", "mentions": ["host"] }),
    )
    .await;
    let hello = id_of(&mut ws, "@Host hello").await;
    let got = bot_messages(&mut ws, |got| !got.is_empty()).await;
    assert_eq!(got[0]["text"], format!("Host answers {hello}."));

    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "anyone know where the FAQ is?" }),
    )
    .await;
    let question = id_of(&mut ws, "anyone know where the FAQ is?").await;
    store_until(db, "the guide's ambient buffer", |r| {
        r.rooms.iter().any(|room| {
            room.snapshot.as_ref().is_some_and(|s| {
                s.members
                    .iter()
                    .any(|m| m.ambient.iter().any(|id| id.as_str() == question))
            })
        })
    })
    .await;

    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Slow ponder this", "mentions": ["slow"] }),
    )
    .await;
    let ponder = id_of(&mut ws, "@Slow ponder this").await;
    store_until(db, "Slow's turn running", |r| {
        r.pending.iter().any(|t| t.turn.persona.as_str() == "slow")
    })
    .await;

    // No warning, no shutdown: SIGKILL.
    svc.child.kill().expect("SIGKILL");
    svc.child.wait().expect("reaped");
    drop(ws);

    // Slow's backend is fixed while the service is down.
    let second = write_config(dir, "second.toml", 0, db);
    let svc = spawn(&["run", "-c", &second]);
    let before = history(&svc.ws_url).await;
    assert_eq!(
        by(&before, "Alice"),
        [
            "@Host hello",
            "anyone know where the FAQ is?",
            "@Slow ponder this"
        ],
        "people's messages survived"
    );
    assert_eq!(by(&before, "Host"), [format!("Host answers {hello}.")]);

    // The waiting batch flushes, the interrupted turn is asked again; each
    // reply arrives once, as a reply to its message. (Either may come before
    // anyone reconnects, so the room's history is what counts.)
    let mut replied = Vec::new();
    for _ in 0..100 {
        replied = history(&svc.ws_url).await;
        if !by(&replied, "Guide").is_empty() && !by(&replied, "Slow").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let reply_of = |name: &str| -> Vec<(String, String)> {
        replied
            .iter()
            .filter(|m| m["sender"]["name"] == name)
            .map(|m| {
                (
                    m["text"].as_str().unwrap_or_default().to_owned(),
                    m["reply_to"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(
        reply_of("Guide"),
        [(format!("Guide answers {question}."), question.clone())]
    );
    assert_eq!(
        reply_of("Slow"),
        [(format!("Slow answers {ponder}."), ponder.clone())]
    );

    let mut ws = enter(&svc.ws_url, "Alice").await;
    // One more exchange after the restart: ids continue, nothing repeats.
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Host again", "mentions": ["host"] }),
    )
    .await;
    let again = id_of(&mut ws, "@Host again").await;
    assert_ne!(again, hello, "new messages get new ids");
    bot_messages(&mut ws, |got| got.iter().any(|m| m["reply_to"] == again.as_str())).await;

    let after = history(&svc.ws_url).await;
    assert_eq!(
        by(&after, "Host"),
        [format!("Host answers {hello}."), format!("Host answers {again}.")]
    );
    assert_eq!(by(&after, "Guide"), [format!("Guide answers {question}.")]);
    assert_eq!(by(&after, "Slow"), [format!("Slow answers {ponder}.")]);
    svc.stop().await;
}

/// A reply gate that said SKIP is done: nothing of it is left to resume,
/// so a restart does not answer the messages it held back (before, each
/// finished gate stayed "running" in the store and every restart answered
/// all of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_that_said_skip_is_not_asked_again_after_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = common::free_port();
    let config = format!(
        r#"
[store]
path = "state.db"

[[persona]]
id = "scout"
name = "Scout"
agent = "main"

[agents.main]
kind = "script"
rules = [{{ when = "", reply = "Scout answers {{msg_id}}." }}]

[agents.gatekeeper]
kind = "script"
rules = [{{ when = "", reply = "SKIP" }}]

[rooms.default]
mode = "all"
reply_gate = {{ enabled = true, agent = "gatekeeper" }}

[platforms.web]
listen = "127.0.0.1:{port}"
"#
    );
    let store = Location::File(dir.path().join("state.db"));
    let (tactful, logs) = common::run_tactful_logged(dir.path(), &config, &[]);
    logs.wait_for("the banner", |l| l.contains(&format!("127.0.0.1:{port}")));
    let mut ws = enter(&format!("ws://127.0.0.1:{port}/ws"), "Alice").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "how is everyone" }),
    )
    .await;
    // The gate's SKIP is stored...
    let decided = || {
        tactful_store::Reader::open(&store)
            .and_then(|r| r.decisions("lobby", None, 10))
            .is_ok_and(|d| d.iter().any(|d| d.reason == "gate_skip"))
    };
    for _ in 0..200 {
        if decided() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(decided(), "the gate said SKIP");
    // ...and with it, the gate's turn is over.
    store_until(&store, "no turn pending", |r| r.pending.is_empty()).await;

    drop(tactful);
    let (_tactful, logs) = common::run_tactful_logged(dir.path(), &config, &[]);
    let restored = logs.wait_for("the restore", |l| l.contains("restored from the store"));
    assert!(restored.contains("resumed=0"), "{restored}");
}
