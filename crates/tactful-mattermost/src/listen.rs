//! The inbound side of one bot: who it is, the channels it listens in and
//! whether it is in them, what it missed (fetched over REST since the last
//! post it handed in), then the event stream, each post handed in once.

use std::sync::Arc;
use std::time::Duration;

use tactful_runtime::RuntimeHandle;
use tactful_runtime::account::Backoff;

use crate::api::ApiError;
use crate::inbound::{Seen, to_message};
use crate::model::{Channel, ClientConfig, Frame, Post, PostList, Team, User};
use crate::settings::ChannelRef;
use crate::socket::{Resume, Socket};
use crate::{IDENTIFY_WAIT, Shared};

/// What the bots' saved state is called: `<prefix><bot user id>` holds the
/// time (ms) of the last post the bot handed in.
pub(crate) const STATE_PREFIX: &str = "mattermost:since:";

/// The store key of a bot's last post.
pub fn state_key(user_id: &str) -> String {
    format!("{STATE_PREFIX}{user_id}")
}

/// How long a name or a thread is waited for before a post is handed in
/// without it.
const LOOKUP_WAIT: Duration = Duration::from_secs(3);

/// The most posts `channels/{id}/posts?since=` answers with.
const SINCE_LIMIT: usize = 1000;

/// A page of a channel's posts, when more than [`SINCE_LIMIT`] were missed.
const PER_PAGE: usize = 200;

/// The most pages read back (10,000 posts a channel).
const MAX_PAGES: usize = 50;

/// The channels a bot listens in, as found this time.
struct Found {
    /// The channels found and joined.
    joined: Vec<Channel>,
    /// What is wrong with the others, one line each.
    missing: Vec<String>,
}

impl Shared {
    /// Identifies persona `i`'s bot, then, if this process holds it
    /// (`listening`), listens until the service stops.
    pub(crate) async fn keep_connected(self: Arc<Self>, i: usize, listening: bool) {
        let persona = self.settings.personas[i].id.clone();
        let mut backoff = self.roster.backoff(i, listening);
        let me = backoff.until_ok(|| self.identify(i)).await;
        self.roster.identified(i);
        if !listening {
            return;
        }
        self.roster.all_identified(IDENTIFY_WAIT).await;
        let Some(handle) = self.roster.runtime() else {
            return;
        };
        // The last post handed in; before the first ever, what was said
        // before the service started is history, not asked of it.
        let mut cursor = self
            .saved
            .number(&state_key(&me.id))
            .unwrap_or(handle.started().as_millis());
        let mut resume = Resume::default();
        tracing::info!(persona = %persona, bot = %me.username, "Mattermost: listening");
        loop {
            let why = self
                .listen(i, &me, &handle, &mut resume, &mut cursor, &mut backoff)
                .await;
            backoff.wait(&why).await;
        }
    }

    /// `users/me`, and the server's longest post (once, best effort).
    async fn identify(&self, i: usize) -> Result<User, String> {
        let api = &self.apis[i];
        let me: User = api.get("/users/me").await.map_err(|e| match e.status() {
            Some(401) => format!("the token was refused (users/me: {e}): check persona.mattermost.token"),
            _ => format!("users/me failed: {e}"),
        })?;
        if me.id.is_empty() || me.username.is_empty() {
            return Err("users/me answered without an id or username".into());
        }
        if let Ok(mut bots) = self.bots.write() {
            bots[i] = Some(me.clone());
        }
        match api.get::<ClientConfig>("/config/client?format=old").await {
            Ok(c) => match c.max_post_size.trim().parse::<usize>() {
                // Below a sentence is not a limit anyone set on purpose.
                Ok(n) if n >= 100 => self.max_post.store(n, std::sync::atomic::Ordering::Relaxed),
                _ => tracing::warn!(
                    "Mattermost: the server's MaxPostSize {:?} is not a size; answers are cut at {} characters",
                    c.max_post_size,
                    self.max_post()
                ),
            },
            Err(e) => tracing::warn!(
                "Mattermost: could not read the server's longest post ({e}); answers are cut at {} characters",
                self.max_post()
            ),
        }
        Ok(me)
    }

    /// Finds the configured channels and whether bot `i` is in each.
    async fn channels(&self, i: usize) -> Result<Found, String> {
        let api = &self.apis[i];
        let mut found = Found {
            joined: Vec::new(),
            missing: Vec::new(),
        };
        for wanted in &self.settings.channels {
            let path = match wanted {
                ChannelRef::Named { team, channel } => format!("/teams/name/{team}/channels/name/{channel}"),
                ChannelRef::Id(id) => format!("/channels/{id}"),
            };
            let channel: Channel = match api.get(&path).await {
                Ok(c) => c,
                Err(e) if matches!(e.status(), Some(403 | 404)) => {
                    found.missing.push(format!(
                        "cannot see channel {wanted} ({e}): check the name, and add the bot to the team and the channel"
                    ));
                    continue;
                }
                Err(e) => return Err(format!("channel {wanted}: {e}")),
            };
            if let Ok(mut kinds) = self.kinds.lock() {
                kinds.insert(channel.id.clone(), channel.kind.clone());
            }
            if let Ok(mut listened) = self.listened.write() {
                listened.insert(channel.id.clone());
            }
            match api.get::<serde_json::Value>(&format!("/channels/{}/members/me", channel.id)).await {
                Ok(_) => {
                    // The first bot in the config that is in the channel
                    // hands its posts in, so they reach the engine in the
                    // order one socket received them (sockets race).
                    if let Ok(mut r) = self.readers.lock() {
                        let reader = r.entry(channel.id.clone()).or_insert(i);
                        *reader = (*reader).min(i);
                    }
                    found.joined.push(channel)
                }
                Err(e) if matches!(e.status(), Some(403 | 404)) => found.missing.push(format!(
                    "not a member of channel {wanted}: add the bot there (`/invite @<bot>` in the channel), or it hears nothing there"
                )),
                Err(e) => return Err(format!("channel {wanted}: {e}")),
            }
        }
        Ok(found)
    }

    /// Says what is missing: WARN, and the account down with it (so
    /// `/healthz` shows it) while it lasts; else the account up.
    fn report(&self, i: usize, backoff: &mut Backoff, found: &Found) {
        backoff.connected();
        if !found.missing.is_empty() {
            let why = found.missing.join("; ");
            tracing::warn!(persona = %self.settings.personas[i].id, "Mattermost: {why}");
            backoff.account().down(&why);
        }
    }

    /// One connection of the event stream, until it ends; why it ended.
    /// The socket opens first, so nothing said while what was missed is
    /// fetched goes unheard: its events wait in the socket.
    async fn listen(
        &self,
        i: usize,
        me: &User,
        handle: &RuntimeHandle,
        resume: &mut Resume,
        cursor: &mut u64,
        backoff: &mut Backoff,
    ) -> String {
        let mut found = match self.channels(i).await {
            Ok(f) => f,
            Err(e) => return e,
        };
        let token = &self.settings.personas[i].token;
        let mut socket = match Socket::open(&self.settings.url, token, resume).await {
            Ok(s) => s,
            Err(e) => return e,
        };
        if let Err(e) = self.catch_up(i, &found.joined, handle, cursor).await {
            socket.close().await;
            return e;
        }
        // Connected once what was missed is in: a connection that fails
        // before that keeps backing off.
        self.report(i, backoff, &found);
        socket.heard_now();
        loop {
            let frame = match socket.next().await {
                Ok(Some(f)) => f,
                Ok(None) => return "the server closed the event stream".into(),
                Err(e) => {
                    if socket.oversized {
                        *resume = Resume::default();
                    }
                    return e;
                }
            };
            if frame.seq_reply.is_some() {
                continue;
            }
            if let Some(seq) = frame.seq {
                if frame.event == "hello" {
                    let id = frame.text("connection_id").unwrap_or_default().to_owned();
                    *resume = Resume {
                        connection_id: id,
                        next_seq: seq + 1,
                    };
                    continue;
                }
                if seq != resume.next_seq {
                    // Events were lost on the way: the next connection
                    // resumes from the first one missing.
                    socket.close().await;
                    return format!("the event stream skipped from {} to {seq}", resume.next_seq);
                }
                resume.next_seq = seq + 1;
            }
            let about_me = frame.text("user_id") == Some(me.id.as_str())
                || frame.broadcast.get("user_id").and_then(|v| v.as_str()) == Some(me.id.as_str());
            match frame.event.as_str() {
                "posted" => self.posted(i, &frame, handle, cursor).await,
                "user_added" | "user_removed" if about_me => match self.channels(i).await {
                    Ok(f) => {
                        found = f;
                        self.report(i, backoff, &found);
                    }
                    Err(e) => tracing::warn!("Mattermost: {e}"),
                },
                _ => {}
            }
        }
    }

    /// A `posted` event: its post, handed in once.
    async fn posted(&self, i: usize, frame: &Frame, handle: &RuntimeHandle, cursor: &mut u64) {
        let Some(raw) = frame.text("post") else {
            tracing::warn!("Mattermost: skipped a posted event without a post");
            return;
        };
        let post: Post = match serde_json::from_str(raw) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("Mattermost: skipped a posted event whose post is not one ({e})");
                return;
            }
        };
        let kind = frame.text("channel_type").unwrap_or_default().to_owned();
        if let Ok(mut kinds) = self.kinds.lock()
            && !kind.is_empty()
        {
            kinds.insert(post.channel_id.clone(), kind.clone());
        }
        let sender = frame.text("sender_name").map(str::to_owned);
        self.hear(i, post, &kind, sender, handle, cursor).await;
    }

    /// What bot `i` missed: every post since `cursor` in its channels and
    /// its direct and group messages, oldest first.
    async fn catch_up(
        &self,
        i: usize,
        joined: &[Channel],
        handle: &RuntimeHandle,
        cursor: &mut u64,
    ) -> Result<(), String> {
        let api = &self.apis[i];
        let since = *cursor;
        let mut channels: Vec<Channel> = joined.to_vec();
        // Direct and group messages are in every team's list: the bot's
        // teams, whether or not a configured channel was found.
        let teams: Vec<Team> = api
            .get("/users/me/teams")
            .await
            .map_err(|e| format!("listing the bot's teams: {e}"))?;
        for team in teams {
            let mine: Vec<Channel> = api
                .get(&format!("/users/me/teams/{}/channels", team.id))
                .await
                .map_err(|e| format!("listing the bot's channels: {e}"))?;
            for c in mine {
                let direct = matches!(c.kind.as_str(), "D" | "G");
                if direct && c.last_post_at >= since && !channels.iter().any(|o| o.id == c.id) {
                    channels.push(c);
                }
            }
        }
        let mut posts: Vec<(Post, String)> = Vec::new();
        for c in &channels {
            if let Ok(mut kinds) = self.kinds.lock() {
                kinds.insert(c.id.clone(), c.kind.clone());
            }
            match self.posts_since(i, &c.id, since).await {
                Ok(found) => posts.extend(found.into_iter().map(|p| (p, c.kind.clone()))),
                // Out of the channel since: nothing there to hear.
                Err(e) if matches!(e.status(), Some(403 | 404)) => {
                    tracing::warn!("Mattermost: cannot read channel {} ({e})", c.id);
                }
                Err(e) => return Err(format!("fetching what was missed: {e}")),
            }
        }
        posts.sort_by(|a, b| (a.0.create_at, &a.0.id).cmp(&(b.0.create_at, &b.0.id)));
        if !posts.is_empty() {
            tracing::info!(
                persona = %self.settings.personas[i].id,
                "Mattermost: {} posts since the last one heard",
                posts.len()
            );
        }
        for (post, kind) in posts {
            self.hear(i, post, &kind, None, handle, cursor).await;
        }
        Ok(())
    }

    /// The posts of `channel` made at or after `since` (ms). `since=`
    /// gives what changed after a time, at most [`SINCE_LIMIT`] in no
    /// order: asked from a millisecond before, so a post made in the
    /// cursor's millisecond but not heard is not skipped, and when the
    /// limit is reached, read page by page, newest first, back to `since`.
    async fn posts_since(&self, i: usize, channel: &str, since: u64) -> Result<Vec<Post>, ApiError> {
        let api = &self.apis[i];
        let list: PostList = api
            .get(&format!(
                "/channels/{channel}/posts?since={}",
                since.saturating_sub(1)
            ))
            .await?;
        if list.posts.len() < SINCE_LIMIT {
            return Ok(list
                .posts
                .into_values()
                .filter(|p| p.create_at >= since)
                .collect());
        }
        let mut out: Vec<Post> = Vec::new();
        for page in 0..MAX_PAGES {
            let list: PostList = api
                .get(&format!(
                    "/channels/{channel}/posts?page={page}&per_page={PER_PAGE}"
                ))
                .await?;
            let older = list.posts.values().any(|p| p.create_at < since);
            let n = list.posts.len();
            out.extend(list.posts.into_values().filter(|p| p.create_at >= since));
            if older || n < PER_PAGE {
                return Ok(out);
            }
        }
        tracing::warn!(
            "Mattermost: more than {} posts missed in channel {channel}; the oldest are left unread",
            MAX_PAGES * PER_PAGE
        );
        Ok(out)
    }

    /// A post bot `i` received: handed in once, unless it is not
    /// conversation or not in a channel listened in; the bot's cursor
    /// moves past it behind it.
    async fn hear(
        &self,
        i: usize,
        post: Post,
        kind: &str,
        sender: Option<String>,
        handle: &RuntimeHandle,
        cursor: &mut u64,
    ) {
        let listened = matches!(kind, "D" | "G")
            || (self.listened.read().is_ok_and(|l| l.contains(&post.channel_id))
                && self
                    .readers
                    .lock()
                    .is_ok_and(|r| r.get(&post.channel_id) == Some(&i)));
        if !listened || post.id.is_empty() {
            return;
        }
        let first = self
            .seen
            .lock()
            .map(|mut s| s.first(post.id.clone()))
            .unwrap_or(false);
        if first {
            let known = self.known();
            if known.iter().any(|b| b.user_id == post.user_id) {
                // A placeholder is no answer yet: it is noted when edited
                // into one.
                if post.message.trim() != tactful_runtime::PLACEHOLDER {
                    self.note_persona_post(&post.id, &post.root_id);
                }
            } else {
                let reply_to = match post.root_id.as_str() {
                    "" => None,
                    root => self.last_persona_post(i, root, post.create_at).await,
                };
                // `sender_name` is `@username`, unless the server shows
                // full names or nicknames: the username (a handle
                // `allowed_users` may name) is then asked for.
                let author = match sender {
                    Some(name) if name.starts_with('@') => Some((name.clone(), name[1..].to_owned())),
                    other => match self.person(i, &post.user_id).await {
                        Some(u) => Some((other.unwrap_or_else(|| u.username.clone()), u.username)),
                        None => other.map(|n| (n, String::new())),
                    },
                };
                let seen = Seen {
                    receiver: &self.settings.personas[i].id,
                    bots: &known,
                    channel_type: kind,
                    author: author.as_ref().map(|(n, u)| (n.as_str(), u.as_str())),
                    thread_reply_to: reply_to.as_deref(),
                    everyone_addresses: self.settings.everyone_addresses,
                };
                if let Some(msg) = to_message(&post, seen) {
                    handle.inbound(msg);
                }
            }
        }
        if post.create_at > *cursor {
            *cursor = post.create_at;
            if let Some(me) = self.bot_user(i) {
                handle.save_state(state_key(&me), cursor.to_string());
            }
        }
    }

    /// A persona's post in thread `root` (empty: none): the thread's last
    /// persona post from now on.
    pub(crate) fn note_persona_post(&self, id: &str, root: &str) {
        if let Ok(mut roots) = self.roots.lock() {
            roots.insert(id.to_owned(), root.to_owned());
        }
        if !root.is_empty()
            && let Ok(mut last) = self.last_in_thread.lock()
        {
            last.insert(root.to_owned(), id.to_owned());
        }
    }

    /// The last persona post in thread `root` before `before`: remembered,
    /// else read from the thread once (after a restart) and remembered.
    async fn last_persona_post(&self, i: usize, root: &str, before: u64) -> Option<String> {
        if let Some(known) = self
            .last_in_thread
            .lock()
            .ok()
            .and_then(|l| l.get(&root.to_owned()).cloned())
        {
            return (!known.is_empty()).then_some(known);
        }
        let thread: PostList = match tokio::time::timeout(
            LOOKUP_WAIT,
            self.apis[i].get(&format!("/posts/{root}/thread")),
        )
        .await
        {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                tracing::info!(
                    "Mattermost: could not read thread {root} ({e}); a reply there replies to its first post"
                );
                return None;
            }
            Err(_) => return None,
        };
        let bots: Vec<String> = self.known().into_iter().map(|b| b.user_id).collect();
        let last = thread
            .posts
            .values()
            .filter(|p| {
                bots.contains(&p.user_id)
                    && p.create_at < before
                    && p.delete_at == 0
                    && p.message.trim() != tactful_runtime::PLACEHOLDER
            })
            .max_by_key(|p| (p.create_at, p.id.clone()))
            .map(|p| p.id.clone());
        if let Ok(mut l) = self.last_in_thread.lock() {
            l.insert(root.to_owned(), last.clone().unwrap_or_default());
        }
        last
    }

    /// Someone's profile: remembered, else asked (briefly).
    async fn person(&self, i: usize, user_id: &str) -> Option<User> {
        if let Some(u) = self
            .people
            .lock()
            .ok()
            .and_then(|p| p.get(&user_id.to_owned()).cloned())
        {
            return Some(u);
        }
        let found: Result<Result<User, ApiError>, _> =
            tokio::time::timeout(LOOKUP_WAIT, self.apis[i].get(&format!("/users/{user_id}"))).await;
        let user = found.ok()?.ok()?;
        if let Ok(mut p) = self.people.lock() {
            p.insert(user_id.to_owned(), user.clone());
        }
        Some(user)
    }
}
