//! The built-in web chat room: a real multi-user chat served by tactful
//! itself, so it runs with no account anywhere.
//!
//! People open the page, pick a name and join rooms; personas are members
//! with a bot badge. The page talks JSON over one WebSocket:
//!
//! client → server
//! - `{"type":"hello","name":"Alice"}` (first; `token` too when the server
//!   has an `auth_token`)
//! - `{"type":"join","room":"lobby"}` → a `history` event
//! - `{"type":"say","room":"lobby","text":"@Docs hi","mentions":["docs"],"reply_to":"w3"}`
//!
//! server → client
//! - `{"type":"welcome","you":{"id","name"}}`
//! - `{"type":"history","room","members":[...],"messages":[...]}`
//! - `{"type":"message","room","message":{"id","sender":{"id","name","bot"},"text","reply_to","quote","time"}}`
//! - `{"type":"edit","room","id","text"}`, `{"type":"delete","room","id"}`
//! - `{"type":"members","room","members":[...]}`, `{"type":"error","message"}`
//!
//! Mentions come from the page's `@` autocomplete as real ids, the way
//! Matrix or Discord send mention entities. What people say is normalised
//! into [`tactful_core::Message`] and handed to the runtime; what personas
//! say arrives through [`WebPlatform`]'s [`Platform`] implementation.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::ws::{Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt as _;
use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tactful_core::addressing::handle_eq;
use tactful_core::{Mentions, Message, MsgId, PersonaId, RoomId, Sender, ThreadId, Timestamp, UserId};
use tactful_runtime::{Capabilities, OutMessage, Platform, PlatformError, RuntimeHandle, wall_clock};
pub use tactful_store::ShownMessage;
use tokio::sync::broadcast;

/// The page, embedded in the binary: no CDN, no build step.
const PAGE: &str = include_str!("page.html");

/// How the web room is served.
#[derive(Clone, Debug)]
pub struct WebConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Required from every client when set; mandatory off loopback.
    pub auth_token: Option<String>,
    /// Messages kept per room for people who join later.
    pub history: usize,
    /// The longest message accepted from a person, in characters.
    pub max_message_chars: usize,
}

/// A config the web room refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WebError {
    /// Listening beyond loopback without a token would open the room (and
    /// the agents behind it) to anyone on the network.
    #[error("platforms.web.listen = {0} is reachable from other machines: set platforms.web.auth_token")]
    OpenWithoutToken(SocketAddr),
}

/// A member of a room as the page shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Member {
    /// Account id (for mentions).
    pub id: String,
    /// Display name.
    pub name: String,
    /// Bot badge.
    pub bot: bool,
}

/// A message as the page shows it.
#[derive(Clone, Debug, Serialize)]
struct WebMsg {
    id: String,
    sender: Member,
    text: String,
    reply_to: Option<String>,
    /// The replied-to message, quoted: who and what.
    quote: Option<serde_json::Value>,
    time: String,
}

#[derive(Default)]
struct Room {
    history: VecDeque<WebMsg>,
    people: Vec<Member>,
}

/// Shared state of the web room.
struct Shared {
    rooms: Mutex<HashMap<String, Room>>,
    personas: Vec<Member>,
    events: broadcast::Sender<(String, serde_json::Value)>,
    next_id: AtomicU64,
    config: WebConfig,
    runtime: Mutex<Option<RuntimeHandle>>,
}

/// The web room: a [`Platform`] for the runtime and a server for people.
#[derive(Clone)]
pub struct WebPlatform {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for WebPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebPlatform")
            .field("listen", &self.shared.config.listen)
            .finish()
    }
}

impl WebPlatform {
    /// A web room whose members include `personas` (id, display name).
    pub fn new(config: WebConfig, personas: &[(PersonaId, String)]) -> Result<Self, WebError> {
        if !config.listen.ip().is_loopback() && config.auth_token.as_deref().is_none_or(str::is_empty) {
            return Err(WebError::OpenWithoutToken(config.listen));
        }
        let (events, _) = broadcast::channel(1024);
        Ok(WebPlatform {
            shared: Arc::new(Shared {
                rooms: Mutex::new(HashMap::new()),
                personas: personas
                    .iter()
                    .map(|(id, name)| Member {
                        id: id.to_string(),
                        name: name.clone(),
                        bot: true,
                    })
                    .collect(),
                events,
                next_id: AtomicU64::new(1),
                config,
                runtime: Mutex::new(None),
            }),
        })
    }

    /// Shows `history` (oldest first, as the store kept it) to people who
    /// join, so the rooms survive a restart. New messages get ids after the
    /// restored ones.
    pub fn restore(&self, history: impl IntoIterator<Item = ShownMessage>) {
        let limit = self.shared.config.history;
        let mut highest = 0;
        let _ = self.shared.with_rooms(|rooms| {
            for m in history {
                if let Some(n) =
                    m.id.as_str()
                        .strip_prefix('w')
                        .and_then(|n| n.parse::<u64>().ok())
                {
                    highest = highest.max(n);
                }
                let sender = Member {
                    id: m.sender.to_string(),
                    name: m.sender_name,
                    bot: m.is_bot,
                };
                rooms.entry(m.room.to_string()).or_default().record(
                    m.id.to_string(),
                    sender,
                    &m.text,
                    m.reply_to.as_ref().map(MsgId::as_str),
                    m.time,
                    limit,
                );
            }
        });
        self.shared.next_id.fetch_max(highest + 1, Ordering::SeqCst);
    }

    /// The configured listen address.
    pub fn listen(&self) -> SocketAddr {
        self.shared.config.listen
    }

    /// Where people's messages go: the runtime's inbound handle.
    pub fn connect_runtime(&self, handle: RuntimeHandle) {
        if let Ok(mut r) = self.shared.runtime.lock() {
            *r = Some(handle);
        }
    }

    /// Binds the listener and serves the page and the WebSocket until the
    /// task is dropped. Returns the bound address (useful with port 0).
    pub async fn serve(&self) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
        let listener = tokio::net::TcpListener::bind(self.shared.config.listen).await?;
        let addr = listener.local_addr()?;
        // Each chat event is a small frame: with Nagle on, one written right
        // after another waits for the peer's delayed ACK (tens of ms).
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
        });
        let app = Router::new()
            .route("/", get(page))
            .route("/ws", get(ws))
            .with_state(self.shared.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!("web room server stopped: {e}");
            }
        });
        tracing::info!("web room at http://{addr}/");
        Ok((addr, task))
    }
}

impl Shared {
    fn new_id(&self) -> String {
        format!("w{}", self.next_id.fetch_add(1, Ordering::SeqCst))
    }

    fn members(&self, room: &Room) -> Vec<Member> {
        self.personas.iter().chain(room.people.iter()).cloned().collect()
    }

    fn publish(&self, room: &str, event: serde_json::Value) {
        let _ = self.events.send((room.to_owned(), event));
    }

    /// Records a message in its room and tells everyone there.
    fn post(&self, room_id: &str, sender: Member, text: &str, reply_to: Option<&str>) -> String {
        let id = self.new_id();
        let recorded = self.with_rooms(|rooms| {
            let room = rooms.entry(room_id.to_owned()).or_default();
            room.record(
                id.clone(),
                sender,
                text,
                reply_to,
                wall_clock(),
                self.config.history,
            )
        });
        if let Ok(msg) = recorded {
            self.publish(
                room_id,
                json!({ "type": "message", "room": room_id, "message": msg }),
            );
        }
        id
    }

    /// Runs `f` on the rooms under their lock.
    fn with_rooms<T>(&self, f: impl FnOnce(&mut HashMap<String, Room>) -> T) -> Result<T, PlatformError> {
        let mut rooms = self
            .rooms
            .lock()
            .map_err(|_| PlatformError("the web room's state is poisoned".into()))?;
        Ok(f(&mut rooms))
    }
}

impl Room {
    /// Appends a message (quoting what it replies to) and keeps the last
    /// `limit`.
    fn record(
        &mut self,
        id: String,
        sender: Member,
        text: &str,
        reply_to: Option<&str>,
        time: Timestamp,
        limit: usize,
    ) -> WebMsg {
        let quote = reply_to.and_then(|r| {
            self.history
                .iter()
                .find(|m| m.id == r)
                .map(|m| json!({ "sender_name": m.sender.name, "text": clip(&m.text, 200) }))
        });
        let msg = WebMsg {
            id,
            sender,
            text: text.to_owned(),
            reply_to: reply_to.map(str::to_owned),
            quote,
            time: time.to_rfc3339(),
        };
        self.history.push_back(msg.clone());
        while self.history.len() > limit {
            self.history.pop_front();
        }
        msg
    }
}

fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// The account id a display name gets: lowercase letters, digits, `_`
/// and `-`, as an `@handle` must be.
fn slug(name: &str) -> String {
    let s: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    s.trim_matches('-').to_owned()
}

impl Platform for WebPlatform {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            can_edit: true,
            can_delete: true,
            native_replies: true,
            max_message_chars: 4000,
        }
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> BoxFuture<'a, Result<MsgId, PlatformError>> {
        Box::pin(async move {
            let sender = self
                .shared
                .personas
                .iter()
                .find(|p| p.id == msg.persona.as_str())
                .cloned()
                .ok_or_else(|| PlatformError(format!("no persona {} in the web room", msg.persona)))?;
            let id = self.shared.post(
                msg.room.as_str(),
                sender,
                msg.text,
                msg.reply_to.map(MsgId::as_str),
            );
            Ok(MsgId::new(id))
        })
    }

    fn edit<'a>(
        &'a self,
        _persona: &'a PersonaId,
        room: &'a RoomId,
        id: &'a MsgId,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), PlatformError>> {
        Box::pin(async move {
            self.shared.with_rooms(|rooms| {
                let m = rooms
                    .get_mut(room.as_str())
                    .and_then(|r| r.history.iter_mut().find(|m| m.id == id.as_str()))
                    .ok_or_else(|| PlatformError(format!("no message {id} in {room}")))?;
                m.text = text.to_owned();
                Ok::<_, PlatformError>(())
            })??;
            self.shared.publish(
                room.as_str(),
                json!({ "type": "edit", "room": room.as_str(), "id": id.as_str(), "text": text }),
            );
            Ok(())
        })
    }

    fn delete<'a>(
        &'a self,
        _persona: &'a PersonaId,
        room: &'a RoomId,
        id: &'a MsgId,
    ) -> BoxFuture<'a, Result<(), PlatformError>> {
        Box::pin(async move {
            self.shared.with_rooms(|rooms| {
                if let Some(r) = rooms.get_mut(room.as_str()) {
                    r.history.retain(|m| m.id != id.as_str());
                }
            })?;
            self.shared.publish(
                room.as_str(),
                json!({ "type": "delete", "room": room.as_str(), "id": id.as_str() }),
            );
            Ok(())
        })
    }
}

async fn page() -> Html<&'static str> {
    Html(PAGE)
}

#[derive(Deserialize)]
struct WsQuery {
    token: Option<String>,
}

async fn ws(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<WsQuery>,
    upgrade: WebSocketUpgrade,
) -> Response {
    if let Some(required) = &shared.config.auth_token
        && q.token.as_deref() != Some(required.as_str())
    {
        return (axum::http::StatusCode::UNAUTHORIZED, "a valid token is required").into_response();
    }
    upgrade.on_upgrade(move |socket| session(shared, socket))
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum ClientEvent {
    Hello {
        name: String,
    },
    Join {
        room: String,
    },
    Say {
        room: String,
        text: String,
        #[serde(default)]
        mentions: Vec<String>,
        reply_to: Option<String>,
        thread: Option<String>,
    },
}

/// One person's connection.
async fn session(shared: Arc<Shared>, socket: WebSocket) {
    let (mut tx, mut rx) = socket.split();
    let mut events = shared.events.subscribe();
    let mut me: Option<Member> = None;
    let mut joined: Vec<String> = Vec::new();
    let send = |v: serde_json::Value| WsMessage::Text(v.to_string().into());
    loop {
        tokio::select! {
            incoming = rx.next() => {
                let Some(Ok(frame)) = incoming else { break };
                let WsMessage::Text(text) = frame else { continue };
                let reply = match serde_json::from_str::<ClientEvent>(&text) {
                    Ok(event) => handle(&shared, event, &mut me, &mut joined),
                    // A malformed frame is answered and skipped; the session goes on.
                    Err(e) => Some(json!({ "type": "error", "message": format!("not understood: {e}") })),
                };
                if let Some(v) = reply
                    && tx.send(send(v)).await.is_err()
                {
                    break;
                }
            }
            event = events.recv() => match event {
                Ok((room, v)) if joined.contains(&room) => {
                    if tx.send(send(v)).await.is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(skipped = n, "a web client fell behind");
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
        }
    }
    if let Some(me) = me
        && let Ok(mut rooms) = shared.rooms.lock()
    {
        for room in &joined {
            if let Some(r) = rooms.get_mut(room)
                && let Some(i) = r.people.iter().position(|p| p.id == me.id)
            {
                r.people.remove(i);
                let members = shared.members(r);
                shared.publish(
                    room,
                    json!({ "type": "members", "room": room, "members": members }),
                );
            }
        }
    }
}

fn handle(
    shared: &Shared,
    event: ClientEvent,
    me: &mut Option<Member>,
    joined: &mut Vec<String>,
) -> Option<serde_json::Value> {
    match event {
        ClientEvent::Hello { name } => {
            let name: String = name.trim().chars().filter(|c| !c.is_control()).take(40).collect();
            let id = slug(&name);
            if id.is_empty() {
                return Some(
                    json!({ "type": "error", "message": "pick a name with a letter or a digit in it" }),
                );
            }
            if shared
                .personas
                .iter()
                .any(|p| handle_eq(&p.id, &id) || handle_eq(&p.name, &name))
            {
                return Some(
                    json!({ "type": "error", "message": format!("{name} is one of the bots here: pick another name") }),
                );
            }
            *me = Some(Member {
                id: id.clone(),
                name: name.clone(),
                bot: false,
            });
            Some(json!({ "type": "welcome", "you": { "id": id, "name": name } }))
        }
        ClientEvent::Join { room } => {
            let Some(member) = me.clone() else {
                return Some(json!({ "type": "error", "message": "say hello first" }));
            };
            let room = room.trim().to_owned();
            if room.is_empty() || room.len() > 64 {
                return Some(json!({ "type": "error", "message": "a room name has 1 to 64 characters" }));
            }
            let Ok(mut rooms) = shared.rooms.lock() else {
                return None;
            };
            let r = rooms.entry(room.clone()).or_default();
            if !r.people.iter().any(|p| p.id == member.id) {
                r.people.push(member);
            }
            let members = shared.members(r);
            let messages: Vec<&WebMsg> = r.history.iter().collect();
            let history =
                json!({ "type": "history", "room": room, "members": members, "messages": messages });
            drop(rooms);
            if !joined.contains(&room) {
                joined.push(room.clone());
            }
            shared.publish(
                &room,
                json!({ "type": "members", "room": room, "members": members }),
            );
            Some(history)
        }
        ClientEvent::Say {
            room,
            text,
            mentions,
            reply_to,
            thread,
        } => {
            let Some(member) = me.clone() else {
                return Some(json!({ "type": "error", "message": "say hello first" }));
            };
            if !joined.contains(&room) {
                return Some(json!({ "type": "error", "message": format!("join {room} first") }));
            }
            let text = text.trim();
            if text.is_empty() {
                return None;
            }
            if text.chars().count() > shared.config.max_message_chars {
                return Some(
                    json!({ "type": "error", "message": format!("messages are at most {} characters", shared.config.max_message_chars) }),
                );
            }
            let id = shared.post(&room, member.clone(), text, reply_to.as_deref());
            let msg = Message {
                id: MsgId::new(id),
                room: RoomId::new(room.as_str()),
                thread: thread.map(ThreadId::new),
                sender: Sender {
                    id: UserId::new(member.id.as_str()),
                    name: Arc::from(member.name.as_str()),
                    is_bot: false,
                },
                text: Arc::from(text),
                mentions: Mentions::Explicit(mentions.into_iter().map(UserId::new).collect()),
                reply_to: reply_to.map(MsgId::new),
                is_dm: false,
                dm_to: None,
                time: wall_clock(),
            };
            if let Ok(r) = shared.runtime.lock()
                && let Some(handle) = r.as_ref()
            {
                handle.inbound(msg);
            }
            None
        }
    }
}
