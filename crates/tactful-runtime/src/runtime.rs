//! The live runtime: the sans-I/O engine driven by real time.
//!
//! One task owns the [`Engine`]: it takes inbound messages, agent results
//! and timer wake-ups in the order they arrive (so a room's messages are
//! decided in arrival order), and acts on every output. Deciding takes
//! microseconds and never waits on an agent: each turn runs in a task of
//! its own, so a slow agent in one room never delays another room. Timers
//! use the same engine calls as `tactful replay` ([`Engine::poll_timeout`],
//! [`Engine::handle_timeout`]), so the live service and a replay of the
//! same events decide the same things.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tactful_agents::{Agent, Deltas};
use tactful_core::{
    AgentResult, Counters, Engine, EngineConfig, EngineError, Message, MsgId, Output, PersonaId, RoomId,
    Timestamp, TurnId, TurnKind,
};
use tactful_store::{LoadLimits, Op, PendingTurn, Store, StoreError};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::delivery::{DeliveryConfig, DeliveryEvent, RoomDelivery};
use crate::persist::{Batch, Persister};
use crate::platform::Platform;

/// Wall-clock time as the engine counts it: milliseconds since the Unix
/// epoch. The only clock read in tactful's decision path.
pub fn wall_clock() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis().min(u64::MAX as u128) as u64);
    Timestamp::from_millis(ms)
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
    /// An agent call reported token usage.
    Usage {
        /// The persona.
        persona: tactful_core::PersonaId,
        /// The `[agents]` key.
        agent: Arc<str>,
        /// The counts.
        usage: tactful_agents::Usage,
    },
    /// State was restored from the store at start.
    Restored {
        /// Transcript messages the engine heard again.
        messages: usize,
        /// Reply turns that were running and were asked again.
        resumed: usize,
        /// Replies decided but unconfirmed, sent again.
        unsent: usize,
    },
    /// The work in progress changed: turns running, ambient batches waiting
    /// to flush and delivery jobs queued. Zero means every room is quiet
    /// until the next message (operators watch it as `tactful_busy`; tests
    /// wait for it instead of sleeping).
    Busy {
        /// How many pieces of work are in progress.
        work: usize,
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

enum Event {
    Inbound(Message),
    Backlog(Message),
    State(String, String),
    AgentDone(TurnId, AgentResult),
    /// A room worker finished a job other than a streaming edit; with the
    /// ids when it delivered a reply.
    Done(RoomId, Option<(MsgId, MsgId)>),
    Shutdown(oneshot::Sender<()>),
}

/// Sends inbound messages to a running runtime. Cheap to clone: each
/// platform adapter holds one.
#[derive(Clone)]
pub struct RuntimeHandle {
    tx: mpsc::UnboundedSender<Event>,
}

impl RuntimeHandle {
    /// Hands a normalised inbound message to the engine. Returns `false`
    /// once the runtime has stopped.
    pub fn inbound(&self, msg: Message) -> bool {
        self.tx.send(Event::Inbound(msg)).is_ok()
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
        self.tx.send(Event::State(key, value)).is_ok()
    }
}

/// A running runtime.
pub struct Runtime {
    handle: RuntimeHandle,
    task: JoinHandle<()>,
}

impl Runtime {
    /// Starts the engine task, delivering to `platforms` (a room goes to the
    /// first that [`Platform::owns`] it). With a store, the engine is first rebuilt
    /// from it: reply turns that were running are asked again and replies
    /// decided but not confirmed are sent again. `trace` receives every
    /// engine output and delivery confirmation, for logs, metrics and tests.
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
        let names = engine
            .personas()
            .iter()
            .map(|p| (p.id.clone(), p.name.clone()))
            .collect();
        let (tx, rx) = mpsc::unbounded_channel();
        let mut restart = Restart::default();
        let persist = match config.store {
            Some(store) => {
                let restored = store.load(limits)?;
                let now = wall_clock();
                let messages = restored.rebuild(&mut engine, now);
                for t in &restored.pending {
                    restart.ended.push(t.turn);
                    // Ambient batches are back in their buffers; a gate that
                    // never answered fails open, as it would on a timeout.
                    let is_reply = t.kind == TurnKind::Reply || t.kind == TurnKind::Gate;
                    if is_reply
                        && engine
                            .resume_turn(now, &t.room, &t.persona, &t.msgs, t.addressed)
                            .is_some()
                    {
                        restart.resumed += 1;
                    }
                }
                restart.unsent = restored.unsent;
                restart.messages = messages;
                if messages > 0 || restart.resumed > 0 || !restart.unsent.is_empty() {
                    tracing::info!(
                        messages,
                        resumed = restart.resumed,
                        unsent = restart.unsent.len(),
                        "restored from the store"
                    );
                }
                Some(Persister::start(store)?)
            }
            None => None,
        };
        let driver = Driver {
            counters: engine.counters(),
            engine,
            agents: config.agents,
            delivery: config.delivery,
            grace: config.shutdown_grace,
            platforms,
            trace,
            tx: tx.clone(),
            rooms: HashMap::new(),
            turns: HashMap::new(),
            persist,
            batch: Batch::default(),
            names,
            deliveries: 0,
            busy: 0,
        };
        let task = tokio::spawn(driver.run(rx, restart));
        Ok(Runtime {
            handle: RuntimeHandle { tx },
            task,
        })
    }

    /// A handle for platform adapters.
    pub fn handle(&self) -> RuntimeHandle {
        self.handle.clone()
    }

    /// Stops taking messages, lets turns in flight finish within the grace
    /// period (then cancels them), delivers what was decided, and returns.
    pub async fn shutdown(self) {
        let (done_tx, done_rx) = oneshot::channel();
        if self.handle.tx.send(Event::Shutdown(done_tx)).is_ok() {
            let _ = done_rx.await;
        }
        let _ = self.task.await;
    }
}

/// What a restart left to do once the engine task runs.
#[derive(Default)]
struct Restart {
    messages: usize,
    resumed: usize,
    /// Old turn ids that were pending: resumed under new ids or dropped.
    ended: Vec<TurnId>,
    unsent: Vec<tactful_core::Outgoing>,
}

/// A delivery job: the event, and for a reply the store's word that it is
/// saved (sent only after that).
type Job = (DeliveryEvent, Option<oneshot::Receiver<()>>);

/// The task that owns the engine.
struct Driver {
    engine: Engine,
    agents: HashMap<String, Arc<dyn Agent>>,
    delivery: DeliveryConfig,
    grace: Duration,
    /// Where replies go: a room belongs to the first platform that owns it.
    platforms: Vec<Arc<dyn Platform>>,
    trace: Option<mpsc::UnboundedSender<TraceEvent>>,
    tx: mpsc::UnboundedSender<Event>,
    rooms: HashMap<RoomId, (mpsc::UnboundedSender<Job>, JoinHandle<()>)>,
    turns: HashMap<TurnId, JoinHandle<()>>,
    /// The store's writer, when there is a store.
    persist: Option<Persister>,
    /// What this event changed, saved when it is fully handled.
    batch: Batch,
    /// Counters as last saved.
    counters: Counters,
    /// Persona display names, for saving replies as the room heard them.
    names: HashMap<PersonaId, Arc<str>>,
    /// Delivery jobs queued and not yet done.
    deliveries: usize,
    /// The work in progress last traced.
    busy: usize,
}

/// Streams an agent's text to the room's delivery worker as it arrives.
struct StreamTo {
    turn: TurnId,
    text: String,
    room: Option<mpsc::UnboundedSender<Job>>,
}

impl Deltas for StreamTo {
    fn delta(&mut self, piece: &str) {
        self.text.push_str(piece);
        if let Some(room) = &self.room {
            let _ = room.send((
                DeliveryEvent::Partial {
                    turn: self.turn,
                    text: self.text.clone(),
                    now: wall_clock(),
                },
                None,
            ));
        }
    }
}

impl Driver {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Event>, restart: Restart) {
        let mut closing: Option<(oneshot::Sender<()>, tokio::time::Instant)> = None;
        if self.persist.is_some() {
            if let Some(trace) = &self.trace {
                let _ = trace.send(TraceEvent::Restored {
                    messages: restart.messages,
                    resumed: restart.resumed,
                    unsent: restart.unsent.len(),
                });
            }
            self.batch
                .ops
                .extend(restart.ended.into_iter().map(Op::TurnEnded));
            for out in restart.unsent {
                let room = out.room.clone();
                self.deliver(&room, DeliveryEvent::Send(Box::new(out)), None);
            }
            // Resumed turns are waiting in the engine's outputs.
            self.drain();
        }
        loop {
            let wake = self.engine.poll_timeout().map(|t| {
                let wait = t.saturating_since(wall_clock());
                tokio::time::Instant::now() + wait
            });
            let deadline = closing.as_ref().map(|(_, d)| *d);
            tokio::select! {
                event = rx.recv() => match event {
                    Some(Event::Inbound(msg)) => {
                        if closing.is_none() {
                            if let Some(trace) = &self.trace {
                                let _ = trace.send(TraceEvent::Inbound { room: msg.room.clone() });
                            }
                            if self.persist.is_some() {
                                self.batch.ops.push(Op::Heard(msg.clone()));
                            }
                            self.engine.handle_message(wall_clock(), msg);
                        }
                    }
                    Some(Event::Backlog(msg)) => {
                        if closing.is_none() {
                            if let Some(trace) = &self.trace {
                                let _ = trace.send(TraceEvent::Backlog { room: msg.room.clone(), msg: msg.id.clone() });
                            }
                            if self.persist.is_some() {
                                self.batch.ops.push(Op::Heard(msg.clone()));
                            }
                            self.engine.restore_message(msg);
                        }
                    }
                    Some(Event::State(key, value)) => {
                        // While closing, messages are no longer taken: a
                        // state covering them must not be saved either.
                        if closing.is_none() && self.persist.is_some() {
                            self.batch.ops.push(Op::PlatformState { key, value });
                        }
                    }
                    Some(Event::AgentDone(turn, result)) => {
                        self.turns.remove(&turn);
                        self.engine.handle_agent_result(wall_clock(), turn, result);
                    }
                    Some(Event::Done(room, sent)) => {
                        self.deliveries = self.deliveries.saturating_sub(1);
                        if let Some((local, platform)) = sent {
                            self.engine.handle_sent(&room, &local, platform.clone());
                            if self.persist.is_some() {
                                self.batch.ops.push(Op::Delivered {
                                    room: room.clone(),
                                    local: local.clone(),
                                    platform: platform.clone(),
                                });
                            }
                            if let Some(trace) = &self.trace {
                                let _ = trace.send(TraceEvent::Delivered { room, local, platform });
                            }
                        }
                    }
                    Some(Event::Shutdown(done)) => {
                        tracing::info!(turns = self.turns.len(), "shutting down");
                        closing = Some((done, tokio::time::Instant::now() + self.grace));
                    }
                    None => break,
                },
                () = sleep_until(wake) => self.engine.handle_timeout(wall_clock()),
                () = sleep_until(deadline) => {
                    tracing::warn!(turns = self.turns.len(), "shutdown grace over: cancelling turns in flight");
                    for (_, task) in self.turns.drain() {
                        task.abort();
                    }
                }
            }
            self.drain();
            let busy = self.engine.pending_work() + self.deliveries;
            if busy != self.busy {
                self.busy = busy;
                if let Some(trace) = &self.trace {
                    let _ = trace.send(TraceEvent::Busy { work: busy });
                }
            }
            if closing.is_some() && self.turns.is_empty() {
                break;
            }
        }
        // Let every room deliver what was decided, then stop.
        for (_, (tx, worker)) in self.rooms.drain() {
            drop(tx);
            let _ = worker.await;
        }
        // Deliveries confirmed during the wait above are saved too.
        while let Ok(event) = rx.try_recv() {
            if let Event::Done(room, Some((local, platform))) = event {
                self.batch.ops.push(Op::Delivered {
                    room,
                    local,
                    platform,
                });
            }
        }
        self.save();
        if let Some(p) = self.persist.take() {
            p.finish();
        }
        if let Some((done, _)) = closing {
            let _ = done.send(());
        }
    }

    /// Acts on every pending engine output, then saves what changed.
    fn drain(&mut self) {
        while let Some(output) = self.engine.poll_output() {
            self.act(output);
        }
        self.save();
    }

    /// Queues this event's changes for the store: the ops gathered while
    /// acting, the rooms whose snapshot changed, and the counters.
    fn save(&mut self) {
        let Some(persist) = &self.persist else {
            return;
        };
        let mut batch = std::mem::take(&mut self.batch);
        for room in self.engine.take_changed_rooms() {
            if let Some(snapshot) = self.engine.snapshot_room(&room) {
                batch.ops.push(Op::Snapshot(room, snapshot));
            }
        }
        let counters = self.engine.counters();
        if counters != self.counters {
            batch.ops.push(Op::Counters(counters.clone()));
            self.counters = counters;
        }
        persist.save(batch);
    }

    /// Queues a job for `room`'s delivery worker, counted as work in
    /// progress until the worker reports it done. Returns the worker's
    /// queue (streaming edits go there directly, uncounted).
    fn deliver(
        &mut self,
        room: &RoomId,
        event: DeliveryEvent,
        saved: Option<oneshot::Receiver<()>>,
    ) -> mpsc::UnboundedSender<Job> {
        let tx = self.room(room);
        if tx.send((event, saved)).is_ok() {
            self.deliveries += 1;
        }
        tx
    }

    fn room(&mut self, room: &RoomId) -> mpsc::UnboundedSender<Job> {
        if let Some((tx, _)) = self.rooms.get(room) {
            return tx.clone();
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
        let platform = self
            .platforms
            .iter()
            .find(|p| p.owns(room))
            .unwrap_or(&self.platforms[self.platforms.len() - 1])
            .clone();
        let mut delivery = RoomDelivery::new(room.clone(), platform, self.delivery.clone());
        let engine = self.tx.clone();
        let room_id = room.clone();
        let worker = tokio::spawn(async move {
            while let Some((event, saved)) = rx.recv().await {
                if let Some(saved) = saved {
                    // Not sent before it is saved: see `persist`.
                    let _ = saved.await;
                }
                let counted = !matches!(event, DeliveryEvent::Partial { .. });
                let sent = delivery.handle(event).await;
                if counted || sent.is_some() {
                    let _ = engine.send(Event::Done(room_id.clone(), sent));
                }
            }
        });
        self.rooms.insert(room.clone(), (tx.clone(), worker));
        tx
    }

    fn act(&mut self, output: Output) {
        if let Some(trace) = &self.trace {
            let _ = trace.send(TraceEvent::Engine(output.clone()));
        }
        let saving = self.persist.is_some();
        match output {
            Output::Decision(d) => {
                tracing::debug!(
                    persona = %d.persona, room = %d.room, msg = %d.msg,
                    outcome = d.outcome.as_str(), reason = d.reason.as_str(), "decision"
                );
                if saving {
                    self.batch.ops.push(Op::Decision(d));
                }
            }
            Output::CallAgent(req) => {
                // Reply turns (and the gate deciding one) are resumed after
                // a restart; ambient batches are back in their buffers.
                let resumable = req.kind == TurnKind::Reply
                    || (req.kind == TurnKind::Gate && req.flush_trigger.is_none());
                if saving && resumable {
                    self.batch.ops.push(Op::TurnStarted(PendingTurn {
                        turn: req.turn,
                        kind: req.kind,
                        room: req.room.clone(),
                        persona: req.persona.clone(),
                        msgs: req.triggers.iter().map(|e| e.id.clone()).collect(),
                        addressed: req.addressed,
                    }));
                }
                self.start_turn(*req);
            }
            Output::Send(out) => {
                let saved = saving.then(|| {
                    let name = self
                        .names
                        .get(&out.persona)
                        .cloned()
                        .unwrap_or_else(|| Arc::from(out.persona.as_str()));
                    self.batch.ops.push(Op::Reply {
                        heard: out.as_heard(name),
                        out: out.clone(),
                    });
                    self.batch.ops.push(Op::TurnEnded(out.turn));
                    let (ack, saved) = oneshot::channel();
                    self.batch.acks.push(ack);
                    saved
                });
                let room = out.room.clone();
                self.deliver(&room, DeliveryEvent::Send(out), saved);
            }
            Output::Silent(end, _) | Output::Withheld(end, _) | Output::Error(end, _) => {
                if saving {
                    self.batch.ops.push(Op::TurnEnded(end.turn));
                }
                self.deliver(&end.room, DeliveryEvent::Quiet { turn: end.turn }, None);
            }
            Output::Cancelled(end, reason) => {
                if let Some(task) = self.turns.remove(&end.turn) {
                    task.abort();
                }
                if saving {
                    self.batch.ops.push(Op::TurnEnded(end.turn));
                }
                tracing::debug!(turn = %end.turn, reason = reason.as_str(), "turn cancelled");
                self.deliver(&end.room, DeliveryEvent::Quiet { turn: end.turn }, None);
            }
            Output::Ambient(_) | Output::Dropped { .. } => {}
        }
    }

    fn start_turn(&mut self, req: tactful_core::TurnRequest) {
        let turn = req.turn;
        let Some(agent) = self.agents.get(req.agent.as_ref()).cloned() else {
            let result = AgentResult::Failed(format!("no agent named {:?}", req.agent));
            let _ = self.tx.send(Event::AgentDone(turn, result));
            return;
        };
        // Only replies stream into a placeholder: ambient batches are
        // usually silent and gate answers are never shown.
        let room = (req.kind == TurnKind::Reply).then(|| {
            let start = DeliveryEvent::Start {
                turn,
                persona: req.persona.clone(),
                thread: req.thread.clone(),
                silence_token: req.silence_token.clone(),
            };
            self.deliver(&req.room, start, None)
        });
        let done = self.tx.clone();
        let trace = self.trace.clone();
        let task = tokio::spawn(async move {
            let mut sink = StreamTo {
                turn,
                text: String::new(),
                room,
            };
            let result = match agent.run(&req, &mut sink).await {
                Ok(reply) => {
                    if let (Some(usage), Some(trace)) = (reply.usage, &trace) {
                        let _ = trace.send(TraceEvent::Usage {
                            persona: req.persona.clone(),
                            agent: req.agent.clone(),
                            usage,
                        });
                    }
                    AgentResult::Output(reply.text)
                }
                Err(e) => {
                    // The trace and the log get the reason, secrets masked:
                    // an operator must be able to see why a turn failed.
                    let reason = tactful_core::secrets::redact(&e.to_string()).into_owned();
                    tracing::warn!(
                        persona = %req.persona, room = %req.room, turn = %turn, agent = %req.agent,
                        "agent turn failed: {reason}"
                    );
                    AgentResult::Failed(reason)
                }
            };
            let _ = done.send(Event::AgentDone(turn, result));
        });
        self.turns.insert(turn, task);
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
