//! Agent backends: what speaks for a persona when the engine starts a turn.
//!
//! The engine (sans-I/O) hands out [`TurnRequest`]s; a driver runs each one
//! through an [`Agent`] and reports the outcome back as an
//! [`tactful_core::AgentResult`]. Every backend implements the same small
//! trait, renders its prompt with the one builder in
//! [`tactful_core::prompt`], and streams text through [`Deltas`] so
//! platforms that can edit messages show progress.
//!
//! Backends:
//! - [`script::ScriptAgent`]: canned answers by regular expression, the
//!   deterministic double for tests and replays;
//! - [`command::CommandAgent`]: any executable, the turn as JSON on stdin;
//! - [`openai::OpenAiAgent`]: any OpenAI-compatible Chat Completions
//!   endpoint, streamed over SSE.

pub mod acp;
pub mod command;
pub mod hooks;
pub mod kb;
pub mod openai;
mod process;
pub mod script;

pub mod turn_json;

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_core::{AgentResult, TurnRequest};

pub use command::CommandAgent;
pub use openai::OpenAiAgent;
pub use script::{ScriptAgent, ScriptAnswer, ScriptRule};

/// Token counts a provider reported for one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Tokens in the prompt.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Of the prompt's tokens, those the provider served from its prompt
    /// cache (OpenAI's `prompt_tokens_details.cached_tokens`, DeepSeek's
    /// `prompt_cache_hit_tokens`): what a cache-friendly prompt saves.
    pub cached_tokens: u64,
}

/// A finished turn: the agent's whole output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentReply {
    /// The output text, directives and all; the engine interprets it.
    pub text: String,
    /// Token usage, when the backend reports it.
    pub usage: Option<Usage>,
    /// Characters of reasoning the backend sent beside the text (an
    /// OpenAI-compatible server's `reasoning_content`), never part of it.
    pub reasoning_chars: usize,
}

impl AgentReply {
    /// A reply of just this text.
    pub fn text(text: String) -> Self {
        AgentReply {
            text,
            ..AgentReply::default()
        }
    }

    /// What the engine is told: the text, and the reasoning's length when
    /// there was any.
    pub fn into_result(self) -> tactful_core::AgentResult {
        match self.reasoning_chars {
            0 => tactful_core::AgentResult::Output(self.text),
            n => tactful_core::AgentResult::Reasoned {
                text: self.text,
                reasoning_chars: n,
            },
        }
    }
}

/// Why a turn failed. Messages are meant for the decision trace and logs:
/// they name what went wrong and never carry a secret.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// No answer within the turn's deadline.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The provider answered with an HTTP error.
    #[error("HTTP {status}: {message}")]
    Http {
        /// The status code.
        status: u16,
        /// The provider's own error message, when it gave one.
        message: String,
    },
    /// The connection failed or broke off.
    #[error("connection failed: {0}")]
    Connection(String),
    /// The answer did not follow the protocol.
    #[error("malformed answer: {0}")]
    Protocol(String),
    /// A subprocess exited unsuccessfully.
    #[error("{command} exited with {status}; stderr: {stderr_tail}")]
    Exit {
        /// The program, as configured.
        command: String,
        /// Its exit status, as text.
        status: String,
        /// The end of what it wrote to stderr.
        stderr_tail: String,
    },
    /// The agent reported a failure of its own (a scripted one, say).
    #[error("{0}")]
    Failed(String),
    /// A subprocess could not be started.
    #[error("could not start {command}: {reason}")]
    Spawn {
        /// The program, as configured.
        command: String,
        /// Why.
        reason: String,
    },
}

impl AgentError {
    /// The engine's view of a failed turn.
    pub fn into_result(self) -> AgentResult {
        AgentResult::Failed(self.to_string())
    }
}

/// Receives an answer's text as it streams in.
///
/// Each call carries the *new* text only. Backends that cannot stream call
/// it once with the whole answer, or not at all.
pub trait Deltas: Send {
    /// More text arrived.
    fn delta(&mut self, text: &str);
}

/// Discards deltas, for callers that only want the final text.
pub struct NoDeltas;

impl Deltas for NoDeltas {
    fn delta(&mut self, _text: &str) {}
}

impl Deltas for String {
    fn delta(&mut self, text: &str) {
        self.push_str(text);
    }
}

/// One agent backend.
///
/// `run` is called once per turn, possibly for many turns at once (one per
/// room); implementations keep whatever per-session state they need behind
/// `&self`. Dropping the returned future cancels the turn: backends must
/// not leave work running for it (kill the subprocess, abort the request).
pub trait Agent: Send + Sync + fmt::Debug {
    /// Runs one turn to its end.
    fn run<'a>(
        &'a self,
        turn: &'a TurnRequest,
        deltas: &'a mut dyn Deltas,
    ) -> BoxFuture<'a, Result<AgentReply, AgentError>>;
}

/// An answer's text as it streams in, bounded: past the reply limit
/// (`max_reply_chars` of the turn, as bytes with room to spare) the rest is
/// not kept, so a runaway model costs a bounded amount of memory. The
/// engine cuts the reply to its limit and says so in the trace.
pub(crate) struct Collected {
    text: String,
    cap: usize,
}

impl Collected {
    /// Collects up to the output cap of a reply of `max_chars` characters.
    pub(crate) fn new(max_chars: usize) -> Self {
        Collected {
            text: String::new(),
            cap: process::output_cap(max_chars),
        }
    }

    /// Keeps `piece` (what fits of it) and passes it on to `deltas`.
    /// Returns `false` once the cap is reached: stop reading.
    pub(crate) fn push(&mut self, piece: &str, deltas: &mut dyn Deltas) -> bool {
        let room = self.cap.saturating_sub(self.text.len());
        let mut take = piece.len().min(room);
        while !piece.is_char_boundary(take) {
            take -= 1;
        }
        let kept = &piece[..take];
        if !kept.is_empty() {
            self.text.push_str(kept);
            deltas.delta(kept);
        }
        take == piece.len()
    }

    /// The text kept.
    pub(crate) fn into_text(self) -> String {
        self.text
    }
}

/// The last `max` bytes of `s`, cut on a character boundary and trimmed, for
/// error messages that quote a subprocess's stderr or a provider's body.
pub fn tail(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.len() <= max {
        return s.to_owned();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &s[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_end_on_a_char_boundary() {
        assert_eq!(tail("  short \n", 10), "short");
        assert_eq!(tail("abcdefé", 3), "…fé");
        assert_eq!(tail("ééé", 3), "…é");
    }
}
