//! The room engine: messages and agent results in, decisions and effects out.
//!
//! [`Engine`] is sans-I/O in the style of `quinn-proto`: the caller owns the
//! clock, the network and the agents. It feeds events with
//! [`Engine::handle_message`] and [`Engine::handle_agent_result`], then
//! drains [`Engine::poll_output`] until it returns `None`, executing the
//! effects it finds (call an agent, send a message). Every entry point takes
//! `now`; nothing inside reads a clock, so a replay on a virtual clock and
//! the live service decide alike.
//!
//! The flow of one message, in order (see also `ARCHITECTURE.md`):
//! 1. duplicate ids are dropped;
//! 2. the author is identified (a persona of ours? a bot?) and the room's
//!    bot streak is updated;
//! 3. mentions and `/command@` are classified once ([`Targets`]);
//! 4. each persona gets one [`Decision`] ([`Engine::decide`]): the room
//!    mode, bot rules, the allowlist and the rate limit, in that order;
//! 5. the message is recorded in the room transcript;
//! 6. each `reply` decision starts a turn: a [`TurnRequest`] output.
//!
//! When a turn ends, [`Engine::handle_agent_result`] strips directives,
//! honours silence, validates `reply_to`, settles the rate-limit slot and
//! emits a [`Outgoing`] send, which the engine then hears like any other
//! message so other personas see it as a bot message.

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::addressing::{Addressed, Handle, Targets, handle_eq};
use crate::decision::{Decision, Outcome, Reason};
use crate::directives;
use crate::ids::{MsgId, PersonaId, RoomId, ThreadId, TurnId, UserId};
use crate::message::{Mentions, Message, Sender};
use crate::persona::{MAX_PERSONAS, PersonaIdx, PersonaSpec};
use crate::policy::{Mode, PolicyTable, RoomPolicy};
use crate::rate_limit::RateLedger;
use crate::silence;
use crate::time::Timestamp;
use crate::transcript::{Entry, History};
use crate::turn::{AgentResult, TurnKind, TurnRequest};

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
#[derive(Clone, Debug, Default)]
pub struct EngineConfig {
    /// The personas this process hosts, in config order.
    pub personas: Vec<PersonaSpec>,
    /// Room policy layers.
    pub policies: PolicyTable,
    /// Context bounds.
    pub context: ContextLimits,
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
}

/// A reply the engine decided to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// When it was decided.
    pub at: Timestamp,
    /// The turn that produced it.
    pub turn: TurnId,
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

/// The end of a turn that sent nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnEnd {
    /// When it ended.
    pub at: Timestamp,
    /// The turn.
    pub turn: TurnId,
    /// Whose turn.
    pub persona: PersonaId,
    /// The room.
    pub room: RoomId,
    /// The messages the turn was for.
    pub msgs: Vec<MsgId>,
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
    /// A turn failed. The string says why.
    Error(TurnEnd, String),
    /// A turn produced a reply that a guard held back at the last moment
    /// (e.g. the room's bots reached `max_bot_turns` while it ran).
    Withheld(TurnEnd, Reason),
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

/// What the engine remembers about one persona in one room.
#[derive(Debug, Default)]
struct PersonaRoom {
    own_ids: VecDeque<MsgId>,
    own_set: rustc_hash::FxHashSet<MsgId>,
    rate: RateLedger,
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
}

/// What the engine remembers about one room.
#[derive(Debug)]
struct Room {
    policies: Vec<Arc<RoomPolicy>>,
    history: History,
    /// Consecutive bot messages since the last human one.
    bot_streak: u32,
    /// Bot accounts seen here that are not personas of ours.
    bots: Vec<UserId>,
    members: Vec<PersonaRoom>,
}

/// An agent turn in flight.
#[derive(Debug)]
struct Turn {
    persona: PersonaIdx,
    room: RoomId,
    thread: Option<ThreadId>,
    is_dm: bool,
    msgs: Vec<MsgId>,
    reserved: bool,
    policy: Arc<RoomPolicy>,
    /// Whether the trigger was a bot message (so the bot-turn limit is
    /// checked again before the reply goes out).
    answers_bot: bool,
}

/// One persona's decision on one message, before it is traced.
#[derive(Clone, Copy, Debug)]
struct Verdict {
    outcome: Outcome,
    reason: Reason,
    /// Whether a rate-limit slot was reserved for the turn.
    reserved: bool,
}

impl Verdict {
    fn new(outcome: Outcome, reason: Reason) -> Verdict {
        Verdict {
            outcome,
            reason,
            reserved: false,
        }
    }
}

/// Who the message being decided replies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReplyAuthor {
    Persona(PersonaIdx),
    Bot,
    Human,
}

/// The sans-I/O room engine. See the module docs for the flow.
#[derive(Debug)]
pub struct Engine {
    personas: Vec<PersonaSpec>,
    policies: PolicyTable,
    shared_policies: Vec<Arc<RoomPolicy>>,
    limits: ContextLimits,
    rooms: FxHashMap<RoomId, Room>,
    turns: FxHashMap<TurnId, Turn>,
    next_turn: u64,
    sent_count: Vec<u64>,
    out: VecDeque<Output>,
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
        for (i, a) in config.personas.iter().enumerate() {
            for b in &config.personas[i + 1..] {
                let handles = std::iter::once(b.id.as_str()).chain(b.aliases.iter().map(|x| x.as_str()));
                for h in handles {
                    if a.answers_to(h) {
                        return Err(EngineError::DuplicateHandle(
                            a.id.clone(),
                            b.id.clone(),
                            h.to_owned(),
                        ));
                    }
                }
            }
        }
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
            policies: config.policies,
            shared_policies,
            limits: config.context,
            rooms: FxHashMap::default(),
            turns: FxHashMap::default(),
            next_turn: 1,
            out: VecDeque::new(),
        })
    }

    /// The personas, in config order.
    pub fn personas(&self) -> &[PersonaSpec] {
        &self.personas
    }

    /// The index of the persona with this id.
    pub fn persona_index(&self, id: &str) -> Option<PersonaIdx> {
        self.personas
            .iter()
            .position(|p| p.id.as_str() == id)
            .map(|i| PersonaIdx(i as u8))
    }

    /// The next output, oldest first. Drain it after every `handle_*` call.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// How many agent turns are in flight.
    pub fn turns_in_flight(&self) -> usize {
        self.turns.len()
    }

    /// How many rooms the engine holds state for.
    pub fn room_count(&self) -> usize {
        self.rooms.len()
    }

    fn persona_of(&self, user: &str) -> Option<PersonaIdx> {
        persona_of(&self.personas, user)
    }

    /// Hears one inbound message at `now`.
    pub fn handle_message(&mut self, now: Timestamp, msg: Message) {
        let author = self.persona_of(msg.sender.id.as_str());
        let is_bot = msg.sender.is_bot || author.is_some();
        let Engine {
            personas,
            policies,
            shared_policies,
            limits,
            rooms,
            turns,
            next_turn,
            out,
            ..
        } = self;
        let limits = *limits;
        let room = rooms
            .entry(msg.room.clone())
            .or_insert_with(|| Room::new(personas, policies, shared_policies, &limits, &msg.room));
        if room.history.contains(msg.id.as_str()) {
            out.push_back(Output::Dropped {
                at: now,
                room: msg.room,
                msg: msg.id,
                reason: "duplicate",
            });
            return;
        }
        if is_bot {
            room.bot_streak = room.bot_streak.saturating_add(1);
            if author.is_none()
                && !room
                    .bots
                    .iter()
                    .any(|b| handle_eq(b.as_str(), msg.sender.id.as_str()))
            {
                room.bots.push(msg.sender.id.clone());
            }
        } else {
            room.bot_streak = 0;
        }
        let reply_author = msg.reply_to.as_ref().map(|r| room.author_of(r));
        let targets = Targets::of(&msg, |h| match persona_of(personas, h) {
            Some(p) => Handle::Persona(p),
            None if room.bots.iter().any(|b| handle_eq(b.as_str(), h)) => Handle::Bot,
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

        let mut started: Vec<(PersonaIdx, TurnId, bool)> = Vec::new();
        let mut recorded = false;
        for (i, spec) in personas.iter().enumerate() {
            let p = PersonaIdx(i as u8);
            let v = decide(spec, p, room, &facts);
            recorded |= v.reason != Reason::DmForOther;
            let turn = (v.outcome == Outcome::Reply).then(|| {
                let t = TurnId(*next_turn);
                *next_turn += 1;
                started.push((p, t, v.reserved));
                t
            });
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

        let entry = Arc::new(Entry {
            id: msg.id.clone(),
            author: msg.sender.id.clone(),
            author_name: msg.sender.name.clone(),
            is_bot,
            persona: author,
            text: msg.text.clone(),
            reply_to: msg.reply_to.clone(),
            thread: msg.thread.clone(),
            time: msg.time,
        });
        if recorded {
            room.history.push(entry.clone());
        }
        if let Some(a) = author {
            room.members[a.0 as usize].remember_own(msg.id.clone(), limits.own_ids);
        }
        if started.is_empty() {
            return;
        }
        // Each turn sees the history before its trigger.
        let mut history: Vec<Arc<Entry>> = room
            .history
            .last(limits.max_turns + 1)
            .filter(|e| e.id != msg.id)
            .cloned()
            .collect();
        let excess = history.len().saturating_sub(limits.max_turns);
        history.drain(..excess);
        for (p, turn, reserved) in started {
            let policy = room.policies[p.0 as usize].clone();
            let spec = &personas[p.0 as usize];
            let silence_token = (policy.allow_silence && !msg.is_dm).then(|| policy.silence_token.clone());
            turns.insert(
                turn,
                Turn {
                    persona: p,
                    room: msg.room.clone(),
                    thread: msg.thread.clone(),
                    is_dm: msg.is_dm,
                    msgs: vec![msg.id.clone()],
                    reserved,
                    policy,
                    answers_bot: is_bot,
                },
            );
            out.push_back(Output::CallAgent(Box::new(TurnRequest {
                turn,
                kind: TurnKind::Reply,
                started: now,
                persona: spec.id.clone(),
                persona_idx: p,
                persona_name: spec.name.clone(),
                agent: spec.agent.clone(),
                prompt: spec.prompt.clone(),
                room: msg.room.clone(),
                thread: msg.thread.clone(),
                is_dm: msg.is_dm,
                silence_token,
                triggers: vec![entry.clone()],
                history: history.clone(),
                max_chars: limits.max_chars,
            })));
        }
    }

    /// Reports how a turn ended. Unknown turns (already ended or cancelled)
    /// are ignored, so a late result can never post twice.
    pub fn handle_agent_result(&mut self, now: Timestamp, turn_id: TurnId, result: AgentResult) {
        let Some(turn) = self.turns.remove(&turn_id) else {
            return;
        };
        let persona = self.personas[turn.persona.0 as usize].id.clone();
        let end = TurnEnd {
            at: now,
            turn: turn_id,
            persona: persona.clone(),
            room: turn.room.clone(),
            msgs: turn.msgs.clone(),
        };
        let text = match result {
            AgentResult::Failed(err) => {
                self.release(&turn);
                self.out.push_back(Output::Error(end, err));
                return;
            }
            AgentResult::Output(text) => text,
        };
        let (d, body) = directives::parse(&text);
        let body = body.trim();
        if body.is_empty() {
            self.release(&turn);
            if d.present {
                self.out
                    .push_back(Output::Silent(end, SilenceKind::DirectivesOnly));
            } else {
                self.out
                    .push_back(Output::Error(end, "the agent returned a blank answer".to_owned()));
            }
            return;
        }
        if turn.policy.allow_silence && silence::is_silence(body, &turn.policy.silence_token) {
            self.release(&turn);
            self.out.push_back(Output::Silent(end, SilenceKind::Token));
            return;
        }
        let room = self.rooms.get_mut(&turn.room).expect("a turn's room exists");
        if turn.answers_bot && room.bot_streak >= turn.policy.max_bot_turns {
            // Other bots spoke while this turn ran and the room reached its
            // limit: answering now would extend the loop.
            self.release(&turn);
            self.out.push_back(Output::Withheld(end, Reason::BotTurnLimit));
            return;
        }
        let (reply_to, dropped_reply_to) = match d.reply_to {
            Some(id) if room.history.contains(&id) => (Some(MsgId::new(id)), None),
            Some(id) => (None, Some(id)),
            None => (None, None),
        };
        if turn.reserved {
            room.members[turn.persona.0 as usize].rate.commit(now);
        }
        let n = &mut self.sent_count[turn.persona.0 as usize];
        *n += 1;
        let id = MsgId::new(format!("{persona}:{n}"));
        let spec = &self.personas[turn.persona.0 as usize];
        let echo = Message {
            id: id.clone(),
            room: turn.room.clone(),
            thread: turn.thread.clone(),
            sender: Sender {
                id: UserId::new(spec.id.as_str()),
                name: spec.name.clone(),
                is_bot: true,
            },
            text: Arc::from(body),
            mentions: Mentions::FromText,
            reply_to: reply_to.clone(),
            is_dm: turn.is_dm,
            dm_to: turn.is_dm.then(|| spec.id.clone()),
            time: now,
        };
        self.out.push_back(Output::Send(Box::new(Outgoing {
            at: now,
            turn: turn_id,
            persona,
            room: turn.room,
            thread: turn.thread,
            id,
            text: body.to_owned(),
            reply_to,
            dropped_reply_to,
            invalid_reply_to: d.invalid_reply_to,
            unknown_directives: d.unknown_keys,
            msgs: turn.msgs,
        })));
        // The room hears the reply like any other message: the author
        // records it as its own, the others as a bot message.
        self.handle_message(now, echo);
    }

    fn release(&mut self, turn: &Turn) {
        if turn.reserved
            && let Some(room) = self.rooms.get_mut(&turn.room)
        {
            room.members[turn.persona.0 as usize].rate.release();
        }
    }
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
/// mode, bot rules, allowlist, rate limit, in that order. The rate-limit
/// slot is reserved here, before any agent is called.
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
    let reason = match (policy.mode, addressed) {
        (Mode::Command, Some(a @ (Addressed::Dm | Addressed::Command))) => Reason::from(a),
        (Mode::Command, _) => return Verdict::new(Outcome::Record, Reason::NotCommand),
        (_, Some(a)) => Reason::from(a),
        (Mode::Mention, None) => return Verdict::new(Outcome::Record, Reason::NotAddressed),
        (Mode::All, None) => {
            let replies_to_other = matches!(f.reply_author, Some(ReplyAuthor::Bot | ReplyAuthor::Persona(_)));
            if f.targets.names_other_than(p) || replies_to_other {
                return Verdict::new(Outcome::Record, Reason::AddressedToOther);
            }
            Reason::All
        }
        (Mode::Observe, None) => unreachable!("observe returned above"),
    };
    if f.is_bot && room.bot_streak >= policy.max_bot_turns {
        return Verdict::new(Outcome::Skip, Reason::BotTurnLimit);
    }
    if !policy.allows(msg.sender.id.as_str()) {
        return Verdict::new(Outcome::Skip, Reason::NotAllowed);
    }
    if let Some(limit) = policy.rate_limit {
        if !room.members[p.0 as usize].rate.try_reserve(f.now, &limit) {
            return Verdict::new(Outcome::Skip, Reason::RateLimited);
        }
        return Verdict {
            outcome: Outcome::Reply,
            reason,
            reserved: true,
        };
    }
    Verdict::new(Outcome::Reply, reason)
}
