//! A room leaving this engine for another one: when several processes
//! share a database, a room belongs to whichever holds its partition, and
//! it moves when that process dies or the partitions are balanced again.
//!
//! The engine that lets a room go forgets it entirely: its transcript and
//! ledgers, its ambient timers and floor passes, its place in the flush
//! queue, and its turns in flight, which end without a word. No output
//! records their end: the store still holds them as running, and the new
//! owner, which reads the room back from the store, asks them again
//! (`resume_turn`), as after a restart. The new owner adopts the room with
//! the restore API (`restore_message`, `restore_room`, …) while it runs.

use super::{Engine, Timer};
use crate::{RoomId, Timestamp, TurnId};

impl Engine {
    /// Forgets `room` (see the module). Returns the turns that were running
    /// there, oldest first: the driver stops their agent calls, whose
    /// answers this engine would ignore anyway.
    pub fn hand_over_room(&mut self, now: Timestamp, room: &RoomId) -> Vec<TurnId> {
        // The room first, so ending its turns touches nothing of it.
        if let Some(gone) = self.rooms.remove(room) {
            self.hand_over_spend(&gone);
        }
        self.dirty.remove(room);
        self.flush_queue.retain(|(r, _)| r != room);
        self.ambient_pending.retain(|(r, _)| r != room);
        self.ambient_touched.retain(|(r, _)| r != room);
        let schedules = &self.schedules;
        self.timers.retain(|_, t| match t {
            Timer::Ambient(r, _) | Timer::FloorPass(r, _) => r != room,
            // The room's schedules run on its new owner.
            Timer::Schedule(i) => schedules.get(*i).is_none_or(|s| &s.room != room),
            Timer::Gate(_) => true,
        });
        let mut ending: Vec<TurnId> = self
            .turns
            .iter()
            .filter(|(_, t)| &t.room == room)
            .map(|(id, _)| *id)
            .collect();
        ending.sort();
        for &id in &ending {
            if let Some(turn) = self.turns.remove(&id) {
                if let Some(key) = turn.gate_timer {
                    self.timers.remove(&key);
                }
                // Budget holds settle and flush slots free up; nothing of
                // the room is left to release.
                self.finish(now, id, turn, false);
            }
        }
        // Finishing may have marked it again.
        self.dirty.remove(room);
        ending
    }

    /// The rooms this engine knows, in no particular order.
    pub fn rooms(&self) -> impl Iterator<Item = &RoomId> {
        self.rooms.keys()
    }

    /// Whether this engine knows `room` (it heard or restored a message
    /// there and has not handed it over).
    pub fn has_room(&self, room: &RoomId) -> bool {
        self.rooms.contains_key(room)
    }
}
