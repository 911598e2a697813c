//! The decision record: for every (message, persona), what happened and why.
//!
//! This trace is a product feature, not a debug aid: it is what answers
//! "why did my bot stay quiet?" in `tactful replay`, in logs and later in
//! the console. Every reason has a stable snake_case name.

use crate::ids::{MsgId, PersonaId, RoomId, TurnId};
use crate::time::Timestamp;

/// What the engine did with a message for one persona.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The persona takes a turn: its agent is called.
    Reply,
    /// Heard and kept as context; by policy it is not this persona's to
    /// answer.
    Record,
    /// It would have been this persona's to answer, but a guard held it
    /// back (or it is not this persona's conversation at all). Kept as
    /// context unless the reason says otherwise.
    Skip,
}

impl Outcome {
    /// The stable name used in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Reply => "reply",
            Outcome::Record => "record",
            Outcome::Skip => "skip",
        }
    }

    /// The outcome of this trace name (as the store keeps it).
    pub fn from_name(name: &str) -> Option<Outcome> {
        [Outcome::Reply, Outcome::Record, Outcome::Skip]
            .into_iter()
            .find(|o| o.as_str() == name)
    }
}

/// Why the engine decided what it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Reply: a direct conversation with the persona.
    Dm,
    /// Reply: the persona is mentioned.
    Mention,
    /// Reply: `/command@persona`.
    Command,
    /// Reply: a reply to one of the persona's own messages.
    ReplyToMe,
    /// Reply: the room is in `all` mode and the message is for anyone.
    All,
    /// Record: the persona wrote it.
    OwnMessage,
    /// Record: `mention` mode and the message does not address the persona.
    NotAddressed,
    /// Record: `all` mode, but the message names someone else (or replies to
    /// another bot's message) and not this persona.
    AddressedToOther,
    /// Record: `command` mode and the message is not `/command@persona`.
    NotCommand,
    /// Record: the room is in `observe` mode.
    Observe,
    /// Record: a bot wrote it and the room ignores bots.
    BotAuthor,
    /// Skip: the room's bots have spoken `max_bot_turns` times in a row
    /// since the last human message.
    BotTurnLimit,
    /// Skip: the sender is not on the room's allowlist.
    NotAllowed,
    /// Skip: the persona's reply budget in this room is spent.
    RateLimited,
    /// Skip, not recorded: a DM with another persona.
    DmForOther,
    /// Record: `ambient` mode; held in the persona's buffer for its next
    /// batch.
    Buffered,
    /// Reply: the reply-decision gate said REPLY.
    GateReply,
    /// Reply: the gate failed (error, timeout or an unreadable answer), so
    /// it failed open.
    GateFailedOpen,
    /// Skip: the reply-decision gate said SKIP.
    GateSkip,
    /// Skip: enough personas already answered this unaddressed message.
    FloorTaken,
    /// Reply: a `[[schedule]]` run is due (never gated, no floor).
    Schedule,
    /// Withheld: a before-send hook cancelled the reply (the `hook` line
    /// before it names the hook and its reason).
    Hook,
    /// Record: unaddressed small talk ("ok", "thanks!", "👍"), which the
    /// pre-gate keeps from costing a call.
    PreGate,
    /// Skip: the room's budget for replies nobody asked for is spent
    /// (`unprompted`).
    UnpromptedBudget,
    /// Skip: the persona's spend budget (`budget`) cannot pay for the call.
    /// An addressed message gets the budget's notice.
    BudgetExhausted,
}

impl Reason {
    /// Every reason, for documentation and coverage checks.
    pub const ALL: [Reason; 25] = [
        Reason::Dm,
        Reason::Mention,
        Reason::Command,
        Reason::ReplyToMe,
        Reason::All,
        Reason::OwnMessage,
        Reason::NotAddressed,
        Reason::AddressedToOther,
        Reason::NotCommand,
        Reason::Observe,
        Reason::BotAuthor,
        Reason::BotTurnLimit,
        Reason::NotAllowed,
        Reason::RateLimited,
        Reason::DmForOther,
        Reason::Buffered,
        Reason::GateReply,
        Reason::GateFailedOpen,
        Reason::GateSkip,
        Reason::FloorTaken,
        Reason::Hook,
        Reason::Schedule,
        Reason::PreGate,
        Reason::UnpromptedBudget,
        Reason::BudgetExhausted,
    ];

    /// The reason of this trace name (as the store keeps it).
    pub fn from_name(name: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// The stable name used in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Dm => "dm",
            Reason::Mention => "mention",
            Reason::Command => "command",
            Reason::ReplyToMe => "reply_to_me",
            Reason::All => "all",
            Reason::OwnMessage => "own_message",
            Reason::NotAddressed => "not_addressed",
            Reason::AddressedToOther => "addressed_to_other",
            Reason::NotCommand => "not_command",
            Reason::Observe => "observe",
            Reason::BotAuthor => "bot_author",
            Reason::BotTurnLimit => "bot_turn_limit",
            Reason::NotAllowed => "not_allowed",
            Reason::RateLimited => "rate_limited",
            Reason::DmForOther => "dm_for_other",
            Reason::Buffered => "buffered",
            Reason::GateReply => "gate_reply",
            Reason::GateFailedOpen => "gate_failed_open",
            Reason::GateSkip => "gate_skip",
            Reason::FloorTaken => "floor_taken",
            Reason::Hook => "hook",
            Reason::Schedule => "schedule",
            Reason::PreGate => "pre_gate",
            Reason::UnpromptedBudget => "unprompted_budget",
            Reason::BudgetExhausted => "budget_exhausted",
        }
    }
}

impl From<crate::addressing::Addressed> for Reason {
    fn from(a: crate::addressing::Addressed) -> Reason {
        use crate::addressing::Addressed;
        match a {
            Addressed::Dm => Reason::Dm,
            Addressed::Mention => Reason::Mention,
            Addressed::Command => Reason::Command,
            Addressed::ReplyToMe => Reason::ReplyToMe,
        }
    }
}

/// One (message, persona) decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// When it was decided.
    pub at: Timestamp,
    /// The room of the message.
    pub room: RoomId,
    /// The message.
    pub msg: MsgId,
    /// The persona it was decided for.
    pub persona: PersonaId,
    /// What happens.
    pub outcome: Outcome,
    /// Why.
    pub reason: Reason,
    /// The turn started for it, when the outcome is [`Outcome::Reply`].
    pub turn: Option<TurnId>,
}
