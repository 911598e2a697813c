//! The engine task's side of sharing a database with other processes:
//! which rooms are this process's, adopting and letting go of them, and
//! fencing every write about them.
//!
//! A room is owned by whichever process holds its partition's lease
//! ([`tactful_store::partition_of`]); the coordinator ([`crate::cluster`])
//! takes and renews leases and tells the engine task what changed. Here:
//! - **Adopt**: the partition's rooms are read back from the store into
//!   the running engine, as after a restart (turns that were running asked
//!   again, replies not confirmed sent again, schedules started).
//! - **Release**: the rooms are handed over ([`Engine::hand_over_room`]),
//!   their agent calls stopped; a partition let go by choice first lets its
//!   rooms deliver what they decided, and is released only once that is
//!   saved, so nothing is decided or sent twice. A lease found lost (this
//!   process was stopped or cut off past its expiry) is dropped at once: its
//!   rooms are already another's.
//! - **Inbox**: messages any process received reach the engine from the
//!   store, only for rooms held here; each is marked decided in the batch
//!   that writes its decisions.
//! - **Fence**: each event's changes are split by partition, each part
//!   carrying its lease ([`Op::Fence`]); changes about a room not held are
//!   dropped. What a process no longer owns it cannot write, even before
//!   it learns that it lost it.
//!
//! [`Engine::hand_over_room`]: tactful_core::Engine::hand_over_room

use std::collections::BTreeMap;

use tactful_core::RoomId;
use tactful_store::{Lease, Op, Waiting, partition_of};
use tokio::sync::oneshot;

use super::Driver;
use crate::clock::wall_clock;
use crate::cluster::{GiveBack, Tenure};
use crate::events::Adoption;
use crate::handle::Fences;
use crate::persist::{Ack, Batch, NotSaved};
use crate::restart::Restart;

/// What this process holds.
pub(crate) struct Owned {
    /// Partitions held, with the lease their writes carry.
    held: Fences,
    /// Until when the leases are surely held, as the delivery workers see it.
    pub tenure: Tenure,
    /// Inbox messages not taken go back to the coordinator.
    give_back: GiveBack,
}

impl Owned {
    pub fn new(tenure: Tenure, give_back: GiveBack, held: Fences) -> Owned {
        Owned {
            held,
            tenure,
            give_back,
        }
    }

    fn hold(&mut self, part: u32, lease: Lease) {
        if let Ok(mut held) = self.held.lock() {
            held.insert(part, lease);
        }
    }

    fn let_go(&mut self, part: &u32) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(part);
        }
    }

    fn held_count(&self) -> usize {
        self.held.lock().map_or(0, |h| h.len())
    }

    /// The lease `room`'s writes carry, if it is this process's.
    pub fn lease_of(&self, room: &RoomId) -> Option<Lease> {
        self.held.lock().ok()?.get(&partition_of(room)).cloned()
    }
}

/// The room a change is about, when it is the room owner's to write: what
/// a process that received a message writes for the owner (the inbox put,
/// the web room's record of what it showed) is nobody's in particular.
fn owner_room(op: &Op) -> Option<&RoomId> {
    match op {
        Op::Heard(m) => Some(&m.room),
        Op::Reply { out, .. } => Some(&out.room),
        Op::PartDelivered { room, .. }
        | Op::Delivered { room, .. }
        | Op::Placeholder { room, .. }
        | Op::Snapshot(room, _)
        | Op::Decided { room, .. } => Some(room),
        Op::Decision(d) => Some(&d.room),
        Op::TurnStarted(t) => Some(&t.room),
        Op::CallStarted(c) => Some(&c.room),
        Op::Spent(s) => Some(&s.room),
        _ => None,
    }
}

impl Driver {
    /// Takes the rooms of newly held partitions into the running engine.
    pub(super) fn adopt(&mut self, adoption: Adoption) {
        let Some(owned) = &mut self.owned else {
            return;
        };
        let now = wall_clock();
        let parts: Vec<u32> = adoption.leases.iter().map(|(p, _)| *p).collect();
        for (part, lease) in adoption.leases {
            owned.hold(part, lease);
        }
        // The rooms' spend comes with their snapshots: what the store says
        // the others spent leaves it out from this event on.
        if let Some(spend) = &adoption.spent_elsewhere {
            self.engine.spent_elsewhere(spend);
        }
        let mut restored = adoption.restored;
        // Each process numbers from its own block: never another's counters.
        restored.counters = None;
        let rooms = restored.rooms.len();
        let restart = Restart::rebuild(&mut self.engine, restored, now);
        let mine = |room: &RoomId| parts.contains(&partition_of(room));
        self.engine.start_schedules_for(now, &adoption.last_runs, &mine);
        tracing::info!(partitions = ?parts, rooms, "rooms adopted");
        self.begin(restart);
        self.trace_held();
    }

    /// Hands over the rooms of `parts`. With `done` (a partition let go by
    /// choice), their deliveries finish first and `done` is told once all
    /// of it is saved; without (a lease lost), everything of them stops now.
    pub(super) fn release(&mut self, parts: Vec<u32>, done: Option<oneshot::Sender<()>>) {
        let Some(owned) = &mut self.owned else {
            return;
        };
        let now = wall_clock();
        let mine = |room: &RoomId| parts.contains(&partition_of(room));
        let mut rooms: Vec<RoomId> = self.engine.rooms().filter(|r| mine(r)).cloned().collect();
        rooms.extend(
            self.rooms
                .keys()
                .filter(|r| mine(r) && !self.engine.has_room(r))
                .cloned(),
        );
        if done.is_none() {
            for p in &parts {
                owned.let_go(p);
            }
        }
        let mut workers = Vec::new();
        for room in &rooms {
            for turn in self.engine.hand_over_room(now, room) {
                if let Some(task) = self.running.remove(&turn) {
                    task.abort();
                }
                self.queued.retain(|r| r.turn != turn);
            }
            if let Some((tx, worker)) = self.rooms.remove(room) {
                drop(tx);
                if done.is_some() {
                    workers.push(worker);
                } else {
                    worker.abort();
                    self.deliveries.remove(room);
                }
            }
        }
        tracing::info!(partitions = ?parts, rooms = rooms.len(), lost = done.is_none(), "rooms handed over");
        self.trace_held();
        if let Some(done) = done {
            // The workers' last reports (`Done`) are queued before they end:
            // `Released` comes after them, so what they delivered is saved
            // under the lease still held.
            let tx = self.p.tx.clone();
            tokio::spawn(async move {
                for w in workers {
                    let _ = w.await;
                }
                let _ = tx.send(crate::events::Event::Released(parts, done));
            });
        }
    }

    /// The rooms of `parts` delivered everything: the leases go once this
    /// event's batch is saved.
    pub(super) fn released(&mut self, parts: Vec<u32>, done: oneshot::Sender<()>) {
        if let Some(owned) = &mut self.owned {
            for p in &parts {
                owned.let_go(p);
            }
        }
        self.trace_held();
        let (ack, saved) = oneshot::channel();
        self.batch.acks.push(ack);
        tokio::spawn(async move {
            let _ = saved.await;
            let _ = done.send(());
        });
    }

    fn trace_held(&self) {
        if let Some(owned) = &self.owned {
            self.trace(crate::events::TraceEvent::Partitions {
                held: owned.held_count(),
            });
        }
    }

    /// Messages from the inbox: heard (or recorded as context) where the
    /// room is held here, and marked decided with what they made.
    pub(super) fn hear_waiting(&mut self, waiting: Vec<Waiting>, closing: bool) {
        if closing {
            return;
        }
        let mut untaken = Vec::new();
        for w in waiting {
            let held = self
                .owned
                .as_ref()
                .is_some_and(|o| o.lease_of(&w.msg.room).is_some());
            // Let go meanwhile: it waits for the new owner.
            if !held {
                continue;
            }
            // The store cannot write: it waits in the inbox, safe, and is
            // handed again (nothing is refused: no platform need send it
            // again, and no platform state waits for it).
            if self.store_down().is_some() {
                untaken.push(w.seq);
                continue;
            }
            let (room, id) = (w.msg.room.clone(), w.msg.id.clone());
            if w.context {
                if self.take(&w.msg) {
                    self.engine.restore_message(w.msg);
                } else {
                    continue;
                }
            } else if self.take(&w.msg) {
                self.hear(w.msg);
            } else {
                continue;
            }
            self.batch.ops.push(Op::Decided { room, id });
        }
        if let Some(owned) = &self.owned {
            owned.give_back.untaken(untaken);
        }
    }

    /// A message received here, for its room's owner (this process or
    /// another) to decide: put in the inbox.
    pub(super) fn put_in_inbox(&mut self, msg: tactful_core::Message, context: bool) {
        self.batch.ops.push(Op::Inbox { msg, context });
    }

    /// Splits this event's changes by partition, each part fenced by its
    /// lease; changes about rooms not held are dropped (their waiters told
    /// so). Parts keep the order of their changes; changes about no room in
    /// particular come last, after those they may follow.
    pub(super) fn fenced(&self, batch: Batch, room_acks: Vec<(RoomId, Ack)>) -> Vec<Batch> {
        let Some(owned) = &self.owned else {
            let mut batch = batch;
            batch.acks.extend(room_acks.into_iter().map(|(_, a)| a));
            return vec![batch];
        };
        let mut parts: BTreeMap<u32, Batch> = BTreeMap::new();
        let mut rest = Batch {
            ops: Vec::new(),
            acks: batch.acks,
        };
        let mut dropped = 0usize;
        for op in batch.ops {
            if matches!(op, Op::Counters(_)) {
                // Counters are per process (an id block each), not saved.
                continue;
            }
            match owner_room(&op) {
                None => rest.ops.push(op),
                Some(room) => match owned.lease_of(room) {
                    Some(lease) => parts
                        .entry(partition_of(room))
                        .or_insert_with(|| Batch {
                            ops: vec![Op::Fence(lease.clone())],
                            acks: Vec::new(),
                        })
                        .ops
                        .push(op),
                    None => dropped += 1,
                },
            }
        }
        for (room, ack) in room_acks {
            match parts.get_mut(&partition_of(&room)) {
                Some(part) => part.acks.push(ack),
                None => {
                    let _ = ack.send(Err(NotSaved::Fenced(format!(
                        "the room {room} is not this process's"
                    ))));
                }
            }
        }
        if dropped > 0 {
            tracing::debug!(
                dropped,
                "changes about rooms this process no longer owns are not saved"
            );
        }
        let mut out: Vec<Batch> = parts.into_values().collect();
        out.push(rest);
        out
    }
}
