//! The task that owns the engine: events in, effects out.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tactful_agents::Agent;
use tactful_agents::hooks::Hooks;
use tactful_core::hooks::HookAction;
use tactful_core::{
    CancelReason, Counters, Engine, EngineError, Message, Outcome, Output, PersonaId, PersonasChanged,
    Reason, RoomId, TurnId, TurnKind, TurnRequest,
};
use tactful_store::{Op, PendingTurn};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::calls::CallLog;
use crate::clock::wall_clock;
use crate::delivery::{DeliveryConfig, DeliveryEvent, RoomDelivery};
use crate::events::{Event, Personas, TraceEvent};
use crate::persist::{Ack, Batch, Health, NotSaved, Persister};
use crate::platform::Platform;
use crate::restart::Restart;

mod owned;
mod turns;
pub(crate) use owned::Owned;

/// A delivery job: the event, and for a reply the store's word that it is
/// saved (sent only after that).
type Job = (DeliveryEvent, Option<oneshot::Receiver<Result<(), NotSaved>>>);

/// What the driver is built from, besides the engine.
pub(crate) struct Parts {
    pub agents: HashMap<String, Arc<dyn Agent>>,
    pub hooks: Arc<Hooks>,
    pub delivery: DeliveryConfig,
    pub grace: Duration,
    pub platforms: Vec<Arc<dyn Platform>>,
    pub trace: Option<mpsc::UnboundedSender<TraceEvent>>,
    pub tx: mpsc::UnboundedSender<Event>,
    pub persist: Option<Persister>,
    pub max_turns: usize,
    pub key_prefix: Arc<str>,
    /// Sharing the store with other processes: the rooms held here.
    pub owned: Option<Owned>,
}

/// The task that owns the engine.
pub(crate) struct Driver {
    engine: Engine,
    p: Parts,
    health: Option<Arc<Health>>,
    rooms: HashMap<RoomId, (mpsc::UnboundedSender<Job>, JoinHandle<()>)>,
    /// Agent turns running, at most `max_turns`.
    running: HashMap<TurnId, JoinHandle<()>>,
    /// Turns waiting for a slot, oldest first.
    queued: VecDeque<TurnRequest>,
    /// What this event changed, saved when it is fully handled.
    batch: Batch,
    /// Who waits for this event's changes about a room (a reply to send).
    room_acks: Vec<(RoomId, Ack)>,
    /// Sharing the store with other processes: the rooms held here.
    owned: Option<Owned>,
    /// Counters as last saved.
    counters: Counters,
    /// Persona display names, for saving replies as the room heard them.
    names: HashMap<PersonaId, Arc<str>>,
    /// Delivery jobs queued and not yet done, by room.
    deliveries: HashMap<RoomId, usize>,
    /// The work in progress last traced.
    busy: usize,
    /// Turns (running, queued) last traced.
    turns_traced: (usize, usize),
    /// The spend budgets last traced.
    budgets_traced: Vec<tactful_core::BudgetLeft>,
    /// Set once a message was refused: a platform's sync state saved after
    /// that would cover a message the store never took.
    state_frozen: bool,
    /// Whether the current run of refusals was logged.
    refusal_logged: bool,
    /// The agent calls running, for the call log and the trace.
    calls: CallLog,
}

impl Driver {
    pub fn new(engine: Engine, mut p: Parts) -> Driver {
        let owned = p.owned.take();
        let names = engine
            .personas()
            .iter()
            .map(|s| (s.id.clone(), s.name.clone()))
            .collect();
        Driver {
            counters: engine.counters(),
            health: p.persist.as_ref().map(Persister::health),
            engine,
            p,
            rooms: HashMap::new(),
            running: HashMap::new(),
            queued: VecDeque::new(),
            batch: Batch::default(),
            room_acks: Vec::new(),
            owned: None,
            names,
            deliveries: HashMap::new(),
            busy: 0,
            turns_traced: (0, 0),
            budgets_traced: Vec::new(),
            state_frozen: false,
            refusal_logged: false,
            calls: CallLog::default(),
        }
        .owning(owned)
    }

    fn owning(mut self, owned: Option<Owned>) -> Driver {
        if owned.is_some() {
            // The other processes add what this one's rooms spend to
            // their personas' budgets (`Op::Spent`).
            self.engine.share_spend();
        }
        self.owned = owned;
        self
    }

    /// A reload's personas and agents: the engine first (it may refuse),
    /// then the agents later turns are run with.
    fn set_personas(&mut self, new: Personas) -> Result<PersonasChanged, EngineError> {
        let changed = self
            .engine
            .set_personas(wall_clock(), new.personas, new.reasoning_kept)?;
        self.p.agents = new.agents;
        for spec in self.engine.personas() {
            self.names.insert(spec.id.clone(), spec.name.clone());
        }
        tracing::info!(
            added = ?changed.added,
            changed = ?changed.changed,
            removed = ?changed.removed,
            "personas replaced: turns in flight keep their agent; removed personas' turns are cancelled"
        );
        Ok(changed)
    }

    fn trace(&self, event: TraceEvent) {
        if let Some(t) = &self.p.trace {
            let _ = t.send(event);
        }
    }

    fn saving(&self) -> bool {
        self.p.persist.is_some()
    }

    fn store_down(&self) -> Option<String> {
        let h = self.health.as_ref()?;
        (!h.is_ok()).then(|| h.error().unwrap_or_else(|| "unknown error".to_owned()))
    }

    pub async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Event>, restart: Restart) {
        let mut closing: Option<(oneshot::Sender<()>, tokio::time::Instant)> = None;
        self.begin(restart);
        loop {
            let wake = self.engine.poll_timeout().map(|t| {
                let wait = t.saturating_since(wall_clock());
                tokio::time::Instant::now() + wait
            });
            let deadline = closing.as_ref().map(|(_, d)| *d);
            tokio::select! {
                event = rx.recv() => match event {
                    Some(Event::Shutdown(done)) => {
                        tracing::info!(turns = self.running.len(), queued = self.queued.len(), "shutting down");
                        closing = Some((done, tokio::time::Instant::now() + self.p.grace));
                    }
                    Some(event) => self.on_event(event, closing.is_some()),
                    None => break,
                },
                () = sleep_until(wake) => self.engine.handle_timeout(wall_clock()),
                () = sleep_until(deadline) => {
                    tracing::warn!(turns = self.running.len(), "shutdown grace over: cancelling turns in flight");
                    for (_, task) in self.running.drain() {
                        task.abort();
                    }
                }
            }
            self.drain();
            if closing.is_none() {
                self.fill();
            }
            self.save();
            self.report();
            if closing.is_some() && self.running.is_empty() {
                break;
            }
        }
        // Let every room deliver what was decided, then stop.
        for (_, (tx, worker)) in self.rooms.drain() {
            drop(tx);
            let _ = worker.await;
        }
        // What the workers reported meanwhile is saved too.
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
        if let Some(p) = self.p.persist.take() {
            p.finish();
        }
        // Everything is delivered and saved: the platforms may say goodbye.
        if closing.is_some() {
            for platform in &self.p.platforms {
                platform.close().await;
            }
        }
        if let Some((done, _)) = closing {
            let _ = done.send(());
        }
    }

    /// Acts on what the restart left: turns asked again (their calls are in
    /// the engine's outputs), replies sent again, placeholders removed.
    fn begin(&mut self, restart: Restart) {
        if !restart.from_store {
            return;
        }
        self.trace(TraceEvent::Restored {
            messages: restart.messages,
            resumed: restart.resumed,
            unsent: restart.unsent.len(),
            stale_placeholders: restart.stale.len(),
        });
        for (t, reason) in restart.not_resumed {
            self.trace(TraceEvent::NotResumed {
                room: t.room,
                persona: t.persona,
                msgs: t.msgs,
                reason,
            });
        }
        self.batch
            .ops
            .extend(restart.ended.into_iter().map(Op::TurnEnded));
        // Alone with the store, calls left running are this process's; when
        // sharing it, they may be another's, still running.
        if self.saving() && self.owned.is_none() {
            self.batch.ops.push(Op::CallsInterrupted);
        }
        for (out, resume) in restart.unsent {
            let room = out.room.clone();
            self.deliver(&room, DeliveryEvent::Send(Box::new(out), Some(resume)), None);
        }
        for p in restart.stale {
            let room = p.room.clone();
            self.deliver(&room, DeliveryEvent::Discard(p), None);
        }
        self.drain();
        self.fill();
        self.save();
        self.report();
    }

    /// Hands a new message to the engine, and then says it was heard:
    /// the work it makes (a turn, an ambient batch) is reported first, so
    /// whoever reads `messages_in` and `busy` together never sees the
    /// message counted while the room still looks idle.
    fn hear(&mut self, msg: tactful_core::Message) {
        let heard = TraceEvent::Inbound {
            msg: Box::new(msg.clone()),
        };
        self.engine.handle_message(wall_clock(), msg);
        self.report();
        self.trace(heard);
    }

    fn on_event(&mut self, event: Event, closing: bool) {
        let sharing = self.owned.is_some();
        match event {
            Event::Inbound(msg) if sharing => {
                if !closing && !self.refused(&msg) {
                    self.put_in_inbox(msg, false);
                }
            }
            Event::Backlog(msg) if sharing => {
                if !closing && !self.refused(&msg) {
                    self.put_in_inbox(msg, true);
                }
            }
            Event::Adopt(adoption) => {
                if !closing {
                    self.adopt(*adoption);
                }
            }
            Event::Release(parts, done) => self.release(parts, done),
            Event::Released(parts, done) => self.released(parts, done),
            Event::FromInbox(waiting) => self.hear_waiting(waiting, closing),
            Event::SpentElsewhere(spend) => self.engine.spent_elsewhere(&spend),
            Event::Inbound(msg) => {
                if !closing && self.take(&msg) {
                    self.hear(msg);
                }
            }
            Event::InboundSaved(msg, also, ack) => {
                if closing {
                    let _ = ack.send(Err(NotSaved::Stopping));
                } else if let Some(error) = self.store_down() {
                    // Its sender is told and hands it in again: no state
                    // need wait for it.
                    self.refuse(&msg, false);
                    let _ = ack.send(Err(NotSaved::StoreDown(error)));
                } else if sharing {
                    self.refusal_logged = false;
                    self.batch.ops.extend(also);
                    self.put_in_inbox(msg, false);
                    self.batch.acks.push(ack);
                } else if self.take(&msg) {
                    if self.saving() {
                        self.batch.ops.extend(also);
                        self.batch.acks.push(ack);
                    } else {
                        let _ = ack.send(Ok(()));
                    }
                    self.hear(msg);
                }
            }
            Event::Backlog(msg) => {
                if !closing && self.take(&msg) {
                    self.trace(TraceEvent::Backlog {
                        room: msg.room.clone(),
                        msg: msg.id.clone(),
                    });
                    self.engine.restore_message(msg);
                }
            }
            Event::State(key, value, ack) => {
                // While closing, messages are no longer taken: a state
                // covering them must not be saved either; nor after a
                // message was refused. A platform that waits for the save
                // (`save_state_saved`) hands its messages in with
                // `inbound_saved` and confirms nothing refused: its state
                // covers only what was stored, whatever others' refusals.
                let frozen = self.state_frozen && ack.is_none();
                let down = ack.is_some() && self.store_down().is_some();
                if !closing && self.saving() && !frozen && !down {
                    self.batch.ops.push(Op::PlatformState { key, value });
                    self.batch.acks.extend(ack);
                } else if let Some(ack) = ack {
                    let outcome = if !self.saving() {
                        // Nothing is kept: nothing to wait for.
                        Ok(())
                    } else if closing {
                        Err(NotSaved::Stopping)
                    } else {
                        Err(NotSaved::StoreDown(
                            "messages were refused since the last save".into(),
                        ))
                    };
                    let _ = ack.send(outcome);
                }
            }
            Event::Note(op) => {
                if self.saving() {
                    self.batch.ops.push(op);
                }
            }
            Event::AgentDone(turn, result, usage) => {
                self.running.remove(&turn);
                let now = wall_clock();
                let gate = self.calls.kind(turn) == Some(TurnKind::Gate);
                let (op, answered) = self.calls.answered(turn, now, &result, usage);
                if self.saving() {
                    self.batch.ops.push(op);
                    // A gate's answer ends it, whatever it said: the engine
                    // decides at once (a SKIP, or a reply turn of its own),
                    // so nothing of it is left to ask again after a restart.
                    if gate {
                        self.batch.ops.push(Op::TurnEnded(turn));
                    }
                }
                if let Some(event) = answered {
                    self.trace(event);
                }
                if let Some(u) = usage {
                    self.engine
                        .handle_usage(turn, u.prompt_tokens.saturating_add(u.completion_tokens));
                }
                self.engine.handle_agent_result(now, turn, result);
            }
            Event::Policies(policies) => {
                self.engine.set_policies(*policies);
                tracing::info!("room policies replaced: each room uses the new ones from its next message");
            }
            Event::Personas(new, answer) => {
                let _ = answer.send(self.set_personas(*new));
            }
            Event::HooksDone(turn, outcomes) => {
                self.running.remove(&turn);
                self.engine.handle_hook_result(wall_clock(), turn, outcomes);
            }
            Event::Shown(room, local, platform) => self.engine.handle_sent(&room, &local, platform),
            Event::Done(room, sent) => {
                if let Some(n) = self.deliveries.get_mut(&room) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        self.deliveries.remove(&room);
                    }
                }
                if let Some((local, platform)) = sent {
                    self.engine.handle_sent(&room, &local, platform.clone());
                    if self.saving() {
                        self.batch.ops.push(Op::Delivered {
                            room: room.clone(),
                            local: local.clone(),
                            platform: platform.clone(),
                        });
                    }
                    self.trace(TraceEvent::Delivered {
                        room,
                        local,
                        platform,
                    });
                }
            }
            Event::Shutdown(_) => {}
        }
    }

    /// Whether an inbound message is refused because the store cannot
    /// write (said and traced).
    fn refused(&mut self, msg: &Message) -> bool {
        if self.store_down().is_some() {
            self.refuse(msg, true);
            return true;
        }
        self.refusal_logged = false;
        false
    }

    /// Whether an inbound message is taken: not while the store cannot
    /// write. A taken one is queued for saving.
    fn take(&mut self, msg: &Message) -> bool {
        if self.refused(msg) {
            return false;
        }
        if !self.engine.knows_room(&msg.room) {
            // Once per room (restored rooms are known): how people find the
            // id a `[rooms."…"]` table or a schedule needs.
            tracing::info!(
                room = %msg.room,
                "a new room: {} (first heard from {}, {})",
                msg.room,
                msg.sender.name,
                msg.sender.id
            );
        }
        if self.saving() {
            self.batch.ops.push(Op::Heard(msg.clone()));
        }
        true
    }

    /// Says and traces that `msg` was refused; with `freeze`, no platform
    /// state is saved from now on (it could cover this message, which its
    /// platform would then not deliver again).
    fn refuse(&mut self, msg: &Message, freeze: bool) {
        self.state_frozen |= freeze;
        if !self.refusal_logged {
            self.refusal_logged = true;
            tracing::warn!(
                room = %msg.room,
                "refusing messages while the store cannot write (see /healthz); platforms that sync will deliver them again after a restart"
            );
        }
        self.trace(TraceEvent::Refused {
            room: msg.room.clone(),
        });
    }

    /// Acts on every engine output; what they change is saved by the
    /// caller, after [`Driver::fill`], in one batch with the calls started.
    fn drain(&mut self) {
        while let Some(output) = self.engine.poll_output() {
            if let Some(op) = self.calls.ended(&output)
                && self.saving()
            {
                self.batch.ops.push(op);
            }
            self.act(output);
        }
    }

    /// Traces the work in progress when it changed.
    fn report(&mut self) {
        let turns = (self.running.len(), self.queued.len());
        if turns != self.turns_traced {
            self.turns_traced = turns;
            self.trace(TraceEvent::Turns {
                running: turns.0,
                queued: turns.1,
            });
        }
        if self.engine.personas().iter().any(|p| p.budget.is_some()) {
            let left = self.engine.budgets_left(wall_clock());
            if left != self.budgets_traced {
                self.budgets_traced = left.clone();
                self.trace(TraceEvent::Budgets { left });
            }
        }
        let busy = self.engine.pending_work() + self.deliveries.values().sum::<usize>();
        if busy != self.busy {
            self.busy = busy;
            self.trace(TraceEvent::Busy { work: busy });
        }
    }

    /// Queues this event's changes for the store: the ops gathered while
    /// acting, the rooms whose snapshot changed, and the counters.
    fn save(&mut self) {
        // Taken whatever happens to them: never left to pile up.
        let spent = self.engine.take_spent();
        let Some(persist) = &self.p.persist else {
            return;
        };
        let mut batch = std::mem::take(&mut self.batch);
        batch.ops.extend(spent.into_iter().map(Op::Spent));
        crate::calls::coalesce(&mut batch.ops);
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
        let room_acks = std::mem::take(&mut self.room_acks);
        for batch in self.fenced(batch, room_acks) {
            persist.save(batch);
        }
    }

    /// Queues a job for `room`'s delivery worker, counted as work in
    /// progress until the worker reports it done. Returns the worker's
    /// queue (streaming edits go there directly, uncounted).
    fn deliver(
        &mut self,
        room: &RoomId,
        event: DeliveryEvent,
        saved: Option<oneshot::Receiver<Result<(), NotSaved>>>,
    ) -> mpsc::UnboundedSender<Job> {
        let tx = self.room(room);
        if tx.send((event, saved)).is_ok() {
            *self.deliveries.entry(room.clone()).or_default() += 1;
        }
        tx
    }

    /// The platform that serves `room`: the first that owns it, else the
    /// last one (the web room, which takes any room).
    fn platform_of(&self, room: &RoomId) -> &Arc<dyn Platform> {
        let platforms = &self.p.platforms;
        platforms
            .iter()
            .find(|p| p.owns(room))
            .unwrap_or(&platforms[platforms.len() - 1])
    }

    fn room(&mut self, room: &RoomId) -> mpsc::UnboundedSender<Job> {
        if let Some((tx, _)) = self.rooms.get(room) {
            return tx.clone();
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
        let platform = self.platform_of(room).clone();
        let engine = self.p.tx.clone();
        // Sharing the store: the room's writes carry its partition's lease,
        // and nothing is posted unless the lease is surely held.
        let lease = self.owned.as_ref().and_then(|o| o.lease_of(room));
        let mut tenure = self
            .owned
            .as_ref()
            .map_or_else(crate::cluster::Tenure::always, |o| o.tenure.clone());
        let mut delivery = RoomDelivery::new(
            room.clone(),
            platform,
            self.p.delivery.clone(),
            self.p.key_prefix.clone(),
            self.p.persist.as_ref().map(|p| p.saver().fenced(lease)),
        )
        .telling_shown({
            let engine = engine.clone();
            let room = room.clone();
            Box::new(
                move |local: &tactful_core::MsgId, platform: &tactful_core::MsgId| {
                    let _ = engine.send(Event::Shown(room.clone(), local.clone(), platform.clone()));
                },
            )
        });
        let room_id = room.clone();
        let worker = tokio::spawn(async move {
            while let Some((event, saved)) = rx.recv().await {
                if let Some(saved) = saved {
                    // What waited for the commit: a reply, or a reply
                    // turn's placeholder (on record with its decision).
                    let what = match event {
                        DeliveryEvent::Start { .. } => "a placeholder",
                        _ => "a reply",
                    };
                    match saved.await {
                        // Decided after the room became another process's:
                        // its new owner answers.
                        Ok(Err(NotSaved::Fenced(e))) => {
                            tracing::info!(room = %room_id, "{what} is not sent: {e}");
                            let _ = engine.send(Event::Done(room_id.clone(), None));
                            continue;
                        }
                        // Not sent before it is saved (see `persist`); a
                        // change the store refused for good is sent all the
                        // same.
                        Ok(Err(e)) => {
                            tracing::warn!(room = %room_id, "{what} is sent without being saved: {e}")
                        }
                        _ => {}
                    }
                }
                if !tenure.held().await {
                    break;
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
        self.trace(TraceEvent::Engine(output.clone()));
        let saving = self.saving();
        match output {
            Output::Decision(d) => {
                // A message that would have been answered but was held back
                // by a guard (rate limit, allowlist, bot turns) is worth an
                // operator's attention; everything else is routine.
                let guarded = d.outcome == Outcome::Skip
                    && matches!(
                        d.reason,
                        Reason::RateLimited | Reason::NotAllowed | Reason::BotTurnLimit
                    );
                if guarded {
                    tracing::warn!(
                        persona = %d.persona, room = %d.room, msg = %d.msg,
                        "an addressed message is not answered: {}", d.reason.as_str()
                    );
                } else {
                    tracing::debug!(
                        persona = %d.persona, room = %d.room, msg = %d.msg,
                        outcome = d.outcome.as_str(), reason = d.reason.as_str(), "decision"
                    );
                }
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
                self.queued.push_back(*req);
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
                    self.room_acks.push((out.room.clone(), ack));
                    saved
                });
                let room = out.room.clone();
                self.deliver(&room, DeliveryEvent::Send(out, None), saved);
            }
            Output::Silent(end, _) | Output::Withheld(end, _) | Output::Error(end, _) => {
                if saving {
                    self.batch.ops.push(Op::TurnEnded(end.turn));
                }
                self.deliver(&end.room, DeliveryEvent::Quiet { turn: end.turn }, None);
            }
            Output::Cancelled(end, reason) => {
                if let Some(task) = self.running.remove(&end.turn) {
                    task.abort();
                }
                self.queued.retain(|r| r.turn != end.turn);
                if saving {
                    self.batch.ops.push(Op::TurnEnded(end.turn));
                }
                if reason == CancelReason::PersonaRemoved {
                    tracing::info!(turn = %end.turn, persona = %end.persona, room = %end.room, "turn cancelled: a reload removed its persona");
                } else {
                    tracing::debug!(turn = %end.turn, reason = reason.as_str(), "turn cancelled");
                }
                self.deliver(&end.room, DeliveryEvent::Quiet { turn: end.turn }, None);
            }
            Output::RunHooks(req) => {
                // The hooks run as part of the turn: in its slot, waited for
                // at shutdown, stopped with it when it is cancelled.
                let hooks = self.p.hooks.clone();
                let tx = self.p.tx.clone();
                let turn = req.turn;
                let task = tokio::spawn(async move {
                    let outcomes = hooks.run(&req).await;
                    let _ = tx.send(Event::HooksDone(turn, outcomes));
                });
                self.running.insert(turn, task);
            }
            // Traced above; the decision before it was logged.
            Output::Limited(_) | Output::Floor(_) => {}
            // A persona falling silent for want of budget is the operator's
            // business: said at INFO, with what it stood at.
            Output::OverBudget(note) => tracing::info!(
                persona = %note.persona, room = %note.room, msg = %note.msg,
                elsewhere = note.elsewhere,
                "out of budget: {} of {} tokens per {} s used ({} of them in rooms other processes hold), a call of about {} does not fit",
                note.used, note.tokens, note.per.as_secs(), note.elsewhere, note.estimate
            ),
            Output::React(note) => {
                let caps = self.platform_of(&note.room).capabilities();
                if caps.reactions {
                    let room = note.room.clone();
                    self.deliver(&room, DeliveryEvent::React(Box::new(note)), None);
                } else if !caps.silence_notices {
                    tracing::info!(persona = %note.persona, room = %note.room, msg = %note.msg,
                        "addressed silence: no reaction here and no notice either (every post reaches many inboxes)");
                } else {
                    // No reactions here (IRC): the notice instead, which
                    // the engine emits as a reply the drain acts on next.
                    self.engine.react_unsupported(wall_clock(), &note);
                }
            }
            Output::Schedule(note) => {
                crate::schedules::log(&note);
                if saving {
                    self.batch.ops.push(crate::schedules::last_run_op(&note));
                }
            }
            Output::Hook(note) => {
                let step = &note.step;
                if step.action == HookAction::Send && step.reason.is_none() {
                    tracing::debug!(hook = %step.hook, persona = %note.persona, room = %note.room, turn = %note.turn, "hook passed the reply");
                } else {
                    tracing::info!(
                        hook = %step.hook, persona = %note.persona, room = %note.room, turn = %note.turn,
                        action = step.action.as_str(),
                        "before-send hook: {}", step.reason.as_deref().unwrap_or(step.action.as_str())
                    );
                }
            }
            Output::Ambient(_) | Output::Dropped { .. } => {}
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
