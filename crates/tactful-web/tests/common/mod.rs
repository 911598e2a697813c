//! The web room's test harness: the real runtime and engine, a script
//! agent speaking for `docs` (alias `helper`), WebSocket clients playing
//! people.
#![allow(dead_code)] // each test file uses some of these

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use regex::Regex;
use serde_json::{Value, json};
use tactful_agents::{Agent, ScriptAgent, ScriptRule};
use tactful_core::{EngineConfig, Output, PersonaSpec};
use tactful_runtime::{DeliveryConfig, Runtime, RuntimeConfig, TraceEvent};
use tactful_web::{WebConfig, WebPlatform};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

pub fn web_config(token: Option<&str>) -> WebConfig {
    WebConfig {
        auth_token: token.map(str::to_owned),
        history: 100,
        max_message_chars: 2000,
        ..WebConfig::new("127.0.0.1:0".parse().expect("addr"))
    }
}

pub struct Room {
    pub addr: std::net::SocketAddr,
    pub runtime: Runtime,
    pub trace: mpsc::UnboundedReceiver<TraceEvent>,
    pub web: WebPlatform,
}

pub async fn start() -> Room {
    start_with(web_config(None)).await
}

pub async fn start_with(config: WebConfig) -> Room {
    start_on(config, None).await
}

/// The room with `store` under the runtime (`None`: nothing saved).
pub async fn start_on(config: WebConfig, store: Option<tactful_runtime::Store>) -> Room {
    let rule = ScriptRule {
        when: Regex::new("(?i)reset").expect("regex"),
        reply: "[[reply_to:{msg_id}]]\nHold the button for 5 s, {from_name}.".to_owned(),
        delay: Duration::ZERO,
        fail: false,
    };
    // Thanks need no answer: the persona stays quiet (and reacts).
    let quiet = ScriptRule {
        when: Regex::new("(?i)thanks").expect("regex"),
        reply: "NO_REPLY".to_owned(),
        delay: Duration::ZERO,
        fail: false,
    };
    let mut agents: HashMap<String, Arc<dyn Agent>> = HashMap::new();
    agents.insert("script".to_owned(), Arc::new(ScriptAgent::new(vec![rule, quiet])));
    let mut docs = PersonaSpec::new("docs", "script");
    docs.name = "Docs".into();
    docs.aliases = vec!["helper".into()];
    let web = WebPlatform::new(config, std::slice::from_ref(&docs)).expect("loopback");
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
            store,
            max_concurrent_turns: 16,
            hooks: Default::default(),
            cluster: None,
        },
        vec![Arc::new(web.clone())],
        Some(tx),
    )
    .expect("runtime");
    web.connect_runtime(runtime.handle());
    let (addr, _server) = web.serve().await.expect("serve");
    Room {
        addr,
        runtime,
        trace,
        web,
    }
}

/// Connects as the room's own page would: with its origin.
pub async fn connect(
    addr: std::net::SocketAddr,
    query: &str,
) -> Result<Socket, tokio_tungstenite::tungstenite::Error> {
    connect_from(addr, query, Some(&format!("http://{addr}"))).await
}

/// Connects with `origin` (`None`: as a program, with none).
pub async fn connect_from(
    addr: std::net::SocketAddr,
    query: &str,
    origin: Option<&str>,
) -> Result<Socket, tokio_tungstenite::tungstenite::Error> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = format!("ws://{addr}/ws{query}").into_client_request()?;
    if let Some(o) = origin {
        req.headers_mut().insert("origin", o.parse().expect("header"));
    }
    tokio_tungstenite::connect_async(req).await.map(|(s, _)| s)
}

/// The HTTP status a refused handshake got.
pub fn refused_with(r: Result<Socket, tokio_tungstenite::tungstenite::Error>) -> u16 {
    match r {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => resp.status().as_u16(),
        Err(e) => panic!("refused another way: {e}"),
        Ok(_) => panic!("accepted"),
    }
}

pub async fn send(ws: &mut Socket, v: Value) {
    ws.send(Ws::Text(v.to_string().into())).await.expect("send");
}

/// The next event matching `pred`, skipping others; fails after 10 s.
pub async fn until(ws: &mut Socket, pred: impl Fn(&Value) -> bool) -> Value {
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

pub async fn join(addr: std::net::SocketAddr, name: &str) -> (Socket, Value) {
    let (ws, history, _) = join_keyed(addr, name, None).await;
    (ws, history)
}

/// Joins the lobby as `name`, showing `key` (a second tab of the person
/// who has it); also returns the name's key.
pub async fn join_keyed(
    addr: std::net::SocketAddr,
    name: &str,
    key: Option<&str>,
) -> (Socket, Value, String) {
    let mut ws = connect(addr, "").await.expect("connect");
    send(&mut ws, json!({ "type": "hello", "name": name, "key": key })).await;
    let welcome = until(&mut ws, |v| v["type"] == "welcome" || v["type"] == "error").await;
    assert_eq!(welcome["type"], "welcome", "{name} let in: {welcome}");
    send(&mut ws, json!({ "type": "join", "room": "lobby" })).await;
    let history = until(&mut ws, |v| v["type"] == "history").await;
    let key = welcome["key"].as_str().unwrap_or_default().to_owned();
    (ws, history, key)
}

/// Waits for the engine's decision on a message, by its text.
pub async fn decided(trace: &mut mpsc::UnboundedReceiver<TraceEvent>, persona: &str) -> (String, String) {
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
