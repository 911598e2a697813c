//! Before-send hooks in the live service: a command hook between the agent
//! and the web room rewrites one reply and holds another back, the room
//! never sees the text the hook replaced (not even while it streams), and
//! the persona's line on the message names the hook and its reason.

use crate::common;

use std::time::Duration;

use common::{enter, say, spawn};
use futures::StreamExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message as Ws;

const HOOK: &str = r#"import json, sys
reply = json.load(sys.stdin)
if "lottery" in reply["text"]:
    print(json.dumps({"action": "cancel", "reason": "off topic here"}))
else:
    print(json.dumps({"action": "replace", "text": reply["text"].upper() + " (" + reply["persona"] + ")"}))
"#;

const CONFIG: &str = r#"
[[persona]]
id = "docs"
name = "Docs"
agent = "main"

[agents.main]
kind = "script"
rules = [
  { when = "(?i)luck", reply = "Buy a lottery ticket!" },
  { when = "(?i)reset", reply = "hold the button for five seconds" },
]

[[hook]]
name = "review"
on = "before_send"
kind = "command"
command = "python3"
args = ["hook.py"]
on_error = "cancel"

[platforms.web]
listen = "127.0.0.1:0"

[runtime]
edit_interval_ms = 10
shutdown_grace_seconds = 5
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_hook_rewrites_and_holds_back_replies_in_the_web_room() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("hook.py"), HOOK).expect("hook");
    let cfg = dir.path().join("tactful.toml");
    std::fs::write(&cfg, CONFIG).expect("config");
    let svc = spawn(&["run", "-c", cfg.to_str().expect("utf-8")]);
    let mut ws = enter(&svc.ws_url, "Alice").await;

    // Held back: no message, and Docs' line says which hook and why.
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Docs wish me luck" }),
    )
    .await;
    let line = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let Some(Ok(Ws::Text(t))) = ws.next().await else {
                continue;
            };
            let v: serde_json::Value = serde_json::from_str(&t).expect("json");
            assert!(
                !(v["type"] == "message" && v["message"]["text"].as_str().unwrap_or("").contains("lottery")),
                "the cancelled reply reached the room: {v}"
            );
            let text = v["why"]["text"].as_str().unwrap_or_default();
            if v["type"] == "why" && text.starts_with("held back") {
                return text.to_owned();
            }
        }
    })
    .await
    .expect("Docs says why it held its reply back");
    assert_eq!(line, "held back by hook `review`: off topic here");

    // Rewritten: the room sees the hook's text only, never the agent's,
    // not even in a streaming edit of the placeholder.
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Docs how do I reset?" }),
    )
    .await;
    let mut shown = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while !shown.iter().any(|t: &String| t.starts_with("HOLD")) {
            let Some(Ok(Ws::Text(t))) = ws.next().await else {
                continue;
            };
            let v: serde_json::Value = serde_json::from_str(&t).expect("json");
            if v["type"] == "message" && v["message"]["sender"]["bot"] == true {
                shown.extend(v["message"]["text"].as_str().map(str::to_owned));
            } else if v["type"] == "edit" {
                shown.extend(v["text"].as_str().map(str::to_owned));
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the rewritten reply arrives: {shown:?}"));
    assert!(
        shown
            .iter()
            .all(|t| t == "…" || t == "HOLD THE BUTTON FOR FIVE SECONDS (docs)"),
        "{shown:?}"
    );
    svc.stop().await;
}
