//! An in-process double of Discord for tests: the gateway (WebSocket:
//! HELLO, IDENTIFY → READY with `resume_gateway_url` and GUILD_CREATE,
//! heartbeats and ACKs, MESSAGE_CREATE, RESUME → the missed events and
//! RESUMED, opcode 7, a dropped connection) and the REST routes tactful
//! uses (users/@me, create/edit/delete message, typing, join thread, a
//! 429 with `retry_after` and rate-limit headers, a global 429 on every
//! route, a one-off 401), at the root and under `/discord-proxy`. Payloads are built from
//! twilight's model types (`Message`, `User`, `Ready`, `GatewayEvent`), so
//! their shape follows what twilight's maintainers track; the guild, which
//! has no literal form, is JSON in Discord's documented shape.
#![allow(dead_code)] // each test uses some of it

use crate::common::double;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::ws::{Message as Ws, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post, put};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use twilight_model::channel::message::{Mention, Message, MessageReference, MessageType};
use twilight_model::gateway::ShardId;
use twilight_model::gateway::event::{DispatchEvent, GatewayEvent};
use twilight_model::gateway::payload::incoming::{Hello, MessageCreate, Ready};
use twilight_model::id::Id;
use twilight_model::oauth::{ApplicationFlags, PartialApplication};
use twilight_model::user::{CurrentUser, User, UserFlags};
use twilight_model::util::Timestamp;

pub const GUILD: u64 = 900;
pub const CHANNEL: u64 = 100;
pub const THREAD: u64 = 101;
pub const AMBIENT: u64 = 102;
pub const BANTER: u64 = 103;
/// Alice's DM channel with docs's bot.
pub const DM: u64 = 300;
/// The role only docs's bot holds.
pub const DOCS_ROLE: u64 = 500;

/// One bot application.
#[derive(Clone, Debug)]
pub struct Bot {
    pub token: String,
    pub id: u64,
    pub name: String,
    /// Its roles in the guild.
    pub roles: Vec<u64>,
}

/// A REST call and its answer.
#[derive(Clone, Debug)]
pub struct Call {
    pub token: String,
    pub method: String,
    pub path: String,
    pub body: Value,
    pub status: u16,
    pub at: Instant,
}

/// A message as it stands now.
#[derive(Clone, Debug)]
pub struct Shown {
    pub id: u64,
    pub channel: u64,
    /// The bot's token, for messages bots sent.
    pub token: Option<String>,
    pub content: String,
    pub reply_to: Option<u64>,
    pub deleted: bool,
    /// Reactions bots put on it: (token, emoji).
    pub reactions: Vec<(String, String)>,
}

/// One bot's gateway session.
#[derive(Default)]
struct Session {
    id: String,
    /// Dispatches sent in this session, with their sequence numbers.
    log: Vec<(u64, String)>,
    live: Option<mpsc::UnboundedSender<Ws>>,
    task: Option<tokio::task::AbortHandle>,
    identifies: u32,
    resumes: u32,
}

#[derive(Default)]
struct Inner {
    bots: Vec<Bot>,
    sessions: HashMap<String, Session>,
    next_id: u64,
    messages: Vec<Shown>,
    calls: Vec<Call>,
    flood: HashSet<String>,
    /// Bots under a global rate limit, until when.
    global: HashMap<String, Instant>,
    /// Bots whose next request is refused with a 401.
    fail_auth: HashSet<String>,
    /// Bots whose application does not have the Message Content intent on.
    no_message_content: HashSet<String>,
    /// A message created with this in its content is shown and never
    /// answered (once): it reached Discord, the bot does not know it.
    stall: Option<String>,
    /// REST requests that came under `/discord-proxy` and at the root.
    via_path: u32,
    via_root: u32,
}

type Shared = double::State<Inner>;

/// The running double.
pub struct Double {
    /// `http://127.0.0.1:port`: both `api_url` and (as `ws://`) the
    /// gateway.
    pub url: String,
    shared: Arc<Shared>,
    _server: double::Server,
}

pub fn user(id: u64, name: &str, bot: bool) -> User {
    User {
        accent_color: None,
        avatar: None,
        avatar_decoration: None,
        avatar_decoration_data: None,
        banner: None,
        bot,
        discriminator: 0,
        email: None,
        flags: None,
        global_name: None,
        id: Id::new(id),
        locale: None,
        mfa_enabled: None,
        name: name.into(),
        premium_type: None,
        primary_guild: None,
        public_flags: None,
        system: None,
        verified: None,
    }
}

/// What `users/@me` and READY say of a bot.
fn current_user(bot: &Bot) -> CurrentUser {
    CurrentUser {
        accent_color: None,
        avatar: None,
        banner: None,
        bot: true,
        discriminator: 0,
        email: None,
        flags: None,
        global_name: None,
        id: Id::new(bot.id),
        locale: None,
        mfa_enabled: false,
        name: bot.name.clone(),
        premium_type: None,
        public_flags: None,
        verified: None,
    }
}

/// A mention entry of `user`.
pub fn mention(u: &User) -> Mention {
    Mention {
        avatar: None,
        bot: u.bot,
        discriminator: 0,
        id: u.id,
        member: None,
        name: u.name.clone(),
        public_flags: UserFlags::empty(),
    }
}

/// A message by `author` in `channel` (guild `guild`, `None` in a DM).
#[allow(deprecated)] // `interaction` must still be named in a literal
pub fn message(id: u64, channel: u64, guild: Option<u64>, author: User, content: &str) -> Message {
    Message {
        activity: None,
        application: None,
        application_id: None,
        attachments: Vec::new(),
        author,
        call: None,
        channel_id: Id::new(channel),
        components: Vec::new(),
        content: content.into(),
        edited_timestamp: None,
        embeds: Vec::new(),
        flags: None,
        guild_id: guild.map(Id::new),
        id: Id::new(id),
        interaction: None,
        interaction_metadata: None,
        kind: MessageType::Regular,
        member: None,
        mention_channels: Vec::new(),
        mention_everyone: false,
        mention_roles: Vec::new(),
        mentions: Vec::new(),
        message_snapshots: Vec::new(),
        pinned: false,
        poll: None,
        reactions: Vec::new(),
        reference: None,
        referenced_message: None,
        role_subscription_data: None,
        sticker_items: Vec::new(),
        timestamp: Timestamp::from_secs(now_secs()).expect("a timestamp"),
        thread: None,
        tts: false,
        webhook_id: None,
    }
}

/// Makes `m` a reply to message `target` in its channel.
pub fn reply(mut m: Message, target: u64) -> Message {
    m.kind = MessageType::Reply;
    m.reference = Some(MessageReference {
        channel_id: Some(m.channel_id),
        guild_id: m.guild_id,
        kind: Default::default(),
        message_id: Some(Id::new(target)),
        fail_if_not_exists: None,
    });
    m
}

/// MESSAGE_CREATE of `msg` to these bots' sessions: logged for a resume,
/// sent now where connected.
fn broadcast(s: &mut Inner, tokens: &[String], msg: &Message) {
    for token in tokens {
        let session = s.sessions.entry(token.clone()).or_default();
        let seq = session.log.last().map_or(1, |(n, _)| n + 1);
        let ev = MessageCreate {
            channel_type: None,
            message: msg.clone(),
        };
        let text = dispatch(seq, DispatchEvent::MessageCreate(Box::new(ev)));
        session.log.push((seq, text.clone()));
        if let Some(live) = &session.live {
            let _ = live.send(Ws::Text(text.into()));
        }
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn dispatch(seq: u64, ev: DispatchEvent) -> String {
    serde_json::to_string(&GatewayEvent::Dispatch(seq, ev)).expect("serialisable")
}

fn guild_create(seq: u64, bot: &Bot) -> String {
    let roles: Vec<String> = bot.roles.iter().map(u64::to_string).collect();
    json!({"op": 0, "s": seq, "t": "GUILD_CREATE", "d": {
        "id": GUILD.to_string(), "name": "team", "icon": null, "splash": null, "discovery_splash": null,
        "owner_id": "1", "afk_channel_id": null, "afk_timeout": 300, "verification_level": 0,
        "default_message_notifications": 0, "explicit_content_filter": 0, "roles": [], "emojis": [],
        "features": [], "mfa_level": 0, "application_id": null, "system_channel_id": null,
        "system_channel_flags": 0, "rules_channel_id": null, "vanity_url_code": null, "description": null,
        "banner": null, "premium_tier": 0, "preferred_locale": "en-US", "public_updates_channel_id": null,
        "nsfw_level": 0, "premium_progress_bar_enabled": false, "large": false, "unavailable": false,
        "members": [{"user": {"id": bot.id.to_string(), "username": bot.name, "discriminator": "0",
            "avatar": null, "bot": true}, "roles": roles, "joined_at": "2025-01-01T00:00:00.000000+00:00",
            "deaf": false, "mute": false, "flags": 0, "nick": null, "communication_disabled_until": null}],
        "channels": [{"id": CHANNEL.to_string(), "type": 0, "name": "general"},
            {"id": AMBIENT.to_string(), "type": 0, "name": "ambient"},
            {"id": BANTER.to_string(), "type": 0, "name": "banter"}],
        "threads": [{"id": THREAD.to_string(), "type": 11, "parent_id": CHANNEL.to_string(), "name": "deploys",
            "owner_id": "1", "thread_metadata": {"archived": false, "auto_archive_duration": 1440,
            "archive_timestamp": "2025-01-01T00:00:00.000000+00:00", "locked": false}}]
    }})
    .to_string()
}

impl Double {
    pub async fn start(bots: Vec<Bot>) -> Double {
        let (listener, url) = double::bind().await;
        let inner = Inner {
            bots,
            next_id: 10_000,
            ..Inner::default()
        };
        let shared = Arc::new(Shared::new(inner, &url));
        let api = || {
            Router::new()
                .route("/api/v10/users/@me", get(me))
                .route("/api/v10/channels/{c}/messages", post(create))
                .route("/api/v10/channels/{c}/messages/{m}", any(edit_or_delete))
                .route("/api/v10/channels/{c}", get(channel))
                .route("/api/v10/guilds/{g}/members/{u}", get(member))
                .route("/api/v10/channels/{c}/typing", post(no_content))
                .route("/api/v10/channels/{c}/messages/{m}/reactions/{e}/@me", put(react))
                .route("/api/v10/channels/{c}/thread-members/@me", put(no_content))
                .layer(axum::middleware::from_fn_with_state(shared.clone(), limits))
        };
        let counted = |under_path: bool| {
            let shared = shared.clone();
            axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
                let shared = shared.clone();
                async move {
                    {
                        let mut s = shared.inner.lock().expect("double state");
                        if under_path {
                            s.via_path += 1;
                        } else {
                            s.via_root += 1;
                        }
                    }
                    next.run(req).await
                }
            })
        };
        let app = Router::new()
            .nest("/discord-proxy", api().layer(counted(true)))
            .merge(api().layer(counted(false)))
            .route("/", any(gateway))
            .fallback(not_found)
            .with_state(shared.clone());
        let _server = double::serve(listener, app);
        Double { url, shared, _server }
    }

    /// The gateway URL (`ws://...`).
    pub fn gateway(&self) -> String {
        self.url.replacen("http://", "ws://", 1)
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.shared.inner.lock().expect("double state"))
    }

    /// A fresh snowflake.
    pub fn id(&self) -> u64 {
        self.with(|s| {
            s.next_id += 1;
            s.next_id
        })
    }

    /// A person's message, dispatched to the gateway sessions of these
    /// bots (in order); returns its id.
    pub fn post(&self, tokens: &[&str], msg: Message) -> u64 {
        let id = msg.id.get();
        self.with(|s| {
            s.messages.push(Shown {
                id,
                channel: msg.channel_id.get(),
                token: None,
                content: msg.content.clone(),
                reply_to: msg.reference.as_ref().and_then(|r| r.message_id).map(|m| m.get()),
                deleted: false,
                reactions: Vec::new(),
            });
            let tokens: Vec<String> = tokens.iter().map(|t| (*t).to_owned()).collect();
            broadcast(s, &tokens, &msg);
        });
        id
    }

    /// Drops a bot's gateway connection without a close frame.
    pub fn drop_connection(&self, token: &str) {
        self.with(|s| {
            if let Some(session) = s.sessions.get_mut(token) {
                session.live = None;
                if let Some(task) = session.task.take() {
                    task.abort();
                }
            }
        });
    }

    /// Asks a bot to reconnect (opcode 7).
    pub fn reconnect(&self, token: &str) {
        self.with(|s| {
            if let Some(live) = s.sessions.get(token).and_then(|x| x.live.as_ref()) {
                let text = serde_json::to_string(&GatewayEvent::Reconnect).expect("serialisable");
                let _ = live.send(Ws::Text(text.into()));
            }
        });
    }

    /// (IDENTIFYs, RESUMEs) the bot made so far.
    pub fn handshakes(&self, token: &str) -> (u32, u32) {
        self.with(|s| {
            s.sessions
                .get(token)
                .map_or((0, 0), |x| (x.identifies, x.resumes))
        })
    }

    /// Whether the bot is connected and through its handshake.
    pub fn connected(&self, token: &str) -> bool {
        self.with(|s| {
            s.sessions
                .get(token)
                .is_some_and(|x| x.live.is_some() && !x.id.is_empty())
        })
    }

    /// Every request of this bot gets a global 429 for `how_long`
    /// (`X-RateLimit-Global`, `Retry-After` and a body that say so).
    pub fn global_limit(&self, token: &str, how_long: Duration) {
        self.with(|s| s.global.insert(token.to_owned(), Instant::now() + how_long));
    }

    /// This bot's application does not have the Message Content intent
    /// on: an IDENTIFY asking for it is closed with 4014, as Discord does.
    pub fn disallow_message_content(&self, token: &str) {
        self.with(|s| s.no_message_content.insert(token.to_owned()));
    }

    /// The next message created with `marker` in its content is shown to
    /// the channel and never answered, as if the connection died on the
    /// way back.
    pub fn stall_create_with(&self, marker: &str) {
        self.with(|s| s.stall = Some(marker.to_owned()));
    }

    /// This bot's next request is refused with a 401 (a token that comes
    /// back: a proxy restarting, an outage).
    pub fn fail_auth_once(&self, token: &str) {
        self.with(|s| s.fail_auth.insert(token.to_owned()));
    }

    /// REST requests that came under `/discord-proxy`, and at the root.
    pub fn requests_by_path(&self) -> (u32, u32) {
        self.with(|s| (s.via_path, s.via_root))
    }

    /// The next message this bot creates gets a 429 (`retry_after` 1 s).
    pub fn flood_next_send(&self, token: &str) {
        self.with(|s| s.flood.insert(token.to_owned()));
    }

    pub fn calls(&self) -> Vec<Call> {
        self.with(|s| s.calls.clone())
    }

    /// The messages bots show in `channel` now.
    pub fn bot_messages(&self, channel: u64) -> Vec<Shown> {
        self.with(|s| {
            s.messages
                .iter()
                .filter(|m| m.channel == channel && m.token.is_some() && !m.deleted)
                .cloned()
                .collect()
        })
    }

    /// Waits (60 s at most) until `pred` holds.
    pub async fn wait_until(&self, what: &str, pred: impl Fn(&View<'_>) -> bool) {
        // A copy: the predicate may ask the double more.
        let seen = || self.with(|s| (s.calls.clone(), s.messages.clone()));
        let holds = || {
            let (calls, messages) = seen();
            pred(&View {
                calls: &calls,
                messages: &messages,
            })
        };
        let dump = || {
            let (calls, messages) = seen();
            format!("\ncalls: {calls:#?}\nmessages: {messages:#?}")
        };
        let what = format!("the Discord double never saw: {what}");
        double::wait_until(&self.shared.changed, &what, holds, dump).await;
    }
}

/// What a wait can look at.
pub struct View<'a> {
    pub calls: &'a [Call],
    pub messages: &'a [Shown],
}

fn token_of(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_start_matches("Bot ").to_owned())
        .unwrap_or_default()
}

fn log(shared: &Shared, token: String, method: &str, path: String, body: Value, status: u16) {
    shared.inner.lock().expect("double state").calls.push(Call {
        token,
        method: method.to_owned(),
        path,
        body,
        status,
        at: Instant::now(),
    });
    shared.changed.notify_waiters();
}

fn bot_of(shared: &Shared, token: &str) -> Option<Bot> {
    let s = shared.inner.lock().expect("double state");
    s.bots.iter().find(|b| b.token == token).cloned()
}

/// A global rate limit and one-off 401s, before any route.
async fn limits(
    State(shared): State<Arc<Shared>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let token = token_of(req.headers());
    let (global, refused) = {
        let mut s = shared.inner.lock().expect("double state");
        let global = s.global.get(&token).is_some_and(|t| *t > Instant::now());
        (global, !global && s.fail_auth.remove(&token))
    };
    let (method, path) = (req.method().to_string(), req.uri().path().to_owned());
    if global {
        log(&shared, token, &method, path, Value::Null, 429);
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [
                ("retry-after", "2"),
                ("x-ratelimit-global", "true"),
                ("x-ratelimit-scope", "global"),
            ],
            axum::Json(json!({"message": "You are being rate limited.", "retry_after": 2.0, "global": true})),
        )
            .into_response();
    }
    if refused {
        log(&shared, token, &method, path, Value::Null, 401);
        return unauthorized();
    }
    next.run(req).await
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        axum::Json(json!({"message": "401: Unauthorized", "code": 0})),
    )
        .into_response()
}

async fn me(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let token = token_of(&headers);
    let Some(bot) = bot_of(&shared, &token) else {
        return unauthorized();
    };
    log(&shared, token, "GET", "users/@me".into(), Value::Null, 200);
    axum::Json(current_user(&bot)).into_response()
}

async fn create(
    State(shared): State<Arc<Shared>>,
    Path(channel): Path<u64>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let token = token_of(&headers);
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = format!("channels/{channel}/messages");
    let Some(bot) = bot_of(&shared, &token) else {
        return unauthorized();
    };
    let flooded = shared.inner.lock().expect("double state").flood.remove(&token);
    if flooded {
        log(&shared, token, "POST", path, body, 429);
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [
                ("retry-after", "1"),
                ("x-ratelimit-scope", "user"),
                ("x-ratelimit-bucket", "create-message"),
                ("x-ratelimit-limit", "5"),
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset-after", "1.000"),
            ],
            axum::Json(
                json!({"message": "You are being rate limited.", "retry_after": 1.0, "global": false}),
            ),
        )
            .into_response();
    }
    let id = {
        let mut s = shared.inner.lock().expect("double state");
        s.next_id += 1;
        let id = s.next_id;
        s.messages.push(Shown {
            id,
            channel,
            token: Some(token.clone()),
            content: body["content"].as_str().unwrap_or_default().to_owned(),
            reply_to: body["message_reference"]["message_id"]
                .as_str()
                .and_then(|m| m.parse().ok()),
            deleted: false,
            reactions: Vec::new(),
        });
        id
    };
    log(&shared, token, "POST", path, body.clone(), 200);
    let stalled = {
        let mut s = shared.inner.lock().expect("double state");
        let content = body["content"].as_str().unwrap_or_default();
        s.stall
            .take_if(|marker| content.contains(marker.as_str()))
            .is_some()
    };
    if stalled {
        shared.changed.notify_waiters();
        return std::future::pending().await;
    }
    let guild = (channel != DM).then_some(GUILD);
    let mut m = message(
        id,
        channel,
        guild,
        user(bot.id, &bot.name, true),
        body["content"].as_str().unwrap_or_default(),
    );
    if let Some(target) = body["message_reference"]["message_id"]
        .as_str()
        .and_then(|t| t.parse().ok())
    {
        m = reply(m, target);
    }
    // Discord shows a bot's guild message to every bot there, the
    // personas' own included.
    if guild.is_some() {
        let mut s = shared.inner.lock().expect("double state");
        let tokens: Vec<String> = s.bots.iter().map(|b| b.token.clone()).collect();
        broadcast(&mut s, &tokens, &m);
    }
    axum::Json(m).into_response()
}

async fn edit_or_delete(
    State(shared): State<Arc<Shared>>,
    Path((channel, id)): Path<(u64, u64)>,
    method: axum::http::Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let token = token_of(&headers);
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = format!("channels/{channel}/messages/{id}");
    let Some(bot) = bot_of(&shared, &token) else {
        return unauthorized();
    };
    let found = {
        let mut s = shared.inner.lock().expect("double state");
        let m = s
            .messages
            .iter_mut()
            .find(|m| m.id == id && m.channel == channel && !m.deleted && m.token.as_deref() == Some(&token));
        match (m, method.as_str()) {
            (Some(m), "PATCH") => {
                m.content = body["content"].as_str().unwrap_or_default().to_owned();
                Some(m.clone())
            }
            (Some(m), "DELETE") => {
                m.deleted = true;
                Some(m.clone())
            }
            _ => None,
        }
    };
    let status = if found.is_some() { 200 } else { 404 };
    log(&shared, token, method.as_str(), path, body, status);
    match (found, method.as_str()) {
        (Some(m), "PATCH") => axum::Json(message(
            m.id,
            channel,
            Some(GUILD),
            user(bot.id, &bot.name, true),
            &m.content,
        ))
        .into_response(),
        (Some(_), _) => StatusCode::NO_CONTENT.into_response(),
        (None, _) => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"message": "Unknown Message", "code": 10008})),
        )
            .into_response(),
    }
}

/// `PUT /channels/{c}/messages/{m}/reactions/{emoji}/@me`: the bot reacts
/// (the emoji is URL-encoded in the path, as Discord documents); 204, or
/// Discord's 10008 for a message it does not know.
async fn react(
    State(shared): State<Arc<Shared>>,
    Path((channel, id, emoji)): Path<(u64, u64, String)>,
    headers: HeaderMap,
) -> Response {
    let token = token_of(&headers);
    if bot_of(&shared, &token).is_none() {
        return unauthorized();
    }
    let found = {
        let mut s = shared.inner.lock().expect("double state");
        match s
            .messages
            .iter_mut()
            .find(|m| m.id == id && m.channel == channel && !m.deleted)
        {
            Some(m) => {
                if !m.reactions.iter().any(|(t, e)| *t == token && *e == emoji) {
                    m.reactions.push((token.clone(), emoji.clone()));
                }
                true
            }
            None => false,
        }
    };
    let status = if found { 204 } else { 404 };
    let path = format!("channels/{channel}/messages/{id}/reactions/{emoji}/@me");
    log(&shared, token, "PUT", path, Value::Null, status);
    if found {
        StatusCode::NO_CONTENT.into_response()
    } else {
        (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"message": "Unknown Message", "code": 10008})),
        )
            .into_response()
    }
}

async fn no_content(
    State(shared): State<Arc<Shared>>,
    uri: axum::http::Uri,
    method: axum::http::Method,
    headers: HeaderMap,
) -> Response {
    let path = uri.path().trim_start_matches("/api/v10/").to_owned();
    log(
        &shared,
        token_of(&headers),
        method.as_str(),
        path,
        Value::Null,
        204,
    );
    StatusCode::NO_CONTENT.into_response()
}

/// `GET channels/{id}`: what GUILD_CREATE also says.
async fn channel(State(shared): State<Arc<Shared>>, Path(c): Path<u64>, headers: HeaderMap) -> Response {
    log(
        &shared,
        token_of(&headers),
        "GET",
        format!("channels/{c}"),
        Value::Null,
        200,
    );
    let body = match c {
        THREAD => json!({"id": THREAD.to_string(), "type": 11, "guild_id": GUILD.to_string(),
            "parent_id": CHANNEL.to_string(), "name": "deploys"}),
        DM => json!({"id": DM.to_string(), "type": 1}),
        other => {
            json!({"id": other.to_string(), "type": 0, "guild_id": GUILD.to_string(), "name": "channel"})
        }
    };
    axum::Json(body).into_response()
}

/// `GET guilds/{g}/members/{u}`: a bot's roles, as GUILD_CREATE says.
async fn member(
    State(shared): State<Arc<Shared>>,
    Path((g, u)): Path<(u64, u64)>,
    headers: HeaderMap,
) -> Response {
    log(
        &shared,
        token_of(&headers),
        "GET",
        format!("guilds/{g}/members/{u}"),
        Value::Null,
        200,
    );
    let bot = shared
        .inner
        .lock()
        .expect("double state")
        .bots
        .iter()
        .find(|b| b.id == u)
        .cloned();
    match bot {
        Some(b) => axum::Json(
            json!({"user": {"id": b.id.to_string(), "username": b.name, "discriminator": "0",
            "avatar": null, "bot": true}, "roles": b.roles.iter().map(u64::to_string).collect::<Vec<_>>(),
            "joined_at": "2025-01-01T00:00:00.000000+00:00", "deaf": false, "mute": false, "flags": 0,
            "nick": null, "communication_disabled_until": null}),
        )
        .into_response(),
        None => not_found(format!("/guilds/{g}/members/{u}").parse().expect("a path")).await,
    }
}

async fn not_found(uri: axum::http::Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"message": format!("404: Not Found {}", uri.path()), "code": 0})),
    )
        .into_response()
}

async fn gateway(State(shared): State<Arc<Shared>>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| session(shared, socket))
}

/// One gateway connection: HELLO, then IDENTIFY or RESUME, heartbeats.
async fn session(shared: Arc<Shared>, socket: WebSocket) {
    use futures::{SinkExt, StreamExt};
    let (mut sink, mut stream) = socket.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Ws>();
    let writer = tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            if sink.send(m).await.is_err() {
                return;
            }
        }
    });
    // The reader's handle, for whichever bot identifies on this
    // connection (so the test can drop it).
    let slot: Arc<Mutex<Option<tokio::task::AbortHandle>>> = Arc::default();
    let reader = {
        let shared = shared.clone();
        let tx = tx.clone();
        let slot = slot.clone();
        tokio::spawn(async move {
            while let Some(Ok(frame)) = stream.next().await {
                let Ws::Text(text) = frame else {
                    continue;
                };
                let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                match v["op"].as_u64() {
                    Some(1) => {
                        let ack = serde_json::to_string(&GatewayEvent::HeartbeatAck).expect("serialisable");
                        let _ = tx.send(Ws::Text(ack.into()));
                    }
                    Some(2) => identify(&shared, &v["d"], &tx, slot.lock().ok().and_then(|mut s| s.take())),
                    Some(6) => resume(&shared, &v["d"], &tx, slot.lock().ok().and_then(|mut s| s.take())),
                    _ => {}
                }
            }
        })
    };
    if let Ok(mut s) = slot.lock() {
        *s = Some(reader.abort_handle());
    }
    let hello = serde_json::to_string(&GatewayEvent::Hello(Hello {
        heartbeat_interval: 41_250,
    }))
    .expect("serialisable");
    let _ = tx.send(Ws::Text(hello.into()));
    // Dropping the connection aborts the reader; the writer goes with it.
    let _ = reader.await;
    writer.abort();
}

fn bot_token(d: &Value) -> String {
    d["token"]
        .as_str()
        .unwrap_or_default()
        .trim_start_matches("Bot ")
        .to_owned()
}

fn identify(
    shared: &Arc<Shared>,
    d: &Value,
    tx: &mpsc::UnboundedSender<Ws>,
    task: Option<tokio::task::AbortHandle>,
) {
    let token = bot_token(d);
    let mut s = shared.inner.lock().expect("double state");
    let Some(bot) = s.bots.iter().find(|b| b.token == token).cloned() else {
        let _ = tx.send(Ws::Close(Some(axum::extract::ws::CloseFrame {
            code: 4004,
            reason: "Authentication failed.".into(),
        })));
        return;
    };
    // Bit 15: MESSAGE_CONTENT.
    let wants_content = d["intents"].as_u64().is_some_and(|i| i & (1 << 15) != 0);
    if wants_content && s.no_message_content.contains(&token) {
        let _ = tx.send(Ws::Close(Some(axum::extract::ws::CloseFrame {
            code: 4014,
            reason: "Disallowed intent(s).".into(),
        })));
        return;
    }
    let session = s.sessions.entry(token).or_default();
    session.identifies += 1;
    session.id = format!("session-{}-{}", bot.id, session.identifies);
    session.log.clear();
    session.live = Some(tx.clone());
    session.task = task;
    let ready = Ready {
        application: PartialApplication {
            flags: ApplicationFlags::empty(),
            id: Id::new(bot.id),
        },
        guilds: Vec::new(),
        resume_gateway_url: shared.url.replacen("http://", "ws://", 1),
        session_id: session.id.clone(),
        shard: Some(ShardId::ONE),
        user: current_user(&bot),
        version: 10,
    };
    for (seq, text) in [
        (1, dispatch(1, DispatchEvent::Ready(ready))),
        (2, guild_create(2, &bot)),
    ] {
        session.log.push((seq, text.clone()));
        let _ = tx.send(Ws::Text(text.into()));
    }
    drop(s);
    shared.changed.notify_waiters();
}

fn resume(
    shared: &Arc<Shared>,
    d: &Value,
    tx: &mpsc::UnboundedSender<Ws>,
    task: Option<tokio::task::AbortHandle>,
) {
    let token = bot_token(d);
    let seq = d["seq"].as_u64().unwrap_or(0);
    let mut s = shared.inner.lock().expect("double state");
    let Some(session) = s
        .sessions
        .get_mut(&token)
        .filter(|x| d["session_id"] == x.id.as_str())
    else {
        let text = serde_json::to_string(&GatewayEvent::InvalidateSession(false)).expect("serialisable");
        let _ = tx.send(Ws::Text(text.into()));
        return;
    };
    session.resumes += 1;
    session.live = Some(tx.clone());
    session.task = task;
    for (n, text) in &session.log {
        if *n > seq {
            let _ = tx.send(Ws::Text(text.clone().into()));
        }
    }
    let last = session.log.last().map_or(seq, |(n, _)| *n);
    let resumed = json!({"op": 0, "s": last, "t": "RESUMED", "d": {}}).to_string();
    let _ = tx.send(Ws::Text(resumed.into()));
    drop(s);
    shared.changed.notify_waiters();
}
