//! The inbound side of one bot: who it is, the streams it is subscribed
//! to, its events queue (registered again when the server forgets it),
//! and what it missed, fetched by message id; each message handed in
//! once, in id order.

use std::sync::Arc;

use tactful_runtime::RuntimeHandle;
use tactful_runtime::account::Backoff;

use crate::api::{ApiError, Form};
use crate::inbound::{Seen, to_message};
use crate::model::{Event, Events, Me, Messages, Registered, Subscriptions, ZMessage};
use crate::{IDENTIFY_WAIT, Shared, topic_key};

/// What the bots' saved state is called: `<prefix><bot user id>` holds the
/// id of the last message the bot handed in.
pub(crate) const STATE_PREFIX: &str = "zulip:last:";

/// The store key of a bot's last message.
pub fn state_key(user_id: u64) -> String {
    format!("{STATE_PREFIX}{user_id}")
}

/// How many messages one fetch of what was missed asks for.
const PAGE: u64 = 200;

/// How far back a first start looks for what was said since the service
/// started (before the bot's queue existed).
const FIRST_LOOK_BACK: u64 = 100;

/// How long a topic's history is waited for before a message is handed in
/// without knowing the topic's last persona message.
const LOOKUP_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// The streams a bot listens in, as found this time: what is wrong with
/// the others, one line each.
struct Missing(Vec<String>);

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
        let mut cursor: Option<u64> = self
            .saved
            .get(&state_key(me.user_id))
            .and_then(|v| v.parse().ok());
        tracing::info!(persona = %persona, bot = %me.full_name, "Zulip: listening");
        loop {
            let why = self.listen(i, &me, &handle, &mut cursor, &mut backoff).await;
            backoff.wait(&why).await;
        }
    }

    /// `users/me`.
    async fn identify(&self, i: usize) -> Result<Me, String> {
        let me: Me = self.apis[i]
            .get("/users/me", &Vec::new())
            .await
            .map_err(|e| match e.status() {
                Some(401) => format!("the email or API key was refused (users/me: {e}): check persona.zulip"),
                _ => format!("users/me failed: {e}"),
            })?;
        if me.user_id == 0 {
            return Err("users/me answered without a user id".into());
        }
        if let Ok(mut bots) = self.bots.write() {
            bots[i] = Some(me.clone());
        }
        Ok(me)
    }

    /// Which configured streams bot `i` is subscribed to.
    async fn streams(&self, i: usize) -> Result<Missing, String> {
        let subs: Subscriptions = self.apis[i]
            .get("/users/me/subscriptions", &Vec::new())
            .await
            .map_err(|e| format!("users/me/subscriptions: {e}"))?;
        let mut missing = Vec::new();
        for name in &self.settings.streams {
            match subs.subscriptions.iter().find(|s| s.name.eq_ignore_ascii_case(name)) {
                Some(s) => {
                    if let Ok(mut l) = self.listened.write() {
                        l.insert(s.stream_id);
                    }
                }
                None => missing.push(format!(
                    "not subscribed to stream {name:?}: subscribe the bot there (the stream's settings → Subscribers), or it hears nothing there"
                )),
            }
        }
        Ok(Missing(missing))
    }

    /// Registers an events queue; reads the longest message from it.
    async fn register(&self, i: usize) -> Result<Registered, ApiError> {
        let form: Form = vec![
            ("event_types", r#"["message","update_message"]"#.into()),
            ("fetch_event_types", r#"["message","realm"]"#.into()),
            ("apply_markdown", "false".into()),
            ("client_gravatar", "true".into()),
            ("all_public_streams", "false".into()),
            ("narrow", "[]".into()),
        ];
        let reg: Registered = self.apis[i].post("/register", &form).await?;
        if let Some(n) = reg.max_message_length.filter(|n| *n >= 100) {
            self.max_message.store(n, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(reg)
    }

    /// One events queue after another, until something fails; why.
    async fn listen(
        &self,
        i: usize,
        me: &Me,
        handle: &RuntimeHandle,
        cursor: &mut Option<u64>,
        backoff: &mut Backoff,
    ) -> String {
        let missing = match self.streams(i).await {
            Ok(m) => m,
            Err(e) => return e,
        };
        loop {
            let reg = match self.register(i).await {
                Ok(r) => r,
                Err(e) => return format!("registering an events queue: {e}"),
            };
            if reg.queue_id.is_empty() {
                return "registering an events queue: the server gave no queue id".into();
            }
            backoff.connected();
            if !missing.0.is_empty() {
                let why = missing.0.join("; ");
                tracing::warn!(persona = %self.settings.personas[i].id, "Zulip: {why}");
                backoff.account().down(&why);
            }
            // What was said while nobody listened, before any event.
            if let Err(e) = self.catch_up(i, me, handle, cursor, reg.max_message_id).await {
                return e;
            }
            let mut last = reg.last_event_id;
            loop {
                let query: Form = vec![
                    ("queue_id", reg.queue_id.clone()),
                    ("last_event_id", last.to_string()),
                ];
                let events: Events = match self.apis[i].poll("/events", &query).await {
                    Ok(e) => e,
                    Err(e) if e.code() == Some("BAD_EVENT_QUEUE_ID") => {
                        tracing::info!(persona = %self.settings.personas[i].id, "Zulip: the events queue expired; registering another");
                        break;
                    }
                    Err(e) => return format!("reading events: {e}"),
                };
                for event in events.events {
                    last = last.max(event.id);
                    self.event(i, event, handle, cursor).await;
                }
            }
        }
    }

    /// One event of the queue.
    async fn event(&self, i: usize, event: Event, handle: &RuntimeHandle, cursor: &mut Option<u64>) {
        match event.kind.as_str() {
            "message" => match event.message {
                Some(m) => self.hear(i, m, handle, cursor).await,
                None => tracing::warn!("Zulip: skipped a message event without its message"),
            },
            "update_message" => self.moved(&event),
            _ => {}
        }
    }

    /// Messages moved to another topic or stream: what is known of them
    /// moves with them.
    fn moved(&self, event: &Event) {
        let Some(from_stream) = event.stream_id else {
            return;
        };
        let to_stream = event.new_stream_id.unwrap_or(from_stream);
        let Some(from_topic) = event.orig_subject.as_deref() else {
            return;
        };
        let to_topic = event.subject.as_deref().unwrap_or(from_topic);
        if let Ok(mut places) = self.places.lock() {
            for id in &event.message_ids {
                places.insert(*id, (to_stream, to_topic.to_owned()));
            }
        }
        if let Ok(mut last) = self.last_in_topic.lock()
            && let Some(id) = last.remove(&topic_key(from_stream, from_topic))
        {
            last.insert(topic_key(to_stream, to_topic), id);
        }
    }

    /// Every message after `cursor` that bot `i` can see, oldest first;
    /// before the first message ever, what was said since the service
    /// started.
    async fn catch_up(
        &self,
        i: usize,
        me: &Me,
        handle: &RuntimeHandle,
        cursor: &mut Option<u64>,
        newest: u64,
    ) -> Result<(), String> {
        let api = &self.apis[i];
        let Some(mut from) = *cursor else {
            let query: Form = vec![
                ("anchor", "newest".into()),
                ("num_before", FIRST_LOOK_BACK.to_string()),
                ("num_after", "0".into()),
                ("apply_markdown", "false".into()),
            ];
            let recent: Messages = api
                .get("/messages", &query)
                .await
                .map_err(|e| format!("fetching what was said since the start: {e}"))?;
            let started = handle.started().as_millis() / 1000;
            for m in recent.messages.into_iter().filter(|m| m.timestamp >= started) {
                self.hear(i, m, handle, cursor).await;
            }
            if cursor.is_none() {
                *cursor = Some(newest);
                handle.save_state(state_key(me.user_id), newest.to_string());
            }
            return Ok(());
        };
        let mut fetched = 0usize;
        loop {
            let query: Form = vec![
                ("anchor", from.to_string()),
                ("include_anchor", "false".into()),
                ("num_before", "0".into()),
                ("num_after", PAGE.to_string()),
                ("apply_markdown", "false".into()),
            ];
            let page: Messages = api
                .get("/messages", &query)
                .await
                .map_err(|e| format!("fetching what was missed: {e}"))?;
            let mut messages = page.messages;
            messages.sort_by_key(|m| m.id);
            let Some(last) = messages.last().map(|m| m.id) else {
                break;
            };
            fetched += messages.len();
            for m in messages {
                self.hear(i, m, handle, cursor).await;
            }
            if page.found_newest || last <= from {
                break;
            }
            from = last;
        }
        if fetched > 0 {
            tracing::info!(persona = %self.settings.personas[i].id, "Zulip: {fetched} messages since the last one heard");
        }
        Ok(())
    }

    /// A message bot `i` received: handed in once, unless it is not
    /// conversation or in a stream not listened in; the bot's cursor moves
    /// past it behind it.
    async fn hear(&self, i: usize, msg: ZMessage, handle: &RuntimeHandle, cursor: &mut Option<u64>) {
        let listened = msg.is_direct()
            || msg
                .stream_id
                .is_some_and(|s| self.listened.read().is_ok_and(|l| l.contains(&s)));
        if listened && msg.id != 0 {
            let first = self.seen.lock().map(|mut s| s.first(msg.id)).unwrap_or(false);
            if first {
                self.hand_in(i, &msg, handle).await;
            }
        }
        if cursor.is_none_or(|c| msg.id > c) {
            *cursor = Some(msg.id);
            if let Some(me) = self.bot_user(i) {
                handle.save_state(state_key(me), msg.id.to_string());
            }
        }
    }

    async fn hand_in(&self, i: usize, msg: &ZMessage, handle: &RuntimeHandle) {
        let known = self.known();
        let stream = msg.stream_id.filter(|_| !msg.is_direct());
        if let Some(s) = stream
            && let Ok(mut places) = self.places.lock()
        {
            places.insert(msg.id, (s, msg.subject.clone()));
        }
        if known.iter().any(|b| b.user_id == msg.sender_id) {
            if let Some(s) = stream {
                self.note_persona_message(msg.id, s, &msg.subject);
            }
            return;
        }
        let topic_reply_to = match stream {
            Some(s) => self.last_persona_message(i, s, &msg.subject, msg.id).await,
            None => None,
        };
        let seen = Seen {
            bots: &known,
            topic_reply_to,
            everyone_addresses: self.settings.everyone_addresses,
        };
        if let Some(m) = to_message(msg, seen) {
            handle.inbound(m);
        }
    }

    /// The last persona message in a topic before `before`: remembered,
    /// else read from the topic once (after a restart) and remembered.
    async fn last_persona_message(&self, i: usize, stream: u64, topic: &str, before: u64) -> Option<u64> {
        let key = topic_key(stream, topic);
        if let Some(id) = self.last_in_topic.lock().ok().and_then(|l| l.get(&key).copied()) {
            return (id != 0).then_some(id);
        }
        let narrow = serde_json::json!([
            {"operator": "stream", "operand": stream},
            {"operator": "topic", "operand": topic},
        ]);
        let query: Form = vec![
            ("anchor", before.to_string()),
            ("include_anchor", "false".into()),
            ("num_before", "100".into()),
            ("num_after", "0".into()),
            ("narrow", narrow.to_string()),
            ("apply_markdown", "false".into()),
        ];
        let found =
            tokio::time::timeout(LOOKUP_WAIT, self.apis[i].get::<Messages>("/messages", &query)).await;
        let page = match found {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                tracing::info!(
                    "Zulip: could not read topic {topic:?} ({e}); a message there addresses by mention only"
                );
                return None;
            }
            Err(_) => return None,
        };
        let bots: Vec<u64> = self.known().into_iter().map(|b| b.user_id).collect();
        let last = page
            .messages
            .iter()
            .filter(|m| bots.contains(&m.sender_id) && m.id < before)
            .map(|m| m.id)
            .max();
        if let Ok(mut l) = self.last_in_topic.lock() {
            l.insert(key, last.unwrap_or(0));
        }
        last
    }
}
