//! Agent turns: what the engine asks a driver to run, and what comes back.

use std::sync::Arc;

use crate::ids::{PersonaId, RoomId, ThreadId, TurnId};
use crate::persona::PersonaIdx;
use crate::time::Timestamp;
use crate::transcript::Entry;

/// What kind of call a turn is. Drivers may route kinds to different
/// backends or budgets; traces show it on every `agent_call`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TurnKind {
    /// An answer to one triggering message.
    Reply,
}

impl TurnKind {
    /// The stable name used in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnKind::Reply => "reply",
        }
    }
}

/// Everything a driver needs to run one agent turn.
///
/// The request carries structured context, not a rendered prompt: each
/// backend renders it with [`crate::prompt::render`] (or, like the script
/// agent, reads the triggers directly).
#[derive(Clone, Debug)]
pub struct TurnRequest {
    /// The turn, to report the result against.
    pub turn: TurnId,
    /// What kind of call this is.
    pub kind: TurnKind,
    /// When the engine started it.
    pub started: Timestamp,
    /// The persona speaking.
    pub persona: PersonaId,
    /// Its index, to tell its own transcript entries from others'.
    pub persona_idx: PersonaIdx,
    /// Its display name.
    pub persona_name: Arc<str>,
    /// The `[agents]` key to run it with.
    pub agent: Arc<str>,
    /// The persona's own prompt.
    pub prompt: Arc<str>,
    /// The room.
    pub room: RoomId,
    /// The thread the reply goes to.
    pub thread: Option<ThreadId>,
    /// Whether the room is a DM.
    pub is_dm: bool,
    /// The silence token when the agent may stay silent here (group rooms
    /// with `allow_silence`); `None` means it must answer.
    pub silence_token: Option<Arc<str>>,
    /// The messages waiting for an answer, oldest first.
    pub triggers: Vec<Arc<Entry>>,
    /// Earlier room history, oldest first, at most `context.max_turns`.
    pub history: Vec<Arc<Entry>>,
    /// Character budget for the rendered conversation.
    pub max_chars: usize,
}

/// What a driver reports when a turn ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentResult {
    /// The agent's whole output text.
    Output(String),
    /// The agent failed; the text says how (never a secret).
    Failed(String),
}
