//! Reading the store while the service writes it, for the operator
//! console: the rooms and their decisions, with the text they were about.
//!
//! A [`Reader`] is a second connection to the same store (a read-only one
//! to a SQLite file, which WAL lets read while the writer commits), so the
//! console never waits on, nor slows, the live path's writer. Every query
//! is bounded.

use crate::backend::ReadBackend;
use crate::calls::{CallRow, CostRow, MAX_COST_ROWS};
use crate::records::{DecisionRow, PartitionOwner, RoomSummary};
use crate::{Location, StoreError};

/// The most decisions one page returns.
pub const MAX_PAGE: usize = 500;

/// A read-only view of a store.
pub struct Reader {
    inner: Box<dyn ReadBackend>,
    shown: String,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("store", &self.shown).finish()
    }
}

impl Reader {
    /// Opens a second connection to the store at `at` (a file must exist:
    /// the service created it). A private in-memory store has nothing to
    /// read from elsewhere.
    pub fn open(at: &Location) -> Result<Reader, StoreError> {
        let inner: Box<dyn ReadBackend> = match at {
            Location::Memory => return Err(StoreError::NotShared),
            Location::File(path) => Box::new(crate::sqlite::Reader::open(path)?),
            Location::Postgres(url) => Box::new(crate::postgres::Reader::open(url)?),
        };
        Ok(Reader {
            inner,
            shown: at.to_string(),
        })
    }

    /// Every room with a stored message, the most recently active first.
    pub fn rooms(&self) -> Result<Vec<RoomSummary>, StoreError> {
        self.inner.rooms()
    }

    /// Whether the store has anything of `room`.
    pub fn has_room(&self, room: &str) -> Result<bool, StoreError> {
        self.inner.has_room(room)
    }

    /// Who holds each room partition now, when several processes share
    /// the store; empty when none does (SQLite: one process owns every
    /// room, so there is nothing to say).
    pub fn owners(&self) -> Result<Vec<PartitionOwner>, StoreError> {
        self.inner.owners()
    }

    /// `room`'s decisions, newest first: at most `limit` (capped at
    /// [`MAX_PAGE`]) before `before` (a `seq`; the newest when `None`).
    pub fn decisions(
        &self,
        room: &str,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<DecisionRow>, StoreError> {
        self.inner
            .decisions(room, before.unwrap_or(i64::MAX), limit.min(MAX_PAGE))
    }

    /// Saved state whose keys start with `prefix`, the greatest keys first,
    /// at most `limit` (capped at [`MAX_PAGE`]).
    pub fn state_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<(String, String)>, StoreError> {
        self.inner.state_with_prefix(prefix, limit.min(MAX_PAGE))
    }

    /// The last `n` messages of `room` (at most [`MAX_PAGE`]), oldest
    /// first, as the engine heard them; unreadable rows are skipped.
    pub fn recent_messages(&self, room: &str, n: usize) -> Result<Vec<tactful_core::Message>, StoreError> {
        self.inner.recent_messages(room, n.min(MAX_PAGE))
    }

    /// `room`'s agent calls, newest first: at most `limit` (capped at
    /// [`MAX_PAGE`]) with turns before `before` (a `turn`; the newest when
    /// `None`). Turns are unique, so no page boundary falls between two
    /// calls started in the same millisecond.
    pub fn calls(&self, room: &str, before: Option<i64>, limit: usize) -> Result<Vec<CallRow>, StoreError> {
        self.inner
            .calls(room, before.unwrap_or(i64::MAX), limit.min(MAX_PAGE))
    }

    /// Calls since `since` (Unix milliseconds), summed per UTC day, room,
    /// persona, agent and kind; the newest day first ([`MAX_COST_ROWS`] at
    /// most: as many means the oldest were left out).
    pub fn costs(&self, since: i64) -> Result<Vec<CostRow>, StoreError> {
        self.inner.costs(since, MAX_COST_ROWS)
    }

    /// Messages heard in each room since `since` (not the personas' own):
    /// what "ambient calls per 100 messages" divides by.
    pub fn people_messages(&self, since: i64) -> Result<Vec<(String, u64)>, StoreError> {
        self.inner.people_messages(since)
    }

    /// The web room's message `id` of `room` as it is shown now (its
    /// latest text and reactions), or `None` once it is gone: what another
    /// process's announcement ([`crate::ShownChange`]) is about.
    pub fn shown_message(&self, room: &str, id: &str) -> Result<Option<crate::ShownMessage>, StoreError> {
        self.inner.shown_message(room, id)
    }
}
