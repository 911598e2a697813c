//! The room engine: messages, agent results and time in; decisions and
//! effects out.
//!
//! [`Engine`] is sans-I/O in the style of `quinn-proto`: the caller owns the
//! clock, the network and the agents. It feeds events with
//! [`Engine::handle_message`], [`Engine::handle_agent_result`] and
//! [`Engine::handle_timeout`] (when [`Engine::poll_timeout`] is due), then
//! drains [`Engine::poll_output`] until it returns `None`, executing the
//! effects it finds. Every entry point takes `now`; nothing inside reads a
//! clock, so a replay on a virtual clock and the live service decide alike.
//!
//! The flow of one message, in order (see also `ARCHITECTURE.md`):
//! 1. duplicate ids are dropped;
//! 2. the author is identified (a persona of ours? a bot?) and the room's
//!    bot streak is updated;
//! 3. mentions and `/command@` are classified once ([`Targets`]);
//! 4. each persona gets a verdict ([`decide`]): room mode, bot rules,
//!    allowlist and rate limit, in that order;
//! 5. the message is recorded in the room transcript;
//! 6. verdicts are acted on: a turn starts, the reply-decision gate is
//!    asked, or the message joins an ambient buffer.
//!
//! When a turn ends, [`Engine::handle_agent_result`] strips directives,
//! honours silence, applies the bot-turn limit and floor control, validates
//! `reply_to`, settles the rate-limit slot and emits an [`Outgoing`] send,
//! which the room then hears like any other message.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use rustc_hash::FxHashMap;

use crate::addressing::{Addressed, CommandTarget, Handle, Targets, handle_eq};
use crate::decision::{Decision, Outcome, Reason};
use crate::directives::{self, Directives};
use crate::hooks::{HookNote, HookRequest, HookScope};
use crate::ids::{MsgId, PersonaId, RoomId, ThreadId, TurnId, UserId};
use crate::message::{Mentions, Message, Sender};
use crate::persona::{MAX_PERSONAS, PersonaIdx, PersonaSet, PersonaSpec};
use crate::policy::{ERROR_NOTICE, Mode, OnError, PolicyTable, RoomPolicy};
use crate::rate_limit::RateLedger;
use crate::reasoning;
use crate::rng::Rng;
use crate::schedule::Schedule;
use crate::silence;
use crate::time::Timestamp;
use crate::transcript::{Entry, History};
mod ambient;
mod hooked;
mod live_personas;
mod live_policy;
mod more_replies;
mod restore;
mod scheduled;

pub use live_personas::PersonasChanged;
pub use restore::{Counters, MemberSnapshot, NotResumed, RoomSnapshot};
pub use scheduled::{ScheduleEvent, ScheduleNote};

use crate::turn::{AgentResult, FlushTrigger, GateVerdict, TurnKind, TurnRequest, parse_gate_answer};

/// How much of a room the engine keeps and shows agents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextLimits {
    /// Messages retained per room (for context, duplicate detection and
    /// `reply_to` validation).
    pub history: usize,
    /// Earlier messages an agent sees in one turn.
    pub max_turns: usize,
    /// Character budget of the rendered conversation in one turn.
    pub max_chars: usize,
    /// Own message ids remembered per (room, persona), so a reply to an old
    /// message of the persona still addresses it.
    pub own_ids: usize,
}

impl Default for ContextLimits {
    fn default() -> Self {
        ContextLimits {
            history: 200,
            max_turns: 30,
            max_chars: 12_000,
            own_ids: 1024,
        }
    }
}

/// Everything the engine is built from.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The personas this process hosts, in config order.
    pub personas: Vec<PersonaSpec>,
    /// Room policy layers.
    pub policies: PolicyTable,
    /// Context bounds.
    pub context: ContextLimits,
    /// Ambient flushes allowed to run at once, process-wide.
    pub max_concurrent_flushes: usize,
    /// Seed for ambient flush jitter.
    pub seed: u64,
    /// The `[agents]` keys whose answers keep a leading reasoning block
    /// (`strip_reasoning = false`); every other agent's is stripped.
    pub reasoning_kept: Vec<Arc<str>>,
    /// The before-send hooks, in the order replies pass through them.
    pub hooks: Vec<HookScope>,
    /// The scheduled turns (run once [`Engine::start_schedules`] is called).
    pub schedules: Vec<Schedule>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            personas: Vec::new(),
            policies: PolicyTable::default(),
            context: ContextLimits::default(),
            max_concurrent_flushes: 3,
            seed: 0,
            reasoning_kept: Vec::new(),
            hooks: Vec::new(),
            schedules: Vec::new(),
        }
    }
}

/// A config the engine cannot run with.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    /// No personas at all.
    #[error("no personas are configured")]
    NoPersonas,
    /// More personas than [`MAX_PERSONAS`].
    #[error("{0} personas are configured; one process hosts at most {MAX_PERSONAS}")]
    TooManyPersonas(usize),
    /// Two personas answer to the same handle.
    #[error("personas `{0}` and `{1}` answer to the same handle `{2}`")]
    DuplicateHandle(PersonaId, PersonaId, String),
    /// `max_concurrent_flushes` is zero: no ambient flush could ever run.
    #[error("max_concurrent_flushes must be at least 1")]
    NoFlushSlots,
}

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
    /// A message was skipped for the rate limit (right after its
    /// `rate_limited` decision): the limit, and when it frees a slot.
    Limited(LimitNote),
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

/// An ambient persona's buffer in one room.
#[derive(Debug, Default)]
struct AmbientState {
    buffer: Vec<Arc<Entry>>,
    /// When the timer trigger fires, once armed by the first message, and
    /// the timer's key (removed when the buffer empties another way).
    due: Option<(Timestamp, u64)>,
    /// A trigger that fired but could not start yet, and why.
    waiting: Option<(FlushTrigger, WaitReason)>,
    /// Whether the pair sits in the engine's concurrency queue.
    queued: bool,
    /// When a cooldown wait wakes up (one timer per cooldown end).
    wake: Option<Timestamp>,
    /// Flush turns (and their gates) running for this pair.
    in_flight: Vec<TurnId>,
}

/// What the engine remembers about one persona in one room.
#[derive(Debug, Default)]
struct PersonaRoom {
    own_ids: VecDeque<MsgId>,
    own_set: rustc_hash::FxHashSet<MsgId>,
    rate: RateLedger,
    last_spoke: Option<Timestamp>,
    ambient: Option<Box<AmbientState>>,
}

impl PersonaRoom {
    fn remember_own(&mut self, id: MsgId, limit: usize) {
        if self.own_set.insert(id.clone()) {
            self.own_ids.push_back(id);
            if self.own_ids.len() > limit
                && let Some(old) = self.own_ids.pop_front()
            {
                self.own_set.remove(&old);
            }
        }
    }

    fn ambient(&mut self) -> &mut AmbientState {
        self.ambient.get_or_insert_with(Box::default)
    }
}

/// What the engine remembers about one room.
#[derive(Debug)]
struct Room {
    policies: Vec<Arc<RoomPolicy>>,
    history: History,
    /// Consecutive bot messages since the last human one.
    bot_streak: u32,
    /// Bot accounts seen here that are not personas of ours: (id, name).
    bots: Vec<(UserId, Arc<str>)>,
    members: Vec<PersonaRoom>,
    /// How many personas have answered each unaddressed message.
    floor: FxHashMap<MsgId, u32>,
    /// Whether the room is a direct conversation (as its messages say).
    is_dm: bool,
}

/// What a gate decides for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GateFor {
    /// One message in `all` mode; its decision waits for the verdict.
    Message,
    /// An ambient batch about to flush.
    Ambient(FlushTrigger),
}

/// An agent turn in flight.
#[derive(Debug)]
struct Turn {
    kind: TurnKind,
    persona: PersonaIdx,
    room: RoomId,
    thread: Option<ThreadId>,
    is_dm: bool,
    triggers: Vec<Arc<Entry>>,
    /// Whether a rate-limit slot is reserved for it.
    reserved: bool,
    policy: Arc<RoomPolicy>,
    /// Whether the trigger was a bot message (so the bot-turn limit is
    /// checked again before the reply goes out).
    answers_bot: bool,
    /// Whether floor control applies: nobody addressed the persona.
    unaddressed: bool,
    /// Whether it counts against `max_concurrent_flushes`.
    holds_flush_slot: bool,
    /// For gate turns: what the verdict is for.
    gate_for: Option<GateFor>,
    /// For gate turns: the timeout timer, removed when the verdict comes.
    gate_timer: Option<(Timestamp, u64)>,
    /// Whether its agent's leading reasoning block is taken off.
    strip_reasoning: bool,
    /// How much reasoning its answer carried, once it came (traced on
    /// the turn's end or first reply).
    reasoning_chars: usize,
    /// Its replies, while before-send hooks run on them.
    held: Option<Box<hooked::Held>>,
    /// For scheduled turns: which schedule.
    schedule: Option<usize>,
}

impl Turn {
    fn msgs(&self) -> Vec<MsgId> {
        self.triggers.iter().map(|e| e.id.clone()).collect()
    }
}

/// Timers the engine asks to be woken for.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Timer {
    /// An ambient buffer's flush deadline or cooldown end.
    Ambient(RoomId, PersonaIdx),
    /// A gate's answer deadline.
    Gate(TurnId),
    /// A schedule's next run (by index).
    Schedule(usize),
}

/// Who the message being decided replies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReplyAuthor {
    Persona(PersonaIdx),
    Bot,
    Human,
}

/// What to do about a message for one persona.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// Only the decision.
    None,
    /// Start a reply turn now.
    Turn,
    /// Ask the reply-decision gate first; the decision waits for it.
    Gate,
    /// Put it in the persona's ambient buffer.
    Buffer,
}

/// One persona's verdict on one message.
#[derive(Clone, Copy, Debug)]
struct Verdict {
    outcome: Outcome,
    reason: Reason,
    action: Action,
    /// Whether a rate-limit slot was reserved.
    reserved: bool,
}

impl Verdict {
    fn new(outcome: Outcome, reason: Reason) -> Verdict {
        Verdict {
            outcome,
            reason,
            action: Action::None,
            reserved: false,
        }
    }
}

/// The sans-I/O room engine. See the module docs for the flow.
#[derive(Debug)]
pub struct Engine {
    /// Every persona slot, retired ones included (see `live_personas`).
    personas: Vec<PersonaSpec>,
    /// The slots a reload removed.
    retired: PersonaSet,
    policies: PolicyTable,
    shared_policies: Vec<Arc<RoomPolicy>>,
    limits: ContextLimits,
    rooms: FxHashMap<RoomId, Room>,
    turns: FxHashMap<TurnId, Turn>,
    next_turn: u64,
    sent_count: Vec<u64>,
    out: VecDeque<Output>,
    timers: BTreeMap<(Timestamp, u64), Timer>,
    timer_seq: u64,
    rng: Rng,
    max_flushes: usize,
    flushes_running: usize,
    flush_queue: VecDeque<(RoomId, PersonaIdx)>,
    /// Rooms whose restorable state changed since the driver last asked
    /// ([`Engine::take_changed_rooms`]).
    dirty: rustc_hash::FxHashSet<RoomId>,
    /// See [`EngineConfig::reasoning_kept`].
    reasoning_kept: Vec<Arc<str>>,
    /// See [`EngineConfig::hooks`].
    hooks: Vec<HookScope>,
    /// See [`EngineConfig::schedules`].
    schedules: Vec<Schedule>,
    /// Each schedule's run in flight.
    runs: Vec<scheduled::Runs>,
}

impl Engine {
    /// Builds an engine, checking what the engine itself relies on.
    pub fn new(config: EngineConfig) -> Result<Engine, EngineError> {
        let n = config.personas.len();
        if n == 0 {
            return Err(EngineError::NoPersonas);
        }
        if n > MAX_PERSONAS {
            return Err(EngineError::TooManyPersonas(n));
        }
        if config.max_concurrent_flushes == 0 {
            return Err(EngineError::NoFlushSlots);
        }
        live_personas::check_handles(config.personas.iter())?;
        // Rooms without a layer of their own share one policy per persona.
        let anywhere = RoomId::new("");
        let shared_policies = config
            .personas
            .iter()
            .map(|p| Arc::new(config.policies.resolve(&anywhere, &p.id)))
            .collect();
        Ok(Engine {
            sent_count: vec![0; n],
            personas: config.personas,
            retired: PersonaSet::default(),
            policies: config.policies,
            shared_policies,
            limits: config.context,
            rooms: FxHashMap::default(),
            turns: FxHashMap::default(),
            next_turn: 1,
            out: VecDeque::new(),
            timers: BTreeMap::new(),
            timer_seq: 0,
            rng: Rng::new(config.seed),
            max_flushes: config.max_concurrent_flushes,
            flushes_running: 0,
            flush_queue: VecDeque::new(),
            dirty: rustc_hash::FxHashSet::default(),
            reasoning_kept: config.reasoning_kept,
            hooks: config.hooks,
            runs: config
                .schedules
                .iter()
                .map(|_| scheduled::Runs::default())
                .collect(),
            schedules: config.schedules,
        })
    }

    /// Whether anything but a schedule's next run is pending: a turn in
    /// flight or a timer of another kind. A replay without an `end` stops
    /// when nothing is.
    pub fn has_work_besides_schedules(&self) -> bool {
        !self.turns.is_empty() || self.timers.values().any(|t| !matches!(t, Timer::Schedule(_)))
    }

    /// Every persona slot in index order: the file's order at start, then
    /// personas a reload added. Slots a reload removed are still here
    /// ([`Engine::is_retired`]).
    pub fn personas(&self) -> &[PersonaSpec] {
        &self.personas
    }

    /// The index of the persona with this id, unless a reload removed it.
    pub fn persona_index(&self, id: &str) -> Option<PersonaIdx> {
        self.personas
            .iter()
            .position(|p| p.id.as_str() == id)
            .map(|i| PersonaIdx(i as u8))
            .filter(|&p| !self.retired.contains(p))
    }

    /// The next output, oldest first. Drain it after every `handle_*` call.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// When the engine next wants [`Engine::handle_timeout`] called.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.timers.keys().next().map(|&(t, _)| t)
    }

    /// How many agent turns are in flight.
    pub fn turns_in_flight(&self) -> usize {
        self.turns.len()
    }

    /// Work started or scheduled that may still end in a message: turns in
    /// flight, and ambient buffers armed to flush or waiting to. Zero means
    /// nothing will be said until the next message arrives.
    pub fn pending_work(&self) -> usize {
        let waiting = self
            .rooms
            .values()
            .flat_map(|r| r.members.iter())
            .filter(|m| {
                m.ambient
                    .as_deref()
                    .is_some_and(|a| a.due.is_some() || a.waiting.is_some() || a.queued)
            })
            .count();
        self.turns.len() + waiting
    }

    /// How many ambient flushes are running.
    pub fn flushes_running(&self) -> usize {
        self.flushes_running
    }

    /// How many rooms the engine holds state for.
    pub fn room_count(&self) -> usize {
        self.rooms.len()
    }

    /// The ambient state of persona `p` in `room`, if it has one.
    fn ambient_mut(&mut self, room: &RoomId, p: PersonaIdx) -> Option<&mut AmbientState> {
        self.rooms.get_mut(room)?.members[p.0 as usize]
            .ambient
            .as_deref_mut()
    }

    fn arm(&mut self, at: Timestamp, timer: Timer) -> (Timestamp, u64) {
        let key = (at, self.timer_seq);
        self.timers.insert(key, timer);
        self.timer_seq += 1;
        key
    }

    // -- Inbound messages --------------------------------------------------

    /// Hears one inbound message at `now`.
    pub fn handle_message(&mut self, now: Timestamp, msg: Message) {
        let author = persona_of(&self.personas, msg.sender.id.as_str());
        let is_bot = msg.sender.is_bot || author.is_some();
        let Engine {
            personas,
            retired,
            policies,
            shared_policies,
            limits,
            rooms,
            next_turn,
            out,
            dirty,
            ..
        } = self;
        let limits = *limits;
        let room = Room::entry(rooms, personas, policies, shared_policies, &limits, &msg.room);
        if room.history.contains(msg.id.as_str()) {
            out.push_back(Output::Dropped {
                at: now,
                room: msg.room,
                msg: msg.id,
                reason: "duplicate",
            });
            return;
        }
        dirty.insert(msg.room.clone());
        room.note_author(&msg, author, is_bot);
        let reply_author = msg.reply_to.as_ref().map(|r| room.author_of(r));
        let targets = Targets::of(&msg, |h| match persona_of(personas, h) {
            // A removed persona is nobody here now.
            Some(p) if retired.contains(p) => Handle::Other,
            Some(p) => Handle::Persona(p),
            None if room.bots.iter().any(|(b, _)| handle_eq(b.as_str(), h)) => Handle::Bot,
            None => Handle::Other,
        });
        let facts = Facts {
            now,
            msg: &msg,
            author,
            is_bot,
            reply_author,
            targets,
        };
        let entry = Arc::new(Entry::of(&msg, author, is_bot));

        let mut actions: Vec<(PersonaIdx, Verdict, Option<TurnId>)> = Vec::new();
        let mut limited: Vec<LimitNote> = Vec::new();
        let mut recorded = false;
        for (i, spec) in personas.iter().enumerate() {
            let p = PersonaIdx(i as u8);
            if retired.contains(p) {
                continue;
            }
            let v = decide(spec, p, room, &facts);
            recorded |= v.reason != Reason::DmForOther;
            let turn = matches!(v.action, Action::Turn | Action::Gate).then(|| {
                let t = TurnId(*next_turn);
                *next_turn += 1;
                t
            });
            if v.reason == Reason::RateLimited
                && let Some(limit) = room.policies[i].rate_limit
            {
                limited.push(LimitNote {
                    at: now,
                    persona: spec.id.clone(),
                    room: msg.room.clone(),
                    msg: msg.id.clone(),
                    replies: limit.replies,
                    per: limit.per,
                    frees_at: room.members[i].rate.frees_at(&limit),
                });
            }
            // A gated message's decision waits for the gate's verdict.
            if v.action != Action::Gate {
                out.push_back(Output::Decision(Decision {
                    at: now,
                    room: msg.room.clone(),
                    msg: msg.id.clone(),
                    persona: spec.id.clone(),
                    outcome: v.outcome,
                    reason: v.reason,
                    turn,
                }));
            }
            out.extend(limited.drain(..).map(Output::Limited));
            if v.action != Action::None {
                actions.push((p, v, turn));
            }
        }
        if recorded && let Some(evicted) = room.history.push(entry.clone()) {
            room.floor.remove(&evicted.id);
            // A message that leaves the context window leaves the ambient
            // batches too: its floor count is gone with it, so a persona
            // flushing later would answer what another already answered
            // (and a restarted engine, which restores the window only,
            // would not have it).
            for m in &mut room.members {
                if let Some(st) = m.ambient.as_deref_mut() {
                    st.buffer.retain(|e| e.id != evicted.id);
                }
            }
        }
        if let Some(a) = author {
            room.members[a.0 as usize].remember_own(msg.id.clone(), limits.own_ids);
        }

        for (p, v, turn) in actions {
            let room_id = &msg.room;
            let policy = self.rooms[room_id].policies[p.0 as usize].clone();
            match v.action {
                Action::Turn => {
                    if policy.mode == Mode::Ambient {
                        self.preempt_ambient(now, room_id, p);
                    }
                    let turn = turn.expect("turn actions carry an id");
                    let unaddressed = v.reason == Reason::All;
                    self.start_turn(
                        now,
                        turn,
                        room_id,
                        p,
                        TurnKind::Reply,
                        vec![entry.clone()],
                        v.reserved,
                        unaddressed,
                        is_bot,
                        None,
                    );
                }
                Action::Gate => {
                    let turn = turn.expect("gate actions carry an id");
                    self.start_turn(
                        now,
                        turn,
                        room_id,
                        p,
                        TurnKind::Gate,
                        vec![entry.clone()],
                        v.reserved,
                        true,
                        is_bot,
                        None,
                    );
                }
                Action::Buffer => self.buffer(now, room_id, p, entry.clone()),
                Action::None => {}
            }
        }
    }

    /// Starts a turn: registers it and asks the driver to run it.
    #[allow(clippy::too_many_arguments)]
    fn start_turn(
        &mut self,
        now: Timestamp,
        turn: TurnId,
        room_id: &RoomId,
        p: PersonaIdx,
        kind: TurnKind,
        triggers: Vec<Arc<Entry>>,
        reserved: bool,
        unaddressed: bool,
        answers_bot: bool,
        flush: Option<GateFor>,
    ) {
        self.dirty.insert(room_id.clone());
        let room = &self.rooms[room_id];
        let policy = room.policies[p.0 as usize].clone();
        let spec = &self.personas[p.0 as usize];
        let first = &triggers[0];
        let is_dm = room.is_dm;
        let history = room.snapshot(&triggers, self.limits.max_turns);
        let room_bots = self
            .personas
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != p.0 as usize && !self.retired.contains(PersonaIdx(i as u8)))
            .map(|(_, s)| s.name.clone())
            .chain(room.bots.iter().map(|(_, name)| name.clone()))
            .collect();
        // A scheduled turn may always stay quiet: nothing asked for it.
        let silence_allowed = (policy.allow_silence && !is_dm) || kind == TurnKind::Schedule;
        let (agent, gate_for, flush_trigger) = match (kind, flush) {
            (TurnKind::Gate, _) => (
                policy
                    .reply_gate
                    .as_ref()
                    .map_or_else(|| spec.agent.clone(), |g| g.agent.clone()),
                Some(flush.unwrap_or(GateFor::Message)),
                match flush {
                    Some(GateFor::Ambient(t)) => Some(t),
                    _ => None,
                },
            ),
            (_, Some(GateFor::Ambient(t))) => (spec.agent.clone(), None, Some(t)),
            _ => (spec.agent.clone(), None, None),
        };
        let holds_flush_slot = kind == TurnKind::Ambient || gate_for.is_some_and(|g| g != GateFor::Message);
        let strip_reasoning = !self.reasoning_kept.contains(&agent);
        let hooked = self.hooks.iter().any(|h| h.applies(&spec.id, room_id));
        let request = TurnRequest {
            turn,
            kind,
            started: now,
            persona: spec.id.clone(),
            persona_idx: p,
            persona_name: spec.name.clone(),
            agent,
            prompt: spec.prompt.clone(),
            room: room_id.clone(),
            thread: first.thread.clone(),
            is_dm,
            silence_token: silence_allowed.then(|| policy.silence_token.clone()),
            triggers: triggers.clone(),
            history,
            max_chars: self.limits.max_chars,
            room_bots,
            flush_trigger,
            addressed: kind == TurnKind::Reply && !unaddressed,
            max_reply_chars: policy.max_reply_chars,
            strip_reasoning,
            hooked,
        };
        let gate_timer = (kind == TurnKind::Gate).then(|| {
            let timeout = policy
                .reply_gate
                .as_ref()
                .map_or(crate::policy::DEFAULT_GATE_TIMEOUT, |g| g.timeout);
            self.arm(now + timeout, Timer::Gate(turn))
        });
        self.turns.insert(
            turn,
            Turn {
                kind,
                persona: p,
                room: room_id.clone(),
                thread: first.thread.clone(),
                is_dm,
                triggers,
                reserved,
                policy,
                answers_bot,
                unaddressed,
                holds_flush_slot,
                gate_for,
                gate_timer,
                strip_reasoning,
                reasoning_chars: 0,
                held: None,
                schedule: None,
            },
        );
        self.out.push_back(Output::CallAgent(Box::new(request)));
    }

    // -- Agent results -----------------------------------------------------

    /// Reports how a turn ended. Unknown turns (already ended or cancelled)
    /// are ignored, so a late result can never post twice.
    pub fn handle_agent_result(&mut self, now: Timestamp, turn_id: TurnId, result: AgentResult) {
        let Some(mut turn) = self.turns.remove(&turn_id) else {
            return;
        };
        let (text, beside) = match result {
            AgentResult::Output(text) => (Ok(text), 0),
            AgentResult::Reasoned {
                text,
                reasoning_chars,
            } => (Ok(text), reasoning_chars),
            AgentResult::Failed(err) => (Err(err), 0),
        };
        let text = match text {
            Ok(text) => text,
            // A failed gate fails open, like an unreadable answer.
            Err(_) if turn.kind == TurnKind::Gate => String::new(),
            Err(err) => {
                let end = self.turn_end(now, turn_id, &turn);
                self.fail(now, turn_id, turn, end, err);
                return;
            }
        };
        let stripped = if turn.strip_reasoning {
            reasoning::strip(&text)
        } else {
            reasoning::Stripped {
                rest: &text,
                reasoning_chars: 0,
                unclosed: false,
            }
        };
        if turn.kind == TurnKind::Gate {
            if let Some(key) = turn.gate_timer {
                self.timers.remove(&key);
            }
            let verdict = parse_gate_answer(stripped.rest);
            self.gate_decided(now, turn_id, turn, verdict);
            return;
        }
        turn.reasoning_chars = beside + stripped.reasoning_chars;
        let end = self.turn_end(now, turn_id, &turn);
        if stripped.unclosed {
            let err = format!(
                "the agent's answer was all reasoning ({} characters, never closed) and no reply",
                stripped.reasoning_chars
            );
            self.fail(now, turn_id, turn, end, err);
            return;
        }
        let text = stripped.rest;
        let mut replies = directives::split_replies(text).into_iter();
        let (d, body) = replies.next().unwrap_or_default();
        let more: Vec<(Directives, String)> = replies.map(|(d, b)| (d, b.to_owned())).collect();
        let body = body.trim();
        if body.is_empty() {
            if d.present {
                self.out
                    .push_back(Output::Silent(end, SilenceKind::DirectivesOnly));
                self.finish(now, turn_id, turn, false);
            } else {
                self.fail(
                    now,
                    turn_id,
                    turn,
                    end,
                    "the agent returned a blank answer".to_owned(),
                );
            }
            return;
        }
        let may_be_silent = turn.policy.allow_silence || turn.kind == TurnKind::Schedule;
        if may_be_silent && silence::is_silence(body, &turn.policy.silence_token) {
            self.out.push_back(Output::Silent(end, SilenceKind::Token));
            self.finish(now, turn_id, turn, false);
            return;
        }
        let held = hooked::Held {
            first: (d, body.to_owned()),
            more,
            notice: false,
        };
        self.release(now, turn_id, turn, held);
    }

    /// A turn failed: the trace gets the reason; the room gets one short
    /// notice when the persona was addressed and `on_error = "notice"`.
    fn fail(&mut self, now: Timestamp, turn_id: TurnId, turn: Turn, end: TurnEnd, reason: String) {
        self.out.push_back(Output::Error(end, reason));
        let notice =
            turn.kind == TurnKind::Reply && !turn.unaddressed && turn.policy.on_error == OnError::Notice;
        if notice {
            let d = Directives {
                reply_to: turn.triggers.last().map(|e| e.id.to_string()),
                ..Directives::default()
            };
            let held = hooked::Held {
                first: (d, ERROR_NOTICE.to_owned()),
                more: Vec::new(),
                notice: true,
            };
            self.release(now, turn_id, turn, held);
        } else {
            self.finish(now, turn_id, turn, false);
        }
    }

    /// Sends `body` for a turn: validates `reply_to`, takes the floor,
    /// commits the rate-limit slot, and lets the room hear the reply.
    fn deliver(
        &mut self,
        now: Timestamp,
        turn_id: TurnId,
        turn: Turn,
        body: &str,
        d: Directives,
        notice: bool,
    ) {
        let room = self.rooms.get_mut(&turn.room).expect("a turn's room exists");
        let (reply_to, dropped_reply_to) = match d.reply_to {
            Some(id) if room.history.contains(&id) => (Some(MsgId::new(id)), None),
            Some(id) => (None, Some(id)),
            None => (None, None),
        };
        if turn.unaddressed {
            for e in &turn.triggers {
                *room.floor.entry(e.id.clone()).or_default() += 1;
            }
        }
        let member = &mut room.members[turn.persona.0 as usize];
        // The notice is tactful's word, not the agent's answer: a failing
        // backend must not spend the room's reply budget.
        if turn.reserved && !notice {
            member.rate.commit(now);
        }
        member.last_spoke = Some(now);
        let n = &mut self.sent_count[turn.persona.0 as usize];
        *n += 1;
        let spec = &self.personas[turn.persona.0 as usize];
        let id = MsgId::new(format!("{}:{n}", spec.id));
        let (text, truncated_from) = cap_reply(body, turn.policy.max_reply_chars);
        let outgoing = Outgoing {
            at: now,
            turn: turn_id,
            kind: turn.kind,
            persona: spec.id.clone(),
            room: turn.room.clone(),
            thread: turn.thread.clone(),
            id,
            text,
            reply_to,
            dropped_reply_to,
            invalid_reply_to: d.invalid_reply_to,
            unknown_directives: d.unknown_keys,
            msgs: turn.msgs(),
            notice,
            is_dm: turn.is_dm,
            truncated_from,
            more_withheld: 0,
            // The notice is tactful's own text: no reasoning went into it.
            reasoning_chars: if notice { 0 } else { turn.reasoning_chars },
        };
        let echo = outgoing.as_heard(spec.name.clone());
        self.out.push_back(Output::Send(Box::new(outgoing)));
        self.finish(now, turn_id, turn, !notice);
        // The room hears the reply like any other message: the author
        // records it as its own, the others as a bot message.
        self.handle_message(now, echo);
    }

    fn turn_end(&self, now: Timestamp, turn_id: TurnId, turn: &Turn) -> TurnEnd {
        TurnEnd {
            at: now,
            turn: turn_id,
            kind: turn.kind,
            persona: self.personas[turn.persona.0 as usize].id.clone(),
            room: turn.room.clone(),
            msgs: turn.msgs(),
            reasoning_chars: turn.reasoning_chars,
        }
    }

    /// Bookkeeping every ended turn needs: the rate-limit slot (released
    /// unless a reply was sent), the flush slot, and the ambient buffer it
    /// came from, which may flush again.
    fn finish(&mut self, now: Timestamp, turn_id: TurnId, turn: Turn, sent: bool) {
        self.dirty.insert(turn.room.clone());
        if let Some(i) = turn.schedule {
            self.schedule_ended(i, turn_id);
        }
        if let Some(room) = self.rooms.get_mut(&turn.room) {
            let member = &mut room.members[turn.persona.0 as usize];
            if turn.reserved && !sent {
                member.rate.release();
            }
            if let Some(st) = member.ambient.as_mut() {
                st.in_flight.retain(|t| *t != turn_id);
            }
        }
        if turn.holds_flush_slot {
            self.flushes_running = self.flushes_running.saturating_sub(1);
            self.resume_ambient(now, &turn.room, turn.persona);
            self.pump_flush_queue(now);
        }
    }

    /// The gate answered (or failed, or timed out: `verdict` is `None`).
    fn gate_decided(&mut self, now: Timestamp, gate_id: TurnId, gate: Turn, verdict: Option<GateVerdict>) {
        let p = gate.persona;
        let room_id = gate.room.clone();
        let spec_id = self.personas[p.0 as usize].id.clone();
        let reason = match verdict {
            Some(GateVerdict::Reply) => Reason::GateReply,
            Some(GateVerdict::Skip) => Reason::GateSkip,
            None => Reason::GateFailedOpen,
        };
        match gate.gate_for {
            Some(GateFor::Ambient(trigger)) => {
                if reason == Reason::GateSkip {
                    let msgs = gate.msgs();
                    self.out.push_back(Output::Ambient(AmbientNote {
                        at: now,
                        persona: spec_id,
                        room: room_id,
                        event: AmbientEvent::Skipped { msgs, reason },
                    }));
                    self.finish(now, gate_id, gate, false);
                    return;
                }
                // The flush goes ahead with the gate's slot and batch.
                let turn = self.new_turn_id();
                self.replace_in_flight(&room_id, p, gate_id, turn);
                self.start_turn(
                    now,
                    turn,
                    &room_id,
                    p,
                    TurnKind::Ambient,
                    gate.triggers,
                    gate.reserved,
                    true,
                    gate.answers_bot,
                    Some(GateFor::Ambient(trigger)),
                );
            }
            _ => {
                let msg = gate.triggers[0].id.clone();
                let floor_taken = reason != Reason::GateSkip
                    && self.rooms[&room_id].floor_taken(&gate.triggers, gate.policy.floor_max_speakers);
                let (outcome, reason) = if floor_taken {
                    (Outcome::Skip, Reason::FloorTaken)
                } else if reason == Reason::GateSkip {
                    (Outcome::Skip, reason)
                } else {
                    (Outcome::Reply, reason)
                };
                let turn = (outcome == Outcome::Reply).then(|| self.new_turn_id());
                self.out.push_back(Output::Decision(Decision {
                    at: now,
                    room: room_id.clone(),
                    msg,
                    persona: spec_id,
                    outcome,
                    reason,
                    turn,
                }));
                match turn {
                    Some(t) => self.start_turn(
                        now,
                        t,
                        &room_id,
                        p,
                        TurnKind::Reply,
                        gate.triggers,
                        gate.reserved,
                        true,
                        gate.answers_bot,
                        None,
                    ),
                    None => self.finish(now, gate_id, gate, false),
                }
            }
        }
    }

    fn new_turn_id(&mut self) -> TurnId {
        let t = TurnId(self.next_turn);
        self.next_turn += 1;
        t
    }

    fn replace_in_flight(&mut self, room: &RoomId, p: PersonaIdx, old: TurnId, new: TurnId) {
        if let Some(st) = self.ambient_mut(room, p) {
            for t in &mut st.in_flight {
                if *t == old {
                    *t = new;
                }
            }
        }
    }

    /// The platform confirmed a reply the engine sent as `local` (its
    /// `<persona>:<n>` id) and gave it the id `platform`. From now on both
    /// ids name the message: a reply to either addresses the persona, and
    /// the platform echoing the message back is dropped as a duplicate.
    pub fn handle_sent(&mut self, room: &RoomId, local: &MsgId, platform: MsgId) {
        if local == &platform {
            return;
        }
        let Some(r) = self.rooms.get_mut(room) else {
            return;
        };
        let author = r.history.get(local.as_str()).and_then(|e| e.persona);
        if r.history.alias(local.as_str(), platform.clone())
            && let Some(p) = author
        {
            r.members[p.0 as usize].remember_own(platform, self.limits.own_ids);
        }
    }

    // -- Timers ------------------------------------------------------------

    /// Fires every timer due at or before `now`.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        while let Some(entry) = self.timers.first_entry() {
            let due = entry.key().0;
            if due > now {
                break;
            }
            match entry.remove() {
                Timer::Schedule(i) => self.schedule_due(now, i, due),
                Timer::Gate(turn_id) => {
                    if let Some(gate) = self.turns.remove(&turn_id) {
                        let end = self.turn_end(now, turn_id, &gate);
                        self.out
                            .push_back(Output::Cancelled(end, CancelReason::GateTimeout));
                        self.gate_decided(now, turn_id, gate, None);
                    }
                }
                Timer::Ambient(room, p) => {
                    let Some(st) = self.ambient_mut(&room, p) else {
                        continue;
                    };
                    let trigger = if st.due.is_some_and(|(d, _)| d <= now) {
                        st.due = None;
                        FlushTrigger::Timer
                    } else if let Some((w, _)) = st.waiting {
                        w
                    } else {
                        continue;
                    };
                    self.try_flush(now, &room, p, trigger);
                }
            }
        }
    }
}

/// `body` cut to at most `max` characters, the truncation mark included,
/// with its original length when it was cut. The cut falls on a line break
/// or a space in the last fifth when there is one, so a word is not
/// chopped.
fn cap_reply(body: &str, max: usize) -> (String, Option<usize>) {
    let Some((hard, _)) = body.char_indices().nth(max) else {
        return (body.to_owned(), None);
    };
    let total = max + body[hard..].chars().count();
    let keep = max.saturating_sub(crate::policy::TRUNCATED_MARK.chars().count());
    let end = body.char_indices().nth(keep).map_or(body.len(), |(i, _)| i);
    let soft = body[..end]
        .rfind(['\n', ' '])
        .filter(|&i| i >= end - end / 5)
        .unwrap_or(end);
    let mut text = body[..soft].trim_end().to_owned();
    text.push_str(crate::policy::TRUNCATED_MARK);
    (text, Some(total))
}

fn persona_of(personas: &[PersonaSpec], user: &str) -> Option<PersonaIdx> {
    personas
        .iter()
        .position(|p| p.answers_to(user))
        .map(|i| PersonaIdx(i as u8))
}

impl Room {
    fn new(
        personas: &[PersonaSpec],
        policies: &PolicyTable,
        shared: &[Arc<RoomPolicy>],
        limits: &ContextLimits,
        id: &RoomId,
    ) -> Room {
        let policies = if policies.has_room(id) {
            personas
                .iter()
                .map(|p| Arc::new(policies.resolve(id, &p.id)))
                .collect()
        } else {
            shared.to_vec()
        };
        Room {
            policies,
            history: History::new(limits.history),
            bot_streak: 0,
            bots: Vec::new(),
            members: (0..personas.len()).map(|_| PersonaRoom::default()).collect(),
            floor: FxHashMap::default(),
            is_dm: false,
        }
    }

    /// The room `id` in `rooms`, created with its policies on first use.
    fn entry<'a>(
        rooms: &'a mut FxHashMap<RoomId, Room>,
        personas: &[PersonaSpec],
        policies: &PolicyTable,
        shared: &[Arc<RoomPolicy>],
        limits: &ContextLimits,
        id: &RoomId,
    ) -> &'a mut Room {
        rooms
            .entry(id.clone())
            .or_insert_with(|| Room::new(personas, policies, shared, limits, id))
    }

    /// Updates what the room knows from a message's author: the bot streak,
    /// the other bots present, whether it is a DM.
    fn note_author(&mut self, msg: &Message, author: Option<PersonaIdx>, is_bot: bool) {
        self.is_dm = msg.is_dm;
        if is_bot {
            self.bot_streak = self.bot_streak.saturating_add(1);
            if author.is_none()
                && !self
                    .bots
                    .iter()
                    .any(|(b, _)| handle_eq(b.as_str(), msg.sender.id.as_str()))
            {
                self.bots.push((msg.sender.id.clone(), msg.sender.name.clone()));
            }
        } else {
            self.bot_streak = 0;
        }
    }

    /// Who wrote the message `id` replies to, as far as the room remembers.
    fn author_of(&self, id: &MsgId) -> ReplyAuthor {
        match self.history.get(id.as_str()) {
            Some(e) => match e.persona {
                Some(p) => ReplyAuthor::Persona(p),
                None if e.is_bot => ReplyAuthor::Bot,
                None => ReplyAuthor::Human,
            },
            // Older than the history: still known if a persona wrote it.
            None => self
                .members
                .iter()
                .position(|m| m.own_set.contains(id.as_str()))
                .map_or(ReplyAuthor::Human, |i| ReplyAuthor::Persona(PersonaIdx(i as u8))),
        }
    }

    /// Whether any of `triggers` already has `max` speakers.
    fn floor_taken(&self, triggers: &[Arc<Entry>], max: u32) -> bool {
        triggers
            .iter()
            .any(|e| self.floor.get(&e.id).copied().unwrap_or(0) >= max)
    }

    /// The history a turn about `triggers` sees: the retained messages up to
    /// the last trigger, triggers excluded, at most `max_turns` of them.
    fn snapshot(&self, triggers: &[Arc<Entry>], max_turns: usize) -> Vec<Arc<Entry>> {
        let is_trigger = |e: &Arc<Entry>| triggers.iter().any(|t| t.id == e.id);
        let last = triggers.last().map(|t| &t.id);
        let mut out: Vec<Arc<Entry>> = Vec::new();
        for e in self.history.iter() {
            if Some(&e.id) == last {
                break;
            }
            if !is_trigger(e) {
                out.push(e.clone());
            }
        }
        let excess = out.len().saturating_sub(max_turns);
        out.drain(..excess);
        out
    }
}

/// What the engine established about a message before deciding for each
/// persona.
struct Facts<'a> {
    now: Timestamp,
    msg: &'a Message,
    author: Option<PersonaIdx>,
    is_bot: bool,
    reply_author: Option<ReplyAuthor>,
    targets: Targets,
}

/// Decides what persona `p` does with a message: own message, DM routing,
/// mode, bot rules, allowlist, rate limit, in that order. A turn's
/// rate-limit slot is reserved here, before any agent (or gate) is called.
fn decide(spec: &PersonaSpec, p: PersonaIdx, room: &mut Room, f: &Facts<'_>) -> Verdict {
    if f.author == Some(p) {
        return Verdict::new(Outcome::Record, Reason::OwnMessage);
    }
    let msg = f.msg;
    let dm_for_p = msg.is_dm && msg.dm_to.as_ref().is_none_or(|to| spec.answers_to(to.as_str()));
    if msg.is_dm && !dm_for_p {
        return Verdict::new(Outcome::Skip, Reason::DmForOther);
    }
    let policy = &room.policies[p.0 as usize];
    let replies_to_p = f.reply_author == Some(ReplyAuthor::Persona(p));
    let addressed = f.targets.addressing(p, dm_for_p, replies_to_p);
    if policy.mode == Mode::Observe {
        return Verdict::new(Outcome::Record, Reason::Observe);
    }
    if f.is_bot && policy.ignore_bots {
        return Verdict::new(Outcome::Record, Reason::BotAuthor);
    }
    let names_other = || {
        f.targets.names_other_than(p)
            || matches!(f.reply_author, Some(ReplyAuthor::Bot | ReplyAuthor::Persona(_)))
    };
    let reason = match (policy.mode, addressed) {
        (Mode::Command, Some(a @ (Addressed::Dm | Addressed::Command))) => Reason::from(a),
        (Mode::Command, _) if f.targets.command == Some(CommandTarget::Bare) => Reason::Command,
        (Mode::Command, _) => return Verdict::new(Outcome::Record, Reason::NotCommand),
        (_, Some(a)) => Reason::from(a),
        (Mode::Mention, None) => return Verdict::new(Outcome::Record, Reason::NotAddressed),
        (Mode::All | Mode::Ambient, None) if names_other() => {
            return Verdict::new(Outcome::Record, Reason::AddressedToOther);
        }
        (Mode::All, None) => Reason::All,
        (Mode::Ambient, None) => Reason::Buffered,
        (Mode::Observe, None) => unreachable!("observe returned above"),
    };
    if f.is_bot && room.bot_streak >= policy.max_bot_turns {
        return Verdict::new(Outcome::Skip, Reason::BotTurnLimit);
    }
    if !policy.allows(msg.sender.id.as_str(), msg.sender.handle.as_deref()) {
        return Verdict::new(Outcome::Skip, Reason::NotAllowed);
    }
    if reason == Reason::Buffered {
        return Verdict {
            action: Action::Buffer,
            ..Verdict::new(Outcome::Record, reason)
        };
    }
    let gated = reason == Reason::All && policy.reply_gate.is_some();
    let mut reserved = false;
    if let Some(limit) = policy.rate_limit {
        if !room.members[p.0 as usize].rate.try_reserve(f.now, &limit) {
            return Verdict::new(Outcome::Skip, Reason::RateLimited);
        }
        reserved = true;
    }
    Verdict {
        outcome: Outcome::Reply,
        reason,
        action: if gated { Action::Gate } else { Action::Turn },
        reserved,
    }
}
