//! One person's connection: the handshake, what they send, what they are
//! sent, and what happens when they cannot keep up.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Response};
use futures::stream::SplitSink;
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tactful_core::{Mentions, Message, MsgId, RoomId, Sender, ThreadId, UserId};
use tactful_runtime::wall_clock;
use tokio::sync::{broadcast, mpsc};

use crate::room::{Member, WebMsg};
use crate::{Shared, fields, identity};

/// The page, embedded in the binary: no CDN, no build step.
const PAGE: &str = include_str!("page.html");

/// The largest frame a client may send: a message of the longest length in
/// JSON with every character escaped, and room to spare.
const MAX_FRAME: usize = 64 * 1024;
/// How much a socket reads at a time. tungstenite zero-fills this much of
/// its buffer before every read (and every poll that finds nothing), 128
/// KiB by default: under load that memset was the service's largest single
/// cost (`BENCHMARKS.md`, "Against the floor"). A chat frame is a few
/// hundred bytes, and a longer one still arrives whole: the buffer grows
/// to a frame's length when its header says it is longer.
pub const READ_BUFFER: usize = 4 * 1024;
/// A client that has not taken a frame for this long is disconnected.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Messages of one connection waiting to be stored at once.
const MAX_SAYS_IN_FLIGHT: usize = 32;

pub(crate) async fn page() -> Html<&'static str> {
    Html(PAGE)
}

#[derive(Deserialize)]
pub(crate) struct WsQuery {
    token: Option<String>,
}

pub(crate) async fn ws(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<WsQuery>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    let Some(access) = shared.access.get() else {
        return (axum::http::StatusCode::SERVICE_UNAVAILABLE, "starting").into_response();
    };
    if let Err(refusal) = access.check(&headers, q.token.as_deref()) {
        return refusal.into_response();
    }
    upgrade
        .read_buffer_size(READ_BUFFER)
        .max_message_size(MAX_FRAME)
        .max_frame_size(MAX_FRAME)
        .on_upgrade(move |socket| session(shared, socket))
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum ClientEvent {
    Hello {
        name: String,
        /// The key the room gave this name's first connection: another tab
        /// (or a reconnect) of the same person shows it to be let in.
        #[serde(default)]
        key: Option<String>,
    },
    Join {
        room: String,
    },
    /// Opens (or reopens) the direct room with a persona.
    Dm {
        persona: String,
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

/// One connection's state.
struct Conn {
    shared: Arc<Shared>,
    me: Option<Member>,
    /// The key this person's browser holds: their direct rooms are its.
    key: Option<String>,
    joined: Vec<String>,
    /// Answers that arrive later (a message the store refused).
    direct: mpsc::UnboundedSender<Value>,
    in_flight: Arc<AtomicUsize>,
}

type Tx = SplitSink<WebSocket, WsMessage>;

/// Sends one frame, or gives up on a client that does not take it.
async fn send(tx: &mut Tx, v: &Value) -> bool {
    let frame = WsMessage::Text(v.to_string().into());
    matches!(
        tokio::time::timeout(SEND_TIMEOUT, tx.send(frame)).await,
        Ok(Ok(()))
    )
}

fn error(message: impl Into<String>) -> Value {
    json!({ "type": "error", "message": message.into() })
}

async fn session(shared: Arc<Shared>, socket: WebSocket) {
    let (mut tx, mut rx) = socket.split();
    let mut events = shared.events.subscribe();
    let (direct, mut answers) = mpsc::unbounded_channel();
    let mut conn = Conn {
        shared,
        me: None,
        key: None,
        joined: Vec::new(),
        direct,
        in_flight: Arc::new(AtomicUsize::new(0)),
    };
    loop {
        tokio::select! {
            incoming = rx.next() => {
                let Some(Ok(frame)) = incoming else { break };
                let WsMessage::Text(text) = frame else { continue };
                let reply = match serde_json::from_str::<ClientEvent>(&text) {
                    Ok(event) => conn.handle(event),
                    // A malformed frame is answered and skipped; the session goes on.
                    Err(e) => Some(error(format!("not understood: {}", clip(&e.to_string(), 200)))),
                };
                if let Some(v) = reply && !send(&mut tx, &v).await {
                    break;
                }
            }
            Some(v) = answers.recv() => {
                if !send(&mut tx, &v).await {
                    break;
                }
            }
            event = events.recv() => match event {
                Ok((room, v)) => {
                    if conn.joined.contains(&room) && !send(&mut tx, &v).await {
                        break;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    // Too far behind to replay: send each room afresh.
                    tracing::info!(missed, "a web client fell behind; resyncing it");
                    let mut ok = true;
                    for room in conn.joined.clone() {
                        let v = conn.history(&room, Some(missed));
                        ok &= send(&mut tx, &v).await;
                    }
                    if !ok {
                        break;
                    }
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
        }
    }
    // A client that stopped reading is told why, if it still listens.
    let close = CloseFrame {
        code: 1008,
        reason: "closed: reconnect to catch up".into(),
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), tx.send(WsMessage::Close(Some(close)))).await;
    conn.leave_all();
}

impl Conn {
    fn handle(&mut self, event: ClientEvent) -> Option<Value> {
        match event {
            ClientEvent::Hello { name, key } => Some(self.hello(&name, key.as_deref())),
            ClientEvent::Join { room } => Some(self.join(&room)),
            ClientEvent::Dm { persona } => Some(self.dm(&persona)),
            ClientEvent::Say {
                room,
                text,
                mentions,
                reply_to,
                thread,
            } => self.say(room, &text, mentions, reply_to, thread),
        }
    }

    fn hello(&mut self, raw: &str, key: Option<&str>) -> Value {
        if let Some(me) = &self.me {
            return error(format!("you are {} already", me.name));
        }
        let name = match identity::clean_name(raw) {
            Ok(n) => n,
            Err(e) => return error(e.to_string()),
        };
        let cast = self.shared.cast();
        if let Some(persona) = cast.lookalikes.persona_like(&name) {
            return error(identity::NameError::Persona(persona.to_owned()).to_string());
        }
        let id = identity::person_id(&name);
        let look = identity::look(&name);
        let Ok(mut people) = self.shared.people.lock() else {
            return error("the web room is not available");
        };
        // Someone else here whose name looks the same would be mistaken
        // for this person.
        if let Some((other, _)) = people.iter().find(|(other, p)| **other != id && p.look == look) {
            let shown = other.strip_prefix("web:").unwrap_or(other).to_owned();
            return error(identity::NameError::Taken(shown).to_string());
        }
        // The same name while it is connected: only the same person, who
        // holds the key its first connection was given (a second tab, a
        // reconnect). Anyone else is told to pick another name.
        let key = match people.get_mut(&id) {
            Some(p) if key.is_some_and(|k| identity::same_key(&p.key, k)) => {
                p.connections += 1;
                p.key.clone()
            }
            Some(_) => return error(identity::NameError::Taken(name.clone()).to_string()),
            None => {
                // The key this browser kept from before (a reload, a
                // restart) stays its key, so its direct rooms stay its own;
                // anything that is not a key the room makes gets a new one.
                let kept = key.filter(|k| identity::is_key(k)).map(str::to_owned);
                let Some(key) = kept.or_else(|| crate::access::new_secret().ok()) else {
                    return error("the web room cannot make a key right now; try again");
                };
                people.insert(
                    id.clone(),
                    identity::Person {
                        look,
                        connections: 1,
                        key: key.clone(),
                    },
                );
                key
            }
        };
        drop(people);
        self.key = Some(key.clone());
        self.me = Some(Member {
            id: id.clone(),
            name: name.clone(),
            bot: false,
        });
        json!({
            "type": "welcome",
            "you": { "id": id, "name": name },
            "key": key,
            "console": self.shared.console.get(),
        })
    }

    /// The `history` event of `room` (with `missed` on a resync).
    fn history(&self, room: &str, missed: Option<u64>) -> Value {
        let shared = &self.shared;
        let cast = shared.cast();
        let with = crate::direct::persona_of(room);
        let view = shared.with_rooms(|rooms| {
            let r = rooms.entry(room.to_owned()).or_default();
            // A direct room's members are the person and that persona.
            let members: Vec<Member> = cast
                .members
                .iter()
                .filter(|m| with.is_none_or(|p| m.id == p))
                .chain(r.people())
                .cloned()
                .collect();
            let messages: Vec<&WebMsg> = r.history().collect();
            json!({ "type": "history", "room": room, "members": members, "messages": messages })
        });
        let mut v = view.unwrap_or_else(|e| error(e.to_string()));
        match with.and_then(|p| cast.members.iter().find(|m| m.id == p)) {
            Some(persona) => v["dm"] = json!(persona),
            None if v["type"] == "history" => v["intro"] = shared.intro(room),
            None => {}
        }
        if let Some(n) = missed {
            v["resync"] = json!(true);
            v["missed"] = json!(n);
        }
        v
    }

    fn join(&mut self, raw: &str) -> Value {
        let Some(member) = self.me.clone() else {
            return error("say hello first");
        };
        let room = match fields::room_name(raw) {
            Ok(r) => r,
            Err(e) => return error(e),
        };
        self.enter(member, room)
    }

    /// Opens the direct room of this person's key with `persona`.
    fn dm(&mut self, persona: &str) -> Value {
        let (Some(member), Some(key)) = (self.me.clone(), self.key.as_deref()) else {
            return error("say hello first");
        };
        if !self.shared.cast().members.iter().any(|m| m.id == persona) {
            return error(format!("there is no persona {:?} here", clip(persona, 64)));
        }
        let room = crate::direct::room_of(key, persona);
        self.enter(member, room)
    }

    /// Puts this connection in `room` (a checked name) and answers with its
    /// history.
    fn enter(&mut self, member: Member, room: String) -> Value {
        let limit = self.shared.config.max_rooms_per_connection;
        if !self.joined.contains(&room) && self.joined.len() >= limit {
            return error(format!("one connection may be in at most {limit} rooms"));
        }
        let shared = &self.shared;
        let arrived = shared.with_rooms(|rooms| rooms.entry(room.clone()).or_default().arrive(&member));
        if !self.joined.contains(&room) {
            self.joined.push(room.clone());
        }
        let history = self.history(&room, None);
        if arrived.unwrap_or(false) {
            let _ = shared.events.send((
                room.clone(),
                json!({ "type": "member_joined", "room": room, "member": member }),
            ));
        }
        history
    }

    fn say(
        &mut self,
        room: String,
        text: &str,
        mentions: Vec<String>,
        reply_to: Option<String>,
        thread: Option<String>,
    ) -> Option<Value> {
        let Some(member) = self.me.clone() else {
            return Some(error("say hello first"));
        };
        if !self.joined.contains(&room) {
            return Some(error(format!("join {} first", clip(&room, 64))));
        }
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        let refused = |message: String| {
            Some(json!({ "type": "error", "message": message, "room": room, "text": text }))
        };
        let max = self.shared.config.max_message_chars;
        if text.chars().count() > max {
            return refused(format!("messages are at most {max} characters"));
        }
        let checks = fields::mentions(&mentions)
            .and_then(|()| {
                reply_to
                    .as_deref()
                    .map_or(Ok(()), |r| fields::message_id("reply_to", r))
            })
            .and_then(|()| {
                thread
                    .as_deref()
                    .map_or(Ok(()), |t| fields::message_id("thread", t))
            });
        if let Err(e) = checks {
            return refused(e);
        }
        if self.in_flight.load(Ordering::SeqCst) >= MAX_SAYS_IN_FLIGHT {
            return refused("too many messages at once: wait a moment".to_owned());
        }
        let mentions = self.with_typed_mentions(&room, text, mentions);
        let shared = self.shared.clone();
        let runtime = shared.runtime();
        let time = wall_clock();
        let queued = shared.with_rooms(|rooms| {
            let r = rooms.entry(room.clone()).or_default();
            let m = WebMsg {
                id: shared.new_id(),
                sender: member.clone(),
                text: text.to_owned(),
                html: crate::render::html(text),
                reply_to: reply_to.clone(),
                quote: r.quote(reply_to.as_deref()),
                time: time.to_rfc3339(),
                why: Vec::new(),
                reactions: Vec::new(),
            };
            let ticket = r.queue_new(m.clone(), None, runtime.is_none());
            r.flush(&room, shared.config.history, &shared.events);
            (m, ticket)
        });
        let Ok((m, ticket)) = queued else {
            return refused("the web room is not available".to_owned());
        };
        // Without a runtime (tests of the room alone) it is shown at once.
        let runtime = runtime?;
        let dm_to = crate::direct::persona_of(&room).map(tactful_core::PersonaId::new);
        let msg = Message {
            id: MsgId::new(m.id.as_str()),
            room: RoomId::new(room.as_str()),
            thread: thread.map(ThreadId::new),
            sender: Sender {
                id: UserId::new(member.id.as_str()),
                name: Arc::from(member.name.as_str()),
                is_bot: false,
                handle: None,
            },
            text: Arc::from(text),
            mentions: Mentions::Explicit(mentions.into_iter().map(UserId::new).collect()),
            reply_to: reply_to.map(MsgId::new),
            is_dm: dm_to.is_some(),
            dm_to,
            time,
        };
        // Shown (and acknowledged) once stored; refused, the sender gets
        // the text back and nobody else ever saw it.
        let saved = runtime.inbound_saved(msg, vec![shared.shown(&room, &m, None, time)]);
        let (direct, in_flight, text) = (self.direct.clone(), self.in_flight.clone(), text.to_owned());
        in_flight.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            let result = saved.await;
            shared.settle(&room, ticket, result.is_ok());
            in_flight.fetch_sub(1, Ordering::SeqCst);
            if let Err(e) = result {
                let _ = direct
                    .send(json!({ "type": "error", "message": e.to_string(), "room": room, "text": text }));
            }
        });
        None
    }

    /// The page's explicit mentions (picked from the autocomplete) and
    /// whoever the text names `@Name` or `@id`: a typed `@Host` addresses
    /// Host as much as a picked one, and `@bob` names bob (`web:bob`)
    /// whether he is in the room or not, as `tactful replay` reads the
    /// same text (the message is then someone else's, not the room's).
    /// `@everyone` and the other room-wide handles name nobody; an e-mail
    /// address is no mention at all.
    fn with_typed_mentions(&self, room: &str, text: &str, mut mentions: Vec<String>) -> Vec<String> {
        let shared = &self.shared;
        let typed: Vec<String> = shared
            .with_rooms(|rooms| {
                let people: Vec<Member> = rooms
                    .get(room)
                    .map(|r| r.people().cloned().collect())
                    .unwrap_or_default();
                let cast = shared.cast();
                tactful_core::addressing::text_mentions(text)
                    .filter_map(|handle| {
                        let member = cast.members.iter().chain(&people).find(|m| {
                            m.name.eq_ignore_ascii_case(handle)
                                || m.id.eq_ignore_ascii_case(handle)
                                || m.id
                                    .strip_prefix("web:")
                                    .is_some_and(|n| n.eq_ignore_ascii_case(handle))
                        });
                        match member {
                            Some(m) => Some(m.id.clone()),
                            None if tactful_core::addressing::room_wide(handle) => None,
                            None => Some(crate::identity::person_id(handle)),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        for id in typed {
            if !mentions.contains(&id) && mentions.len() < fields::MAX_MENTIONS {
                mentions.push(id);
            }
        }
        mentions
    }

    /// The connection closed: its name is free again when it was the last
    /// with it, then it leaves its rooms (so whoever sees it leave may
    /// take the name at once).
    fn leave_all(&mut self) {
        let Some(me) = self.me.take() else { return };
        let shared = &self.shared;
        if let Ok(mut people) = shared.people.lock()
            && let Some(p) = people.get_mut(&me.id)
        {
            p.connections -= 1;
            if p.connections == 0 {
                people.remove(&me.id);
            }
        }
        let _ = shared.with_rooms(|rooms| {
            for room in &self.joined {
                if let Some(r) = rooms.get_mut(room)
                    && r.leave(&me.id)
                {
                    let _ = shared.events.send((
                        room.clone(),
                        json!({ "type": "member_left", "room": room, "id": me.id }),
                    ));
                }
            }
        });
    }
}

fn clip(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}
