//! An in-process double of a Mattermost server for tests: the REST API v4
//! endpoints tactful calls and the WebSocket event stream, shaped as the
//! API reference and the vendor's own types (`@mattermost/types`) describe
//! them, and checked by the vendor's client (`@mattermost/client`, in
//! `tests/mattermost/`) so it cannot drift into what tactful expects.
//!
//! - Auth: `Authorization: Bearer <token>` (any case of the scheme, as the
//!   server takes it); a wrong token is a 401 with the server's error body.
//! - Errors: `{id, message, detailed_error, request_id, status_code}` as
//!   JSON; a 429 is plain text with `X-RateLimit-*` and `Retry-After`.
//! - The event stream: a token in the upgrade's `Authorization` header, or
//!   `authentication_challenge` answered `{status: OK, seq_reply}` (a
//!   wrong one closes the socket); `hello` at seq 0 with a
//!   `connection_id`, every event numbered. A socket authenticated by its
//!   header that names a `connection_id` and `sequence_number` gets what
//!   it missed from the last 128 events sent there; any other gets a new
//!   `hello` (and must fetch what it missed over REST), as on the server.
//! - `channels/{id}/posts?since=` answers what changed strictly after
//!   `since`, 1,000 at most; without it, pages newest first.
//! - Like the server, a post is shown to every member of its channel's
//!   sockets as `posted` (its post a JSON string), edits as `post_edited`,
//!   deletions as `post_deleted`, reactions as `reaction_added`.
#![allow(dead_code)] // each test uses some of it

mod api;
mod socket;

use crate::common::double;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc;

pub use double::Call;

/// The team every channel of the double is in.
pub const TEAM: &str = "myteam";
pub const TEAM_ID: &str = "tm000000000000000000000001";
/// Channels: `town-square` (open), `ambient` (open), `quiet` (the bots are
/// not members).
pub const TOWN: &str = "ch000000000000000000000001";
pub const AMBIENT: &str = "ch000000000000000000000002";
pub const QUIET: &str = "ch000000000000000000000003";

/// How many events a connection keeps for a resume (the server's dead
/// queue).
const DEAD_QUEUE: usize = 128;

/// A user: a person or a persona's bot.
#[derive(Clone, Debug)]
pub struct User {
    pub id: String,
    pub username: String,
    pub token: String,
    pub is_bot: bool,
}

/// A channel.
#[derive(Clone, Debug)]
pub struct Channel {
    pub id: String,
    pub name: String,
    /// `O`, `P`, `D`, `G`.
    pub kind: String,
    pub members: Vec<String>,
    pub last_post_at: u64,
}

/// A post as it stands now.
#[derive(Clone, Debug)]
pub struct Post {
    pub id: String,
    pub channel_id: String,
    pub user_id: String,
    pub root_id: String,
    pub message: String,
    pub create_at: u64,
    pub update_at: u64,
    pub edit_at: u64,
    pub delete_at: u64,
    pub props: Value,
    pub kind: String,
}

impl Post {
    /// The post as the API sends it: every field `@mattermost/types`'s
    /// `Post` requires.
    pub fn json(&self) -> Value {
        json!({
            "id": self.id, "create_at": self.create_at, "update_at": self.update_at,
            "edit_at": self.edit_at, "delete_at": self.delete_at, "is_pinned": false,
            "user_id": self.user_id, "channel_id": self.channel_id, "root_id": self.root_id,
            "original_id": "", "message": self.message, "type": self.kind,
            "props": self.props, "hashtags": "", "pending_post_id": "", "reply_count": 0,
            "metadata": {},
        })
    }
}

/// A reaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reaction {
    pub user_id: String,
    pub post_id: String,
    pub emoji_name: String,
}

/// One event stream connection, kept after its socket closes so it can be
/// resumed.
pub(crate) struct Conn {
    pub user_id: String,
    pub next_seq: u64,
    /// The last events sent, for a resume.
    pub dead: VecDeque<(u64, String)>,
    /// Whether events were dropped from `dead` (a resume from before them
    /// is impossible).
    pub lost_before: u64,
    /// The open socket's sender, if one is open.
    pub live: Option<mpsc::UnboundedSender<String>>,
}

/// A planned refusal: every request answered 429 until `until`.
#[derive(Clone, Copy, Debug)]
pub struct Storm {
    pub until: Instant,
}

#[derive(Default)]
pub(crate) struct Inner {
    pub users: Vec<User>,
    pub channels: Vec<Channel>,
    pub posts: Vec<Post>,
    pub reactions: Vec<Reaction>,
    /// `(user, channel, parent)` for each typing call.
    pub typing: Vec<(String, String, String)>,
    pub calls: Vec<Call>,
    pub conns: HashMap<String, Conn>,
    /// Sockets opened (including resumes), by user.
    pub opened: Vec<(String, bool)>,
    pub max_post_size: usize,
    pub storm: Option<Storm>,
    pub clock: u64,
    pub ids: u64,
}

impl Inner {
    /// A fresh 26-character id.
    pub fn new_id(&mut self, prefix: &str) -> String {
        self.ids += 1;
        format!("{prefix}{:0>width$}", self.ids, width = 26 - prefix.len())
    }

    /// The server's clock: milliseconds, strictly increasing.
    pub fn now(&mut self) -> u64 {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        self.clock = wall.max(self.clock + 1);
        self.clock
    }

    pub fn user_by_token(&self, token: &str) -> Option<User> {
        self.users.iter().find(|u| u.token == token).cloned()
    }

    pub fn channel(&self, id: &str) -> Option<&Channel> {
        self.channels.iter().find(|c| c.id == id)
    }

    /// Sends `event` (its `data` and `broadcast`) to every connection of
    /// `user`, numbered per connection; kept for resumes.
    pub fn emit_to(&mut self, user: &str, event: &str, data: Value, broadcast: Value) {
        for conn in self.conns.values_mut().filter(|c| c.user_id == user) {
            let seq = conn.next_seq;
            conn.next_seq += 1;
            let frame = json!({"event": event, "data": data, "broadcast": broadcast, "seq": seq}).to_string();
            conn.dead.push_back((seq, frame.clone()));
            while conn.dead.len() > DEAD_QUEUE {
                if let Some((s, _)) = conn.dead.pop_front() {
                    conn.lost_before = s + 1;
                }
            }
            if let Some(tx) = &conn.live
                && tx.send(frame).is_err()
            {
                conn.live = None;
            }
        }
    }

    /// Sends `event` to every member of `channel`.
    pub fn emit_channel(&mut self, channel: &str, event: &str, data: Value) {
        let Some(c) = self.channel(channel) else { return };
        let members = c.members.clone();
        let broadcast = json!({"omit_users": null, "user_id": "", "channel_id": channel, "team_id": "", "connection_id": "", "omit_connection_id": ""});
        for m in members {
            self.emit_to(&m, event, data.clone(), broadcast.clone());
        }
    }

    /// Makes a post and shows it, as `POST /posts` does.
    pub fn create_post(&mut self, user: &str, channel: &str, message: &str, root: &str) -> Post {
        let now = self.now();
        let id = self.new_id("po");
        let is_bot = self.users.iter().any(|u| u.id == user && u.is_bot);
        let props = if is_bot {
            json!({"from_bot": "true"})
        } else {
            json!({})
        };
        let post = Post {
            id,
            channel_id: channel.to_owned(),
            user_id: user.to_owned(),
            root_id: root.to_owned(),
            message: message.to_owned(),
            create_at: now,
            update_at: now,
            edit_at: 0,
            delete_at: 0,
            props,
            kind: String::new(),
        };
        self.posts.push(post.clone());
        if let Some(c) = self.channels.iter_mut().find(|c| c.id == channel) {
            c.last_post_at = now;
        }
        let kind = self.channel(channel).map(|c| c.kind.clone()).unwrap_or_default();
        let sender = self
            .users
            .iter()
            .find(|u| u.id == user)
            .map(|u| format!("@{}", u.username))
            .unwrap_or_default();
        self.emit_channel(
            channel,
            "posted",
            json!({
                "channel_display_name": channel, "channel_name": channel, "channel_type": kind,
                "post": post.json().to_string(), "sender_name": sender, "set_online": true,
                "team_id": if matches!(kind.as_str(), "D" | "G") { "" } else { TEAM_ID },
            }),
        );
        post
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
    /// A server with `bots` (username, token) and `people` (username,
    /// token): every bot and person is in `town-square` and `ambient`;
    /// only the people are in `quiet`.
    pub async fn start(bots: &[(&str, &str)], people: &[(&str, &str)]) -> Double {
        let mut inner = Inner {
            max_post_size: 16383,
            ..Inner::default()
        };
        for (name, token, is_bot) in bots
            .iter()
            .map(|(n, t)| (n, t, true))
            .chain(people.iter().map(|(n, t)| (n, t, false)))
        {
            let id = format!("us{name:0>24}").replace(['-', '.', '_'], "0");
            inner.users.push(User {
                id,
                username: (*name).to_owned(),
                token: (*token).to_owned(),
                is_bot,
            });
        }
        let everyone: Vec<String> = inner.users.iter().map(|u| u.id.clone()).collect();
        let people_ids: Vec<String> = inner
            .users
            .iter()
            .filter(|u| !u.is_bot)
            .map(|u| u.id.clone())
            .collect();
        for (id, name, members) in [
            (TOWN, "town-square", everyone.clone()),
            (AMBIENT, "ambient", everyone),
            (QUIET, "quiet", people_ids),
        ] {
            inner.channels.push(Channel {
                id: id.into(),
                name: name.into(),
                kind: "O".into(),
                members,
                last_post_at: 0,
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

    /// A user's id by username.
    pub fn user(&self, username: &str) -> String {
        self.with(|s| {
            s.users
                .iter()
                .find(|u| u.username == username)
                .map(|u| u.id.clone())
        })
        .unwrap_or_else(|| panic!("no user {username}"))
    }

    /// `username` posts `text` in `channel` (in thread `root`, or "").
    pub fn post(&self, username: &str, channel: &str, text: &str, root: &str) -> String {
        let user = self.user(username);
        self.with(|s| s.create_post(&user, channel, text, root).id)
    }

    /// The direct channel of two users, made on first use.
    pub fn direct(&self, a: &str, b: &str) -> String {
        let (a, b) = (self.user(a), self.user(b));
        self.with(|s| {
            let mut pair = [a.clone(), b.clone()];
            pair.sort();
            let name = format!("{}__{}", pair[0], pair[1]);
            if let Some(c) = s.channels.iter().find(|c| c.name == name) {
                return c.id.clone();
            }
            let id = s.new_id("dm");
            s.channels.push(Channel {
                id: id.clone(),
                name,
                kind: "D".into(),
                members: vec![a, b],
                last_post_at: 0,
            });
            id
        })
    }

    /// Adds `username` to `channel`, as an admin would, with the
    /// `user_added` event.
    pub fn add_member(&self, username: &str, channel: &str) {
        let user = self.user(username);
        self.with(|s| {
            if let Some(c) = s.channels.iter_mut().find(|c| c.id == channel) {
                c.members.push(user.clone());
            }
            let data = json!({"team_id": TEAM_ID, "user_id": user});
            s.emit_channel(channel, "user_added", data);
        });
    }

    /// Takes `username` out of `channel`, with the `user_removed` events
    /// the server sends: to the channel (`data.user_id`) and to the user
    /// removed (`broadcast.user_id`, `data.channel_id`).
    pub fn remove_member(&self, username: &str, channel: &str) {
        let user = self.user(username);
        self.with(|s| {
            if let Some(c) = s.channels.iter_mut().find(|c| c.id == channel) {
                c.members.retain(|m| *m != user);
            }
            let data = json!({"user_id": user, "remover_id": ""});
            s.emit_channel(channel, "user_removed", data);
            let data = json!({"channel_id": channel, "remover_id": ""});
            s.emit_to(
                &user,
                "user_removed",
                data,
                json!({"user_id": user, "channel_id": ""}),
            );
        });
    }

    /// Sends `frame` (raw text) to every open socket of `username`, as
    /// the next event in sequence when it parses as one.
    pub fn send_raw(&self, username: &str, event: &str, data: Value) {
        let user = self.user(username);
        self.with(|s| s.emit_to(&user, event, data, json!({"user_id": user})));
    }

    /// Closes every open socket (the connections can be resumed).
    pub fn drop_sockets(&self) {
        self.with(|s| s.conns.values_mut().for_each(|c| c.live = None));
    }

    /// Forgets every connection, as a server restart does: a resume gets
    /// a new `hello`.
    pub fn forget_connections(&self) {
        self.with(|s| s.conns.clear());
    }

    /// Answers every request 429 for `secs` from now.
    pub fn storm(&self, secs: f64) -> Instant {
        let until = Instant::now() + Duration::from_secs_f64(secs);
        self.with(|s| s.storm = Some(Storm { until }));
        until
    }

    pub fn set_max_post_size(&self, n: usize) {
        self.with(|s| s.max_post_size = n);
    }

    pub fn posts(&self, channel: &str) -> Vec<Post> {
        self.with(|s| {
            s.posts
                .iter()
                .filter(|p| p.channel_id == channel)
                .cloned()
                .collect()
        })
    }

    /// The posts `username` made in `channel` that are not deleted.
    pub fn posts_by(&self, username: &str, channel: &str) -> Vec<Post> {
        let user = self.user(username);
        self.posts(channel)
            .into_iter()
            .filter(|p| p.user_id == user && p.delete_at == 0)
            .collect()
    }

    pub fn reactions(&self) -> Vec<Reaction> {
        self.with(|s| s.reactions.clone())
    }

    pub fn typing(&self) -> Vec<(String, String, String)> {
        self.with(|s| s.typing.clone())
    }

    pub fn calls(&self) -> Vec<Call> {
        self.with(|s| s.calls.clone())
    }

    /// Whether `username` has a socket open.
    pub fn connected(&self, username: &str) -> bool {
        let user = self.user(username);
        self.with(|s| s.conns.values().any(|c| c.user_id == user && c.live.is_some()))
    }

    /// Sockets opened by `username`: `true` for each that resumed a
    /// connection.
    pub fn opened(&self, username: &str) -> Vec<bool> {
        let user = self.user(username);
        self.with(|s| {
            s.opened
                .iter()
                .filter(|(u, _)| *u == user)
                .map(|(_, r)| *r)
                .collect()
        })
    }

    pub async fn wait_until(&self, what: &str, pred: impl Fn(&Double) -> bool) {
        let dump = || {
            let posts = self.with(|s| s.posts.clone());
            format!("\ncalls: {:#?}\nposts: {posts:#?}", self.calls())
        };
        let what = format!("the Mattermost double never saw: {what}");
        double::wait_until(&self.shared.changed, &what, || pred(self), dump).await;
    }
}
