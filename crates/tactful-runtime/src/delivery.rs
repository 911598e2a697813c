//! The delivery path: the one way replies leave tactful, for every
//! platform.
//!
//! One worker per room runs these steps in order, so a room's messages go
//! out in the order they were decided while rooms deliver in parallel:
//! - a reply turn on a platform that can edit posts a placeholder at once,
//!   and streamed text replaces it at most every `edit_interval`, never
//!   showing a `[[...]]` header or a half-typed silence token
//!   ([`tactful_core::delivery::visible`]);
//! - the final reply is split to the platform's limit with code fences kept
//!   balanced; with `reply_to` it is sent as a reply first and the
//!   placeholder deleted after, so a failed send never loses the text;
//! - a turn that ends without a reply deletes its placeholder;
//! - every failed call is tried once more, then logged with its room.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tactful_core::delivery::{EditThrottle, Visible, split_message, visible};
use tactful_core::{MsgId, Outgoing, PersonaId, RoomId, ThreadId, Timestamp, TurnId};

use crate::platform::{OutMessage, Platform, PlatformError};

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
            placeholder: "…".to_owned(),
        }
    }
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
        /// The thread the reply goes to.
        thread: Option<ThreadId>,
        /// The silence token when silence is allowed.
        silence_token: Option<Arc<str>>,
    },
    /// The agent's text so far.
    Partial {
        /// The turn.
        turn: TurnId,
        /// All text streamed so far.
        text: String,
        /// When.
        now: Timestamp,
    },
    /// The engine decided to send this.
    Send(Box<Outgoing>),
    /// The turn ended without a reply (silence, withheld, error, cancelled).
    Quiet {
        /// The turn.
        turn: TurnId,
    },
}

struct Stream {
    persona: PersonaId,
    silence_token: Option<Arc<str>>,
    placeholder: Option<MsgId>,
    shown: String,
    throttle: EditThrottle,
}

/// Tries a platform call twice; logs the final failure with the room.
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
                tracing::warn!(%room, error = %e, "{what} failed twice; giving up");
            })
        }
    }
}

/// One room's delivery state.
pub struct RoomDelivery {
    room: RoomId,
    platform: Arc<dyn Platform>,
    config: DeliveryConfig,
    streams: HashMap<TurnId, Stream>,
}

impl RoomDelivery {
    /// Delivery for `room` through `platform`.
    pub fn new(room: RoomId, platform: Arc<dyn Platform>, config: DeliveryConfig) -> Self {
        RoomDelivery {
            room,
            platform,
            config,
            streams: HashMap::new(),
        }
    }

    /// Handles one event. For a send, returns the engine id of the reply
    /// and the platform id it got, so the engine can learn the alias.
    pub async fn handle(&mut self, event: DeliveryEvent) -> Option<(MsgId, MsgId)> {
        match event {
            DeliveryEvent::Start {
                turn,
                persona,
                thread,
                silence_token,
            } => {
                self.start(turn, persona, thread, silence_token).await;
                None
            }
            DeliveryEvent::Partial { turn, text, now } => {
                self.partial(turn, &text, now).await;
                None
            }
            DeliveryEvent::Send(out) => self.send(*out).await,
            DeliveryEvent::Quiet { turn } => {
                self.quiet(turn).await;
                None
            }
        }
    }

    async fn start(
        &mut self,
        turn: TurnId,
        persona: PersonaId,
        thread: Option<ThreadId>,
        silence: Option<Arc<str>>,
    ) {
        let caps = self.platform.capabilities();
        let placeholder = if caps.can_edit {
            let text = self.config.placeholder.clone();
            let msg = OutMessage {
                persona: &persona,
                room: &self.room,
                thread: thread.as_ref(),
                text: &text,
                reply_to: None,
            };
            twice("posting a placeholder", &self.room, || self.platform.send(msg))
                .await
                .ok()
        } else {
            None
        };
        self.streams.insert(
            turn,
            Stream {
                persona,
                silence_token: silence,
                placeholder,
                shown: String::new(),
                throttle: EditThrottle::new(self.config.edit_interval),
            },
        );
    }

    async fn partial(&mut self, turn: TurnId, text: &str, now: Timestamp) {
        let max = self.platform.capabilities().max_message_chars;
        let Some(s) = self.streams.get_mut(&turn) else {
            return;
        };
        let Some(placeholder) = s.placeholder.clone() else {
            return;
        };
        let Visible::Show(body) = visible(text, s.silence_token.as_deref()) else {
            return;
        };
        // While streaming, show what fits in one message.
        let body: String = body.chars().take(max).collect();
        if body == s.shown || !s.throttle.try_edit(now) {
            return;
        }
        let persona = s.persona.clone();
        let edited = twice("editing a streaming reply", &self.room, || {
            self.platform.edit(&persona, &self.room, &placeholder, &body)
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
            ..
        }) = self.streams.remove(&turn)
        {
            self.remove_placeholder(&persona, &id).await;
        }
    }

    async fn remove_placeholder(&self, persona: &PersonaId, id: &MsgId) {
        if self.platform.capabilities().can_delete {
            let _ = twice("deleting a placeholder", &self.room, || {
                self.platform.delete(persona, &self.room, id)
            })
            .await;
        } else {
            // Without delete, the least trace left behind is an empty edit.
            let _ = twice("blanking a placeholder", &self.room, || {
                self.platform.edit(persona, &self.room, id, "\u{200b}")
            })
            .await;
        }
    }

    async fn send(&mut self, out: Outgoing) -> Option<(MsgId, MsgId)> {
        let caps = self.platform.capabilities();
        let stream = self.streams.remove(&out.turn);
        let placeholder = stream.and_then(|s| s.placeholder);
        let parts = split_message(&out.text, caps.max_message_chars);
        let (first, rest) = parts
            .split_first()
            .expect("split_message returns at least one part");
        let reply_to = out.reply_to.as_ref().filter(|_| caps.native_replies);
        let first_id = match (&placeholder, reply_to) {
            // A reply to a specific message cannot be an edit: send it as a
            // reply first, then remove the placeholder. If the send fails,
            // the placeholder keeps the text.
            (Some(ph), Some(target)) => match self.post(&out, first, Some(target)).await {
                Ok(id) => {
                    self.remove_placeholder(&out.persona, ph).await;
                    Some(id)
                }
                Err(_) => self.edit_or_keep(&out.persona, ph, first).await,
            },
            (Some(ph), None) => match self.edit_or_keep(&out.persona, ph, first).await {
                Some(id) => Some(id),
                None => {
                    let id = self.post(&out, first, None).await.ok();
                    if id.is_some() {
                        self.remove_placeholder(&out.persona, ph).await;
                    }
                    id
                }
            },
            // Without a placeholder the platform gets the target even with
            // no native replies: it addresses the author its own way (IRC
            // prefixes their nick).
            (None, _) => self.post(&out, first, out.reply_to.as_ref()).await.ok(),
        };
        for part in rest {
            let _ = self.post(&out, part, None).await;
        }
        first_id.map(|platform_id| (out.id, platform_id))
    }

    /// Posts one part of a reply.
    async fn post(
        &self,
        out: &Outgoing,
        text: &str,
        reply_to: Option<&MsgId>,
    ) -> Result<MsgId, PlatformError> {
        let msg = OutMessage {
            persona: &out.persona,
            room: &out.room,
            thread: out.thread.as_ref(),
            text,
            reply_to,
        };
        twice("sending a reply", &self.room, || self.platform.send(msg)).await
    }

    /// Puts `text` in the placeholder; its id on success.
    async fn edit_or_keep(&self, persona: &PersonaId, placeholder: &MsgId, text: &str) -> Option<MsgId> {
        twice("editing a placeholder into the reply", &self.room, || {
            self.platform.edit(persona, &self.room, placeholder, text)
        })
        .await
        .ok()
        .map(|()| placeholder.clone())
    }
}
