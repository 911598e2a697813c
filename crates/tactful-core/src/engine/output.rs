//! What the engine hands its driver: every [`Output`] and the records
//! inside them (replies, turn ends, ambient and rate-limit notes).

#[allow(clippy::wildcard_imports)]
use super::*;

/// A reply the engine decided to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// When it was decided.
    pub at: Timestamp,
    /// The turn that produced it.
    pub turn: TurnId,
    /// What kind of turn.
    pub kind: TurnKind,
    /// The persona speaking.
    pub persona: PersonaId,
    /// The room.
    pub room: RoomId,
    /// The thread, when the trigger was in one.
    pub thread: Option<ThreadId>,
    /// The engine's id for it: `<persona>:<n>`, counting from 1 per persona.
    pub id: MsgId,
    /// The text to send, directives stripped.
    pub text: String,
    /// The message to reply to, when the agent chose a valid one.
    pub reply_to: Option<MsgId>,
    /// A `reply_to` the agent gave that names no message of this room; the
    /// text is sent as a plain message instead.
    pub dropped_reply_to: Option<String>,
    /// `reply_to` values rejected as malformed.
    pub invalid_reply_to: Vec<String>,
    /// Directive keys that were not understood.
    pub unknown_directives: Vec<String>,
    /// The messages the turn answered.
    pub msgs: Vec<MsgId>,
    /// Whether this is the short notice sent because the turn failed.
    pub notice: bool,
    /// Whether the room is a direct conversation.
    pub is_dm: bool,
    /// When the answer was longer than `max_reply_chars`: its length in
    /// characters before it was cut (the text ends with the truncation
    /// mark).
    pub truncated_from: Option<usize>,
    /// Further replies of this turn the rate limit held back (on the
    /// turn's last reply sent; see `directives::split_replies`).
    pub more_withheld: u32,
    /// The length of the reasoning taken off the agent's answer, in
    /// characters (0 when there was none), on the turn's first reply.
    pub reasoning_chars: usize,
}

impl Outgoing {
    /// The reply as the room hears it, written by the persona (whose
    /// display name is `name`). The engine records exactly this; a store
    /// saves it so a restart records it again.
    pub fn as_heard(&self, name: Arc<str>) -> Message {
        Message {
            id: self.id.clone(),
            room: self.room.clone(),
            thread: self.thread.clone(),
            sender: Sender {
                id: UserId::new(self.persona.as_str()),
                name,
                is_bot: true,
                handle: None,
            },
            text: Arc::from(self.text.as_str()),
            mentions: Mentions::FromText,
            reply_to: self.reply_to.clone(),
            is_dm: self.is_dm,
            dm_to: self.is_dm.then(|| self.persona.clone()),
            time: self.at,
        }
    }
}

/// Why a turn sent nothing on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SilenceKind {
    /// The agent answered with the silence token.
    Token,
    /// The output held directives and no text.
    DirectivesOnly,
}

impl SilenceKind {
    /// The stable name used in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            SilenceKind::Token => "silence_token",
            SilenceKind::DirectivesOnly => "directives_only",
        }
    }
}

/// Why the engine cancelled a turn in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelReason {
    /// An ambient flush was overtaken by a message addressing the persona:
    /// the addressed reply answers instead, so the flush must not post.
    Addressed,
    /// The reply-decision gate did not answer in time; it failed open.
    GateTimeout,
    /// A config reload removed the persona.
    PersonaRemoved,
}

impl CancelReason {
    /// The stable name used in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            CancelReason::Addressed => "addressed",
            CancelReason::GateTimeout => "gate_timeout",
            CancelReason::PersonaRemoved => "persona_removed",
        }
    }
}

/// The end of a turn that sent nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnEnd {
    /// When it ended.
    pub at: Timestamp,
    /// The turn.
    pub turn: TurnId,
    /// What kind of turn.
    pub kind: TurnKind,
    /// Whose turn.
    pub persona: PersonaId,
    /// The room.
    pub room: RoomId,
    /// The messages the turn was for.
    pub msgs: Vec<MsgId>,
    /// The length of the reasoning taken off the agent's answer, in
    /// characters (0 when there was none).
    pub reasoning_chars: usize,
}

/// Why an ambient flush that was due has not started yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitReason {
    /// The persona spoke in the room less than `cooldown_seconds` ago.
    Cooldown,
    /// `max_concurrent_flushes` ambient calls are already running.
    Concurrency,
    /// The persona's previous flush in this room is still running.
    InFlight,
}

impl WaitReason {
    /// The stable name used in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitReason::Cooldown => "cooldown",
            WaitReason::Concurrency => "concurrency",
            WaitReason::InFlight => "in_flight",
        }
    }
}

/// Something that happened to an ambient buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AmbientEvent {
    /// A batch began: its flush timer is armed for `due` (unless a count,
    /// an addressed message or the hard cap comes first). What the console
    /// counts down as "flushes in ~N s".
    Armed {
        /// When the timer fires.
        due: Timestamp,
    },
    /// A flush is due but waits.
    Waiting {
        /// What made it due.
        trigger: FlushTrigger,
        /// Why it waits.
        why: WaitReason,
        /// When it may start, if known.
        until: Option<Timestamp>,
    },
    /// The buffer was emptied without a flush: an addressed message took
    /// over (its reply sees these messages as context).
    Cleared {
        /// The messages that were buffered.
        msgs: Vec<MsgId>,
    },
    /// A flush was due but will not call the agent.
    Skipped {
        /// The batch.
        msgs: Vec<MsgId>,
        /// Why (`rate_limited`, `floor_taken`, `gate_skip`).
        reason: Reason,
    },
}

/// What a `rate_limited` skip was up against: shown as "limit 6/120 s,
/// frees in 40 s".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitNote {
    /// When.
    pub at: Timestamp,
    /// Whose budget.
    pub persona: PersonaId,
    /// Which room.
    pub room: RoomId,
    /// The message skipped.
    pub msg: MsgId,
    /// The limit: this many replies...
    pub replies: u32,
    /// ...per this window.
    pub per: Duration,
    /// When the oldest reply leaves the window; `None` when every slot is
    /// held by a reply being written (one frees when it ends).
    pub frees_at: Option<Timestamp>,
}

impl LimitNote {
    /// The note for message `msg` skipped under `limit`, as `ledger` stands.
    pub fn of(
        at: Timestamp,
        persona: PersonaId,
        room: RoomId,
        msg: MsgId,
        limit: &crate::policy::RateLimit,
        ledger: &RateLedger,
    ) -> LimitNote {
        LimitNote {
            at,
            persona,
            room,
            msg,
            replies: limit.replies,
            per: limit.per,
            frees_at: ledger.frees_at(limit),
        }
    }
}

/// What a `budget_exhausted` skip was up against: shown as "budget 4,920
/// of 5,000 tokens per 3600 s used, frees in 58 min".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetNote {
    /// When.
    pub at: Timestamp,
    /// Whose budget.
    pub persona: PersonaId,
    /// Which room.
    pub room: RoomId,
    /// The message skipped (the newest of an ambient batch).
    pub msg: MsgId,
    /// Whether the room's own budget was spent (else the persona's).
    pub room_budget: bool,
    /// Tokens spent in the window, holds of running calls included.
    pub used: u64,
    /// How many of `used` rooms held by other processes spent (0 for a
    /// room's own budget, or a process alone).
    pub elsewhere: u64,
    /// The budget: this many tokens...
    pub tokens: u64,
    /// ...per this window.
    pub per: Duration,
    /// The call's estimate, which did not fit.
    pub estimate: u64,
    /// When the oldest spend leaves the window; `None` when all of it is
    /// held by calls running (it frees when they end).
    pub frees_at: Option<Timestamp>,
}

/// An [`AmbientEvent`] for one persona in one room.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AmbientNote {
    /// When.
    pub at: Timestamp,
    /// Whose buffer.
    pub persona: PersonaId,
    /// Which room.
    pub room: RoomId,
    /// What happened.
    pub event: AmbientEvent,
}

/// Something the driver must act on or record, in the order it happened.
#[derive(Clone, Debug)]
pub enum Output {
    /// A decision for one (message, persona) pair. Record it.
    Decision(Decision),
    /// Run an agent turn and report back with
    /// [`Engine::handle_agent_result`].
    CallAgent(Box<TurnRequest>),
    /// Deliver a reply.
    Send(Box<Outgoing>),
    /// A turn ended in deliberate silence: nothing to deliver.
    Silent(TurnEnd, SilenceKind),
    /// A turn produced a reply that a guard held back at the last moment:
    /// the room's bots reached `max_bot_turns`, or another persona already
    /// took the floor.
    Withheld(TurnEnd, Reason),
    /// A turn failed. The string says why.
    Error(TurnEnd, String),
    /// Run these before-send hooks on a turn's replies and report with
    /// [`Engine::handle_hook_result`].
    RunHooks(Box<HookRequest>),
    /// One hook's step over one reply (what it did, and why).
    Hook(HookNote),
    /// The engine gave up on a turn in flight: stop the agent if possible;
    /// its result, if it still comes, is ignored.
    Cancelled(TurnEnd, CancelReason),
    /// An ambient buffer waited, was cleared, or skipped a flush.
    Ambient(AmbientNote),
    /// A persona was offered the floor of an unaddressed message (with
    /// `floor.strategy = "pass"`).
    Floor(FloorNote),
    /// A message was skipped for the rate limit (right after its
    /// `rate_limited` decision): the limit, and when it frees a slot.
    Limited(LimitNote),
    /// A reaction to put on a person's message: the persona they asked
    /// chose silence (`addressed_silence = "react"`). Where the platform
    /// has no reactions the driver calls [`Engine::react_unsupported`].
    React(super::ReactNote),
    /// What a spend budget stood at when it could not pay for a call
    /// (after the `budget_exhausted` decision or skip).
    OverBudget(BudgetNote),
    /// A schedule's run fired or was skipped; drivers store its due time
    /// as the schedule's last run.
    Schedule(ScheduleNote),
    /// An inbound message was dropped before any decision.
    Dropped {
        /// When.
        at: Timestamp,
        /// Its room.
        room: RoomId,
        /// Its id.
        msg: MsgId,
        /// Why, e.g. `duplicate`.
        reason: &'static str,
    },
}
