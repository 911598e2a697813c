//! The delivery path: the one way replies leave tactful, for every
//! platform.
//!
//! One worker per room runs these steps in order, so a room's messages go
//! out in the order they were decided while rooms deliver in parallel:
//! - a reply turn on a platform that can edit posts a placeholder at once,
//!   and streamed text replaces it at most every `edit_interval`, never
//!   showing a `[[...]]` header or a half-typed silence token
//!   ([`tactful_core::delivery::visible`]);
//! - on a platform with native replies the placeholder is posted as a reply
//!   to the person's message that started the turn (not in a DM), so the
//!   answer grows where it will stay, under its quote;
//! - the final reply is cut into parts by the platform ([`Platform::parts`]:
//!   its limit with code fences kept balanced, or IRC's lines); when it answers the message its placeholder already replies
//!   to (or none), the placeholder becomes it; with another `reply_to` it is
//!   sent as a reply first and the placeholder deleted after, so a failed
//!   send never loses the text;
//! - a turn that ends without a reply deletes its placeholder;
//! - every failed call is tried once more, then logged with its room.
//!
//! Crash safety: each part of a reply is sent with an idempotency key
//! (`<store id>:<reply id>:<part>`), which platforms that can deduplicate use
//! (the web room, Matrix transaction ids), and each part's delivery is
//! recorded before the next part goes, so a restart resumes after the
//! parts that went out. A placeholder is recorded before anything streams
//! into it: after a crash an unsent reply turns its old placeholder into
//! the reply, and a placeholder whose turn has no reply is removed.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tactful_core::delivery::{EditThrottle, Visible, visible};
use tactful_core::{MsgId, Outgoing, PersonaId, RoomId, ThreadId, TurnId};

use tactful_store::{Op, Placeholder as Recorded};

use crate::clock::wall_clock;
use crate::persist::Saver;
use crate::platform::{At, OutMessage, Platform, PlatformError};

/// What a placeholder says before any text is ready: a platform that
/// hears its own personas' posts (Slack shows an app every message in
/// its channels) tells a placeholder from an answer by it.
pub const PLACEHOLDER: &str = "…";

/// Delivery settings.
#[derive(Clone, Debug)]
pub struct DeliveryConfig {
    /// Streaming edits at most this often (`edit_interval_ms`).
    pub edit_interval: Duration,
    /// What a placeholder says before any text is ready.
    pub placeholder: String,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        DeliveryConfig {
            edit_interval: Duration::from_millis(1000),
            placeholder: PLACEHOLDER.to_owned(),
        }
    }
}

/// The text an agent has streamed so far, shared between the agent's task
/// (which appends) and the room's worker (which reads when it can show
/// it). Appending is amortised O(1) and the worker is told at most once
/// per read, so a reply streamed in 200,000 pieces costs O(reply), not a
/// copy of the whole text per piece.
#[derive(Debug, Default)]
pub struct Streamed {
    text: Mutex<String>,
    /// Set when text arrived that the worker was not yet told about.
    unread: std::sync::atomic::AtomicBool,
}

impl Streamed {
    /// Appends a piece; returns `true` when the worker should be told.
    pub fn push(&self, piece: &str) -> bool {
        if let Ok(mut t) = self.text.lock() {
            t.push_str(piece);
        }
        !self.unread.swap(true, std::sync::atomic::Ordering::AcqRel)
    }

    /// Runs `f` on the text so far, marking it read.
    fn read<T>(&self, f: impl FnOnce(&str) -> T) -> Option<T> {
        self.unread.store(false, std::sync::atomic::Ordering::Release);
        self.text.lock().ok().map(|t| f(&t))
    }
}

/// After a restart: where a reply's delivery stopped.
#[derive(Clone, Debug, Default)]
pub struct Resume {
    /// Parts that reached the platform already.
    pub parts_done: usize,
    /// The platform id of the first part, when it went out.
    pub first_id: Option<MsgId>,
    /// The turn's placeholder still on screen, to become the reply, as
    /// recorded (its thread `None` also for a record older than the
    /// thread's column: the reply's thread is taken then).
    pub placeholder: Option<Recorded>,
}

/// What a room's delivery worker is asked to do.
#[derive(Debug)]
pub enum DeliveryEvent {
    /// A reply turn started: post a placeholder if the platform can edit.
    Start {
        /// The turn.
        turn: TurnId,
        /// Who speaks.
        persona: PersonaId,
        /// The message the reply most likely answers, for the placeholder.
        answering: Option<MsgId>,
        /// The thread the reply goes to.
        thread: Option<ThreadId>,
        /// What of the streamed text may be shown.
        showing: Showing,
        /// Where the agent's text accumulates.
        streamed: Arc<Streamed>,
        /// The placeholder is on record already (the driver saved it with
        /// the decision that started the turn, and this job waited for
        /// that commit), so posting it costs no commit of its own.
        recorded: bool,
    },
    /// More text streamed for a turn (read from its [`Streamed`]).
    Partial {
        /// The turn.
        turn: TurnId,
    },
    /// The engine decided to send this; `resume` after a restart.
    Send(Box<Outgoing>, Option<Resume>),
    /// The turn ended without a reply (silence, withheld, error, cancelled).
    Quiet {
        /// The turn.
        turn: TurnId,
    },
    /// A reaction on a person's message (`addressed_silence = "react"`).
    React(Box<tactful_core::ReactNote>),
    /// A placeholder left from before a restart whose turn has no reply,
    /// as recorded.
    Discard(Recorded),
}

/// What of a streaming answer may be shown, from the turn's request.
#[derive(Clone, Debug, Default)]
pub struct Showing {
    /// The silence token when silence is allowed (a prefix of it is held).
    pub silence_token: Option<Arc<str>>,
    /// Whether a leading reasoning block is stripped (and never shown).
    pub strip_reasoning: bool,
    /// Whether nothing may be shown before the final text: before-send
    /// hooks may still rewrite or cancel the reply.
    pub hold: bool,
}

/// Which turn a [`DeliveryEvent::Start`] starts, and where it answers.
struct Turn {
    turn: TurnId,
    persona: PersonaId,
    answering: Option<MsgId>,
    thread: Option<ThreadId>,
}

struct Stream {
    persona: PersonaId,
    showing: Showing,
    placeholder: Option<MsgId>,
    /// The thread the placeholder is in.
    thread: Option<ThreadId>,
    /// What the placeholder was posted as a reply to.
    answering: Option<MsgId>,
    shown: String,
    throttle: EditThrottle,
    streamed: Arc<Streamed>,
    /// Keeps the platform's "typing" status up while the turn runs;
    /// stopped when the stream is dropped (the turn sent or fell silent).
    _typing: Typing,
}

/// How often the "typing" status is renewed: Telegram lets it lapse after
/// five seconds.
const TYPING_EVERY: Duration = Duration::from_secs(4);

/// A task renewing a turn's "typing" status, aborted when dropped.
struct Typing(Option<tokio::task::JoinHandle<()>>);

impl Typing {
    fn start(
        platform: Arc<dyn Platform>,
        persona: PersonaId,
        room: RoomId,
        thread: Option<ThreadId>,
    ) -> Typing {
        // Outside a runtime (some unit tests drive delivery by hand) there
        // is no status to keep.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return Typing(None);
        };
        Typing(Some(rt.spawn(async move {
            loop {
                platform.typing(At::new(&persona, &room, thread.as_ref())).await;
                tokio::time::sleep(TYPING_EVERY).await;
            }
        })))
    }
}

impl Drop for Typing {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// Tries a platform call twice; logs the final failure with the room. A
/// failure that says the room moved to another process
/// ([`crate::persist::ROOM_MOVED`]: this one was stopped or cut off past
/// its lease, and a streaming edit slipped out before it learnt so) is a
/// correct fencing, not a platform failing: said at INFO as what it is.
async fn twice<T, F, Fut>(what: &str, room: &RoomId, mut call: F) -> Result<T, PlatformError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, PlatformError>>,
{
    match call().await {
        Ok(v) => Ok(v),
        Err(first) => {
            tracing::debug!(%room, error = %first, "{what} failed; trying once more");
            call().await.inspect_err(|e| {
                if e.0.contains(crate::persist::ROOM_MOVED) {
                    tracing::info!(
                        %room,
                        error = %e,
                        "{what} not done: the room moved to another process (this one was stopped or cut off past its lease), which finishes it; nothing is lost"
                    );
                } else {
                    tracing::warn!(%room, error = %e, "{what} failed twice; giving up");
                }
            })
        }
    }
}

/// A turn's placeholder as the final send finds it.
#[derive(Clone, Copy)]
struct Placeholder<'a> {
    /// Its platform id, when one was posted.
    id: Option<&'a MsgId>,
    /// The thread it is in.
    thread: Option<&'a ThreadId>,
    /// The message it was posted as a reply to.
    answering: Option<&'a MsgId>,
    /// What streaming last showed in it.
    shown: &'a str,
}

/// One room's delivery state.
pub struct RoomDelivery {
    room: RoomId,
    platform: Arc<dyn Platform>,
    config: DeliveryConfig,
    streams: HashMap<TurnId, Stream>,
    /// Makes idempotency keys unique to this store.
    key_prefix: Arc<str>,
    /// Where delivery progress is recorded, when there is a store.
    saver: Option<Saver>,
    /// Told a reply's platform id as soon as its first part is shown.
    shown: Option<Shown>,
}

/// Tells the engine the platform id a reply is shown under (local id,
/// platform id) before the part's record is saved. The platform shows the
/// part to people before `send` returns, and someone may answer it at once:
/// the engine must know the id by the time that answer arrives, or the
/// answer's `reply_to` names a message it does not know (live, a "more?"
/// to the Guide's answer was then not a follow-up, 3 runs in 25). This is
/// told in the same step as the platform returns, before any wait, while an
/// answer needs a round trip to a person: it reaches the engine after.
pub type Shown = Box<dyn Fn(&MsgId, &MsgId) + Send + Sync>;

impl RoomDelivery {
    /// Delivery for `room` through `platform`; `key_prefix` (the store's
    /// id) makes part keys unique; progress is recorded through `saver`.
    pub fn new(
        room: RoomId,
        platform: Arc<dyn Platform>,
        config: DeliveryConfig,
        key_prefix: Arc<str>,
        saver: Option<Saver>,
    ) -> Self {
        RoomDelivery {
            room,
            platform,
            config,
            streams: HashMap::new(),
            key_prefix,
            saver,
            shown: None,
        }
    }

    /// This delivery, telling `shown` each reply's platform id as soon as
    /// its first part is shown (see [`Shown`]).
    pub fn telling_shown(mut self, shown: Shown) -> Self {
        self.shown = Some(shown);
        self
    }

    /// Records `op` before going on: a crash after this line finds it.
    async fn record(&self, op: Op) {
        if let Some(saver) = &self.saver
            && let Err(e) = saver.save(vec![op]).await
        {
            tracing::warn!(room = %self.room, "delivery progress not saved: {e}");
        }
    }

    /// Records that a turn's placeholder is gone (in order with what
    /// follows; not waited for: a crash before it only removes it again).
    fn placeholder_gone(&self, turn: TurnId) {
        if let Some(saver) = &self.saver {
            saver.save_later(vec![Op::PlaceholderGone(turn)]);
        }
    }

    /// Handles one event. For a send, returns the engine id of the reply
    /// and the platform id its first part got, so the engine can learn the
    /// alias.
    pub async fn handle(&mut self, event: DeliveryEvent) -> Option<(MsgId, MsgId)> {
        match event {
            DeliveryEvent::Start {
                turn,
                persona,
                answering,
                thread,
                showing,
                streamed,
                recorded,
            } => {
                let answering = answering.filter(|_| self.platform.capabilities().native_replies);
                let turn = Turn {
                    turn,
                    persona,
                    answering,
                    thread,
                };
                self.start(turn, showing, streamed, recorded).await;
                None
            }
            DeliveryEvent::Partial { turn } => {
                self.partial(turn).await;
                None
            }
            DeliveryEvent::Send(out, resume) => self.send(*out, resume).await,
            DeliveryEvent::Quiet { turn } => {
                self.quiet(turn).await;
                None
            }
            DeliveryEvent::React(note) => {
                match self
                    .platform
                    .react(
                        At::new(&note.persona, &note.room, note.thread.as_ref()),
                        &note.msg,
                        &note.emoji,
                    )
                    .await
                {
                    Ok(()) => {
                        tracing::debug!(room = %self.room, persona = %note.persona, msg = %note.msg, "reacted")
                    }
                    // A reaction is a courtesy: losing one is logged, not retried.
                    Err(e) => {
                        tracing::warn!(room = %self.room, persona = %note.persona, msg = %note.msg, "could not react: {e}")
                    }
                }
                None
            }
            DeliveryEvent::Discard(p) => {
                if let Some(id) = self
                    .resolve(p.turn, &p.persona, p.id, p.thread.as_ref(), None)
                    .await
                {
                    tracing::debug!(room = %self.room, turn = %p.turn, %id, "removing a placeholder left by a restart");
                    self.remove_placeholder(&p.persona, p.thread.as_ref(), &id).await;
                }
                self.placeholder_gone(p.turn);
                None
            }
        }
    }

    async fn start(&mut self, turn: Turn, showing: Showing, streamed: Arc<Streamed>, recorded: bool) {
        let Turn {
            turn,
            persona,
            answering,
            thread,
        } = turn;
        let typing = Typing::start(
            self.platform.clone(),
            persona.clone(),
            self.room.clone(),
            thread.clone(),
        );
        let placeholder = if self.platform.capabilities().can_edit {
            // On record before it is posted (its id still unknown; usually
            // saved by the driver with the decision, see `recorded`) and
            // again after: a crash at any point leaves a record a restart finds,
            // and posting again under the same key finds the message. The
            // second record is queued, not waited for: it reaches the store
            // before anything saved after it (one writer, in order), and a
            // crash before it leaves the first record, which a restart
            // handles as a crash during the post itself. Waiting for it
            // would hold the turn's first streamed text back by a commit.
            let record = |id: &str| Op::Placeholder {
                turn,
                room: self.room.clone(),
                persona: persona.clone(),
                thread: thread.clone(),
                id: MsgId::new(id),
            };
            if !recorded {
                self.record(record("")).await;
            }
            let id = self
                .post_placeholder(turn, &persona, thread.as_ref(), answering.as_ref())
                .await;
            if let Some(id) = &id {
                tracing::debug!(room = %self.room, %turn, %id, "placeholder posted");
                if let Some(saver) = &self.saver {
                    saver.save_later(vec![record(id.as_str())]);
                }
            }
            id
        } else {
            None
        };
        self.streams.insert(
            turn,
            Stream {
                persona,
                showing,
                placeholder,
                thread,
                answering,
                shown: String::new(),
                throttle: EditThrottle::new(self.config.edit_interval),
                streamed,
                _typing: typing,
            },
        );
    }

    /// Posts a turn's placeholder under its key; the same call after a
    /// crash finds the one posted before (where the platform deduplicates).
    async fn post_placeholder(
        &self,
        turn: TurnId,
        persona: &PersonaId,
        thread: Option<&ThreadId>,
        answering: Option<&MsgId>,
    ) -> Option<MsgId> {
        let key = format!("{}:{}:p", self.key_prefix, turn.0);
        let msg = OutMessage {
            persona,
            room: &self.room,
            thread,
            text: &self.config.placeholder,
            reply_to: answering,
            key: Some(&key),
            placeholder: true,
            follows: None,
            first_replied_to: None,
        };
        self.send_once_or_twice("posting a placeholder", msg).await.ok()
    }

    /// A placeholder from before a restart, by id: recorded without one
    /// when the crash came while it was being posted (it is posted again
    /// where the answer goes).
    async fn resolve(
        &self,
        turn: TurnId,
        persona: &PersonaId,
        id: MsgId,
        thread: Option<&ThreadId>,
        out: Option<&Outgoing>,
    ) -> Option<MsgId> {
        if !id.as_str().is_empty() {
            return Some(id);
        }
        let answering = out
            .and_then(|o| o.reply_to.as_ref())
            .filter(|_| self.platform.capabilities().native_replies);
        self.post_placeholder(turn, persona, thread, answering).await
    }

    async fn partial(&mut self, turn: TurnId) {
        let max = self.platform.capabilities().max_message_chars;
        let Some(s) = self.streams.get_mut(&turn) else {
            return;
        };
        let Some(placeholder) = s.placeholder.clone().filter(|_| !s.showing.hold) else {
            // Nothing to show it in (or nothing may be shown before the
            // hooks have passed it): mark it read, keep nothing.
            s.streamed.read(|_| ());
            return;
        };
        let now = wall_clock();
        if s.throttle.next_allowed().is_some_and(|t| now < t) {
            // Too soon: a later piece (or the final send) shows it.
            s.streamed.read(|_| ());
            return;
        }
        let showing = &s.showing;
        let token = showing.silence_token.as_deref();
        let body = s
            .streamed
            .read(|text| match visible(text, token, showing.strip_reasoning) {
                // While streaming, show what fits in one message.
                Visible::Show(body) => Some(body.chars().take(max).collect::<String>()),
                Visible::Hold => None,
            });
        let Some(Some(body)) = body else {
            return;
        };
        if body == s.shown || !s.throttle.try_edit(now) {
            return;
        }
        let (persona, thread) = (s.persona.clone(), s.thread.clone());
        let edited = twice("editing a streaming reply", &self.room, || {
            self.platform.edit(
                At::new(&persona, &self.room, thread.as_ref()),
                &placeholder,
                &body,
            )
        })
        .await;
        if edited.is_ok()
            && let Some(s) = self.streams.get_mut(&turn)
        {
            s.shown = body;
        }
    }

    async fn quiet(&mut self, turn: TurnId) {
        if let Some(Stream {
            persona,
            placeholder: Some(id),
            thread,
            ..
        }) = self.streams.remove(&turn)
        {
            self.remove_placeholder(&persona, thread.as_ref(), &id).await;
            self.placeholder_gone(turn);
        }
    }

    async fn remove_placeholder(&self, persona: &PersonaId, thread: Option<&ThreadId>, id: &MsgId) {
        if self.platform.capabilities().can_delete {
            let _ = twice("deleting a placeholder", &self.room, || {
                self.platform.delete(At::new(persona, &self.room, thread), id)
            })
            .await;
        } else {
            // Without delete, the least trace left behind is an empty edit.
            let _ = twice("blanking a placeholder", &self.room, || {
                self.platform
                    .edit(At::new(persona, &self.room, thread), id, "\u{200b}")
            })
            .await;
        }
    }

    fn part(&self, out: &Outgoing, part: usize, platform: &MsgId) -> Op {
        Op::PartDelivered {
            room: self.room.clone(),
            local: out.id.clone(),
            part,
            platform: platform.clone(),
        }
    }

    /// A part's idempotency key: `<store id>:<reply id>:<part>` (a turn
    /// may send several replies, each with its own engine id).
    fn key(&self, out: &Outgoing, part: usize) -> String {
        format!("{}:{}:{part}", self.key_prefix, out.id)
    }

    async fn send(&mut self, out: Outgoing, resume: Option<Resume>) -> Option<(MsgId, MsgId)> {
        let resume = resume.unwrap_or_default();
        // A placeholder from before a restart is where its record says,
        // else where the reply goes.
        let (placeholder, ph_thread, answering, shown) = match self.streams.remove(&out.turn) {
            Some(s) => (s.placeholder, s.thread, s.answering, s.shown),
            None => match resume.placeholder.clone() {
                Some(p) => {
                    let thread = p.thread.or_else(|| out.thread.clone());
                    (
                        self.resolve(out.turn, &out.persona, p.id, thread.as_ref(), Some(&out))
                            .await,
                        thread,
                        None,
                        String::new(),
                    )
                }
                None => (None, None, None, String::new()),
            },
        };
        let held = Placeholder {
            id: placeholder.as_ref(),
            thread: ph_thread.as_ref(),
            answering: answering.as_ref(),
            shown: &shown,
        };
        let mut parts = self.platform.parts(&out.room, out.reply_to.as_ref(), &out.text);
        if parts.is_empty() {
            // A text the platform shows as nothing still ends its turn
            // (and fills or removes its placeholder) as one empty part.
            parts.push(String::new());
        }
        let mut first_id = resume.first_id.clone();
        if resume.parts_done == 0 {
            first_id = self.send_first(&out, &parts[0], held).await;
            if let Some(id) = &first_id {
                if let Some(shown) = &self.shown {
                    shown(&out.id, id);
                }
                tracing::debug!(room = %self.room, reply = %out.id, part = 0, %id, "part delivered");
                self.record(self.part(&out, 0, id)).await;
            }
        } else if let Some(ph) = placeholder.as_ref().filter(|ph| first_id.as_ref() != Some(*ph)) {
            // The first part went out as a message of its own before the
            // restart: the placeholder is a leftover. (When the placeholder
            // became the first part, it stays.)
            self.remove_placeholder(&out.persona, ph_thread.as_ref(), ph)
                .await;
        }
        if placeholder.is_some() {
            self.placeholder_gone(out.turn);
        }
        for (i, part) in parts.iter().enumerate().skip(resume.parts_done.max(1)) {
            let key = self.key(&out, i);
            if let Ok(id) = self.post(&out, part, None, &key, first_id.as_ref()).await {
                tracing::debug!(room = %self.room, reply = %out.id, part = i, %id, "part delivered");
                // Each part on record before the next: a crash resends at
                // most the part in flight (and that one under the same key).
                self.record(self.part(&out, i, &id)).await;
            }
        }
        first_id.map(|platform_id| (out.id, platform_id))
    }

    /// Delivers the first part: into the placeholder, or as a message of
    /// its own; its platform id.
    async fn send_first(&self, out: &Outgoing, first: &str, held: Placeholder<'_>) -> Option<MsgId> {
        let caps = self.platform.capabilities();
        let key = self.key(out, 0);
        let reply_to = out.reply_to.as_ref().filter(|_| caps.native_replies);
        match (held.id, reply_to) {
            // The placeholder already replies to what the answer replies to:
            // it becomes the answer, in place (so does an answer naming no
            // message: the arm below).
            (Some(ph), Some(target)) if held.answering == Some(target) => {
                match self
                    .edit_or_keep(&out.persona, held.thread, ph, first, held.shown)
                    .await
                {
                    Some(id) => Some(id),
                    None => {
                        let id = self.post(out, first, Some(target), &key, None).await.ok();
                        if id.is_some() {
                            self.remove_placeholder(&out.persona, held.thread, ph).await;
                        }
                        id
                    }
                }
            }
            // A reply to a specific message cannot be an edit: send it as a
            // reply first, then remove the placeholder. If the send fails,
            // the placeholder keeps the text.
            (Some(ph), Some(target)) => match self.post(out, first, Some(target), &key, None).await {
                Ok(id) => {
                    self.remove_placeholder(&out.persona, held.thread, ph).await;
                    Some(id)
                }
                Err(_) => {
                    self.edit_or_keep(&out.persona, held.thread, ph, first, held.shown)
                        .await
                }
            },
            (Some(ph), None) => match self
                .edit_or_keep(&out.persona, held.thread, ph, first, held.shown)
                .await
            {
                Some(id) => Some(id),
                None => {
                    let id = self.post(out, first, None, &key, None).await.ok();
                    if id.is_some() {
                        self.remove_placeholder(&out.persona, held.thread, ph).await;
                    }
                    id
                }
            },
            // Without a placeholder the platform gets the target even with
            // no native replies: it addresses the author its own way (IRC
            // prefixes their nick). When the placeholder could not be
            // posted, the answer still quotes what it would have quoted.
            (None, _) => {
                let target = out.reply_to.as_ref().or(held.answering);
                self.post(out, first, target, &key, None).await.ok()
            }
        }
    }

    /// Sends `msg`: twice at most where a second try under the same key
    /// cannot make a second message, once elsewhere (a send that failed
    /// late may have arrived).
    async fn send_once_or_twice(&self, what: &str, msg: OutMessage<'_>) -> Result<MsgId, PlatformError> {
        if self.platform.capabilities().deduplicates_sends {
            twice(what, &self.room, || self.platform.send(msg)).await
        } else {
            self.platform.send(msg).await.inspect_err(|e| {
                tracing::warn!(room = %self.room, error = %e, "{what} failed; not tried again, it may have arrived");
            })
        }
    }

    /// Posts one part of a reply.
    async fn post(
        &self,
        out: &Outgoing,
        text: &str,
        reply_to: Option<&MsgId>,
        key: &str,
        follows: Option<&MsgId>,
    ) -> Result<MsgId, PlatformError> {
        let msg = OutMessage {
            persona: &out.persona,
            room: &out.room,
            thread: out.thread.as_ref(),
            text,
            reply_to,
            key: Some(key),
            placeholder: false,
            follows,
            first_replied_to: follows.and(out.reply_to.as_ref()),
        };
        self.send_once_or_twice("sending a reply", msg).await
    }

    /// Puts `text` in the placeholder; its id on success. When streaming
    /// showed exactly `text` already, nothing is sent: an identical edit
    /// would spend the platform's rate limit (and, on Matrix, add an event)
    /// for nothing.
    async fn edit_or_keep(
        &self,
        persona: &PersonaId,
        thread: Option<&ThreadId>,
        placeholder: &MsgId,
        text: &str,
        shown: &str,
    ) -> Option<MsgId> {
        if text == shown {
            return Some(placeholder.clone());
        }
        twice("editing a placeholder into the reply", &self.room, || {
            self.platform
                .edit(At::new(persona, &self.room, thread), placeholder, text)
        })
        .await
        .ok()
        .map(|()| placeholder.clone())
    }
}
