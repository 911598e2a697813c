//! The agent-call log: one row per call an engine turn made (reply, gate,
//! ambient batch, schedule), with its latency, token counts and how it
//! ended. It is what the console's transcript and cost view read, so what a
//! room costs survives a restart and can be summed per day.
//!
//! A call is written when it starts ([`CallStart`]) and completed by every
//! later word about it ([`CallEnd`]): the agent's answer (latency, tokens,
//! error text) and then what the engine made of it (a reply, silence...).
//! The first value of each column wins, so a turn that answered three
//! questions is one call, ended when the agent answered.

use serde::Serialize;
use tactful_core::{PersonaId, RoomId, Timestamp, TurnId, TurnKind};

/// An agent call began.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallStart {
    /// The engine's turn id: one call per turn.
    pub turn: TurnId,
    /// What the call was for.
    pub kind: TurnKind,
    /// The room.
    pub room: RoomId,
    /// Whose call.
    pub persona: PersonaId,
    /// The `[agents]` key it went to.
    pub agent: String,
    /// The newest message it was about (none for a schedule's run).
    pub msg: Option<String>,
    /// When it started (not when it was decided: a queued turn waits).
    pub at: Timestamp,
}

/// More about a call: each field set here fills the column only if it is
/// still empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallEnd {
    /// The call.
    pub turn: TurnId,
    /// When the agent answered, failed or was stopped.
    pub at: Option<Timestamp>,
    /// `answered`, `reply`, `silent`, `withheld`, `error` or `cancelled`:
    /// a later, more precise word replaces `answered`.
    pub outcome: Option<&'static str>,
    /// The agent's error, secrets masked.
    pub error: Option<String>,
    /// Tokens in the prompt, as the provider reported them.
    pub prompt_tokens: Option<u64>,
    /// Tokens generated.
    pub completion_tokens: Option<u64>,
    /// Prompt tokens the provider served from its cache.
    pub cached_tokens: Option<u64>,
}

/// One call, as the console lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallRow {
    /// The turn.
    pub turn: i64,
    /// `reply`, `gate`, `ambient` or `schedule`.
    pub kind: String,
    /// Whose call.
    pub persona: String,
    /// The agent.
    pub agent: String,
    /// The newest message it was about.
    pub msg: Option<String>,
    /// When it started (Unix milliseconds).
    pub started: u64,
    /// How long the agent took, once it answered.
    pub latency_ms: Option<u64>,
    /// How it ended (none while it runs).
    pub outcome: Option<String>,
    /// The agent's error, secrets masked.
    pub error: Option<String>,
    /// Tokens in, out, and in from the provider's cache.
    pub prompt_tokens: Option<u64>,
    /// Tokens generated.
    pub completion_tokens: Option<u64>,
    /// Prompt tokens served from the provider's cache.
    pub cached_tokens: Option<u64>,
}

/// Calls of one room, persona, agent and kind on one UTC day.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CostRow {
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    /// The room.
    pub room: String,
    /// The persona.
    pub persona: String,
    /// The agent.
    pub agent: String,
    /// `reply`, `gate`, `ambient` or `schedule`.
    pub kind: String,
    /// Calls made.
    pub calls: u64,
    /// Of those, failed.
    pub errors: u64,
    /// Tokens in.
    pub prompt_tokens: u64,
    /// Tokens out.
    pub completion_tokens: u64,
    /// Tokens in served from the cache.
    pub cached_tokens: u64,
    /// The mean latency of the calls that answered.
    pub mean_latency_ms: Option<u64>,
}

/// The most rows [`Reader::costs`] returns.
pub const MAX_COST_ROWS: usize = 10_000;

/// A token count as the stores keep it (a count past `i64::MAX` is kept as
/// that).
pub(crate) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
