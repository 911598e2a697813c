//! The web room end to end: WebSocket clients playing people, the real
//! runtime and engine, a script agent speaking for a persona.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use regex::Regex;
use serde_json::{Value, json};
use tactful_agents::{Agent, ScriptAgent, ScriptRule};
use tactful_core::{EngineConfig, Output, PersonaSpec};
use tactful_runtime::{DeliveryConfig, Runtime, RuntimeConfig, TraceEvent};
use tactful_web::{WebConfig, WebError, WebPlatform};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

fn web_config(token: Option<&str>) -> WebConfig {
    WebConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        auth_token: token.map(str::to_owned),
        history: 100,
        max_message_chars: 2000,
    }
}

struct Room {
    addr: std::net::SocketAddr,
    runtime: Runtime,
    trace: mpsc::UnboundedReceiver<TraceEvent>,
}

async fn start() -> Room {
    let rule = ScriptRule {
        when: Regex::new("(?i)reset").expect("regex"),
        reply: "[[reply_to:{msg_id}]]\nHold the button for 5 s, {from_name}.".to_owned(),
        delay: Duration::ZERO,
        fail: false,
    };
    let mut agents: HashMap<String, Arc<dyn Agent>> = HashMap::new();
    agents.insert("script".to_owned(), Arc::new(ScriptAgent::new(vec![rule])));
    let mut docs = PersonaSpec::new("docs", "script");
    docs.name = "Docs".into();
    let web = WebPlatform::new(web_config(None), &[(docs.id.clone(), "Docs".to_owned())]).expect("loopback");
    let (tx, trace) = mpsc::unbounded_channel();
    let runtime = Runtime::start(
        RuntimeConfig {
            engine: EngineConfig {
                personas: vec![docs],
                ..Default::default()
            },
            agents,
            delivery: DeliveryConfig::default(),
            shutdown_grace: Duration::from_secs(10),
            store: None,
        },
        vec![Arc::new(web.clone())],
        Some(tx),
    )
    .expect("runtime");
    web.connect_runtime(runtime.handle());
    let (addr, _server) = web.serve().await.expect("serve");
    Room { addr, runtime, trace }
}

async fn connect(
    addr: std::net::SocketAddr,
    query: &str,
) -> Result<Socket, tokio_tungstenite::tungstenite::Error> {
    tokio_tungstenite::connect_async(format!("ws://{addr}/ws{query}"))
        .await
        .map(|(s, _)| s)
}

async fn send(ws: &mut Socket, v: Value) {
    ws.send(Ws::Text(v.to_string().into())).await.expect("send");
}

/// The next event matching `pred`, skipping others; fails after 10 s.
async fn until(ws: &mut Socket, pred: impl Fn(&Value) -> bool) -> Value {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let frame = ws.next().await.expect("open").expect("frame");
            if let Ws::Text(t) = frame {
                let v: Value = serde_json::from_str(&t).expect("json");
                if pred(&v) {
                    return v;
                }
            }
        }
    })
    .await
    .expect("the event arrives")
}

async fn join(addr: std::net::SocketAddr, name: &str) -> (Socket, Value) {
    let mut ws = connect(addr, "").await.expect("connect");
    send(&mut ws, json!({ "type": "hello", "name": name })).await;
    until(&mut ws, |v| v["type"] == "welcome").await;
    send(&mut ws, json!({ "type": "join", "room": "lobby" })).await;
    let history = until(&mut ws, |v| v["type"] == "history").await;
    (ws, history)
}

/// Waits for the engine's decision on a message, by its text.
async fn decided(trace: &mut mpsc::UnboundedReceiver<TraceEvent>, persona: &str) -> (String, String) {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), trace.recv()).await {
            Ok(Some(TraceEvent::Engine(Output::Decision(d)))) if d.persona.as_str() == persona => {
                return (d.msg.to_string(), d.reason.as_str().to_owned());
            }
            Ok(Some(_)) => {}
            other => panic!("no decision: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_gets_a_reply_and_chatter_gets_none() {
    let mut room = start().await;
    let (mut alice, history) = join(room.addr, "Alice").await;
    let members: Vec<(String, bool)> = history["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap_or("").to_owned(),
                m["bot"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert!(
        members.contains(&("Docs".to_owned(), true)),
        "personas are members with a bot badge: {members:?}"
    );
    let (mut bob, _) = join(room.addr, "Bob").await;

    // Chit-chat: decided, recorded, not answered.
    send(
        &mut alice,
        json!({ "type": "say", "room": "lobby", "text": "morning all" }),
    )
    .await;
    let (chat_id, reason) = decided(&mut room.trace, "docs").await;
    assert_eq!(reason, "not_addressed");

    // A mention with a real mention entity from the autocomplete.
    send(
        &mut alice,
        json!({ "type": "say", "room": "lobby", "text": "@Docs how do I reset it?", "mentions": ["docs"] }),
    )
    .await;
    let (q_id, reason) = decided(&mut room.trace, "docs").await;
    assert_eq!(reason, "mention");
    let reply = until(&mut bob, |v| {
        v["type"] == "message"
            && v["message"]["sender"]["bot"] == true
            && v["message"]["reply_to"].is_string()
    })
    .await;
    let m = &reply["message"];
    assert_eq!(m["text"], "Hold the button for 5 s, Alice.");
    assert_eq!(
        m["reply_to"].as_str(),
        Some(q_id.as_str()),
        "a real reply to the question"
    );
    assert_eq!(m["quote"]["sender_name"], "Alice");
    assert_eq!(m["quote"]["text"], "@Docs how do I reset it?");
    // The streaming placeholder was removed after the reply went out.
    until(&mut bob, |v| v["type"] == "delete").await;

    // A late joiner sees the history: the chat, the question, one reply.
    room.runtime.shutdown().await;
    let (_carol, history) = join(room.addr, "Carol").await;
    let msgs = history["messages"].as_array().expect("messages");
    let texts: Vec<&str> = msgs.iter().map(|m| m["text"].as_str().unwrap_or("")).collect();
    assert_eq!(
        texts,
        [
            "morning all",
            "@Docs how do I reset it?",
            "Hold the button for 5 s, Alice."
        ]
    );
    assert_eq!(msgs[0]["id"].as_str(), Some(chat_id.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bot_names_and_malformed_frames_are_refused_without_dropping_the_session() {
    let room = start().await;
    let mut ws = connect(room.addr, "").await.expect("connect");
    send(&mut ws, json!({ "type": "hello", "name": "docs" })).await;
    let e = until(&mut ws, |v| v["type"] == "error").await;
    assert!(e["message"].as_str().unwrap_or("").contains("bots"), "{e}");
    ws.send(Ws::Text("{not json".into())).await.expect("send");
    let e = until(&mut ws, |v| v["type"] == "error").await;
    assert!(
        e["message"].as_str().unwrap_or("").contains("not understood"),
        "{e}"
    );
    send(&mut ws, json!({ "type": "say", "room": "lobby", "text": "hi" })).await;
    let e = until(&mut ws, |v| v["type"] == "error").await;
    assert!(e["message"].as_str().unwrap_or("").contains("hello first"), "{e}");
    // Still connected and usable.
    send(&mut ws, json!({ "type": "hello", "name": "Dana" })).await;
    until(&mut ws, |v| v["type"] == "welcome").await;
    room.runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_required_when_set_and_off_loopback() {
    let web = WebPlatform::new(web_config(Some("s3cret")), &[]).expect("loopback with token");
    let (addr, _server) = web.serve().await.expect("serve");
    assert!(connect(addr, "").await.is_err(), "no token, no room");
    assert!(connect(addr, "?token=wrong").await.is_err());
    assert!(connect(addr, "?token=s3cret").await.is_ok());
    let open = WebConfig {
        listen: "0.0.0.0:0".parse().expect("addr"),
        ..web_config(None)
    };
    assert_eq!(
        WebPlatform::new(open.clone(), &[]).err(),
        Some(WebError::OpenWithoutToken(open.listen))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_served_from_the_binary() {
    let room = start().await;
    let body = reqwest_free_get(room.addr).await;
    assert!(body.contains("<title>tactful</title>"));
    assert!(body.contains("new WebSocket"), "the script is inline: no CDN");
    assert!(
        !body.contains("http://") && !body.contains("https://"),
        "nothing is fetched from elsewhere"
    );
    room.runtime.shutdown().await;
}

/// A plain HTTP GET / over a socket.
async fn reqwest_free_get(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    out
}
