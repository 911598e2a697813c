//! Before-send hooks, as far as deciding goes.
//!
//! An operator's hooks may rewrite or cancel a reply after the agent wrote
//! it and before any platform sees it (`[[hook]]` with
//! `on = "before_send"`). Running one is I/O (a command hook is a program),
//! so the engine only says *which* hooks a reply passes through
//! ([`Output::RunHooks`](crate::Output::RunHooks) with a [`HookRequest`]),
//! and hears back how each ended ([`HookOutcome`], through
//! `Engine::handle_hook_result`). What a hook did is therefore part of the
//! trace and of replay like any decision: a cancelled reply releases its
//! rate-limit slot like silence, a rewritten one is what the room hears.

use std::sync::Arc;

use crate::ids::{MsgId, PersonaId, RoomId, ThreadId, TurnId};
use crate::time::Timestamp;
use crate::transcript::Entry;
use crate::turn::TurnKind;

/// Which replies a hook sees: its name, and the personas and rooms it is
/// limited to (empty: all).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookScope {
    /// The hook's name, unique in the config; traces and the room say it.
    pub name: Arc<str>,
    /// Only these personas' replies (empty: every persona's).
    pub personas: Vec<PersonaId>,
    /// Only replies in these rooms (empty: every room).
    pub rooms: Vec<RoomId>,
}

impl HookScope {
    /// Whether a reply of `persona` in `room` passes through this hook.
    pub fn applies(&self, persona: &PersonaId, room: &RoomId) -> bool {
        (self.personas.is_empty() || self.personas.contains(persona))
            && (self.rooms.is_empty() || self.rooms.contains(room))
    }
}

/// One reply of a turn, as the hooks see it: its final text (directives
/// read, not yet split for a platform) and what it answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookReply {
    /// The text that would be sent.
    pub text: String,
    /// The message it replies to, when the agent named one.
    pub reply_to: Option<String>,
}

/// The replies of one turn, for the hooks that apply to them, in order.
#[derive(Clone, Debug)]
pub struct HookRequest {
    /// The turn; the outcome is reported against it.
    pub turn: TurnId,
    /// What kind of turn wrote the replies.
    pub kind: TurnKind,
    /// When the engine asked.
    pub at: Timestamp,
    /// The persona speaking.
    pub persona: PersonaId,
    /// The room.
    pub room: RoomId,
    /// The thread the replies go to.
    pub thread: Option<ThreadId>,
    /// The hooks to run, in config order.
    pub hooks: Vec<Arc<str>>,
    /// The replies: the turn's first, then any further ones.
    pub replies: Vec<HookReply>,
    /// The messages the turn answers.
    pub triggers: Vec<Arc<Entry>>,
    /// Whether the reply is tactful's short notice after a failed turn.
    pub notice: bool,
}

/// What one hook did to one reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HookAction {
    /// Let it through unchanged.
    Send,
    /// Rewrote it (a redaction, or a command's new text).
    Replace,
    /// Stopped it: nothing is sent.
    Cancel,
}

impl HookAction {
    /// The stable name used in traces and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            HookAction::Send => "send",
            HookAction::Replace => "replace",
            HookAction::Cancel => "cancel",
        }
    }
}

/// One hook's step over one reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookStep {
    /// The hook.
    pub hook: Arc<str>,
    /// What it did.
    pub action: HookAction,
    /// Why, when there is something to say (a cancel's reason, a failure
    /// and what `on_error` made of it, how many matches were redacted).
    pub reason: Option<String>,
}

/// How one reply came through its hooks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookOutcome {
    /// Each hook's step, in order; the chain stops at a cancel.
    pub steps: Vec<HookStep>,
    /// The text to send, or `None` when a hook cancelled the reply.
    pub text: Option<String>,
}

/// A hook step as the trace shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookNote {
    /// When the engine heard it.
    pub at: Timestamp,
    /// The turn.
    pub turn: TurnId,
    /// What kind of turn.
    pub kind: TurnKind,
    /// Whose reply.
    pub persona: PersonaId,
    /// The room.
    pub room: RoomId,
    /// The messages the turn answers.
    pub msgs: Vec<MsgId>,
    /// Which of the turn's replies (0 for the first).
    pub reply: usize,
    /// The step.
    pub step: HookStep,
}
