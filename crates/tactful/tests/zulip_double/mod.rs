//! An in-process double of a Zulip server for tests: the REST API
//! endpoints tactful calls and the real-time events queues, shaped as
//! Zulip's API description (`zulip.yaml`) gives them, and checked by
//! Zulip's own Python client (PyPI `zulip`, in `tests/zulip/`) so it
//! cannot drift into what tactful expects.
//!
//! - Auth: HTTP Basic with a bot's or person's email and API key; a wrong
//!   key is 401 `INVALID_API_KEY`, none is 401 `UNAUTHORIZED`.
//! - Errors: `{result: "error", msg, code}`; a 429 is `RATE_LIMIT_HIT`
//!   with `retry-after` in the body and `Retry-After`, `X-RateLimit-Reset`
//!   (a Unix time), `X-RateLimit-Remaining` and `X-RateLimit-Limit`.
//! - Queues: `POST /register` makes one per call; `GET /events` long-polls
//!   it (a `heartbeat` after a quiet while), a queue the double forgot
//!   answers 400 `BAD_EVENT_QUEUE_ID`. Like the server, a message is an
//!   event in the queue of everyone who can see it (subscribers, the
//!   people of a direct message), with `mentioned` among its flags when
//!   it names them; a topic renamed or moved is an `update_message`.
#![allow(dead_code)] // each test uses some of it

mod api;

use crate::common::double;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use double::Call;

/// Streams: `general` and `ambient` (everyone subscribed), `quiet` (only
/// the people).
pub const GENERAL: u64 = 7;
pub const AMBIENT: u64 = 8;
pub const QUIET: u64 = 9;

/// A user: a person or a persona's bot.
#[derive(Clone, Debug)]
pub struct User {
    pub id: u64,
    pub email: String,
    pub full_name: String,
    pub api_key: String,
    pub is_bot: bool,
}

/// A stream.
#[derive(Clone, Debug)]
pub struct Stream {
    pub id: u64,
    pub name: String,
    pub subscribers: Vec<u64>,
}

/// A message as it stands now.
#[derive(Clone, Debug)]
pub struct Msg {
    pub id: u64,
    pub sender_id: u64,
    /// The stream, or `None` for a direct message.
    pub stream_id: Option<u64>,
    pub topic: String,
    /// A direct message's people, the sender included.
    pub people: Vec<u64>,
    pub content: String,
    pub timestamp: u64,
    pub edited: bool,
    pub deleted: bool,
}

/// One events queue.
pub(crate) struct Queue {
    pub user_id: u64,
    pub events: VecDeque<(i64, Value)>,
    pub next_id: i64,
}

#[derive(Default)]
pub(crate) struct Inner {
    pub users: Vec<User>,
    pub streams: Vec<Stream>,
    pub messages: Vec<Msg>,
    /// `(user, message, emoji name)`.
    pub reactions: Vec<(u64, u64, String)>,
    pub typing: Vec<(u64, Value)>,
    pub calls: Vec<Call>,
    pub queues: HashMap<String, Queue>,
    /// Queues registered, by user.
    pub registered: Vec<u64>,
    pub max_message_length: usize,
    pub storm_until: Option<Instant>,
    /// Whether people and bots may delete their own messages (an
    /// organisation setting; off, deleting is for administrators).
    pub own_deletes: bool,
    pub next_message: u64,
    pub next_queue: u64,
}

impl Inner {
    pub fn user_by_email(&self, email: &str) -> Option<&User> {
        self.users.iter().find(|u| u.email.eq_ignore_ascii_case(email))
    }

    pub fn user(&self, id: u64) -> Option<&User> {
        self.users.iter().find(|u| u.id == id)
    }

    pub fn stream(&self, id: u64) -> Option<&Stream> {
        self.streams.iter().find(|s| s.id == id)
    }

    /// Who can see `m`.
    pub fn audience(&self, m: &Msg) -> Vec<u64> {
        match m.stream_id {
            Some(s) => self.stream(s).map(|s| s.subscribers.clone()).unwrap_or_default(),
            None => m.people.clone(),
        }
    }

    /// `m` as the API sends it.
    pub fn message_json(&self, m: &Msg) -> Value {
        let sender = self.user(m.sender_id).cloned().unwrap_or(User {
            id: m.sender_id,
            email: String::new(),
            full_name: String::new(),
            api_key: String::new(),
            is_bot: false,
        });
        let (kind, recipient) = match m.stream_id {
            Some(s) => ("stream", json!(self.stream(s).map(|s| s.name.clone()).unwrap_or_default())),
            None => (
                "private",
                Value::Array(
                    m.people
                        .iter()
                        .filter_map(|p| self.user(*p))
                        .map(|u| json!({"id": u.id, "email": u.email, "full_name": u.full_name, "is_mirror_dummy": false}))
                        .collect(),
                ),
            ),
        };
        let mut v = json!({
            "id": m.id, "sender_id": sender.id, "sender_email": sender.email,
            "sender_full_name": sender.full_name, "sender_realm_str": "double",
            "content": m.content, "content_type": "text/x-markdown", "type": kind,
            "display_recipient": recipient, "subject": m.topic, "topic_links": [],
            "timestamp": m.timestamp, "client": "double", "is_me_message": false,
            "reactions": [], "submessages": [], "recipient_id": m.stream_id.unwrap_or(0) + 1000,
            "avatar_url": null,
        });
        if let Some(s) = m.stream_id {
            v["stream_id"] = json!(s);
        }
        v
    }

    /// Puts `event` in every queue of `user`.
    pub fn push(&mut self, user: u64, event: Value) {
        for q in self.queues.values_mut().filter(|q| q.user_id == user) {
            let id = q.next_id;
            q.next_id += 1;
            let mut e = event.clone();
            e["id"] = json!(id);
            q.events.push_back((id, e));
            while q.events.len() > 1000 {
                q.events.pop_front();
            }
        }
    }

    /// Makes a message and tells everyone who can see it.
    pub fn create(
        &mut self,
        sender: u64,
        stream: Option<u64>,
        topic: &str,
        people: Vec<u64>,
        content: &str,
    ) -> u64 {
        self.next_message += 1;
        let id = self.next_message;
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let m = Msg {
            id,
            sender_id: sender,
            stream_id: stream,
            topic: topic.to_owned(),
            people,
            content: content.to_owned(),
            timestamp,
            edited: false,
            deleted: false,
        };
        let json = self.message_json(&m);
        for user in self.audience(&m) {
            let name = self.user(user).map(|u| u.full_name.clone()).unwrap_or_default();
            let mentioned =
                content.contains(&format!("@**{name}")) || content.contains(&format!("|{user}**"));
            let flags: Vec<&str> = if mentioned { vec!["mentioned"] } else { vec![] };
            self.push(user, json!({"type": "message", "message": json, "flags": flags}));
        }
        self.messages.push(m);
        id
    }
}

/// The double: a server on a loopback port.
#[derive(Clone)]
pub struct Double {
    pub url: String,
    shared: Arc<double::State<Inner>>,
    _server: Arc<double::Server>,
}

impl Double {
    /// A server with `bots` and `people`, each `(full name, email, API
    /// key)`: everyone subscribed to `general` and `ambient`, only the
    /// people to `quiet`.
    pub async fn start(bots: &[(&str, &str, &str)], people: &[(&str, &str, &str)]) -> Double {
        let mut inner = Inner {
            max_message_length: 10_000,
            own_deletes: true,
            next_message: 100,
            ..Inner::default()
        };
        let mut id = 0;
        for (list, is_bot) in [(bots, true), (people, false)] {
            for (name, email, key) in list {
                id += 1;
                inner.users.push(User {
                    id,
                    email: (*email).to_owned(),
                    full_name: (*name).to_owned(),
                    api_key: (*key).to_owned(),
                    is_bot,
                });
            }
        }
        let everyone: Vec<u64> = inner.users.iter().map(|u| u.id).collect();
        let people_ids: Vec<u64> = inner.users.iter().filter(|u| !u.is_bot).map(|u| u.id).collect();
        for (id, name, subscribers) in [
            (GENERAL, "general", everyone.clone()),
            (AMBIENT, "ambient", everyone),
            (QUIET, "quiet", people_ids),
        ] {
            inner.streams.push(Stream {
                id,
                name: name.into(),
                subscribers,
            });
        }
        let (listener, url) = double::bind().await;
        let shared = Arc::new(double::State::new(inner, &url));
        let server = double::serve(listener, api::router(shared.clone()));
        Double {
            url,
            shared,
            _server: Arc::new(server),
        }
    }

    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let out = f(&mut self.shared.inner.lock().expect("double"));
        self.shared.changed.notify_waiters();
        out
    }

    /// A user's id by full name.
    pub fn user(&self, name: &str) -> u64 {
        self.with(|s| s.users.iter().find(|u| u.full_name == name).map(|u| u.id))
            .unwrap_or_else(|| panic!("no user {name}"))
    }

    /// `name` writes `content` in `topic` of `stream`.
    pub fn post(&self, name: &str, stream: u64, topic: &str, content: &str) -> u64 {
        let sender = self.user(name);
        self.with(|s| s.create(sender, Some(stream), topic, Vec::new(), content))
    }

    /// `name` writes `content` to the people named `to`.
    pub fn dm(&self, name: &str, to: &[&str], content: &str) -> u64 {
        let sender = self.user(name);
        let mut people: Vec<u64> = to.iter().map(|n| self.user(n)).collect();
        people.push(sender);
        people.sort_unstable();
        people.dedup();
        self.with(|s| s.create(sender, None, "", people, content))
    }

    /// Renames `from` in `stream` to `to` (every message in it), as a
    /// person moving a topic does: an `update_message` to the subscribers.
    pub fn rename_topic(&self, stream: u64, from: &str, to: &str) {
        self.with(|s| {
            let ids: Vec<u64> = s
                .messages
                .iter_mut()
                .filter(|m| m.stream_id == Some(stream) && m.topic.eq_ignore_ascii_case(from))
                .map(|m| {
                    m.topic = to.to_owned();
                    m.id
                })
                .collect();
            let Some(first) = ids.first().copied() else { return };
            let event = json!({
                "type": "update_message", "user_id": null, "message_id": first, "message_ids": ids,
                "flags": [], "edit_timestamp": 1, "rendering_only": false, "stream_id": stream,
                "orig_subject": from, "subject": to, "propagate_mode": "change_all", "topic_links": [],
            });
            for user in s
                .stream(stream)
                .map(|st| st.subscribers.clone())
                .unwrap_or_default()
            {
                s.push(user, event.clone());
            }
        });
    }

    /// Moves message `id` alone to `to` in its stream (`change_one`): an
    /// `update_message` naming it only.
    pub fn move_message(&self, id: u64, to: &str) {
        self.with(|s| {
            let Some(m) = s.messages.iter_mut().find(|m| m.id == id) else {
                return;
            };
            let from = std::mem::replace(&mut m.topic, to.to_owned());
            let stream = m.stream_id.unwrap_or(0);
            let event = json!({
                "type": "update_message", "user_id": null, "message_id": id, "message_ids": [id],
                "flags": [], "edit_timestamp": 1, "rendering_only": false, "stream_id": stream,
                "orig_subject": from, "subject": to, "propagate_mode": "change_one", "topic_links": [],
            });
            for user in s
                .stream(stream)
                .map(|st| st.subscribers.clone())
                .unwrap_or_default()
            {
                s.push(user, event.clone());
            }
        });
    }

    /// Forgets every events queue and, in the same moment, `name` writes
    /// `content` in `topic` of `stream`: the message is in no queue, only
    /// to be fetched.
    pub fn forget_queues_and_post(&self, name: &str, stream: u64, topic: &str, content: &str) -> u64 {
        let sender = self.user(name);
        self.with(|s| {
            s.queues.clear();
            s.create(sender, Some(stream), topic, Vec::new(), content)
        })
    }

    /// Forgets every events queue, as a server restart does.
    pub fn forget_queues(&self) {
        self.with(|s| s.queues.clear());
    }

    /// Answers every request 429 for `secs` from now.
    pub fn storm(&self, secs: f64) -> Instant {
        let until = Instant::now() + Duration::from_secs_f64(secs);
        self.with(|s| s.storm_until = Some(until));
        until
    }

    /// Deleting becomes for administrators only (Zulip's default).
    pub fn forbid_own_deletes(&self) {
        self.with(|s| s.own_deletes = false);
    }

    pub fn set_max_message_length(&self, n: usize) {
        self.with(|s| s.max_message_length = n);
    }

    pub fn subscribe(&self, name: &str, stream: u64) {
        let user = self.user(name);
        self.with(|s| {
            if let Some(st) = s.streams.iter_mut().find(|st| st.id == stream) {
                st.subscribers.push(user);
            }
        });
    }

    /// Messages in `stream` (every stream: `None`) not deleted.
    pub fn messages(&self, stream: Option<u64>) -> Vec<Msg> {
        self.with(|s| {
            s.messages
                .iter()
                .filter(|m| !m.deleted && (stream.is_none() || m.stream_id == stream))
                .cloned()
                .collect()
        })
    }

    /// What `name` wrote, not deleted.
    pub fn messages_by(&self, name: &str) -> Vec<Msg> {
        let user = self.user(name);
        self.messages(None)
            .into_iter()
            .filter(|m| m.sender_id == user)
            .collect()
    }

    pub fn reactions(&self) -> Vec<(u64, u64, String)> {
        self.with(|s| s.reactions.clone())
    }

    pub fn typing(&self) -> Vec<(u64, Value)> {
        self.with(|s| s.typing.clone())
    }

    pub fn calls(&self) -> Vec<Call> {
        self.with(|s| s.calls.clone())
    }

    /// How many queues `name` registered.
    pub fn registered(&self, name: &str) -> usize {
        let user = self.user(name);
        self.with(|s| s.registered.iter().filter(|u| **u == user).count())
    }

    /// Whether `name` has a queue now.
    pub fn has_queue(&self, name: &str) -> bool {
        let user = self.user(name);
        self.with(|s| s.queues.values().any(|q| q.user_id == user))
    }

    /// Puts a raw event in `name`'s queues (bad input).
    pub fn push_raw(&self, name: &str, event: Value) {
        let user = self.user(name);
        self.with(|s| s.push(user, event));
    }

    pub async fn wait_until(&self, what: &str, pred: impl Fn(&Double) -> bool) {
        let dump = || {
            let messages = self.with(|s| s.messages.clone());
            format!("\ncalls: {:#?}\nmessages: {messages:#?}", self.calls())
        };
        let what = format!("the Zulip double never saw: {what}");
        double::wait_until(&self.shared.changed, &what, || pred(self), dump).await;
    }
}
