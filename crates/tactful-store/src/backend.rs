//! The store as one trait, so SQLite (the embedded default) and PostgreSQL
//! (for several processes) are two answers to the same questions.
//!
//! A backend only runs queries: what a restart rebuilds from the rows
//! ([`crate::Restored`]), how a row becomes tactful's types
//! ([`crate::row`]) and what each change means ([`crate::Op`]) are written
//! once above it. `tests/conformance.rs` runs the same tests against both.

use std::collections::BTreeMap;

use tactful_core::{Message, MsgId, RoomId};

use crate::calls::{CallRow, CostRow};
use crate::records::{DecisionRow, PartitionOwner, PendingRow, RoomSummary, StoredMessage};
use crate::records::{Placeholder, Unsent};
use crate::{Op, ShownMessage, StoreError};

/// What the service's writer asks of its store.
pub(crate) trait Backend: Send {
    /// Saves `ops` in one transaction, in order: all of them or none.
    fn apply(&mut self, ops: &[Op]) -> Result<(), StoreError>;
    /// One saved platform state value.
    fn state(&mut self, key: &str) -> Result<Option<String>, StoreError>;
    /// Saves `value` under `key` unless a value is there already.
    fn state_insert_new(&mut self, key: &str, value: &str) -> Result<(), StoreError>;
    /// Every saved platform state value, by key.
    fn platform_state(&mut self) -> Result<BTreeMap<String, String>, StoreError>;
    /// The newest `limit` shown messages of every room, oldest first.
    fn shown(&mut self, limit: usize) -> Result<Vec<ShownMessage>, StoreError>;
    /// How many decisions the trace holds for `room`.
    fn decision_count(&mut self, room: &RoomId) -> Result<u64, StoreError>;

    /// The engine's id counters, as saved.
    fn counters_json(&mut self) -> Result<Option<String>, StoreError>;
    /// Every room with a message or a snapshot, in name order.
    fn room_names(&mut self) -> Result<Vec<String>, StoreError>;
    /// `room`'s newest `limit` messages, newest first.
    fn recent(
        &mut self,
        room: &RoomId,
        limit: usize,
        skipped: &mut Vec<String>,
    ) -> Result<Vec<StoredMessage>, StoreError>;
    /// The personas' own messages of `room` before `before` (a `seq`), the
    /// newest `per_persona` of each, oldest first: (persona, id, platform id).
    fn older_own(
        &mut self,
        room: &RoomId,
        before: i64,
        per_persona: usize,
    ) -> Result<Vec<(String, String, Option<String>)>, StoreError>;
    /// `room`'s engine snapshot, as saved.
    fn snapshot_json(&mut self, room: &RoomId) -> Result<Option<String>, StoreError>;
    /// Turns started and not ended, oldest first.
    fn pending_rows(&mut self) -> Result<Vec<PendingRow>, StoreError>;
    /// The stored message `id` of `room`, at any age.
    fn message(
        &mut self,
        room: &RoomId,
        id: &MsgId,
        skipped: &mut Vec<String>,
    ) -> Result<Option<Message>, StoreError>;
    /// Replies decided but not confirmed sent, oldest first.
    fn unsent(&mut self) -> Result<Vec<Unsent>, StoreError>;
    /// Streaming placeholders still on record.
    fn placeholders(&mut self) -> Result<Vec<Placeholder>, StoreError>;

    /// The writer thread takes over upkeep the backend would otherwise do
    /// inside a commit (SQLite's WAL checkpoints).
    fn writer_upkeep(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
    /// The writer has nothing queued: a moment for that upkeep.
    fn idle(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// What the console reads, on a connection of its own so it never waits on
/// the writer. Every query is bounded.
pub(crate) trait ReadBackend: Send {
    /// Every room with a stored message, the most recently active first.
    fn rooms(&self) -> Result<Vec<RoomSummary>, StoreError>;
    /// Whether the store has anything of `room`.
    fn has_room(&self, room: &str) -> Result<bool, StoreError>;
    /// `room`'s decisions, newest first, before `before` (a `seq`).
    fn decisions(&self, room: &str, before: i64, limit: usize) -> Result<Vec<DecisionRow>, StoreError>;
    /// Saved state whose keys start with `prefix`, the greatest keys first.
    fn state_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<(String, String)>, StoreError>;
    /// The last `n` messages of `room`, oldest first.
    fn recent_messages(&self, room: &str, n: usize) -> Result<Vec<Message>, StoreError>;
    /// `room`'s agent calls, newest first, with turns before `before`.
    fn calls(&self, room: &str, before: i64, limit: usize) -> Result<Vec<CallRow>, StoreError>;
    /// Calls since `since`, summed per UTC day, room, persona, agent, kind.
    fn costs(&self, since: i64, limit: usize) -> Result<Vec<CostRow>, StoreError>;
    /// People's messages per room since `since`.
    fn people_messages(&self, since: i64) -> Result<Vec<(String, u64)>, StoreError>;
    /// The shown message `id` of `room`, as the web room keeps it.
    fn shown_message(&self, room: &str, id: &str) -> Result<Option<ShownMessage>, StoreError>;
    /// Who holds each room partition's lease now; none where there are no
    /// leases (SQLite).
    fn owners(&self) -> Result<Vec<PartitionOwner>, StoreError> {
        Ok(Vec::new())
    }
}
