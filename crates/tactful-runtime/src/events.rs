//! What flows into the engine's task ([`Event`]) and what the runtime
//! reports as it works ([`TraceEvent`]): kept apart from the task itself
//! so the parts that send them (platforms' handle, the coordinator, the
//! delivery workers, the call log) need not know the runtime.

use std::collections::HashMap;
use std::sync::Arc;

use tactful_agents::Agent;
use tactful_core::hooks::HookOutcome;
use tactful_core::{
    AgentResult, EngineError, Message, MsgId, Output, PersonaId, PersonaSpec, PersonasChanged, PolicyTable,
    RoomId, Timestamp, TurnId, TurnKind,
};
use tactful_store::{Lease, Op, Restored};
use tokio::sync::oneshot;

use crate::persist::Ack;

/// The personas and agents a config reload hands to the running engine.
pub struct Personas {
    /// Every persona of the reloaded file, in its order.
    pub personas: Vec<PersonaSpec>,
    /// Agent backends by `[agents]` key: the whole new set.
    pub agents: HashMap<String, Arc<dyn Agent>>,
    /// See [`EngineConfig::reasoning_kept`].
    pub reasoning_kept: Vec<Arc<str>>,
}

/// What the runtime reports as it works: every engine output, and every
/// reply the platform confirmed (with the id it gave it).
#[derive(Clone, Debug)]
pub enum TraceEvent {
    /// An engine output (decision, call, send, turn end...).
    Engine(Output),
    /// A message arrived from a platform.
    Inbound {
        /// The message (its room included; the console's live transcript
        /// shows it).
        msg: Box<Message>,
    },
    /// A message was refused because the store cannot write.
    Refused {
        /// Its room.
        room: RoomId,
    },
    /// A message from before the start was recorded as context.
    Backlog {
        /// Its room.
        room: RoomId,
        /// Its id.
        msg: MsgId,
    },
    /// An agent answered, failed or gave up: one per call that ran.
    Answered {
        /// The turn.
        turn: TurnId,
        /// What the call was for.
        kind: TurnKind,
        /// The room.
        room: RoomId,
        /// The persona.
        persona: PersonaId,
        /// The `[agents]` key.
        agent: Arc<str>,
        /// From the call's start (not its decision) to its answer.
        latency: std::time::Duration,
        /// The token counts, when the backend reports them.
        usage: Option<tactful_agents::Usage>,
        /// The agent's error, secrets masked.
        error: Option<String>,
    },
    /// State was restored from the store at start.
    Restored {
        /// Transcript messages the engine heard again.
        messages: usize,
        /// Reply turns that were running and were asked again.
        resumed: usize,
        /// Replies decided but unconfirmed, sent again (from the first part
        /// that had not gone out).
        unsent: usize,
        /// Streaming placeholders left on screen that had no reply: removed.
        stale_placeholders: usize,
    },
    /// A turn that was running before a restart could not be asked again;
    /// the log says why.
    NotResumed {
        /// The room.
        room: RoomId,
        /// The persona.
        persona: PersonaId,
        /// The messages it answered.
        msgs: Vec<MsgId>,
        /// Why.
        reason: tactful_core::NotResumed,
    },
    /// The work in progress changed: turns running or queued, ambient
    /// batches waiting to flush and delivery jobs queued. Zero means every
    /// room is quiet until the next message (operators watch it as
    /// `tactful_busy`; tests wait for it instead of sleeping).
    Busy {
        /// How many pieces of work are in progress.
        work: usize,
    },
    /// What is left of the personas' spend budgets changed (only personas
    /// with a `budget`).
    Budgets {
        /// Each persona's budget.
        left: Vec<tactful_core::BudgetLeft>,
    },
    /// The room partitions this process holds changed (several processes
    /// on one database; operators watch it as `tactful_partitions_held`).
    Partitions {
        /// How many it holds now.
        held: usize,
    },
    /// Agent turns running and waiting for a slot changed.
    Turns {
        /// Running now.
        running: usize,
        /// Waiting for `max_concurrent_turns`.
        queued: usize,
    },
    /// A reply was delivered: the engine's id for it and the platform's.
    /// Sent after the engine learned the platform id.
    Delivered {
        /// The room.
        room: RoomId,
        /// The engine's `<persona>:<n>` id.
        local: MsgId,
        /// The platform's id.
        platform: MsgId,
    },
}

pub(crate) enum Event {
    Inbound(Message),
    /// A message that must be stored before its sender is told it was
    /// taken, with the platform's own records of it.
    InboundSaved(Message, Vec<Op>, Ack),
    Backlog(Message),
    /// A platform's bookkeeping, and who waits until it is saved.
    State(String, String, Option<Ack>),
    /// Bookkeeping saved whatever was refused before it.
    Note(Op),
    /// An agent turn ended, with the tokens it used when reported.
    AgentDone(TurnId, AgentResult, Option<tactful_agents::Usage>),
    /// A turn's before-send hooks ran.
    HooksDone(TurnId, Vec<HookOutcome>),
    /// New room policy layers (a config reload).
    Policies(Box<PolicyTable>),
    /// New personas and agents (a config reload), answered with what
    /// changed or why the engine refused them.
    Personas(
        Box<Personas>,
        oneshot::Sender<Result<PersonasChanged, EngineError>>,
    ),
    /// A room worker finished a job other than a streaming edit; with the
    /// ids when it delivered a reply.
    Done(RoomId, Option<(MsgId, MsgId)>),
    /// A reply's first part is shown under this platform id (local, then
    /// platform), told before its record is saved: a person who answers it
    /// at once must find the engine knowing the id (`Done` repeats it).
    Shown(RoomId, MsgId, MsgId),
    /// Rooms of partitions this process now holds (several processes).
    Adopt(Box<Adoption>),
    /// Partitions to hand over: let go by choice (`Some`: told once their
    /// rooms delivered and saved everything), or lost (`None`: at once).
    Release(Vec<u32>, Option<oneshot::Sender<()>>),
    /// The rooms of partitions let go by choice have delivered everything.
    Released(Vec<u32>, oneshot::Sender<()>),
    /// Messages waiting in the inbox for partitions this process holds.
    FromInbox(Vec<tactful_store::Waiting>),
    /// What the rooms of partitions held by other processes spent of the
    /// personas' own budgets: (persona, bucket end, tokens).
    SpentElsewhere(Vec<(tactful_core::PersonaId, tactful_core::Timestamp, u64)>),
    Shutdown(oneshot::Sender<()>),
}

/// Rooms of newly held partitions, read back from the store.
pub(crate) struct Adoption {
    /// The partitions and their leases.
    pub leases: Vec<(u32, Lease)>,
    /// Their rooms.
    pub restored: Restored,
    /// Each schedule's last run.
    pub last_runs: Vec<(Arc<str>, Timestamp)>,
    /// What the rooms of the partitions not held here spent of the
    /// personas' budgets, these excluded now: taken in with the rooms, so
    /// no message is decided with a room's spend counted twice (from its
    /// snapshot and from the store) or not at all. `None` when it could
    /// not be read (the round's last read tells it).
    pub spent_elsewhere: Option<Spend>,
}

/// Spend by persona and bucket end (see [`Event::SpentElsewhere`]).
pub(crate) type Spend = Vec<(PersonaId, Timestamp, u64)>;
