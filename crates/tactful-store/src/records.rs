//! The rows the store hands out, as plain data: what the backends read
//! them into and what restarts and the console take. Kept apart from the
//! code that reads them, so the backends, the loader and the console's
//! reader all depend on this one leaf and not on one another.

use serde::Serialize;
use tactful_core::{Message, MsgId, Outgoing, PersonaId, RoomId, ThreadId, TurnId};

/// A message row as a restart reads it: where it stands in its room, the
/// message, and the platform's id for it (a reply that was delivered).
pub(crate) struct StoredMessage {
    pub seq: i64,
    pub msg: Message,
    pub platform_id: Option<String>,
}

/// A `pending_turns` row, before its messages are looked up.
pub(crate) struct PendingRow {
    pub turn: i64,
    pub kind: String,
    pub room: String,
    pub persona: String,
    /// The turn's message ids as JSON (may be unreadable: see
    /// [`crate::Restored::skipped`]).
    pub msgs: String,
    pub addressed: bool,
}

/// A reply decided but not confirmed sent.
#[derive(Clone, Debug)]
pub struct Unsent {
    /// The reply.
    pub out: Outgoing,
    /// How many of its parts reached the platform already.
    pub parts_done: usize,
    /// The platform id of its first part, when that went out.
    pub first_id: Option<MsgId>,
}

/// A streaming placeholder still on screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placeholder {
    /// The turn it stands for.
    pub turn: TurnId,
    /// The room.
    pub room: RoomId,
    /// Who posted it.
    pub persona: PersonaId,
    /// The thread it was posted in.
    pub thread: Option<ThreadId>,
    /// Its platform id.
    pub id: MsgId,
}

/// One room, as the console lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RoomSummary {
    /// The room id (`tg:-100…`, `lobby`).
    pub room: String,
    /// Messages stored.
    pub messages: u64,
    /// Decisions stored.
    pub decisions: u64,
    /// When the last message was sent (Unix milliseconds).
    pub last_at: u64,
}

/// One decision, with the message it was about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DecisionRow {
    /// Its place in the trace: pages go backwards from it.
    pub seq: i64,
    /// When it was decided (Unix milliseconds).
    pub at: u64,
    /// The message.
    pub msg: String,
    /// Who wrote it, when the message is stored (a schedule's run has no
    /// message).
    pub sender: Option<String>,
    /// What it said.
    pub text: Option<String>,
    /// The persona decided for.
    pub persona: String,
    /// `reply`, `record` or `skip`.
    pub outcome: String,
    /// Why, as the trace names it.
    pub reason: String,
    /// The turn started, if any.
    pub turn: Option<i64>,
}

/// Which process holds a room partition's lease now (several processes on
/// one PostgreSQL database): the console shows it as the owner of each
/// room in the partition ([`crate::partition_of`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PartitionOwner {
    /// The partition.
    #[serde(skip)]
    pub partition: u32,
    /// The process, as it said itself when it joined (host and pid).
    pub process: String,
    /// Since when it holds the lease (Unix milliseconds, the database's
    /// clock); `None` for a lease taken before tactful noted it.
    pub since: Option<u64>,
}
