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

/// Whether a persona's message is a placeholder, or one withdrawn: no
/// answer a follow-up could be addressed by.
fn is_placeholder(content: &str) -> bool {
    let c = content.trim();
    c == tactful_runtime::PLACEHOLDER || c == crate::send::WITHDRAWN
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
        let mut cursor: Option<u64> = self.saved.number(&state_key(me.user_id));
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

    /// Which configured streams bot `i` is subscribed to: each found is
    /// listened in (bot `i` reads it unless a bot before it in the config
    /// does), each not found noted for [`Shared::report_streams`].
    async fn streams(&self, i: usize) -> Result<(), String> {
        let subs: Subscriptions = self.apis[i]
            .get("/users/me/subscriptions", &Vec::new())
            .await
            .map_err(|e| format!("users/me/subscriptions: {e}"))?;
        let mut unsubscribed = std::collections::HashSet::new();
        for name in &self.settings.streams {
            match subs
                .subscriptions
                .iter()
                .find(|s| s.name.eq_ignore_ascii_case(name))
            {
                Some(s) => self.reads(i, s.stream_id),
                None => {
                    unsubscribed.insert(name.to_lowercase());
                }
            }
        }
        if let Ok(mut u) = self.unsubscribed.lock() {
            u[i] = unsubscribed;
        }
        Ok(())
    }

    /// Bot `i` is subscribed to `stream`: the stream is listened in, and
    /// bot `i` reads it unless a bot before it in the config does. One
    /// bot hands a stream's messages in, so they reach the engine in the
    /// order that bot received them (two bots' queues race each other).
    fn reads(&self, i: usize, stream: u64) {
        if let Ok(mut l) = self.listened.write() {
            l.insert(stream);
        }
        if let Ok(mut r) = self.readers.lock() {
            let reader = r.entry(stream).or_insert(i);
            *reader = (*reader).min(i);
        }
    }

    /// Whether bot `i` hands in `stream`'s messages.
    fn is_reader(&self, i: usize, stream: u64) -> bool {
        self.readers
            .lock()
            .ok()
            .and_then(|r| r.get(&stream).copied())
            .is_some_and(|reader| reader == i)
    }

    /// Says which configured streams bot `i` is not subscribed to: a WARN
    /// and the account down with it (so `/healthz` shows it); none, the
    /// account up.
    fn report_streams(&self, i: usize, handle: &RuntimeHandle) {
        let persona = &self.settings.personas[i].id;
        let account = handle.account("Zulip", persona.as_str());
        let missing: Vec<String> = self
            .unsubscribed
            .lock()
            .map(|u| {
                let mut names: Vec<String> = u[i].iter().cloned().collect();
                names.sort();
                names
            })
            .unwrap_or_default();
        if missing.is_empty() {
            account.connected();
            return;
        }
        let why = missing
            .iter()
            .map(|name| format!("not subscribed to stream {name:?}: subscribe the bot there (the stream's settings → Subscribers), or it hears nothing there"))
            .collect::<Vec<_>>()
            .join("; ");
        tracing::warn!(persona = %persona, "Zulip: {why}");
        account.down(&why);
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
        loop {
            if let Err(e) = self.streams(i).await {
                return e;
            }
            let reg = match self.register(i).await {
                Ok(r) => r,
                Err(e) => return format!("registering an events queue: {e}"),
            };
            if reg.queue_id.is_empty() {
                return "registering an events queue: the server gave no queue id".into();
            }
            // What was said while nobody listened, before any event.
            if let Err(e) = self
                .catch_up(i, me, handle, cursor, reg.max_message_id.max(0) as u64)
                .await
            {
                self.drop_queue(i, &reg.queue_id).await;
                return e;
            }
            // Up once what was missed is in (unless a stream is missing,
            // as found now: the catch-up may have shown a subscription
            // since); the pause between attempts is reset only once a
            // poll worked, so a queue that fails at once keeps backing off.
            self.report_streams(i, handle);
            let mut last = reg.last_event_id;
            let mut network_failures = 0u32;
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
                    // A lost connection or a poll that timed out: the
                    // queue is still there, asked again (three times).
                    Err(ApiError::Network(e)) if network_failures < 3 => {
                        network_failures += 1;
                        tracing::info!(persona = %self.settings.personas[i].id, "Zulip: polling again after {e}");
                        tokio::time::sleep(std::time::Duration::from_secs(u64::from(network_failures))).await;
                        continue;
                    }
                    Err(e) => {
                        self.drop_queue(i, &reg.queue_id).await;
                        return format!("reading events: {e}");
                    }
                };
                network_failures = 0;
                backoff.reset();
                for raw in events.events {
                    let event: Event = match serde_json::from_value(raw) {
                        Ok(e) => e,
                        Err(e) => {
                            tracing::warn!("Zulip: skipped an event that is not one ({e})");
                            continue;
                        }
                    };
                    last = last.max(event.id);
                    self.event(i, event, handle, cursor).await;
                }
            }
        }
    }

    /// Deletes a queue this bot leaves (the server would keep it, and
    /// queue events for it, for ten minutes); best effort.
    async fn drop_queue(&self, i: usize, queue_id: &str) {
        let path = format!("/events?queue_id={queue_id}");
        let _ = tokio::time::timeout(LOOKUP_WAIT, self.apis[i].delete(&path)).await;
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
    /// moves with them, and only of them (a move can take one message, or
    /// the later ones, and leave the rest).
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
                if places.get(id).is_some() {
                    places.insert(*id, (to_stream, to_topic.to_owned()));
                }
            }
        }
        if let Ok(mut last) = self.last_in_topic.lock() {
            let from = topic_key(from_stream, from_topic);
            if let Some(id) = last.get(&from).copied()
                && event.message_ids.contains(&id)
            {
                // The old topic's last persona message left it: which is
                // its last now is read again when asked.
                last.remove(&from);
                let to = topic_key(to_stream, to_topic);
                if last.get(&to).is_none_or(|there| *there < id) {
                    last.insert(to, id);
                }
            }
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
        // A stream message: in a stream listened in; one this bot was not
        // found subscribed to says it is now (asked first, whatever the
        // other bots found: each bot learns it from its own copy).
        let listened = msg.is_direct()
            || msg.stream_id.is_some_and(|s| {
                let late = self.subscribed_since(i, s, &msg, handle);
                (late || self.listened.read().is_ok_and(|l| l.contains(&s))) && self.is_reader(i, s)
            });
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

    /// A message bot `i` received from a configured stream it was not
    /// found subscribed to: it was subscribed since (its messages come as
    /// events from then on). The stream is listened in, and the bot is no
    /// longer reported once no configured stream is missing. Whether the
    /// message's stream is now one listened in.
    fn subscribed_since(&self, i: usize, stream: u64, msg: &ZMessage, handle: &RuntimeHandle) -> bool {
        let crate::model::DisplayRecipient::Stream(name) = &msg.display_recipient else {
            return false;
        };
        let name = name.to_lowercase();
        let Ok(mut unsubscribed) = self.unsubscribed.lock() else {
            return false;
        };
        if !unsubscribed[i].remove(&name) {
            return self
                .settings
                .streams
                .iter()
                .any(|s| s.eq_ignore_ascii_case(&name))
                && self.listened.read().is_ok_and(|l| l.contains(&stream));
        }
        drop(unsubscribed);
        self.reads(i, stream);
        let persona = &self.settings.personas[i].id;
        tracing::info!(persona = %persona, "Zulip: now subscribed to stream {name:?}");
        self.report_streams(i, handle);
        true
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
            // A placeholder is no answer yet (it is noted when edited
            // into one), and a withdrawn one never is.
            if let Some(s) = stream
                && !is_placeholder(&msg.content)
            {
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
            .filter(|m| bots.contains(&m.sender_id) && m.id < before && !is_placeholder(&m.content))
            .map(|m| m.id)
            .max();
        if let Ok(mut l) = self.last_in_topic.lock() {
            l.insert(key, last.unwrap_or(0));
        }
        last
    }
}
