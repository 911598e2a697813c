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
//!    allowlist and rate limit, in that order, then its spend budget
//!    (`budget.rs`);
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
mod budget;
mod decide;
mod floor;
mod gate;
mod hand_over;
mod hooked;
mod live_personas;
mod live_policy;
mod more_replies;
mod notices;
mod output;
mod pending;
mod restore;
mod results;
mod room;
mod scheduled;
mod settings;

use decide::{Action, Facts, ReplyAuthor, Verdict, decide};
pub use output::{
    AmbientEvent, AmbientNote, BudgetNote, CancelReason, LimitNote, Outgoing, Output, SilenceKind, TurnEnd,
    WaitReason,
};
use room::{AmbientState, PersonaRoom, Room};

pub use budget::{BUDGET_NOTICE_GAP, BudgetLeft, Spent};
pub use floor::{FloorNote, FloorWhy};
pub use live_personas::PersonasChanged;
pub use notices::ReactNote;
pub use restore::{Counters, MemberSnapshot, NotResumed, RoomSnapshot};
pub use scheduled::{ScheduleEvent, ScheduleNote};
pub use settings::{ContextLimits, EngineConfig, EngineError};

use crate::turn::{AgentResult, FlushTrigger, GateVerdict, TurnKind, TurnRequest, parse_gate_answer};

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
    /// Whether it holds (or held) the floor of its message, passed to it
    /// (see `floor.rs`): its end passes the floor on.
    floor_pass: bool,
    /// Whether it holds a slot of the room's unprompted budget (committed
    /// when it replies, given back otherwise).
    unprompted: bool,
    /// Its hold on a spend budget, settled when it ends (`budget.rs`).
    budget: Option<budget::Hold>,
    /// Tokens its backend reported ([`Engine::handle_usage`]).
    used: Option<u64>,
    /// Whether its agent answered (a failed call costs its estimate only
    /// when it answered).
    answered: bool,
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
    /// The floor of an unaddressed message passes on if its holder is
    /// still writing (see `floor.rs`).
    FloorPass(RoomId, MsgId),
}

/// The sans-I/O room engine. See the module docs for the flow.
#[derive(Debug)]
pub struct Engine {
    /// Every persona slot, retired ones included (see `live_personas`).
    personas: Vec<PersonaSpec>,
    /// The slots a reload removed.
    retired: PersonaSet,
    /// The verdicts of the message being decided, kept for the next.
    scratch: Vec<(PersonaIdx, Verdict)>,
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
    /// Ambient buffers with work pending (`ambient_pending`), kept up to
    /// date from `ambient_touched` when [`Engine::pending_work`] is asked.
    ambient_pending: rustc_hash::FxHashSet<(RoomId, PersonaIdx)>,
    /// Ambient buffers whose state may have changed since: every change
    /// names its buffer here, so the count is brought up to date by
    /// looking at those alone (the driver asks after every event; a
    /// deployment may hold a hundred thousand buffers waiting to flush).
    /// Folded in by itself past `pending::TOUCHED_FOLD` entries, so an engine
    /// nobody asks (replay, a library user) does not grow it for ever.
    ambient_touched: Vec<(RoomId, PersonaIdx)>,
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
    /// Each persona slot's spend against its own budget (`budget.rs`).
    spend: Vec<crate::budget::SpendLedger>,
    /// Spend shared with other processes holding the other rooms.
    shared: budget::Shared,
    /// Whether any budget is configured: without one, no turn looks its
    /// room up again for it (`budget::in_use`).
    budgets: bool,
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
            spend: vec![crate::budget::SpendLedger::default(); n],
            shared: budget::Shared::default(),
            budgets: budget::in_use(&config.personas, &config.policies),
            personas: config.personas,
            retired: PersonaSet::default(),
            scratch: Vec::new(),
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
            ambient_pending: rustc_hash::FxHashSet::default(),
            ambient_touched: Vec::new(),
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

    /// How many ambient flushes are running.
    pub fn flushes_running(&self) -> usize {
        self.flushes_running
    }

    /// How many rooms the engine holds state for.
    pub fn room_count(&self) -> usize {
        self.rooms.len()
    }

    /// The ambient state of persona `p` in `room`, if it has one (noted as
    /// touched: the caller may change it).
    fn ambient_mut(&mut self, room: &RoomId, p: PersonaIdx) -> Option<&mut AmbientState> {
        self.touch_ambient(room, p);
        self.rooms.get_mut(room)?.members[p.0 as usize]
            .ambient
            .as_deref_mut()
    }

    /// Marks turn `t` as holding a slot of its room's unprompted budget.
    fn hold_unprompted(&mut self, t: TurnId) {
        if let Some(turn) = self.turns.get_mut(&t) {
            turn.unprompted = true;
        }
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
        self.bound_touched();
        let author = persona_of(&self.personas, msg.sender.id.as_str());
        let is_bot = msg.sender.is_bot || author.is_some();
        let Engine {
            personas,
            retired,
            policies,
            shared_policies,
            limits,
            rooms,
            out,
            dirty,
            timers,
            scratch,
            flush_queue,
            ambient_touched,
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

        // Reused from message to message: no allocation per message.
        let mut verdicts = std::mem::take(scratch);
        verdicts.clear();
        // Rate-limit notes, rare: no allocation unless there is one.
        let mut limited: Vec<(PersonaIdx, LimitNote)> = Vec::new();
        let mut recorded = false;
        for (i, spec) in personas.iter().enumerate() {
            let p = PersonaIdx(i as u8);
            if retired.contains(p) {
                continue;
            }
            let v = decide(spec, p, room, &facts);
            recorded |= v.reason != Reason::DmForOther;
            if let Some(note) = room.policies[i]
                .rate_limit
                .filter(|_| v.reason == Reason::RateLimited)
                .map(|limit| {
                    let ledger = &room.members[i].rate;
                    LimitNote::of(
                        now,
                        spec.id.clone(),
                        msg.room.clone(),
                        msg.id.clone(),
                        &limit,
                        ledger,
                    )
                })
            {
                limited.push((p, note));
            }
            verdicts.push((p, v));
        }
        if recorded && let Some(evicted) = room.history.push(entry.clone()) {
            room.floor.remove(&evicted.id);
            if let Some(mut pass) = room.passes.remove(&evicted.id) {
                pass.disarm(timers);
            }
            // A message that leaves the context window leaves the ambient
            // batches too: its floor count is gone with it, so a persona
            // flushing later would answer what another already answered
            // (and a restarted engine, which restores the window only,
            // would not have it).
            for (i, m) in room.members.iter_mut().enumerate() {
                if let Some(st) = m.ambient.as_deref_mut() {
                    let pair = (msg.room.clone(), PersonaIdx(i as u8));
                    if st.forget(&evicted.id, timers) {
                        flush_queue.retain(|q| *q != pair);
                    }
                    // Its timer and wait may have gone with the message.
                    ambient_touched.push(pair);
                }
            }
        }
        if let Some(a) = author {
            room.members[a.0 as usize].remember_own(msg.id.clone(), limits.own_ids);
        }

        // A reply the persona cannot pay for is not started (`budget.rs`).
        for (p, v) in &mut verdicts {
            if self.budgets
                && matches!(v.action, Action::Turn | Action::Gate)
                && !self.affords(now, &msg.room, *p, entry.text.len())
            {
                *v = self.out_of_budget(now, &msg.room, *p, v);
            }
        }
        // With `floor.strategy = "pass"`, the floor of an unaddressed
        // message goes to one persona at a time (see `floor.rs`).
        let (held, offer) = self.hold_floor(now, &msg.room, &entry, is_bot, &verdicts);
        let mut actions: Vec<(PersonaIdx, Verdict, Option<TurnId>)> = Vec::new();
        for (p, v) in verdicts.drain(..) {
            if held.contains(p) {
                continue;
            }
            let turn =
                matches!(v.action, Action::Turn | Action::Gate | Action::Notice).then(|| self.new_turn_id());
            // A gated message's decision waits for the gate's verdict.
            if v.action != Action::Gate {
                self.out.push_back(Output::Decision(Decision {
                    at: now,
                    room: msg.room.clone(),
                    msg: msg.id.clone(),
                    persona: self.personas[p.0 as usize].id.clone(),
                    outcome: v.outcome,
                    reason: v.reason,
                    turn,
                }));
            }
            if let Some(i) = limited.iter().position(|(q, _)| *q == p) {
                self.out.push_back(Output::Limited(limited.swap_remove(i).1));
            }
            if v.reason == Reason::BudgetExhausted
                && let Some(note) = self.budget_note(now, &msg.room, p, msg.id.clone(), entry.text.len())
            {
                self.out.push_back(Output::OverBudget(note));
            }
            if v.action != Action::None {
                actions.push((p, v, turn));
            }
        }
        self.scratch = verdicts;
        let first = offer.as_ref().map(|note| note.persona.clone());
        self.out.extend(offer.map(Output::Floor));

        // Notices are said after every persona's action on the message, so
        // the others decide it before they hear the notice.
        let mut notices = Vec::new();
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
                Action::Notice => notices.push((p, turn.expect("notice actions carry an id"))),
                Action::None => {}
            }
            if let Some(t) = turn {
                if v.unprompted {
                    self.hold_unprompted(t);
                }
                if first.as_ref() == Some(&self.personas[p.0 as usize].id) {
                    self.floor_offered(now, room_id, &msg.id, t);
                }
            }
        }
        for (p, turn) in notices {
            self.budget_notice(now, turn, &msg.room, p, &entry);
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
        let from = room.members[p.0 as usize].window_from;
        let (history, window_from, trigger_at) = room.snapshot(&triggers, self.limits.max_turns, from);
        let history = history.iter().map(|e| room.canonical(e)).collect();
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
            (_, Some(GateFor::Ambient(t))) => (
                spec.ambient_agent.clone().unwrap_or_else(|| spec.agent.clone()),
                None,
                Some(t),
            ),
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
            triggers: triggers.iter().map(|e| room.canonical(e)).collect(),
            history,
            trigger_at,
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
        // A gate reads only the newest few messages: its window is not the
        // persona's.
        if kind != TurnKind::Gate
            && let Some(r) = self.rooms.get_mut(room_id)
        {
            r.members[p.0 as usize].window_from = window_from;
        }
        let budget = (self.budgets && kind != TurnKind::Gate)
            .then(|| self.hold_budget(now, room_id, p, triggers.iter().map(|e| e.text.len()).sum()))
            .flatten();
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
                floor_pass: false,
                unprompted: false,
                budget,
                used: None,
                answered: false,
            },
        );
        self.out.push_back(Output::CallAgent(Box::new(request)));
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
        if self.budgets || turn.budget.is_some() {
            self.settle_budget(now, &turn);
        }
        if let Some(i) = turn.schedule {
            self.schedule_ended(i, turn_id);
        }
        if let Some(room) = self.rooms.get_mut(&turn.room) {
            if turn.unprompted && !sent {
                room.unprompted.release();
            }
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
        if turn.floor_pass {
            self.floor_turn_ended(now, turn_id, &turn, sent);
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
        self.bound_touched();
        while let Some(entry) = self.timers.first_entry() {
            let key = *entry.key();
            let due = key.0;
            if due > now {
                break;
            }
            match entry.remove() {
                Timer::Schedule(i) => self.schedule_due(now, i, due),
                Timer::FloorPass(room, msg) => self.floor_timeout(now, &room, &msg),
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
                    // Only the deadline or cooldown wake the buffer waits
                    // on acts; a superseded one flushing a later deadline
                    // early reordered an instant's flushes against a
                    // restored engine, which has no such timer (restore.rs).
                    let trigger = if st.due == Some(key) {
                        st.due = None;
                        FlushTrigger::Timer
                    } else if let Some((w, _)) = st.waiting
                        && st.wake == Some(due)
                    {
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

fn persona_of(personas: &[PersonaSpec], user: &str) -> Option<PersonaIdx> {
    personas
        .iter()
        .position(|p| p.answers_to(user))
        .map(|i| PersonaIdx(i as u8))
}
