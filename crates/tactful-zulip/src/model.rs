//! The parts of Zulip's REST responses and events tactful reads, as the
//! API description (`zulip.yaml`) gives them. Every field has a default,
//! so a server that leaves one out (an older version) is read rather than
//! refused; what tactful needs and cannot default is checked where used.

use serde::Deserialize;

/// `GET /users/me`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Me {
    /// The bot's user id.
    pub user_id: u64,
    /// Its email.
    pub email: String,
    /// Its name, which mentions use (`@**Docs Bot**`).
    pub full_name: String,
}

/// A person in a direct message's recipients.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Recipient {
    /// Their user id.
    pub id: u64,
    /// Their email.
    pub email: String,
    /// Their name.
    pub full_name: String,
}

/// Where a message went: a stream's name, or a direct message's people.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum DisplayRecipient {
    /// A stream message: the stream's name.
    Stream(String),
    /// A direct message: everyone in it, the sender included.
    People(Vec<Recipient>),
}

impl Default for DisplayRecipient {
    fn default() -> Self {
        DisplayRecipient::Stream(String::new())
    }
}

/// A message (in a `message` event, or `GET /messages`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ZMessage {
    /// The message's id: unique in the organisation, and increasing.
    pub id: u64,
    /// Its author.
    pub sender_id: u64,
    /// The author's name.
    pub sender_full_name: String,
    /// The author's email.
    pub sender_email: String,
    /// The text: Zulip's Markdown as written (events are asked for with
    /// `apply_markdown: false`).
    pub content: String,
    /// `stream` (newer servers also say `channel`) or `private`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The stream, for a stream message.
    pub stream_id: Option<u64>,
    /// The stream's name, or a direct message's people.
    pub display_recipient: DisplayRecipient,
    /// The topic, for a stream message.
    pub subject: String,
    /// When it was sent, in seconds since the epoch.
    pub timestamp: u64,
}

impl ZMessage {
    /// Whether this is a direct message.
    pub fn is_direct(&self) -> bool {
        matches!(self.kind.as_str(), "private" | "direct")
    }
}

/// One event of a queue.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Event {
    /// Its id in the queue.
    pub id: i64,
    /// `message`, `update_message`, `heartbeat`...
    #[serde(rename = "type")]
    pub kind: String,
    /// A `message` event's message.
    pub message: Option<ZMessage>,
    /// A `message` event's flags for the bot (`mentioned`...).
    pub flags: Vec<String>,
    /// An `update_message` event: the messages moved or renamed.
    pub message_ids: Vec<u64>,
    /// An `update_message` event: the topic before, when it changed.
    pub orig_subject: Option<String>,
    /// An `update_message` event: the topic after, when it changed.
    pub subject: Option<String>,
    /// An `update_message` event: the stream before.
    pub stream_id: Option<u64>,
    /// An `update_message` event: the stream after, when it changed.
    pub new_stream_id: Option<u64>,
}

/// `POST /register`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Registered {
    /// The queue's id.
    pub queue_id: String,
    /// The last event already in it.
    pub last_event_id: i64,
    /// The newest message the bot can see; -1 when it can see none.
    pub max_message_id: i64,
    /// The longest message the server takes, in characters.
    pub max_message_length: Option<usize>,
}

/// `GET /events`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Events {
    /// The events after the one asked from, each read on its own (one
    /// that is not what the API describes is skipped, not the batch).
    pub events: Vec<serde_json::Value>,
}

/// `GET /messages`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Messages {
    /// The messages, oldest first.
    pub messages: Vec<ZMessage>,
    /// Whether the newest message is among them.
    pub found_newest: bool,
}

/// A stream the bot is subscribed to (`GET /users/me/subscriptions`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Subscription {
    /// The stream's id.
    pub stream_id: u64,
    /// Its name.
    pub name: String,
}

/// `GET /users/me/subscriptions`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Subscriptions {
    /// The streams.
    pub subscriptions: Vec<Subscription>,
}

/// `POST /messages`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct SentMessage {
    /// The new message's id.
    pub id: u64,
}

/// Every answer's envelope: `success` or `error`, and why.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Outcome {
    /// `success` or `error`.
    pub result: String,
    /// What went wrong, for people.
    pub msg: String,
    /// A stable code (`BAD_EVENT_QUEUE_ID`, `RATE_LIMIT_HIT`...).
    pub code: String,
}
