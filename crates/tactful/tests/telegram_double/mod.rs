//! An in-process Telegram Bot API for tests, following the documented JSON
//! (<https://core.telegram.org/bots/api>): `getMe`, `getUpdates` as a long
//! poll that honours `offset` (updates below it are confirmed and gone),
//! `sendMessage`, `editMessageText`, `deleteMessage`, `sendChatAction`,
//! `setMessageReaction` (emoji from Telegram's fixed set only, as the Bot
//! API refuses others with `REACTION_INVALID`), and on demand a 429 with `retry_after` or a 400 "can't parse entities".
//! Tests play the people by posting messages, which reach every bot in a
//! group under one `message_id` (as Telegram does with privacy mode off)
//! and the one bot of a private chat.
#![allow(dead_code)] // each test uses some of it

use crate::common::double;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// One bot the double knows.
#[derive(Clone, Debug)]
pub struct Bot {
    pub token: String,
    pub id: i64,
    pub username: String,
    pub name: String,
}

/// A request a bot made, and how it was answered.
pub use double::Call;

/// A message as it stands now (after edits), by a bot or a person.
#[derive(Clone, Debug)]
pub struct Shown {
    pub chat: i64,
    pub id: i64,
    /// The bot's token, for messages bots sent.
    pub token: Option<String>,
    pub text: String,
    pub parse_mode: Option<String>,
    pub reply_to: Option<i64>,
    pub thread: Option<i64>,
    pub deleted: bool,
    /// Reactions bots set on it: (token, emoji).
    pub reactions: Vec<(String, String)>,
}

/// Some of the emoji Telegram accepts as a reaction (the Bot API's
/// `ReactionTypeEmoji`): enough to tell an accepted one from another.
const REACTIONS: &[&str] = &["👍", "👎", "❤", "🔥", "🎉", "🤔", "👀", "🙏", "👌", "💯"];

#[derive(Default)]
struct Inner {
    bots: Vec<Bot>,
    queues: HashMap<String, VecDeque<Value>>,
    /// Update ids count per bot, as Telegram's do.
    next_update: HashMap<String, i64>,
    next_message: HashMap<i64, i64>,
    chats: HashMap<i64, Value>,
    calls: Vec<Call>,
    flood: HashSet<String>,
    reject_html: Option<String>,
    /// A `sendMessage` whose text holds this is shown and never answered
    /// (once): the moment a message reached Telegram but the bot does
    /// not know it yet.
    stall: Option<String>,
    /// The answer being made is the stalled one.
    stalled: bool,
    messages: Vec<Shown>,
    /// Where each (chat, message id) is in `messages`: a benchmark's
    /// hundred thousand messages are found without a scan.
    index: HashMap<(i64, i64), usize>,
}

impl Inner {
    fn add(&mut self, m: Shown) {
        self.index.insert((m.chat, m.id), self.messages.len());
        self.messages.push(m);
    }

    /// The message `id` of `chat`, if `chat_id` and `id` are given.
    fn find(&mut self, chat_id: Option<i64>, id: Option<i64>) -> Option<&mut Shown> {
        let at = *self.index.get(&(chat_id?, id?))?;
        self.messages.get_mut(at)
    }
}

type Shared = double::State<Inner>;

/// The running double.
pub struct Double {
    pub url: String,
    shared: Arc<Shared>,
    _server: double::Server,
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn ok(result: Value) -> Response {
    (StatusCode::OK, axum::Json(json!({"ok": true, "result": result}))).into_response()
}

fn fail(code: u16, description: &str, parameters: Option<Value>) -> Response {
    let mut body = json!({"ok": false, "error_code": code, "description": description});
    if let Some(p) = parameters {
        body["parameters"] = p;
    }
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST),
        axum::Json(body),
    )
        .into_response()
}

impl Double {
    pub async fn start(bots: Vec<Bot>) -> Double {
        let (listener, url) = double::bind().await;
        let inner = Inner {
            bots,
            ..Inner::default()
        };
        let shared = Arc::new(Shared::new(inner, &url));
        let app = Router::new()
            .route("/{bot}/{method}", post(handle))
            .with_state(shared.clone());
        let _server = double::serve(listener, app);
        Double { url, shared, _server }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let mut inner = self.shared.inner.lock().expect("double state");
        f(&mut inner)
    }

    /// A person posts `fields` (text, entities, ...) in `chat` as `from`;
    /// it reaches the bots with these tokens. Returns its message id.
    pub fn post(&self, tokens: &[&str], chat: Value, from: Value, fields: Value) -> i64 {
        let id = self.with(|s| {
            let chat_id = chat["id"].as_i64().expect("chat id");
            s.chats.insert(chat_id, chat.clone());
            let n = s.next_message.entry(chat_id).or_insert(1);
            let id = *n;
            *n += 1;
            let mut msg = json!({"message_id": id, "date": now_secs(), "chat": chat, "from": from});
            for (k, v) in fields.as_object().expect("fields").iter() {
                msg[k] = v.clone();
            }
            s.add(Shown {
                chat: chat_id,
                id,
                token: None,
                text: msg["text"]
                    .as_str()
                    .or(msg["caption"].as_str())
                    .unwrap_or_default()
                    .to_owned(),
                parse_mode: None,
                reply_to: msg["reply_to_message"]["message_id"].as_i64(),
                thread: msg["message_thread_id"].as_i64(),
                deleted: false,
                reactions: Vec::new(),
            });
            for token in tokens {
                let next = s.next_update.entry((*token).to_owned()).or_insert(1);
                let update_id = *next;
                *next += 1;
                s.queues
                    .entry((*token).to_owned())
                    .or_default()
                    .push_back(json!({"update_id": update_id, "message": msg}));
            }
            id
        });
        self.shared.changed.notify_waiters();
        id
    }

    /// Someone edits message `id` of `chat` to `text`: an `edited_message`
    /// update (which a bot that asked for new messages only would not get
    /// from Telegram; a server that sends it anyway must not be answered).
    pub fn edit(&self, tokens: &[&str], chat: Value, from: Value, id: i64, text: &str) {
        self.with(|s| {
            let msg = json!({"message_id": id, "date": now_secs(), "edit_date": now_secs(),
                "chat": chat, "from": from, "text": text});
            for token in tokens {
                let next = s.next_update.entry((*token).to_owned()).or_insert(1);
                let update_id = *next;
                *next += 1;
                s.queues
                    .entry((*token).to_owned())
                    .or_default()
                    .push_back(json!({"update_id": update_id, "edited_message": msg}));
            }
        });
        self.shared.changed.notify_waiters();
    }

    /// The next `sendMessage` of this bot gets a 429 asking to wait 1 s.
    pub fn flood_next_send(&self, token: &str) {
        self.with(|s| s.flood.insert(token.to_owned()));
    }

    /// HTML texts containing `marker` are refused as unparsable.
    /// The next `sendMessage` holding `marker` is shown to the chat and
    /// never answered, as if the connection died on the way back.
    pub fn stall_send_with(&self, marker: &str) {
        self.with(|s| s.stall = Some(marker.to_owned()));
    }

    pub fn reject_html_with(&self, marker: &str) {
        self.with(|s| s.reject_html = Some(marker.to_owned()));
    }

    /// The update ids waiting for `token`'s bot (not yet confirmed).
    pub fn queued(&self, token: &str) -> Vec<i64> {
        self.with(|s| {
            s.queues
                .get(token)
                .map(|q| q.iter().filter_map(|u| u["update_id"].as_i64()).collect())
                .unwrap_or_default()
        })
    }

    pub fn calls(&self) -> Vec<Call> {
        self.with(|s| s.calls.clone())
    }

    /// The calls after the first `from`: a benchmark reads what is new
    /// without copying a hundred thousand calls each time.
    pub fn calls_from(&self, from: usize) -> Vec<Call> {
        self.with(|s| s.calls.get(from..).map(<[Call]>::to_vec).unwrap_or_default())
    }

    /// Every message of `chat`, as it stands, deleted ones included.
    pub fn messages(&self, chat: i64) -> Vec<Shown> {
        self.with(|s| s.messages.iter().filter(|m| m.chat == chat).cloned().collect())
    }

    /// The messages bots show in `chat` now.
    pub fn bot_messages(&self, chat: i64) -> Vec<Shown> {
        self.messages(chat)
            .into_iter()
            .filter(|m| m.token.is_some() && !m.deleted)
            .collect()
    }

    /// Waits (60 s at most) until `pred` holds of the calls and messages.
    pub async fn wait_until(&self, what: &str, pred: impl Fn(&[Call], &[Shown]) -> bool) {
        let holds = || {
            // A copy: the predicate may ask the double more.
            let (calls, messages) = self.with(|s| (s.calls.clone(), s.messages.clone()));
            pred(&calls, &messages)
        };
        let what = format!("the Bot API double never saw: {what}");
        double::wait_until(&self.shared.changed, &what, holds, String::new).await;
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let Some(token) = bot.strip_prefix("bot").map(str::to_owned) else {
        return fail(404, "Not Found", None);
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
    // Method names are case-insensitive (teloxide sends `GetMe`); the
    // calls are logged under their documented spelling.
    let method = [
        "getMe",
        "getUpdates",
        "sendMessage",
        "editMessageText",
        "deleteMessage",
        "sendChatAction",
        "setMessageReaction",
    ]
    .into_iter()
    .find(|m| m.eq_ignore_ascii_case(&method))
    .map_or(method, str::to_owned);
    let response = answer(&shared, &token, &method, &body).await;
    let status = response.status().as_u16();
    let stalled = {
        let mut s = shared.inner.lock().expect("double state");
        s.calls.push(Call {
            token,
            method,
            body,
            status,
            at: Instant::now(),
        });
        std::mem::take(&mut s.stalled)
    };
    shared.changed.notify_waiters();
    if stalled {
        return std::future::pending().await;
    }
    response
}

async fn answer(shared: &Shared, token: &str, method: &str, body: &Value) -> Response {
    let bot = {
        let s = shared.inner.lock().expect("double state");
        s.bots.iter().find(|b| b.token == token).cloned()
    };
    let Some(bot) = bot else {
        return fail(401, "Unauthorized", None);
    };
    let me = json!({"id": bot.id, "is_bot": true, "first_name": bot.name, "username": bot.username});
    match method {
        "getMe" => {
            let mut m = me;
            m["can_join_groups"] = json!(true);
            m["can_read_all_group_messages"] = json!(true);
            m["supports_inline_queries"] = json!(false);
            m["has_main_web_app"] = json!(false);
            ok(m)
        }
        "getUpdates" => get_updates(shared, token, body).await,
        "sendMessage" => {
            let mut s = shared.inner.lock().expect("double state");
            if s.flood.remove(token) {
                return fail(
                    429,
                    "Too Many Requests: retry after 1",
                    Some(json!({"retry_after": 1})),
                );
            }
            let text = body["text"].as_str().unwrap_or_default().to_owned();
            let parse_mode = body["parse_mode"].as_str().map(str::to_owned);
            if let Some(refused) = refusal(&s, &text, parse_mode.as_deref()) {
                return refused;
            }
            let chat_id = body["chat_id"].as_i64().unwrap_or_default();
            let chat = s
                .chats
                .get(&chat_id)
                .cloned()
                .unwrap_or(json!({"id": chat_id, "type": "supergroup", "title": "chat"}));
            let n = s.next_message.entry(chat_id).or_insert(1);
            let id = *n;
            *n += 1;
            let thread = body["message_thread_id"].as_i64();
            s.add(Shown {
                chat: chat_id,
                id,
                token: Some(token.to_owned()),
                text: text.clone(),
                parse_mode,
                reply_to: body["reply_parameters"]["message_id"].as_i64(),
                thread,
                deleted: false,
                reactions: Vec::new(),
            });
            if s.stall.as_ref().is_some_and(|m| text.contains(m.as_str())) {
                s.stall = None;
                s.stalled = true;
            }
            let mut msg =
                json!({"message_id": id, "date": now_secs(), "chat": chat, "from": me, "text": text});
            if let Some(t) = thread {
                msg["message_thread_id"] = json!(t);
                msg["is_topic_message"] = json!(true);
            }
            ok(msg)
        }
        "editMessageText" => {
            let mut s = shared.inner.lock().expect("double state");
            let text = body["text"].as_str().unwrap_or_default().to_owned();
            let parse_mode = body["parse_mode"].as_str().map(str::to_owned);
            if let Some(refused) = refusal(&s, &text, parse_mode.as_deref()) {
                return refused;
            }
            let (chat_id, id) = (body["chat_id"].as_i64(), body["message_id"].as_i64());
            let chat = chat_id.and_then(|c| s.chats.get(&c).cloned());
            let Some(m) = s.find(chat_id, id).filter(|m| m.token.as_deref() == Some(token)) else {
                return fail(400, "Bad Request: message to edit not found", None);
            };
            if m.text == text && m.parse_mode == parse_mode {
                return fail(
                    400,
                    "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
                    None,
                );
            }
            m.text = text.clone();
            m.parse_mode = parse_mode;
            ok(json!({"message_id": m.id, "date": now_secs(), "chat": chat, "from": me, "text": text}))
        }
        "deleteMessage" => {
            let mut s = shared.inner.lock().expect("double state");
            let (chat_id, id) = (body["chat_id"].as_i64(), body["message_id"].as_i64());
            match s.find(chat_id, id).filter(|m| !m.deleted) {
                Some(m) => {
                    m.deleted = true;
                    ok(json!(true))
                }
                None => fail(400, "Bad Request: message to delete not found", None),
            }
        }
        "sendChatAction" => ok(json!(true)),
        "setMessageReaction" => {
            let mut s = shared.inner.lock().expect("double state");
            let (chat_id, id) = (body["chat_id"].as_i64(), body["message_id"].as_i64());
            let emoji: Vec<String> = body["reaction"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["type"] == "emoji")
                .filter_map(|r| r["emoji"].as_str().map(str::to_owned))
                .collect();
            if emoji.iter().any(|e| !REACTIONS.contains(&e.as_str())) {
                return fail(400, "Bad Request: REACTION_INVALID", None);
            }
            match s.find(chat_id, id).filter(|m| !m.deleted) {
                Some(m) => {
                    // A bot may set one reaction: the new one replaces its own.
                    m.reactions.retain(|(t, _)| t != token);
                    m.reactions
                        .extend(emoji.into_iter().map(|e| (token.to_owned(), e)));
                    ok(json!(true))
                }
                None => fail(400, "Bad Request: message to react not found", None),
            }
        }
        _ => fail(404, "Not Found: method not found", None),
    }
}

/// Telegram's 400 for HTML it cannot parse, when armed.
fn refusal(s: &Inner, text: &str, parse_mode: Option<&str>) -> Option<Response> {
    let marker = s.reject_html.as_deref()?;
    (parse_mode == Some("HTML") && text.contains(marker)).then(|| {
        fail(
            400,
            "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0",
            None,
        )
    })
}

/// A long poll: confirmed updates (below `offset`) are dropped; what is
/// left comes at once, or as soon as something arrives within `timeout`.
async fn get_updates(shared: &Shared, token: &str, body: &Value) -> Response {
    let offset = body["offset"].as_i64().unwrap_or(0);
    let timeout = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
    let limit = body["limit"].as_u64().unwrap_or(100) as usize;
    let deadline = Instant::now() + timeout;
    loop {
        let changed = shared.changed.notified();
        {
            let mut s = shared.inner.lock().expect("double state");
            let queue = s.queues.entry(token.to_owned()).or_default();
            // Confirmed updates are at the front (ids only grow).
            while queue
                .front()
                .is_some_and(|u| u["update_id"].as_i64().unwrap_or(0) < offset)
            {
                queue.pop_front();
            }
            if !queue.is_empty() {
                return ok(Value::Array(queue.iter().take(limit).cloned().collect()));
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return ok(json!([]));
        }
        let _ = tokio::time::timeout(left, changed).await;
    }
}
