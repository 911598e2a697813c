//! The changes the runtime saves. Each backend writes them its own way
//! (`sqlite::write`, `postgres::write`); what a change means is said once,
//! here, and held by the conformance tests both backends pass.

use tactful_core::{Counters, ThreadId, TurnId, TurnKind};
use tactful_core::{Decision, Message, MsgId, Outgoing, PersonaId, RoomId, RoomSnapshot};

use crate::shown::ShownMessage;

/// One change to save. The runtime turns engine outputs into these and
/// saves them in batches with [`crate::Store::apply`].
#[derive(Clone, Debug)]
pub enum Op {
    /// A message was heard from a platform.
    Heard(Message),
    /// A persona's reply was decided: the transcript gets the message as
    /// the room heard it, and the outbox holds it until [`Op::Delivered`].
    Reply {
        /// The reply.
        out: Box<Outgoing>,
        /// It as the room heard it (author name included).
        heard: Message,
    },
    /// One part of a reply reached the platform: a restart resumes after
    /// it instead of posting the reply again from its first part.
    PartDelivered {
        /// The room.
        room: RoomId,
        /// The engine's `<persona>:<n>` id.
        local: MsgId,
        /// Which part (0 is the first).
        part: usize,
        /// The id the platform gave that part.
        platform: MsgId,
    },
    /// The platform confirmed a reply and gave it this id.
    Delivered {
        /// The room.
        room: RoomId,
        /// The engine's `<persona>:<n>` id.
        local: MsgId,
        /// The platform's id.
        platform: MsgId,
    },
    /// A streaming placeholder was posted for a turn: after a crash it is
    /// turned into the turn's reply, or removed.
    Placeholder {
        /// The turn it stands for.
        turn: TurnId,
        /// The room.
        room: RoomId,
        /// Who posted it.
        persona: PersonaId,
        /// The thread it was posted in (Discord addresses a thread's
        /// messages through the thread).
        thread: Option<ThreadId>,
        /// Its platform id.
        id: MsgId,
    },
    /// A turn's placeholder became its reply or was removed.
    PlaceholderGone(TurnId),
    /// A decision for one (message, persona) pair.
    Decision(Decision),
    /// The engine's view of a room changed.
    Snapshot(RoomId, RoomSnapshot),
    /// The engine's id counters moved.
    Counters(Counters),
    /// A reply turn started (kept until it ends, to resume it after a
    /// restart).
    TurnStarted(PendingTurn),
    /// A turn ended, whatever the outcome.
    TurnEnded(TurnId),
    /// A platform's own bookkeeping, e.g. a Matrix sync token: saved in
    /// order with the messages it covers, so a restart resumes exactly
    /// after what was saved.
    PlatformState {
        /// The platform's key, e.g. `matrix:sync:docs`.
        key: String,
        /// The value.
        value: String,
    },
    /// Saved state no longer wanted (a label cleared in the console): its
    /// key is removed, so what is kept stays bounded by what is in use.
    ForgetState {
        /// The key.
        key: String,
    },
    /// A setting every process sharing the store follows (a room policy
    /// set in the console): saved like [`Op::PlatformState`], and on
    /// PostgreSQL announced on [`crate::STATE_CHANNEL`] at commit, so the
    /// others read it and apply it too.
    SharedState {
        /// The key, e.g. `console:policy:lobby`.
        key: String,
        /// The value (empty once reverted).
        value: String,
    },
    /// A message as a platform that keeps its history here (the web room)
    /// shows it. Its room keeps the newest `keep`.
    Shown {
        /// The message.
        msg: ShownMessage,
        /// How many of the room's messages are kept.
        keep: usize,
    },
    /// A shown message's text changed.
    ShownEdit {
        /// The room.
        room: RoomId,
        /// The message's platform id.
        id: MsgId,
        /// The new text.
        text: String,
    },
    /// A shown message was deleted.
    ShownDelete {
        /// The room.
        room: RoomId,
        /// The message's platform id.
        id: MsgId,
    },
    /// Someone reacted to a shown message.
    ShownReact {
        /// The room.
        room: RoomId,
        /// The message's platform id.
        id: MsgId,
        /// The emoji.
        emoji: String,
        /// Who reacted (a display name).
        by: String,
    },
    /// A note on a shown message (why a persona answered it or not), for
    /// the web rooms of the other processes sharing the store: announced,
    /// not kept (see [`crate::fan_out`]). Nothing without PostgreSQL.
    ShownNote {
        /// The room.
        room: RoomId,
        /// The message's platform id.
        id: MsgId,
        /// The note, as the web room serialised it.
        note: String,
    },
    /// An agent call started (the console's transcript and costs).
    CallStarted(crate::CallStart),
    /// More about an agent call: its answer, then what came of it.
    CallEnded(crate::CallEnd),
    /// The service starts: calls a previous run left running are marked
    /// `interrupted`.
    CallsInterrupted,
    /// The rest of the batch is written only while this lease is held, by
    /// its holder, with its epoch, unexpired: a process whose lease was
    /// taken over (or ran out while it was stopped) writes nothing more
    /// under it ([`crate::StoreError::Fenced`]). PostgreSQL only.
    Fence(crate::Lease),
    /// A message received, for its room's owner to decide: put in the
    /// inbox once per (room, id), whoever received it and however often,
    /// and the owner woken when the batch commits. PostgreSQL only.
    Inbox {
        /// The message.
        msg: Message,
        /// From before the platform's first sync: recorded as context,
        /// never answered.
        context: bool,
    },
    /// A message waiting in the inbox was decided: written in the batch
    /// that holds its decisions, so it is decided once, whoever received
    /// it and whoever owned its room. PostgreSQL only.
    Decided {
        /// The room.
        room: RoomId,
        /// The message's id.
        id: MsgId,
    },
    /// A room spent tokens of its persona's own budget: counted per
    /// partition, so every other process adds it to what that persona may
    /// still spend ([`crate::Cluster::spent_elsewhere`]). Written under the
    /// room's lease. PostgreSQL only (a process alone has nobody to tell:
    /// SQLite keeps nothing of it).
    Spent(tactful_core::Spent),
}

/// A reply turn that was running.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingTurn {
    /// Its id before the restart.
    pub turn: TurnId,
    /// What kind of turn.
    pub kind: TurnKind,
    /// The room.
    pub room: RoomId,
    /// The persona.
    pub persona: PersonaId,
    /// The messages it answers.
    pub msgs: Vec<MsgId>,
    /// Whether the persona was addressed.
    pub addressed: bool,
}

pub(crate) fn kind_name(kind: TurnKind) -> &'static str {
    kind.as_str()
}

/// The inverse of [`kind_name`]; anything else reads as a reply.
pub(crate) fn kind_from_name(name: &str) -> TurnKind {
    match name {
        "gate" => TurnKind::Gate,
        "ambient" => TurnKind::Ambient,
        "schedule" => TurnKind::Schedule,
        _ => TurnKind::Reply,
    }
}

/// The column value of a message's explicit mentions (`None` when the
/// engine reads them from the text).
pub(crate) fn mentions_json(m: &Message) -> Option<String> {
    match &m.mentions {
        tactful_core::Mentions::FromText => None,
        tactful_core::Mentions::Explicit(ids) => Some(
            serde_json::to_string(&ids.iter().map(tactful_core::UserId::as_str).collect::<Vec<_>>())
                .unwrap_or_else(|_| "[]".to_owned()),
        ),
    }
}

/// Snapshots, counters and a turn's messages as stored: plain data, so
/// serialising cannot fail.
pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}
