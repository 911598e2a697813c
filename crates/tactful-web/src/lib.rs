//! The built-in web chat room: a real multi-user chat served by tactful
//! itself, so it runs with no account anywhere.
//!
//! People open the page, pick a name and join rooms; personas are members
//! with a bot badge. The page talks JSON over one WebSocket:
//!
//! client → server
//! - `{"type":"hello","name":"Alice"}` (first; the token goes in `?token=`
//!   or an `Authorization: Bearer` header when the server has one)
//! - `{"type":"join","room":"lobby"}` → a `history` event (with `"intro"`:
//!   each persona's mode there in plain words, and messages to try)
//! - `{"type":"dm","persona":"docs"}` → the `history` of this person's
//!   direct room with that persona (with `"dm"`; see [`direct`])
//! - `{"type":"say","room":"lobby","text":"@Docs hi","mentions":["docs"],"reply_to":"w3"}`
//!
//! server → client
//! - `{"type":"welcome","you":{"id","name"},"key","console"}` (the key the
//!   browser keeps: a second tab, a reconnect or a reload shows it in
//!   `hello`; `console`: where this listener serves the operator console,
//!   `null` where it serves none, so the page links to it only when it is
//!   there)
//! - `{"type":"history","room","members":[...],"messages":[...]}` (again,
//!   with `"resync":true,"missed":N`, to a client that fell behind)
//! - `{"type":"message","room","message":{"id","sender":{"id","name","bot"},"text","reply_to","quote","time"}}`
//! - `{"type":"why","room","msg","why":{"persona","state","text"}}`: one
//!   persona's line on why it answered a message or not (with
//!   `show_decisions`), always after that message's `message` event,
//!   whichever process decided it (see [`room`]); a `history` carries the
//!   lines on its messages as `why`
//! - `{"type":"edit","room","id","text"}`, `{"type":"delete","room","id"}`,
//!   `{"type":"react","room","id","emoji","by"}`
//! - `{"type":"member_joined","room","member"}`, `{"type":"member_left","room","id"}`
//! - `{"type":"error","message"}` (with `"room"` and `"text"` when a message
//!   was not taken, so the page can give it back)
//!
//! Mentions come from the page's `@` autocomplete as real ids, the way
//! Matrix or Discord send mention entities. What people say is stored, then
//! shown and handed to the runtime as a [`tactful_core::Message`]; what
//! personas say arrives through [`WebPlatform`]'s [`Platform`]
//! implementation and is stored before it is shown too (see [`room`]).
//! Who may connect: [`access`]; who people are: [`identity`]; what they
//! may send: [`fields`].

pub mod access;
pub mod direct;
pub mod fields;
pub mod identity;
mod others;
mod render;
pub mod room;
mod session;
pub mod why;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use axum::Router;
use axum::routing::get;
use axum::serve::ListenerExt as _;
use tactful_core::policy::{Mode, PolicyTable};
use tactful_core::{MsgId, Output, PersonaId, PersonaSpec, RoomId, Timestamp, UserId};
use tactful_runtime::{
    At, Capabilities, Done, OutMessage, Platform, PlatformError, RuntimeHandle, Saver, Sent, TraceEvent,
    wall_clock,
};
use tactful_store::Op;
pub use tactful_store::ShownMessage;
use tokio::sync::{broadcast, watch};

use crate::access::Access;
use crate::identity::Lookalikes;
use crate::room::{Member, Noted, Room, WebMsg};

pub use others::Following;
pub use session::READ_BUFFER;

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
    /// Page origins allowed to connect; `None` means the listen address
    /// and its `localhost` / `127.0.0.1` forms.
    pub allowed_origins: Option<Vec<String>>,
    /// How many rooms one connection may join.
    pub max_rooms_per_connection: usize,
    /// Whether everyone sees why each persona answered a message or not.
    pub show_decisions: bool,
    /// Messages a newcomer can click to send, shown in an empty room's
    /// introduction; empty means one "@Name hello" per persona that
    /// answers mentions.
    pub examples: Vec<String>,
}

impl WebConfig {
    /// A loopback room on `listen` with the defaults.
    pub fn new(listen: SocketAddr) -> WebConfig {
        WebConfig {
            listen,
            auth_token: None,
            history: 500,
            max_message_chars: 4000,
            allowed_origins: None,
            max_rooms_per_connection: 20,
            show_decisions: listen.ip().is_loopback(),
            examples: Vec::new(),
        }
    }
}

/// A config the web room refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WebError {
    /// Listening beyond loopback without a token would open the room (and
    /// the agents behind it) to anyone on the network.
    #[error("platforms.web.listen = {0} is reachable from other machines: set platforms.web.auth_token")]
    OpenWithoutToken(SocketAddr),
    /// A token of spaces is no token.
    #[error("platforms.web.auth_token is blank")]
    BlankToken,
}

/// Shared state of the web room.
struct Shared {
    rooms: Mutex<HashMap<String, Room>>,
    /// The personas, replaced when a config reload changes them.
    cast: std::sync::RwLock<Arc<Cast>>,
    /// People connected, by id: how their name looks and how many
    /// connections they have.
    people: Mutex<HashMap<String, identity::Person>>,
    events: broadcast::Sender<room::Event>,
    next_id: AtomicU64,
    config: WebConfig,
    /// The runtime's handle, once connected. The runtime may ask the room
    /// to deliver before it is (replies left from before a restart), so
    /// deliveries wait for it: a reply must be stored before it is shown.
    runtime: watch::Sender<Option<RuntimeHandle>>,
    /// Set when the listener is bound (its port completes the origins).
    access: OnceLock<Access>,
    /// What the decision view remembers between trace events.
    explainer: Mutex<why::Explainer>,
    /// The room policies in force, for the introduction's modes.
    policies: std::sync::RwLock<Arc<PolicyTable>>,
    /// Whether other processes share the store: the notes made here are
    /// announced to their web rooms (see [`others`]).
    shared_store: std::sync::atomic::AtomicBool,
    /// Notes on messages this process has not shown yet (another process
    /// received them, and its announcement is on its way), shown with
    /// them; the oldest are dropped past [`others::EARLY_NOTES`]. Only
    /// ever locked with `rooms` held (see `Shared::show_note`).
    early: Mutex<std::collections::VecDeque<why::Note>>,
    /// Where this listener serves the operator console (`tactful demo`),
    /// told to the page: it links there, and nowhere when unset.
    console: OnceLock<String>,
}

/// The personas as the room shows them.
struct Cast {
    members: Vec<Member>,
    /// Personas a reload removed: replies of theirs already decided are
    /// still shown under their name.
    gone: Vec<Member>,
    /// Their names' looks: nobody may join under one.
    lookalikes: Lookalikes,
}

impl Cast {
    fn of(personas: &[PersonaSpec]) -> Cast {
        Cast {
            members: personas
                .iter()
                .map(|p| Member {
                    id: p.id.to_string(),
                    name: p.name.to_string(),
                    bot: true,
                })
                .collect(),
            gone: Vec::new(),
            lookalikes: Lookalikes::of(personas),
        }
    }
}

impl Shared {
    fn cast(&self) -> Arc<Cast> {
        self.cast
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// What a newcomer to `room` is told: each persona, how it behaves
    /// there in plain words, and messages to try.
    fn intro(&self, room: &str) -> serde_json::Value {
        let policies = self
            .policies
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let cast = self.cast();
        let room_id = RoomId::new(room);
        let modes: Vec<(&Member, Mode)> = cast
            .members
            .iter()
            .map(|m| (m, policies.resolve(&room_id, &PersonaId::new(m.id.as_str())).mode))
            .collect();
        let examples = if self.config.examples.is_empty() {
            modes
                .iter()
                .filter(|(_, mode)| matches!(mode, Mode::Mention | Mode::Ambient | Mode::All))
                .map(|(m, _)| format!("@{} hello", m.name))
                .collect()
        } else {
            self.config.examples.clone()
        };
        let personas: Vec<serde_json::Value> = modes
            .iter()
            .map(|(m, mode)| {
                serde_json::json!({ "id": m.id, "name": m.name, "mode": mode.as_str(), "says": mode.in_plain_words() })
            })
            .collect();
        serde_json::json!({ "personas": personas, "examples": examples })
    }
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

/// How long a delivery waits for the runtime to connect.
const CONNECT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How many events a connection may be behind before it is resynced.
const EVENT_BACKLOG: usize = 1024;

impl WebPlatform {
    /// The personas changed (a config reload): rooms list the new ones
    /// from their next history, and nobody may join under a new one's
    /// name. A removed persona's replies already decided still go out.
    pub fn set_personas(&self, personas: &[PersonaSpec]) {
        let mut cast = Cast::of(personas);
        // Replies still on their way may be by a removed persona.
        let old = self.shared.cast();
        cast.gone = old
            .gone
            .iter()
            .chain(&old.members)
            .filter(|m| !cast.members.iter().any(|n| n.id == m.id))
            .cloned()
            .collect();
        *self
            .shared
            .cast
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(cast);
    }

    /// The room policies in force changed (at start, a reload, the
    /// console): each room's introduction says the personas' modes there.
    pub fn set_policies(&self, table: &PolicyTable) {
        *self
            .shared
            .policies
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(table.clone());
    }

    /// A web room whose members include `personas`.
    pub fn new(config: WebConfig, personas: &[PersonaSpec]) -> Result<Self, WebError> {
        if config.auth_token.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(WebError::BlankToken);
        }
        if !config.listen.ip().is_loopback() && config.auth_token.is_none() {
            return Err(WebError::OpenWithoutToken(config.listen));
        }
        let (events, _) = broadcast::channel(EVENT_BACKLOG);
        Ok(WebPlatform {
            shared: Arc::new(Shared {
                rooms: Mutex::new(HashMap::new()),
                cast: std::sync::RwLock::new(Arc::new(Cast::of(personas))),
                people: Mutex::new(HashMap::new()),
                events,
                next_id: AtomicU64::new(1),
                config,
                runtime: watch::channel(None).0,
                access: OnceLock::new(),
                explainer: Mutex::new(why::Explainer::default()),
                policies: std::sync::RwLock::new(Arc::new(PolicyTable::default())),
                shared_store: std::sync::atomic::AtomicBool::new(false),
                early: Mutex::new(std::collections::VecDeque::new()),
                console: OnceLock::new(),
            }),
        })
    }

    /// Says that the operator console is served at `path` on this room's
    /// own listener (`tactful demo`): the page links to it. Without it the
    /// page shows no link (with `tactful run` the console is on
    /// `[server] listen`, which people in the room need not reach). The
    /// first call counts.
    pub fn link_console(&self, path: &str) {
        let _ = self.shared.console.set(path.to_owned());
    }

    /// Shows `history` (oldest first, as the store kept it) to people who
    /// join, so the rooms survive a restart; reply parts keep their
    /// idempotency keys, so one sent again is not shown twice. New messages
    /// get ids after the restored ones.
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
                let room = rooms.entry(m.room.to_string()).or_default();
                let key = m.key.clone();
                let msg = room.shown_as_web(m);
                room.restore(msg, key, limit);
            }
        });
        self.shared.next_id.fetch_max(highest + 1, Ordering::SeqCst);
    }

    /// Puts back the notes a restart took off the restored messages:
    /// `outputs` are the engine outputs the store kept for them (see
    /// `tactful`'s `web_notes`), oldest first. Nothing is shown while
    /// `show_decisions` is off.
    pub fn restore_notes(&self, outputs: &[Output]) {
        if !self.shared.config.show_decisions {
            return;
        }
        let _ = self.shared.with_rooms(|rooms| {
            for note in outputs.iter().flat_map(why::notes) {
                if let Some(r) = rooms.get_mut(note.room.as_str()) {
                    r.note_why(note.msg.as_str(), note.why);
                }
            }
        });
    }

    /// Ids that must not be handed out again though they are not in the
    /// history: placeholders on record, which a restart deletes (a new
    /// message given such an id would be deleted with it).
    pub fn reserve_ids<'a>(&self, ids: impl IntoIterator<Item = &'a MsgId>) {
        let highest = ids
            .into_iter()
            .filter_map(|id| id.as_str().strip_prefix('w').and_then(|n| n.parse::<u64>().ok()))
            .max()
            .unwrap_or(0);
        self.shared.next_id.fetch_max(highest + 1, Ordering::SeqCst);
    }

    /// Takes in what the runtime traced, to show on each message why each
    /// persona answered it or not (when `show_decisions` is on). Called off
    /// the engine's path, from the task that also feeds the metrics.
    pub fn observe(&self, event: &TraceEvent) {
        let shared = &self.shared;
        if !shared.config.show_decisions {
            return;
        }
        let TraceEvent::Engine(output) = event else {
            return;
        };
        let notes = match shared.explainer.lock() {
            Ok(mut x) => x.notes(output),
            Err(_) => why::notes(output),
        };
        for note in notes {
            shared.announce_note(&note);
            shared.show_note(note);
        }
    }

    /// The configured listen address.
    pub fn listen(&self) -> SocketAddr {
        self.shared.config.listen
    }

    /// Where people's messages go: the runtime's inbound handle.
    pub fn connect_runtime(&self, handle: RuntimeHandle) {
        // Sharing the store: ids from this process's own block, never
        // another's (whose messages the restored history may hold).
        if let Some(block) = handle.id_block() {
            self.shared.next_id.store(block.max(1), Ordering::SeqCst);
        }
        self.shared.runtime.send_replace(Some(handle));
    }

    /// Binds the listener and serves the page and the WebSocket until the
    /// task is dropped. Returns the bound address (useful with port 0).
    pub async fn serve(&self) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
        self.serve_with(|_| None).await
    }

    /// [`WebPlatform::serve`], with more routes on the same listener (the
    /// operator console in `tactful demo`), built once the bound address is
    /// known.
    pub async fn serve_with(
        &self,
        extra: impl FnOnce(SocketAddr) -> Option<Router>,
    ) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
        let listener = tokio::net::TcpListener::bind(self.shared.config.listen).await?;
        let addr = listener.local_addr()?;
        let c = &self.shared.config;
        let access = Access::new(addr, c.allowed_origins.as_deref(), c.auth_token.clone());
        tracing::debug!(origins = ?access.origins(), "web room origins");
        let _ = self.shared.access.set(access);
        // Each chat event is a small frame: with Nagle on, one written right
        // after another waits for the peer's delayed ACK (tens of ms).
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
        });
        let app = Router::new()
            .route("/", get(session::page))
            .route("/r/{room}", get(session::page))
            .route("/ws", get(session::ws))
            .with_state(self.shared.clone());
        let app = match extra(addr) {
            Some(more) => app.merge(more),
            None => app,
        };
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
    /// Shows a note on its message: at once to people who were shown the
    /// message, after it to people who will be (it waits to be stored, or
    /// its announcement from another process is being read), or kept for
    /// when it arrives from another process (a web room's only: other
    /// platforms' rooms, named with a `:`, are never shown here).
    ///
    /// All of it under the rooms' lock: the note is kept for later in the
    /// same step that finds its message missing, so the message, arriving
    /// at that moment, cannot pass it by (it takes what was kept under the
    /// same lock: `others::apply`). Checked and kept in two steps, a note
    /// and its message arriving together lost the note.
    fn show_note(&self, note: why::Note) {
        let room = note.room.as_str();
        let may_arrive = self.shared_store.load(Ordering::Relaxed) && !room.contains(':');
        let _ = self.with_rooms(|rooms| {
            let noted = rooms
                .get_mut(room)
                .map_or(Noted::Unknown, |r| r.note_why(note.msg.as_str(), note.why.clone()));
            match noted {
                Noted::Shown => {
                    let _ = self.events.send((
                        room.to_owned(),
                        serde_json::json!({ "type": "why", "room": room, "msg": note.msg.as_str(), "why": note.why }),
                    ));
                }
                Noted::Unknown if may_arrive => self.keep_early(note.clone()),
                Noted::Waiting | Noted::Kept | Noted::Unknown => {}
            }
        });
    }

    /// Tells the other processes' web rooms of a note made here (their
    /// people see why too). Only web rooms: names with a platform prefix
    /// (`tg:`…) are other platforms' rooms.
    fn announce_note(&self, note: &why::Note) {
        if !self.shared_store.load(Ordering::Relaxed) || note.room.as_str().contains(':') {
            return;
        }
        // Fenced by the room's lease: a process that lost the room must not
        // tell the others of a decision the store refused.
        if let Some(saver) = self.runtime().and_then(|h| h.saver_for(&note.room)) {
            saver.save_later(vec![Op::ShownNote {
                room: note.room.clone(),
                id: note.msg.clone(),
                note: note.why.to_json(),
            }]);
        }
    }

    fn new_id(&self) -> String {
        format!("w{}", self.next_id.fetch_add(1, Ordering::SeqCst))
    }

    /// Runs `f` on the rooms under their lock.
    fn with_rooms<T>(&self, f: impl FnOnce(&mut HashMap<String, Room>) -> T) -> Result<T, PlatformError> {
        let mut rooms = self
            .rooms
            .lock()
            .map_err(|_| PlatformError("the web room's state is poisoned".into()))?;
        Ok(f(&mut rooms))
    }

    fn runtime(&self) -> Option<RuntimeHandle> {
        self.runtime.borrow().clone()
    }

    /// Where deliveries are stored: waits for the runtime to connect (a
    /// runtime delivers only to platforms it was given, which are connected
    /// right after it starts).
    async fn saver(&self) -> Result<Option<Saver>, PlatformError> {
        let mut rx = self.runtime.subscribe();
        let connected = tokio::time::timeout(CONNECT_WAIT, rx.wait_for(Option::is_some)).await;
        match connected {
            Ok(Ok(handle)) => Ok(handle.as_ref().and_then(|h| h.saver().cloned())),
            _ => Err(PlatformError(
                "the web room was never connected to the runtime".into(),
            )),
        }
    }

    /// Marks a queued change stored or refused, and shows what is ready.
    fn settle(&self, room: &str, ticket: u64, ok: bool) {
        let limit = self.config.history;
        let _ = self.with_rooms(|rooms| {
            if let Some(r) = rooms.get_mut(room) {
                r.settle(ticket, ok);
                r.flush(room, limit, &self.events);
            }
        });
    }

    /// A message as the store keeps it.
    fn shown(&self, room: &str, msg: &WebMsg, key: Option<&str>, time: Timestamp) -> Op {
        Op::Shown {
            msg: ShownMessage {
                id: MsgId::new(msg.id.as_str()),
                room: RoomId::new(room),
                key: key.map(str::to_owned),
                sender: UserId::new(msg.sender.id.as_str()),
                sender_name: msg.sender.name.clone(),
                is_bot: msg.sender.bot,
                text: msg.text.clone(),
                reply_to: msg.reply_to.as_deref().map(MsgId::new),
                time,
                reactions: Vec::new(),
            },
            keep: self.config.history,
        }
    }
}

impl Platform for WebPlatform {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            can_edit: true,
            can_delete: true,
            native_replies: true,
            max_message_chars: 4000,
            reactions: true,
            silence_notices: true,
            // A key sent again returns the message it already made.
            deduplicates_sends: true,
            // The rooms no other platform claims.
            rooms: None,
        }
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async move {
            let shared = &self.shared;
            let cast = shared.cast();
            let sender = cast
                .members
                .iter()
                .chain(&cast.gone)
                .find(|p| p.id == msg.persona.as_str())
                .cloned()
                .ok_or_else(|| PlatformError(format!("no persona {} in the web room", msg.persona)))?;
            let room = msg.room.as_str();
            let saver = shared.saver().await?;
            let time = wall_clock();
            let id = shared.with_rooms(|rooms| {
                let r = rooms.entry(room.to_owned()).or_default();
                // A part sent again (after a crash) is the part shown before.
                if let Some(id) = msg.key.and_then(|k| r.by_key(k)) {
                    return id.to_owned();
                }
                let reply_to = msg.reply_to.map(MsgId::as_str);
                let m = WebMsg {
                    id: shared.new_id(),
                    sender,
                    text: msg.text.to_owned(),
                    html: render::html(msg.text),
                    reply_to: reply_to.map(str::to_owned),
                    quote: r.quote(reply_to),
                    time: time.to_rfc3339(),
                    why: Vec::new(),
                    reactions: Vec::new(),
                };
                // Shown at once (after whatever is ahead of it in line,
                // such as a person's message still being stored), and its
                // record queued behind it, not waited for: delivery has
                // committed what it sends (the placeholder's record, the
                // reply) before sending it, so a crash before this record
                // lands is one delivery recovers from by sending again
                // under the same key. At most the part in flight shows
                // twice, as RELIABILITY.md promises; waiting here cost
                // every reply a commit (BENCHMARKS.md). A person's message,
                // which nothing else records, is still stored before it is
                // shown.
                if let Some(saver) = &saver {
                    saver.save_later(vec![shared.shown(room, &m, msg.key, time)]);
                }
                let id = m.id.clone();
                r.queue_new(m, msg.key.map(str::to_owned), true);
                r.flush(room, shared.config.history, &shared.events);
                id
            })?;
            Ok(MsgId::new(id))
        })
    }

    fn edit<'a>(&'a self, at: At<'a>, id: &'a MsgId, text: &'a str) -> Done<'a> {
        let room = at.room;
        Box::pin(async move {
            let shared = &self.shared;
            shared.with_rooms(|rooms| {
                let r = rooms
                    .get_mut(room.as_str())
                    .ok_or_else(|| PlatformError(format!("no message {id} in {room}")))?;
                if !r.knows(id.as_str()) {
                    // The room's new owner deleted it (a placeholder this
                    // process left when it lost the room): say so in the
                    // words delivery knows, so its log says what happened.
                    let why = if r.was_deleted_elsewhere(id.as_str()) {
                        format!(
                            "{id} was deleted by the process that owns {room} now: {}",
                            tactful_runtime::ROOM_MOVED
                        )
                    } else {
                        format!("no message {id} in {room}")
                    };
                    return Err(PlatformError(why));
                }
                r.queue_edit(id.to_string(), text.to_owned());
                r.flush(room.as_str(), shared.config.history, &shared.events);
                Ok::<_, PlatformError>(())
            })??;
            // A lost edit costs only the newest text of a streaming reply;
            // the final reply is sent again if its delivery was not saved.
            if let Some(saver) = shared.saver().await? {
                saver.save_later(vec![Op::ShownEdit {
                    room: room.clone(),
                    id: id.clone(),
                    text: text.to_owned(),
                }]);
            }
            Ok(())
        })
    }

    fn react<'a>(&'a self, at: At<'a>, msg: &'a MsgId, emoji: &'a str) -> Done<'a> {
        let (persona, room) = (at.persona, at.room);
        Box::pin(async move {
            let shared = &self.shared;
            let cast = shared.cast();
            let name = cast
                .members
                .iter()
                .chain(&cast.gone)
                .find(|p| p.id == persona.as_str())
                .map(|p| p.name.clone())
                .ok_or_else(|| PlatformError(format!("no persona {persona} in the web room")))?;
            shared.with_rooms(|rooms| {
                let r = rooms
                    .get_mut(room.as_str())
                    .filter(|r| r.knows(msg.as_str()))
                    .ok_or_else(|| PlatformError(format!("no message {msg} in {room}")))?;
                r.queue_react(msg.to_string(), emoji.to_owned(), name.clone());
                r.flush(room.as_str(), shared.config.history, &shared.events);
                Ok::<_, PlatformError>(())
            })??;
            // Stored before the delivery counts as done, so a restart
            // shows it again (reactions are rare: the wait costs nothing).
            if let Some(saver) = shared.saver().await? {
                saver
                    .save(vec![Op::ShownReact {
                        room: room.clone(),
                        id: msg.clone(),
                        emoji: emoji.to_owned(),
                        by: name,
                    }])
                    .await
                    .map_err(|e| PlatformError(format!("the reaction was shown but not stored: {e}")))?;
            }
            Ok(())
        })
    }

    fn delete<'a>(&'a self, at: At<'a>, id: &'a MsgId) -> Done<'a> {
        let room = at.room;
        Box::pin(async move {
            let shared = &self.shared;
            shared.with_rooms(|rooms| {
                if let Some(r) = rooms.get_mut(room.as_str()) {
                    r.queue_delete(id.to_string());
                    r.flush(room.as_str(), shared.config.history, &shared.events);
                }
            })?;
            if let Some(saver) = shared.saver().await? {
                saver.save_later(vec![Op::ShownDelete {
                    room: room.clone(),
                    id: id.clone(),
                }]);
            }
            Ok(())
        })
    }
}
