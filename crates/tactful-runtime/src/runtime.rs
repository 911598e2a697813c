//! The live runtime: the sans-I/O engine driven by real time.
//!
//! One task owns the [`Engine`] ([`crate::driver`]): it takes inbound
//! messages, agent results and timer wake-ups in the order they arrive (so
//! a room's messages are decided in arrival order), and acts on every
//! output. Deciding takes microseconds and never waits on an agent: each
//! turn runs in a task of its own (at most `max_concurrent_turns` at once,
//! the rest queued in order), so a slow agent in one room never delays
//! another room. Timers use the same engine calls as `tactful replay`
//! ([`Engine::poll_timeout`], [`Engine::handle_timeout`]), so the live
//! service and a replay of the same events decide the same things.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tactful_agents::Agent;
use tactful_agents::hooks::Hooks;
use tactful_core::PolicyTable;
use tactful_core::hooks::HookOutcome;
use tactful_core::{
    AgentResult, Engine, EngineConfig, EngineError, Message, MsgId, Output, PersonaId, PersonaSpec,
    PersonasChanged, RoomId, Timestamp, TurnId, TurnKind,
};
use tactful_store::{LoadLimits, Op, Store, StoreError};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::connections::{Account, Connections};
use crate::delivery::DeliveryConfig;
use crate::driver::Driver;
use crate::persist::{Ack, Health, NotSaved, Persister, Saver};
use crate::platform::Platform;
use crate::restart::Restart;

/// Wall-clock time as the engine counts it: milliseconds since the Unix
/// epoch. The only clock read in tactful's decision path.
pub fn wall_clock() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis().min(u64::MAX as u128) as u64);
    Timestamp::from_millis(ms)
}

/// The default for [`RuntimeConfig::max_concurrent_turns`].
pub const DEFAULT_MAX_CONCURRENT_TURNS: usize = 16;

/// The personas and agents a config reload hands to the running engine.
pub struct Personas {
    /// Every persona of the reloaded file, in its order.
    pub personas: Vec<PersonaSpec>,
    /// Agent backends by `[agents]` key: the whole new set.
    pub agents: HashMap<String, Arc<dyn Agent>>,
    /// See [`EngineConfig::reasoning_kept`].
    pub reasoning_kept: Vec<Arc<str>>,
}

/// Everything the runtime is built from.
pub struct RuntimeConfig {
    /// The engine's config.
    pub engine: EngineConfig,
    /// Agent backends by `[agents]` key.
    pub agents: HashMap<String, Arc<dyn Agent>>,
    /// Delivery settings.
    pub delivery: DeliveryConfig,
    /// How long shutdown waits for turns in flight before cancelling them.
    pub shutdown_grace: Duration,
    /// Where state is saved, and restored from at start. `None` keeps
    /// everything in memory (replays, some tests).
    pub store: Option<Store>,
    /// Agent turns running at once, process-wide; more wait in a queue, in
    /// the order they were decided. One person opening sixty rooms and
    /// mentioning six personas in each must not start 360 agent processes,
    /// nor a restart start every unfinished turn at once.
    pub max_concurrent_turns: usize,
    /// The before-send hooks the engine's `hooks` names.
    pub hooks: Hooks,
    /// Sharing the store with other processes (PostgreSQL): this process
    /// owns only the rooms of the partitions it holds, and every message
    /// received goes through the store's inbox to its room's owner.
    pub cluster: Option<crate::cluster::ClusterConfig>,
}

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The engine refused its config.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// There is nowhere to deliver replies.
    #[error("no platform is configured")]
    NoPlatform,
    /// The store's writer thread could not start.
    #[error("cannot start the store writer: {0}")]
    Thread(#[from] std::io::Error),
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
    Adopt(Box<crate::cluster::Adoption>),
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

/// Sends inbound messages to a running runtime. Cheap to clone: each
/// platform adapter holds one.
#[derive(Clone)]
pub struct RuntimeHandle {
    pub(crate) tx: mpsc::UnboundedSender<Event>,
    saver: Option<Saver>,
    /// The leases held, when sharing the store (see [`Self::saver_for`]).
    fences: Option<crate::driver::Fences>,
    connections: Connections,
    id_block: Option<u64>,
    started: Timestamp,
}

impl RuntimeHandle {
    /// When the service started (wall clock): a platform that takes what
    /// was said before it first listened for history counts from here, not
    /// from when it connected (when several processes share the store, a
    /// platform connects when its lease comes, which can be seconds
    /// later; a question asked meanwhile is no history).
    pub fn started(&self) -> Timestamp {
        self.started
    }

    /// When this process shares its store with others (`[cluster]`), the
    /// first id of its own block: a platform that numbers its own messages
    /// (the web room) numbers from there, so no two processes hand out one
    /// id. `None` when the process is alone.
    pub fn id_block(&self) -> Option<u64> {
        self.id_block
    }

    /// The account of `persona` on `platform` ("Discord", as the log
    /// names it), whose connection state `/healthz`, the metrics and the
    /// banner show.
    pub fn account(&self, platform: &str, persona: &str) -> Account {
        self.connections.account(platform, persona)
    }

    /// Every platform account's connection state.
    pub fn connections(&self) -> &Connections {
        &self.connections
    }

    /// Hands a normalised inbound message to the engine. Returns `false`
    /// once the runtime has stopped. While the store cannot write, the
    /// message is refused (logged and counted): platforms that sync (Matrix)
    /// deliver it again after a restart.
    pub fn inbound(&self, msg: Message) -> bool {
        self.tx.send(Event::Inbound(msg)).is_ok()
    }

    /// Hands a message to the engine and resolves once it is stored,
    /// together with `also` (the platform's own records of it). A platform
    /// that shows messages itself (the web room) shows it only then: what
    /// people saw is never lost to a crash. Refused while the store cannot
    /// write or the service is stopping; nothing was taken then.
    pub fn inbound_saved(
        &self,
        msg: Message,
        also: Vec<Op>,
    ) -> impl Future<Output = Result<(), NotSaved>> + use<> {
        let (ack, done) = oneshot::channel();
        let sent = self.tx.send(Event::InboundSaved(msg, also, ack)).is_ok();
        async move {
            if !sent {
                return Err(NotSaved::Stopping);
            }
            done.await.unwrap_or(Err(NotSaved::Stopping))
        }
    }

    /// Hands over a message from before the service started (a platform's
    /// first sync): recorded as context, never answered.
    pub fn backlog(&self, msg: Message) -> bool {
        self.tx.send(Event::Backlog(msg)).is_ok()
    }

    /// Saves a platform's bookkeeping (a sync token, say) in order with
    /// the messages handed in before it: after a restart the store holds
    /// the value only if it holds those messages too.
    pub fn save_state(&self, key: String, value: String) -> bool {
        self.tx.send(Event::State(key, value, None)).is_ok()
    }

    /// [`RuntimeHandle::save_state`], resolving once the value is stored,
    /// with every message handed in before it. A platform that confirms
    /// what it received to its server (Telegram's next `getUpdates` offset
    /// drops the updates below it for good) waits for this first, so a
    /// crash between the two never loses a message. Refused, and nothing
    /// saved, while the store cannot write or the service stops. Such a
    /// platform hands its messages in with [`RuntimeHandle::inbound_saved`]
    /// and saves nothing past one that was refused: so, unlike
    /// [`RuntimeHandle::save_state`], this is saved even after another
    /// platform's message was refused.
    pub fn save_state_saved(
        &self,
        key: String,
        value: String,
    ) -> impl Future<Output = Result<(), NotSaved>> + use<> {
        let (ack, done) = oneshot::channel();
        let sent = self.tx.send(Event::State(key, value, Some(ack))).is_ok();
        async move {
            if !sent {
                return Err(NotSaved::Stopping);
            }
            done.await.unwrap_or(Err(NotSaved::Stopping))
        }
    }

    /// Saves a platform's bookkeeping that covers no incoming message
    /// (where its own posts went: Slack's thread state). Unlike
    /// [`RuntimeHandle::save_state`], it is saved even after a message was
    /// refused, since saving it cannot skip one.
    pub fn save_note(&self, key: String, value: String) -> bool {
        self.tx
            .send(Event::Note(Op::PlatformState { key, value }))
            .is_ok()
    }

    /// Saves a setting every process sharing the store follows (a room
    /// policy set in the console): like [`RuntimeHandle::save_note`], and
    /// announced to the other processes at commit ([`Op::SharedState`]).
    pub fn save_shared(&self, key: String, value: String) -> bool {
        self.tx.send(Event::Note(Op::SharedState { key, value })).is_ok()
    }

    /// Replaces the room policies of the running engine (a config
    /// reload): every room uses the new ones from its next message on;
    /// turns in flight keep theirs. `false` once the runtime has stopped.
    pub fn set_policies(&self, policies: PolicyTable) -> bool {
        self.tx.send(Event::Policies(Box::new(policies))).is_ok()
    }

    /// Replaces the personas and the agent backends of the running engine
    /// (a config reload; see [`Engine::set_personas`] for what happens to
    /// each persona). Turns in flight keep the agent they started with.
    /// Resolves to what changed, or the engine's reason for refusing
    /// (nothing changed then); `Err(None)` once the runtime has stopped.
    pub fn set_personas(
        &self,
        personas: Personas,
    ) -> impl Future<Output = Result<PersonasChanged, Option<EngineError>>> + use<> {
        let (tx, rx) = oneshot::channel();
        let sent = self.tx.send(Event::Personas(Box::new(personas), tx)).is_ok();
        async move {
            if !sent {
                return Err(None);
            }
            rx.await.map_err(|_| None)?.map_err(Some)
        }
    }

    /// Where a platform saves records of its own, in order with the
    /// runtime's; `None` without a store.
    pub fn saver(&self) -> Option<&Saver> {
        self.saver.as_ref()
    }

    /// Where a platform saves what it says about `room` (the web room's
    /// decision notes, announced to the other processes): fenced by the
    /// room's lease when several processes share the store, so a process
    /// that lost the room, or never held it, announces nothing there (the
    /// store refuses the batch); `None` when it holds no lease for the room
    /// or there is no store.
    pub fn saver_for(&self, room: &RoomId) -> Option<Saver> {
        let saver = self.saver.clone()?;
        let Some(fences) = &self.fences else {
            return Some(saver);
        };
        let lease = fences
            .lock()
            .ok()?
            .get(&tactful_store::partition_of(room))
            .cloned()?;
        Some(saver.fenced(Some(lease)))
    }
}

/// A running runtime.
pub struct Runtime {
    handle: RuntimeHandle,
    health: Option<Arc<Health>>,
    task: JoinHandle<()>,
    /// Sharing the store with other processes.
    coordinator: Option<crate::cluster::Coordinator>,
}

impl Runtime {
    /// Starts the engine task, delivering to `platforms` (a room goes to the
    /// first that [`Platform::owns`] it). With a store, the engine is first rebuilt
    /// from it: reply turns that were running are asked again, replies
    /// decided but not confirmed are sent again from the first part that
    /// had not gone out, and placeholders left on screen become their reply
    /// or are removed. `trace` receives every engine output and delivery
    /// confirmation, for logs, metrics and tests.
    pub fn start(
        config: RuntimeConfig,
        platforms: Vec<Arc<dyn Platform>>,
        trace: Option<mpsc::UnboundedSender<TraceEvent>>,
    ) -> Result<Runtime, StartError> {
        if platforms.is_empty() {
            return Err(StartError::NoPlatform);
        }
        let limits = LoadLimits {
            history: config.engine.context.history,
            own_ids: config.engine.context.own_ids,
        };
        let mut engine = Engine::new(config.engine)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let mut coordinator = None;
        let mut id_block = None;
        let (persist, restart, key_prefix) = match (config.store, &config.cluster) {
            // Rooms come as their partitions are taken (`cluster`).
            (Some(mut store), Some(cluster)) => {
                let key_prefix = store.id()?;
                let (c, tenure, block) =
                    crate::cluster::Coordinator::start(store.location(), cluster, limits, tx.clone())?;
                let mut counters = engine.counters();
                counters.next_turn = block;
                for (_, sent) in &mut counters.sent {
                    *sent = block;
                }
                engine.restore_counters(&counters);
                coordinator = Some((c, tenure));
                id_block = Some(block);
                (Some(Persister::start(store)?), Restart::default(), key_prefix)
            }
            (Some(mut store), None) => {
                let key_prefix = store.id()?;
                let restored = store.load(limits)?;
                let last_runs = crate::schedules::last_runs(&store.platform_state()?);
                let restart = Restart::rebuild(&mut engine, restored, wall_clock());
                engine.start_schedules(wall_clock(), &last_runs);
                (Some(Persister::start(store)?), restart, key_prefix)
            }
            // No store: keys only need to be unique to this process.
            (None, _) => {
                engine.start_schedules(wall_clock(), &[]);
                (
                    None,
                    Restart::default(),
                    format!("{:x}", wall_clock().as_millis()),
                )
            }
        };
        let fences = coordinator.as_ref().map(|_| crate::driver::Fences::default());
        let handle = RuntimeHandle {
            tx: tx.clone(),
            saver: persist.as_ref().map(Persister::saver),
            fences: fences.clone(),
            connections: Connections::default(),
            id_block,
            started: wall_clock(),
        };
        let health = persist.as_ref().map(Persister::health);
        let driver = Driver::new(
            engine,
            crate::driver::Parts {
                agents: config.agents,
                hooks: Arc::new(config.hooks),
                delivery: config.delivery,
                grace: config.shutdown_grace,
                platforms,
                trace,
                tx,
                persist,
                max_turns: config.max_concurrent_turns.max(1),
                key_prefix: Arc::from(key_prefix),
                owned: coordinator.as_ref().map(|(c, tenure)| {
                    let fences = fences.clone().unwrap_or_default();
                    crate::driver::Owned::new(tenure.clone(), c.giving_back(), fences)
                }),
            },
        );
        let task = tokio::spawn(driver.run(rx, restart));
        Ok(Runtime {
            handle,
            health,
            task,
            coordinator: coordinator.map(|(c, _)| c),
        })
    }

    /// Connects platform accounts: at once when this process is alone with
    /// its store; when it shares it, each while this process holds its
    /// lease (another process connects it when this one dies).
    pub fn hold(&self, connections: Vec<crate::cluster::Leased>) {
        match &self.coordinator {
            Some(c) => c.hold(connections),
            None => {
                // Alone: every account, from the state read at the start
                // (nobody else saved any since).
                let saved = crate::cluster::Saved::new();
                for c in connections {
                    let _ = (c.connect)(Some((crate::platform::Held::Every, &saved)));
                }
            }
        }
    }

    /// A handle for platform adapters.
    pub fn handle(&self) -> RuntimeHandle {
        self.handle.clone()
    }

    /// Every platform account's connection state: what `/healthz` and the
    /// metrics report besides the store.
    pub fn connections(&self) -> Connections {
        self.handle.connections.clone()
    }

    /// Whether the store is writing (`None` without a store): what
    /// `/healthz` reports.
    pub fn health(&self) -> Option<Arc<Health>> {
        self.health.clone()
    }

    /// Stops taking messages, lets turns in flight finish within the grace
    /// period (then cancels them), delivers what was decided, and returns.
    pub async fn shutdown(self) {
        let (done_tx, done_rx) = oneshot::channel();
        if self.handle.tx.send(Event::Shutdown(done_tx)).is_ok() {
            let _ = done_rx.await;
        }
        let _ = self.task.await;
        // Everything is saved: the others may take the rooms at once.
        if let Some(c) = self.coordinator {
            c.stop().await;
        }
    }
}
