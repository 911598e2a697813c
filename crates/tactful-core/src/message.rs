//! The one inbound message type every platform normalises into.
//!
//! Platform adapters translate their events into [`Message`] and nothing
//! else; the engine never sees a platform type. That is the inbound half of
//! the "one chokepoint each way" rule: addressing, loop guards and the
//! transcript are implemented once, here and in the engine, for every
//! platform.

use std::sync::Arc;

use crate::ids::{MsgId, PersonaId, RoomId, ThreadId, UserId};
use crate::time::Timestamp;

/// Who wrote a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sender {
    /// The platform account id.
    pub id: UserId,
    /// The display name, as the platform shows it. Sanitised before an agent
    /// sees it (see [`crate::transcript::speaker_tag`]).
    pub name: Arc<str>,
    /// Whether the platform marks the account as a bot. Personas hosted by
    /// this process are bots to each other whatever this says.
    pub is_bot: bool,
    /// A second name the platform vouches for, which people know better
    /// than the id (Telegram's `@username`), for `allowed_users` only: the
    /// owner can change it, so nothing else (history, loop guards) keys on
    /// it.
    pub handle: Option<Arc<str>>,
}

/// How a message names its addressees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mentions {
    /// The platform supplied mention entities (Matrix `m.mentions`, Discord
    /// mentions, the web room's autocomplete): these ids and no others.
    Explicit(Vec<UserId>),
    /// The platform has no entities (IRC, scripted replays): the engine reads
    /// `@handle` tokens from the text on word boundaries.
    FromText,
}

/// One chat message as the engine sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Platform message id, unique within the room.
    pub id: MsgId,
    /// The room it was posted in. A DM is a room of its own.
    pub room: RoomId,
    /// The thread inside the room, if any.
    pub thread: Option<ThreadId>,
    /// The author.
    pub sender: Sender,
    /// Plain text body.
    pub text: Arc<str>,
    /// Who it mentions.
    pub mentions: Mentions,
    /// The message this one replies to, if the platform says so.
    pub reply_to: Option<MsgId>,
    /// Whether the room is a direct conversation with a persona.
    pub is_dm: bool,
    /// For a DM: the persona the conversation is with. `None` on a DM means
    /// every persona present in the room counts as its recipient.
    pub dm_to: Option<PersonaId>,
    /// When the platform says it was sent.
    pub time: Timestamp,
}

impl Message {
    /// A plain group message with text-derived mentions; the starting point
    /// for tests and drivers, which then set the fields they need.
    pub fn new(
        id: impl Into<MsgId>,
        room: impl Into<RoomId>,
        sender: impl Into<UserId>,
        text: &str,
        time: Timestamp,
    ) -> Self {
        let sender: UserId = sender.into();
        Message {
            id: id.into(),
            room: room.into(),
            thread: None,
            sender: Sender {
                name: Arc::from(sender.as_str()),
                id: sender,
                is_bot: false,
                handle: None,
            },
            text: Arc::from(text),
            mentions: Mentions::FromText,
            reply_to: None,
            is_dm: false,
            dm_to: None,
            time,
        }
    }
}
