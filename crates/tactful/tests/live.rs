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

[server]
listen = "127.0.0.1:0"
"#;

/// GET a path over plain HTTP/1.1; the body.
async fn get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default()
}

/// A running `tactful` process and the web room URL it printed.
struct Service {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
    ws_url: String,
}

fn spawn(args: &[&str]) -> Service {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tactful"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
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
    Service { child, out, ws_url }
}

impl Service {
    /// SIGTERM, then a clean exit that says so.
    async fn stop(mut self) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .expect("kill")
                .success()
        );
        let mut child = self.child;
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .expect("join")
            .expect("wait");
        assert!(status.success(), "a clean exit on SIGTERM: {status}");
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).expect("rest of stdout");
        assert!(rest.contains("tactful: stopped"), "{rest:?}");
    }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn enter(ws_url: &str, name: &str) -> Socket {
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url).await.expect("connect");
    say(&mut ws, json!({ "type": "hello", "name": name })).await;
    say(&mut ws, json!({ "type": "join", "room": "lobby" })).await;
    ws
}

async fn say(ws: &mut Socket, v: Value) {
    ws.send(Ws::Text(v.to_string().into())).await.expect("send");
}

/// Bot messages until `done` says the wanted ones arrived (30 s at most).
async fn bot_messages(ws: &mut Socket, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while !done(&got) {
            if let Some(Ok(Ws::Text(t))) = ws.next().await {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "message"
                    && v["message"]["sender"]["bot"] == true
                    && v["message"]["text"] != "…"
                {
                    got.push(v["message"].clone());
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out; got {got:#?}"));
    got
}

/// The id of the room's message with this text, from the room's own echo.
async fn id_of(ws: &mut Socket, text: &str) -> String {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(Ok(Ws::Text(t))) = ws.next().await {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "message" && v["message"]["text"] == text {
                    return v["message"]["id"].as_str().unwrap_or_default().to_owned();
                }
            }
        }
    })
    .await
    .expect("the message is echoed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_answers_in_the_web_room_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("tactful-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let cfg = dir.join("tactful.toml");
    std::fs::write(&cfg, CONFIG).expect("config");
    let mut svc = spawn(&["run", "-c", cfg.to_str().expect("utf-8")]);
    let mut line = String::new();
    svc.out.read_line(&mut line).expect("the metrics line");
    let server = line
        .split_whitespace()
        .find_map(|w| {
            w.strip_prefix("http://")
                .and_then(|a| a.strip_suffix("/healthz,"))
        })
        .unwrap_or_else(|| panic!("no health URL in {line:?}"))
        .to_owned();
    assert_eq!(get(&server, "/healthz").await, "ok\n");

    let mut ws = enter(&svc.ws_url, "Alice").await;
    let ask =
        json!({ "type": "say", "room": "lobby", "text": "@Docs how do I reset?", "mentions": ["docs"] });
    say(&mut ws, ask).await;
    let replies = bot_messages(&mut ws, |got| got.iter().any(|m| m["reply_to"].is_string())).await;
    let reply = replies
        .iter()
        .find(|m| m["reply_to"].is_string())
        .expect("a reply");
    assert_eq!(reply["text"], "Hold the button for 5 s.");

    // The metrics count the turn (they are fed asynchronously: poll).
    let wanted = [
        "tactful_messages_in_total 1",
        "tactful_decisions_total{persona=\"docs\",outcome=\"reply\",reason=\"mention\"} 1",
        "tactful_agent_calls_total{persona=\"docs\",agent=\"main\",kind=\"reply\"} 1",
        "tactful_sends_total{persona=\"docs\",notice=\"false\"} 1",
        "tactful_agent_call_seconds_count{kind=\"reply\"} 1",
    ];
    let mut metrics = String::new();
    for _ in 0..100 {
        metrics = get(&server, "/metrics").await;
        if wanted.iter().all(|w| metrics.contains(w)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for w in wanted {
        assert!(metrics.contains(w), "missing {w} in:\n{metrics}");
    }
    svc.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_guide_answers_documentation_questions_and_ignores_chatter() {
    let svc = spawn(&["demo", "--listen", "127.0.0.1:0"]);
    let mut ws = enter(&svc.ws_url, "Alice").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "lunch at noon anyone" }),
    )
    .await;
    let chatter = id_of(&mut ws, "lunch at noon anyone").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "what does ambient mode do?" }),
    )
    .await;
    let question = id_of(&mut ws, "what does ambient mode do?").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Host hello there", "mentions": ["host"] }),
    )
    .await;
    let greeting = id_of(&mut ws, "@Host hello there").await;
    let replies = bot_messages(&mut ws, |got| {
        got.iter().any(|m| m["reply_to"] == question.as_str())
            && got.iter().any(|m| m["reply_to"] == greeting.as_str())
    })
    .await;
    let guide = replies
        .iter()
        .find(|m| m["reply_to"] == question.as_str())
        .expect("guide answered");
    assert_eq!(guide["sender"]["name"], "Guide");
    assert!(
        guide["text"]
            .as_str()
            .unwrap_or("")
            .contains("(from docs/faq.md, \"What is ambient mode?\")"),
        "{guide}"
    );
    let host = replies
        .iter()
        .find(|m| m["reply_to"] == greeting.as_str())
        .expect("host answered");
    assert_eq!(host["sender"]["name"], "Host");
    assert!(
        replies.iter().all(|m| m["reply_to"] != chatter.as_str()),
        "chatter got no reply: {replies:#?}"
    );
    svc.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_shuts_down_cleanly_when_nobody_reads_its_output() {
    let Service { child, out, ws_url } = spawn(&["demo", "--listen", "127.0.0.1:0"]);
    // Whoever started it stops reading: what it prints later goes nowhere.
    drop(out);
    let mut ws = enter(&ws_url, "Alice").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Host hi", "mentions": ["host"] }),
    )
    .await;
    let replies = bot_messages(&mut ws, |got| !got.is_empty()).await;
    assert_eq!(replies[0]["sender"]["name"], "Host");
    // Its last words hit a closed pipe: still a clean exit, not a panic.
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill")
            .success()
    );
    let mut child = child;
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait");
    assert!(status.success(), "clean exit with stdout closed: {status}");
}
