//! Changing room policies while the engine runs (a config reload today;
//! the console's live edits next).
//!
//! Every room re-resolves its personas' policies from the new table at
//! once; what is in flight keeps what it started with: a turn keeps the
//! policy it was decided under, an ambient batch already waiting is still
//! read, and a rate ledger keeps its history (a new limit counts the
//! replies already sent).

use std::sync::Arc;

use super::Engine;
use crate::ids::RoomId;
use crate::policy::PolicyTable;

impl Engine {
    /// Replaces the room policy layers.
    pub fn set_policies(&mut self, policies: PolicyTable) {
        let anywhere = RoomId::new("");
        self.shared_policies = self
            .personas
            .iter()
            .map(|p| Arc::new(policies.resolve(&anywhere, &p.id)))
            .collect();
        for (id, room) in self.rooms.iter_mut() {
            room.policies = if policies.has_room(id) {
                self.personas
                    .iter()
                    .map(|p| Arc::new(policies.resolve(id, &p.id)))
                    .collect()
            } else {
                self.shared_policies.clone()
            };
            self.dirty.insert(id.clone());
        }
        self.policies = policies;
        self.budgets = super::budget::in_use(&self.personas, &self.policies);
    }

    /// Whether the engine has heard of room `id` (a message in it, or a
    /// restore from the store).
    pub fn knows_room(&self, id: &RoomId) -> bool {
        self.rooms.contains_key(id)
    }

    /// The policy table in force.
    pub fn policies(&self) -> &PolicyTable {
        &self.policies
    }
}
