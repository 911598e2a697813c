//! `tactful run` as a user runs it: the web room answers, and SIGTERM
//! stops it cleanly.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as Ws;

const CONFIG: &str = r#"
[[persona]]
id = "docs"
name = "Docs"
agent = "main"

[agents.main]
kind = "script"
rules = [{ when = "(?i)reset", reply = "[[reply_to:{msg_id}]]\nHold the button for 5 s." }]

[platforms.web]
listen = "127.0.0.1:0"

[runtime]
edit_interval_ms = 100
shutdown_grace_seconds = 5
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_answers_in_the_web_room_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("tactful-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let cfg = dir.join("tactful.toml");
    std::fs::write(&cfg, CONFIG).expect("config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tactful"))
        .args(["run", "-c", cfg.to_str().expect("utf-8")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tactful starts");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("the ready line");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .trim_end_matches('/');
    let ws_url = format!("{}/ws", url.replacen("http://", "ws://", 1));

    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url).await.expect("connect");
    let send = |v: Value| Ws::Text(v.to_string().into());
    ws.send(send(json!({ "type": "hello", "name": "Alice" })))
        .await
        .expect("hello");
    ws.send(send(json!({ "type": "join", "room": "lobby" })))
        .await
        .expect("join");
    ws.send(send(
        json!({ "type": "say", "room": "lobby", "text": "@Docs how do I reset?", "mentions": ["docs"] }),
    ))
    .await
    .expect("say");
    let reply = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Some(Ok(Ws::Text(t))) = ws.next().await {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "message"
                    && v["message"]["sender"]["bot"] == true
                    && v["message"]["reply_to"].is_string()
                {
                    return v;
                }
            }
        }
    })
    .await
    .expect("a reply");
    assert_eq!(reply["message"]["text"], "Hold the button for 5 s.");

    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill")
            .success()
    );
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait");
    assert!(status.success(), "a clean exit on SIGTERM: {status}");
    let mut rest = String::new();
    out.read_to_string(&mut rest).expect("rest of stdout");
    assert!(rest.contains("tactful: stopped"), "{rest:?}");
}
