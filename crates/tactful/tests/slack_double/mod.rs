//! An in-process double of Slack for tests: the Web API methods tactful
//! calls (`apps.connections.open`, `auth.test`, `users.info`,
//! `chat.postMessage`, `chat.update`, `chat.delete`, a 429 with
//! `Retry-After`, a `users.info` as slow as asked) and Socket Mode (a WebSocket per app: `hello`,
//! `events_api` envelopes that must be acknowledged with their
//! `envelope_id`, redelivery of what was not, `disconnect`). Events are
//! built from slack-morphism's models (`SlackMessageEvent`,
//! `SlackPushEventCallback`, `SlackUser`, the chat responses), so their
//! shape is what its maintainers track; the Socket Mode frames, whose
//! types slack-morphism does not export, are JSON in Slack's documented
//! shape. Like Slack, the double shows every app the messages posted in
//! its channels, the apps' own included, and edits and deletions as
//! `message_changed` and `message_deleted` events.
#![allow(dead_code)] // each test uses some of it

use crate::common::double;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::ws::{Message as Ws, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::{Value, json};
use slack_morphism::prelude::*;
use tokio::sync::mpsc;

pub const TEAM: &str = "T0DOUBLE";
pub const CHANNEL: &str = "C0GENERAL";
pub const AMBIENT: &str = "C0AMBIENT";
pub const PRIVATE: &str = "C0PRIVATE";

/// One Slack app (a persona's).
#[derive(Clone, Debug)]
pub struct App {
    pub app_id: String,
    pub bot_token: String,
    pub app_token: String,
    /// The bot user.
    pub user: String,
    pub bot_id: String,
    pub name: String,
}

/// A Web API call and its answer.
pub use double::Call;

/// A message as it stands now.
#[derive(Clone, Debug)]
pub struct Shown {
    pub channel: String,
    pub ts: String,
    pub thread_ts: Option<String>,
    /// The bot token, for messages apps posted.
    pub token: Option<String>,
    pub text: String,
    pub deleted: bool,
    /// Reactions apps added: (bot token, emoji name).
    pub reactions: Vec<(String, String)>,
}

/// One envelope sent (or queued) to an app.
#[derive(Clone, Debug)]
pub struct Envelope {
    pub id: String,
    pub app: usize,
    /// The event's `ts` (its message's id).
    pub ts: String,
    pub payload: Value,
    pub attempt: u32,
    pub sent: bool,
    /// When it went out.
    pub sent_at: Option<Instant>,
    pub acked: bool,
    /// When its ack arrived.
    pub acked_at: Option<Instant>,
}

/// How long Slack waits for an ack before it counts an envelope as not
/// acknowledged (and delivers it again).
pub const ACK_DEADLINE: Duration = Duration::from_secs(3);

#[derive(Default)]
struct Socket {
    live: Option<mpsc::UnboundedSender<Ws>>,
    opens: u32,
    sockets: u32,
    lose_acks: bool,
}

#[derive(Default)]
struct Inner {
    apps: Vec<App>,
    people: HashMap<String, String>,
    sockets: Vec<Socket>,
    tickets: HashMap<String, usize>,
    envelopes: Vec<Envelope>,
    messages: Vec<Shown>,
    calls: Vec<Call>,
    flood: HashSet<String>,
    clock: u64,
    /// Every envelope id acknowledged, in order.
    acks: Vec<String>,
    /// People whose profile says `is_bot`.
    bot_users: HashSet<String>,
    /// How long `users.info` takes to answer.
    users_info_delay: Duration,
    /// A `chat.postMessage` whose text holds this is shown and never
    /// answered (once): it reached Slack, the app does not know it.
    stall: Option<String>,
    /// The answer being made is the stalled one.
    stalled: bool,
}

impl Inner {
    fn ts(&mut self) -> String {
        self.clock += 1;
        format!("1700000000.{:06}", self.clock)
    }

    /// Sends (or queues, while the app has no socket) an envelope.
    fn envelope(&mut self, app: usize, ts: &str, event: &Value, attempt: u32) {
        self.clock += 1;
        let id = format!("env-{}", self.clock);
        let mut payload = serde_json::to_value(SlackPushEventCallback::new(
            TEAM.into(),
            self.apps[app].app_id.clone().into(),
            serde_json::from_value(event.clone()).expect("an event"),
            format!("Ev{}", self.clock).into(),
            now(),
        ))
        .expect("serialisable");
        payload["type"] = json!("event_callback");
        let mut env = Envelope {
            id,
            app,
            ts: ts.to_owned(),
            payload,
            attempt,
            sent: false,
            sent_at: None,
            acked: false,
            acked_at: None,
        };
        self.send(&mut env);
        self.envelopes.push(env);
    }

    fn send(&mut self, env: &mut Envelope) {
        let frame = json!({
            "type": "events_api",
            "envelope_id": env.id,
            "accepts_response_payload": false,
            "retry_attempt": env.attempt,
            "retry_reason": if env.attempt > 0 { "timeout" } else { "" },
            "payload": env.payload,
        });
        if let Some(live) = &self.sockets[env.app].live {
            env.sent = live.send(Ws::Text(frame.to_string().into())).is_ok();
            env.sent_at = env.sent.then(Instant::now);
        }
    }

    /// Shows `event` (a message event in `channel`) to every app but the
    /// ones in `not`.
    fn broadcast(&mut self, ts: &str, event: &Value, to: &[usize]) {
        for &app in to {
            self.envelope(app, ts, event, 0);
        }
    }

    /// Records `m` as said at `ts` and shows it to the apps `to`.
    fn say(&mut self, to: &[usize], m: SlackMessageEvent, ts: &str) {
        let m = with_ts(m, ts);
        self.messages.push(Shown {
            channel: m
                .origin
                .channel
                .as_ref()
                .map(|c| c.to_string())
                .unwrap_or_default(),
            ts: ts.to_owned(),
            thread_ts: m.origin.thread_ts.as_ref().map(|t| t.to_string()),
            token: None,
            text: m
                .content
                .as_ref()
                .and_then(|c| c.text.clone())
                .unwrap_or_default(),
            deleted: false,
            reactions: Vec::new(),
        });
        let ev = event_json(SlackEventCallbackBody::Message(m));
        self.broadcast(ts, &ev, to);
    }

    fn all_apps(&self) -> Vec<usize> {
        (0..self.apps.len()).collect()
    }
}

/// Now, as Slack dates events (seconds).
fn now() -> SlackDateTime {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    serde_json::from_value(json!(secs)).expect("a date")
}

type Shared = double::State<Inner>;

/// The running double.
pub struct Double {
    /// `http://127.0.0.1:port`; the Web API is under `/api`.
    pub url: String,
    shared: Arc<Shared>,
    _server: double::Server,
}

/// A person's (or a bot's) message event in `channel`.
pub fn message(channel: &str, user: &str, text: &str) -> SlackMessageEvent {
    SlackMessageEvent::new(
        SlackMessageOrigin::new(SlackTs::new(String::new()))
            .with_channel(channel.into())
            .with_channel_type(SlackChannelType("channel".into())),
        SlackMessageSender::new().with_user(user.into()),
    )
    .with_content(SlackMessageContent::new().with_text(text.into()))
}

/// `m` as a reply in the thread `thread_ts`.
pub fn in_thread(mut m: SlackMessageEvent, thread_ts: &str) -> SlackMessageEvent {
    m.origin.thread_ts = Some(thread_ts.into());
    m
}

/// A DM (`im` channel) message.
pub fn dm(channel: &str, user: &str, text: &str) -> SlackMessageEvent {
    let mut m = message(channel, user, text);
    m.origin.channel_type = Some(SlackChannelType("im".into()));
    m
}

/// Another app's bot message.
pub fn bot_message(channel: &str, bot_id: &str, name: &str, text: &str) -> SlackMessageEvent {
    let mut m = message(channel, "", text);
    m.sender = SlackMessageSender::new()
        .with_bot_id(bot_id.into())
        .with_username(name.into());
    m.subtype = Some(SlackMessageEventType::BotMessage);
    m
}

fn with_ts(mut m: SlackMessageEvent, ts: &str) -> SlackMessageEvent {
    m.origin.ts = ts.into();
    m
}

fn event_json(body: SlackEventCallbackBody) -> Value {
    serde_json::to_value(body).expect("serialisable")
}

impl Double {
    pub async fn start(apps: Vec<App>, people: &[(&str, &str)]) -> Double {
        let (listener, url) = double::bind().await;
        let sockets = apps.iter().map(|_| Socket::default()).collect();
        let inner = Inner {
            apps,
            people: people
                .iter()
                .map(|(id, name)| ((*id).to_owned(), (*name).to_owned()))
                .collect(),
            sockets,
            ..Inner::default()
        };
        let shared = Arc::new(Shared::new(inner, &url));
        let app = Router::new()
            .route("/api/{method}", any(web_api))
            .route("/link/", get(link))
            .with_state(shared.clone());
        let _server = double::serve(listener, app);
        Double { url, shared, _server }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let out = f(&mut self.shared.inner.lock().expect("double state"));
        self.shared.changed.notify_waiters();
        out
    }

    /// A person says `m` (its `ts` is given here); the apps `to` (by
    /// index) get it as a `message` event. Returns its `ts`.
    pub fn post(&self, to: &[usize], m: SlackMessageEvent) -> String {
        self.with(|s| {
            let ts = s.ts();
            s.say(to, m, &ts);
            ts
        })
    }

    /// Like [`Double::post`], but app `first` gets the message as an
    /// `app_mention` event before the `message` events go out (Slack does
    /// not order the two).
    pub fn post_mentioning(&self, first: usize, to: &[usize], m: SlackMessageEvent) -> String {
        self.with(|s| {
            let ts = s.ts();
            let user = m.sender.user.as_ref().map(|u| u.to_string()).unwrap_or_default();
            let mut ev = SlackAppMentionEvent::new(
                user.into(),
                m.origin.channel.clone().expect("a channel"),
                m.content.clone().unwrap_or_else(SlackMessageContent::new),
                SlackMessageOrigin::new(ts.clone().into()),
            );
            ev.origin.thread_ts = m.origin.thread_ts.clone();
            let ev = event_json(SlackEventCallbackBody::AppMention(ev));
            s.envelope(first, &ts, &ev, 0);
            s.say(to, m, &ts);
            ts
        })
    }

    /// People tactful has not seen before, with their names.
    pub fn add_people(&self, people: &[(String, String)]) {
        self.with(|s| s.people.extend(people.iter().cloned()));
    }

    /// `users.info` takes `delay` to answer from now on.
    pub fn slow_users_info(&self, delay: Duration) {
        self.with(|s| s.users_info_delay = delay);
    }

    /// Someone whose profile says they are a bot (an app's bot user).
    pub fn add_bot_user(&self, id: &str, name: &str) {
        self.with(|s| {
            s.people.insert(id.to_owned(), name.to_owned());
            s.bot_users.insert(id.to_owned());
        });
    }

    /// An edit of a person's message, as Slack reports it.
    pub fn edit(&self, ts: &str, text: &str) {
        self.with(|s| {
            let Some(m) = s.messages.iter_mut().find(|m| m.ts == ts) else {
                return;
            };
            m.text = text.to_owned();
            let channel = m.channel.clone();
            let now = s.ts();
            let ev = json!({
                "type": "message", "subtype": "message_changed", "channel": channel,
                "channel_type": "channel", "ts": now, "event_ts": now, "hidden": true,
                "message": {"type": "message", "user": "U0ALICE", "text": text, "ts": ts,
                            "edited": {"user": "U0ALICE", "ts": now}},
                "previous_message": {"type": "message", "user": "U0ALICE", "text": "before", "ts": ts},
            });
            let all = s.all_apps();
            s.broadcast(&now, &ev, &all);
        });
    }

    /// Sends again, as Slack does when no ack came in time, every
    /// envelope not acknowledged yet, on the apps' live sockets.
    pub fn redeliver_unacked(&self) -> usize {
        self.redeliver_where(|_| true)
    }

    /// [`Double::redeliver_unacked`] for the envelopes of these messages
    /// only (others may just not have been read yet).
    pub fn redeliver_unacked_of(&self, messages: &[&str]) -> usize {
        self.redeliver_where(|e| messages.contains(&e.ts.as_str()))
    }

    fn redeliver_where(&self, which: impl Fn(&Envelope) -> bool) -> usize {
        self.with(|s| {
            let pending: Vec<Envelope> = s
                .envelopes
                .iter()
                .filter(|e| !e.acked && which(e))
                .cloned()
                .collect();
            for e in &pending {
                if let Some(old) = s.envelopes.iter_mut().find(|x| x.id == e.id) {
                    // Superseded by the retry.
                    old.acked = true;
                }
                let event = e.payload["event"].clone();
                s.envelope(e.app, &e.ts, &event, e.attempt + 1);
            }
            pending.len()
        })
    }

    /// Sends the message `ts` to app `app` again, as a retry of its first
    /// envelope (as if that ack had been lost).
    pub fn redeliver(&self, app: usize, ts: &str) {
        self.with(|s| {
            let first = s
                .envelopes
                .iter()
                .find(|e| e.app == app && e.ts == ts)
                .cloned()
                .expect("an envelope of that message");
            let event = first.payload["event"].clone();
            s.envelope(app, ts, &event, first.attempt + 1);
        });
    }

    /// Sends `frame` as it is on app `app`'s socket (a malformed one,
    /// say).
    pub fn send_frame(&self, app: usize, frame: &str) {
        self.with(|s| {
            if let Some(live) = &s.sockets[app].live {
                let _ = live.send(Ws::Text(frame.to_owned().into()));
            }
        });
    }

    /// Whether an ack for envelope `id` arrived.
    pub fn acked(&self, id: &str) -> bool {
        self.with(|s| s.acks.iter().any(|a| a == id))
    }

    /// Acks from app `app` are lost on the way (or stop being lost).
    pub fn lose_acks(&self, app: usize, lose: bool) {
        self.with(|s| s.sockets[app].lose_acks = lose);
    }

    /// Slack asks app `app` to reconnect: a `disconnect` envelope, after
    /// which nothing more goes over that socket.
    pub fn disconnect(&self, app: usize) {
        self.with(|s| {
            if let Some(live) = s.sockets[app].live.take() {
                let frame = json!({"type": "disconnect", "reason": "refresh_requested",
                                   "debug_info": {"host": "double"}});
                let _ = live.send(Ws::Text(frame.to_string().into()));
            }
        });
    }

    /// How many times app `app` called `apps.connections.open`, and how
    /// many sockets it opened.
    pub fn opens(&self, app: usize) -> (u32, u32) {
        self.with(|s| (s.sockets[app].opens, s.sockets[app].sockets))
    }

    pub fn connected(&self, app: usize) -> bool {
        self.with(|s| s.sockets[app].live.is_some())
    }

    /// The next `chat.postMessage` with `marker` in its text is shown
    /// to the channel and never answered, as if the connection died on
    /// the way back.
    pub fn stall_post_with(&self, marker: &str) {
        self.with(|s| s.stall = Some(marker.to_owned()));
    }

    /// The next `chat.postMessage` with `token` is refused with a 429.
    pub fn flood_next_post(&self, token: &str) {
        self.with(|s| s.flood.insert(token.to_owned()));
    }

    pub fn calls(&self) -> Vec<Call> {
        self.with(|s| s.calls.clone())
    }

    /// Whether every envelope of message `ts` went out and was not
    /// acknowledged within Slack's deadline: by Slack's rules, not
    /// acknowledged at all.
    pub fn unacknowledged(&self, ts: &str) -> bool {
        self.with(|s| {
            let copies: Vec<&Envelope> = s.envelopes.iter().filter(|e| e.ts == ts).collect();
            !copies.is_empty()
                && copies
                    .iter()
                    .all(|e| !e.acked && e.sent_at.is_some_and(|t| t.elapsed() >= ACK_DEADLINE))
        })
    }

    pub fn envelopes(&self) -> Vec<Envelope> {
        self.with(|s| s.envelopes.clone())
    }

    /// The apps' messages in `channel`, as they stand.
    pub fn bot_messages(&self, channel: &str) -> Vec<Shown> {
        self.with(|s| {
            s.messages
                .iter()
                .filter(|m| m.channel == channel && m.token.is_some() && !m.deleted)
                .cloned()
                .collect()
        })
    }

    /// Waits (60 s at most) until `pred` holds.
    pub async fn wait_until(&self, what: &str, pred: impl Fn(&Double) -> bool) {
        let dump = || {
            let messages = self.with(|s| s.messages.clone());
            format!("\ncalls: {:#?}\nmessages: {messages:#?}", self.calls())
        };
        let what = format!("the Slack double never saw: {what}");
        double::wait_until(&self.shared.changed, &what, || pred(self), dump).await;
    }
}

fn token_of(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_start_matches("Bearer ").to_owned())
        .unwrap_or_default()
}

fn ok(mut v: Value) -> Value {
    v["ok"] = json!(true);
    v
}

fn failed(error: &str) -> Value {
    json!({"ok": false, "error": error})
}

/// Every Web API method: the arguments come as JSON or as a query.
async fn web_api(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let token = token_of(&headers);
    let args: Value = if body.is_empty() {
        serde_json::to_value(&query).unwrap_or(Value::Null)
    } else {
        serde_json::from_slice(&body).unwrap_or_else(|_| {
            // A form body: `a=b&c=d`.
            let form: HashMap<String, String> = url_decode(&body);
            serde_json::to_value(form).unwrap_or(Value::Null)
        })
    };
    if method == "users.info" {
        let delay = shared.inner.lock().expect("double state").users_info_delay;
        tokio::time::sleep(delay).await;
    }
    let (status, answer) = {
        let mut s = shared.inner.lock().expect("double state");
        answer(&mut s, &shared.url, &method, &token, &args)
    };
    let stalled = {
        let mut s = shared.inner.lock().expect("double state");
        s.calls.push(Call {
            token,
            method,
            body: args,
            status: status.as_u16(),
            at: Instant::now(),
        });
        std::mem::take(&mut s.stalled)
    };
    shared.changed.notify_waiters();
    if stalled {
        return std::future::pending().await;
    }
    if status == StatusCode::TOO_MANY_REQUESTS {
        return (status, [("retry-after", "1")], axum::Json(answer)).into_response();
    }
    (status, axum::Json(answer)).into_response()
}

fn url_decode(body: &[u8]) -> HashMap<String, String> {
    String::from_utf8_lossy(body)
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.replace('+', " ")))
        .collect()
}

fn answer(s: &mut Inner, url: &str, method: &str, token: &str, args: &Value) -> (StatusCode, Value) {
    let by_app = s.apps.iter().position(|a| a.app_token == token);
    let by_bot = s.apps.iter().position(|a| a.bot_token == token);
    let arg = |k: &str| args[k].as_str().unwrap_or_default().to_owned();
    match (method, by_app, by_bot) {
        ("apps.connections.open", Some(app), _) => {
            s.clock += 1;
            let ticket = format!("ticket-{}", s.clock);
            s.tickets.insert(ticket.clone(), app);
            s.sockets[app].opens += 1;
            let ws = url.replace("http://", "ws://");
            (
                StatusCode::OK,
                ok(json!({"url": format!("{ws}/link/?ticket={ticket}")})),
            )
        }
        ("auth.test", _, Some(app)) => {
            let a = &s.apps[app];
            let r = SlackApiAuthTestResponse::new(
                a.user.clone().into(),
                TEAM.into(),
                "Double".into(),
                serde_json::from_value(json!("https://double.slack.com/")).expect("a URL"),
            )
            .with_user(a.name.clone())
            .with_bot_id(a.bot_id.clone().into());
            (StatusCode::OK, ok(serde_json::to_value(r).expect("serialisable")))
        }
        ("users.info", _, Some(_)) => {
            let id = arg("user");
            match s.people.get(&id) {
                Some(name) => {
                    let flags = SlackUserFlags::new().with_is_bot(s.bot_users.contains(&id));
                    let user = SlackUser::new(id.clone().into(), flags)
                        .with_name(name.to_lowercase())
                        .with_profile(SlackUserProfile::new().with_display_name(name.clone()));
                    let r = SlackApiUsersInfoResponse::new(user);
                    (StatusCode::OK, ok(serde_json::to_value(r).expect("serialisable")))
                }
                None => (StatusCode::OK, failed("user_not_found")),
            }
        }
        ("chat.postMessage", _, Some(app)) => {
            if s.flood.remove(token) {
                return (StatusCode::TOO_MANY_REQUESTS, failed("ratelimited"));
            }
            let channel = arg("channel");
            let text = arg("text");
            let thread_ts = args["thread_ts"].as_str().map(str::to_owned);
            if let Some(t) = &thread_ts
                && !s
                    .messages
                    .iter()
                    .any(|m| &m.ts == t && m.thread_ts.as_ref().is_none_or(|p| p == t))
            {
                // Slack wants a thread's parent here, never a reply.
                return (StatusCode::OK, failed("invalid_thread_ts"));
            }
            if s.stall.take_if(|m| text.contains(m.as_str())).is_some() {
                s.stalled = true;
            }
            let ts = s.ts();
            s.messages.push(Shown {
                channel: channel.clone(),
                ts: ts.clone(),
                thread_ts: thread_ts.clone(),
                token: Some(token.to_owned()),
                text: text.clone(),
                deleted: false,
                reactions: Vec::new(),
            });
            let a = s.apps[app].clone();
            let mut m = message(&channel, &a.user, &text);
            m.sender = m.sender.with_bot_id(a.bot_id.clone().into());
            m.origin.thread_ts = thread_ts.clone().map(Into::into);
            let m = with_ts(m, &ts);
            let r = SlackApiChatPostMessageResponse::new(
                channel.clone().into(),
                ts.clone().into(),
                SlackMessage::new(
                    SlackMessageOrigin::new(ts.clone().into()),
                    SlackMessageContent::new().with_text(text),
                    SlackMessageSender::new().with_user(a.user.clone().into()),
                    SlackParentMessageParams::new(),
                ),
            );
            // Every app in the channel sees it, the poster's own included.
            let ev = event_json(SlackEventCallbackBody::Message(m));
            let all = s.all_apps();
            s.broadcast(&ts, &ev, &all);
            (StatusCode::OK, ok(serde_json::to_value(r).expect("serialisable")))
        }
        ("chat.update" | "chat.delete", _, Some(app)) => {
            let (channel, ts) = (arg("channel"), arg("ts"));
            let (user, bot_id) = (s.apps[app].user.clone(), s.apps[app].bot_id.clone());
            let Some(m) = s
                .messages
                .iter_mut()
                .find(|m| m.channel == channel && m.ts == ts && !m.deleted)
            else {
                return (StatusCode::OK, failed("message_not_found"));
            };
            if m.token.as_deref() != Some(token) {
                return (StatusCode::OK, failed("cant_update_message"));
            }
            // As Slack sends them: the message as it is now (`message`,
            // on an edit) and as it was (`previous_message`), each with
            // its author and thread; a deletion names the message by
            // `deleted_ts`.
            let as_shown = |m: &Shown| {
                let mut v =
                    json!({"type": "message", "text": m.text, "ts": m.ts, "user": user, "bot_id": bot_id});
                if let Some(t) = &m.thread_ts {
                    v["thread_ts"] = json!(t);
                }
                v
            };
            let previous = as_shown(m);
            let (subtype, current) = if method == "chat.update" {
                m.text = arg("text");
                ("message_changed", Some(as_shown(m)))
            } else {
                m.deleted = true;
                ("message_deleted", None)
            };
            let text = m.text.clone();
            let now = s.ts();
            let mut ev = json!({"type": "message", "subtype": subtype, "channel": channel, "ts": now,
                                "hidden": true, "previous_message": previous});
            match current {
                Some(c) => ev["message"] = c,
                None => ev["deleted_ts"] = json!(ts),
            }
            let all = s.all_apps();
            s.broadcast(&now, &ev, &all);
            (
                StatusCode::OK,
                ok(json!({"channel": channel, "ts": ts, "text": text,
                                        "message": {"text": text}})),
            )
        }
        // https://api.slack.com/methods/reactions.add: a name, not the
        // emoji itself; `invalid_name` for one Slack does not know.
        ("reactions.add", _, Some(_)) => {
            let (channel, ts, name) = (arg("channel"), arg("timestamp"), arg("name"));
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_+-".contains(c))
            {
                return (StatusCode::OK, failed("invalid_name"));
            }
            let Some(m) = s
                .messages
                .iter_mut()
                .find(|m| m.channel == channel && m.ts == ts && !m.deleted)
            else {
                return (StatusCode::OK, failed("message_not_found"));
            };
            if m.reactions.iter().any(|(t, n)| t == token && *n == name) {
                return (StatusCode::OK, failed("already_reacted"));
            }
            m.reactions.push((token.to_owned(), name));
            (StatusCode::OK, ok(json!({})))
        }
        (_, None, None) => (StatusCode::OK, failed("invalid_auth")),
        _ => (StatusCode::OK, failed("unknown_method")),
    }
}

/// The Socket Mode WebSocket of the app whose ticket is in the URL.
async fn link(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<HashMap<String, String>>,
    ws: WebSocketUpgrade,
) -> Response {
    let app = {
        let s = shared.inner.lock().expect("double state");
        q.get("ticket").and_then(|t| s.tickets.get(t).copied())
    };
    match app {
        Some(app) => ws.on_upgrade(move |socket| session(shared, app, socket)),
        None => (StatusCode::UNAUTHORIZED, "no such ticket").into_response(),
    }
}

/// One socket: `hello`, then whatever was queued or is unacknowledged
/// (Slack's retries), then envelopes as they come; acks are read.
async fn session(shared: Arc<Shared>, app: usize, socket: WebSocket) {
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
    {
        let mut s = shared.inner.lock().expect("double state");
        let app_id = s.apps[app].app_id.clone();
        let hello = json!({"type": "hello", "num_connections": 1,
                           "connection_info": {"app_id": app_id},
                           "debug_info": {"host": "double", "approximate_connection_time": 18060}});
        let _ = tx.send(Ws::Text(hello.to_string().into()));
        s.sockets[app].live = Some(tx.clone());
        s.sockets[app].sockets += 1;
        let waiting: Vec<Envelope> = s
            .envelopes
            .iter()
            .filter(|e| e.app == app && !e.acked)
            .cloned()
            .collect();
        for e in waiting {
            if let Some(old) = s.envelopes.iter_mut().find(|x| x.id == e.id) {
                old.acked = true;
            }
            let event = e.payload["event"].clone();
            let attempt = if e.sent { e.attempt + 1 } else { e.attempt };
            s.envelope(app, &e.ts, &event, attempt);
        }
    }
    shared.changed.notify_waiters();
    while let Some(Ok(frame)) = stream.next().await {
        let Ws::Text(text) = frame else {
            continue;
        };
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if let Some(id) = v["envelope_id"].as_str() {
            let mut s = shared.inner.lock().expect("double state");
            s.acks.push(id.to_owned());
            if !s.sockets[app].lose_acks
                && let Some(e) = s.envelopes.iter_mut().find(|e| e.id == id)
            {
                e.acked = true;
                e.acked_at = Some(Instant::now());
            }
            drop(s);
            shared.changed.notify_waiters();
        }
    }
    {
        let mut s = shared.inner.lock().expect("double state");
        if s.sockets[app].live.as_ref().is_some_and(|l| l.same_channel(&tx)) {
            s.sockets[app].live = None;
        }
    }
    writer.abort();
}
