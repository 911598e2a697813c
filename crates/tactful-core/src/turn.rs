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
    /// An ambient batch: unaddressed messages the agent may answer or let
    /// pass in silence.
    Ambient,
    /// A reply-decision gate: a classifier asked REPLY or SKIP.
    Gate,
    /// A `[[schedule]]` run: the persona speaks unasked, at a set time.
    Schedule,
}

impl TurnKind {
    /// The stable name used in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnKind::Reply => "reply",
            TurnKind::Ambient => "ambient",
            TurnKind::Gate => "gate",
            TurnKind::Schedule => "schedule",
        }
    }
}

/// What made an ambient buffer flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlushTrigger {
    /// `ambient.flush_seconds` (with jitter) after the first buffered message.
    Timer,
    /// `ambient.flush_messages` messages were buffered.
    Count,
    /// The buffer reached `ambient.hard_cap`.
    HardCap,
}

impl FlushTrigger {
    /// The stable name used in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            FlushTrigger::Timer => "timer",
            FlushTrigger::Count => "count",
            FlushTrigger::HardCap => "hard_cap",
        }
    }
}

/// A classifier's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateVerdict {
    /// Answer.
    Reply,
    /// Stay out.
    Skip,
}

/// Reads a gate answer: its first word, ignoring case and punctuation, must
/// be REPLY or SKIP. Anything else is unreadable (`None`), and the gate
/// fails open.
pub fn parse_gate_answer(text: &str) -> Option<GateVerdict> {
    let word: String = text
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if word.eq_ignore_ascii_case("reply") {
        Some(GateVerdict::Reply)
    } else if word.eq_ignore_ascii_case("skip") {
        Some(GateVerdict::Skip)
    } else {
        None
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
    /// For each trigger, how many of `history` the room heard before it:
    /// an ambient batch's messages arrive among others, and the prompt
    /// shows them in that order. Empty: every trigger comes after the
    /// history.
    pub trigger_at: Vec<usize>,
    /// Character budget for the rendered conversation.
    pub max_chars: usize,
    /// Display names of the other bots in the room (other personas
    /// included), for the gate's classifier.
    pub room_bots: Vec<Arc<str>>,
    /// For ambient batches: what made the buffer flush.
    pub flush_trigger: Option<FlushTrigger>,
    /// Whether someone addressed the persona (DM, mention, command, reply
    /// to it): a backend may answer "I don't know" then, where it would
    /// stay silent on a message meant for anyone.
    pub addressed: bool,
    /// The longest reply the engine will send, in characters: a backend
    /// may stop reading (and paying for) output past it. The engine cuts
    /// longer answers itself, so reading a little more is harmless.
    pub max_reply_chars: usize,
    /// Whether a leading reasoning block (`<think>…</think>`) is taken off
    /// the answer ([`crate::reasoning`]): the delivery path must not
    /// stream one into a placeholder either.
    pub strip_reasoning: bool,
    /// Whether its replies pass through before-send hooks: the delivery
    /// path then shows nothing of the answer until they have (a hook may
    /// still cancel or rewrite it).
    pub hooked: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_answers_are_read_from_the_first_word() {
        assert_eq!(parse_gate_answer("REPLY"), Some(GateVerdict::Reply));
        assert_eq!(parse_gate_answer(" skip."), Some(GateVerdict::Skip));
        assert_eq!(
            parse_gate_answer("**Skip** - it is for Bob"),
            Some(GateVerdict::Skip)
        );
        assert_eq!(parse_gate_answer("Reply: yes"), Some(GateVerdict::Reply));
        assert_eq!(parse_gate_answer("I think REPLY"), None);
        assert_eq!(parse_gate_answer("REPLYING"), None);
        assert_eq!(parse_gate_answer(""), None);
    }
}

/// What a driver reports when a turn ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentResult {
    /// The agent's whole output text.
    Output(String),
    /// The agent's output, and the length in characters of the reasoning
    /// its server sent beside it (OpenAI-compatible `reasoning_content`):
    /// counted in the trace, never shown.
    Reasoned {
        /// The output text, as for [`AgentResult::Output`].
        text: String,
        /// The reasoning's length.
        reasoning_chars: usize,
    },
    /// The agent failed; the text says how (never a secret).
    Failed(String),
}
