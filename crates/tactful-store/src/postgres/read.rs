//! The console's queries against PostgreSQL, on a connection of their own.

use std::sync::Mutex;
use tactful_core::{Message, RoomId};

use tokio_postgres::Client;

use super::{Params, connect, rows};
use crate::StoreError;
use crate::backend::ReadBackend;
use crate::calls::{CallRow, CostRow};
use crate::records::{DecisionRow, PartitionOwner, RoomSummary};
use crate::row::{self, CALL_COLUMNS, MESSAGE_COLUMNS, Row, SHOWN_COLUMNS};

/// The console's connection, made again when it is lost.
pub(crate) struct Reader {
    url: String,
    client: Mutex<Client>,
}

impl Reader {
    /// Connects to `url` (its schema is the service's business: a reader
    /// never migrates).
    pub(crate) fn open(url: &str) -> Result<Reader, StoreError> {
        Ok(Reader {
            client: Mutex::new(connect(url)?),
            url: url.to_owned(),
        })
    }

    /// Runs `sql` and reads every row with `f`, on a connection made again
    /// first if the last one was lost.
    fn rows<T>(
        &self,
        sql: &str,
        params: Params<'_>,
        f: impl FnMut(&tokio_postgres::Row) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let mut client = self
            .client
            .lock()
            .map_err(|_| StoreError::Io(std::io::Error::other("the store reader is unusable")))?;
        if client.is_closed() {
            *client = connect(&self.url)?;
        }
        rows(&client, sql, params, f)
        // (A session the server ended before the client noticed fails this
        // read; the console's next read connects afresh.)
    }
}

impl ReadBackend for Reader {
    fn rooms(&self) -> Result<Vec<RoomSummary>, StoreError> {
        self.rows(
            "SELECT m.room, count(*), max(m.time),
                    (SELECT count(*) FROM decisions d WHERE d.room = m.room)
             FROM messages m GROUP BY m.room ORDER BY max(m.time) DESC LIMIT 10000",
            &[],
            row::room_summary,
        )
    }

    fn has_room(&self, room: &str) -> Result<bool, StoreError> {
        Ok(!self
            .rows("SELECT 1 FROM messages WHERE room = $1 LIMIT 1", &[&room], |_| {
                Ok(())
            })?
            .is_empty())
    }

    fn decisions(&self, room: &str, before: i64, limit: usize) -> Result<Vec<DecisionRow>, StoreError> {
        self.rows(
            "SELECT d.seq, d.at, d.msg, m.sender_name, m.text, d.persona, d.outcome, d.reason, d.turn
             FROM decisions d LEFT JOIN messages m ON m.room = d.room AND m.id = d.msg
             WHERE d.room = $1 AND d.seq < $2 ORDER BY d.seq DESC LIMIT $3",
            &[&room, &before, &(limit as i64)],
            row::decision,
        )
    }

    fn state_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<(String, String)>, StoreError> {
        self.rows(
            "SELECT key, value FROM platform_state WHERE starts_with(key, $1) ORDER BY key DESC LIMIT $2",
            &[&prefix, &(limit as i64)],
            |r| Ok((r.text(0)?, r.text(1)?)),
        )
    }

    fn recent_messages(&self, room: &str, n: usize) -> Result<Vec<Message>, StoreError> {
        let id = RoomId::new(room);
        let mut skipped = Vec::new();
        let read = self.rows(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM (
                     SELECT * FROM messages WHERE room = $1 ORDER BY seq DESC LIMIT $2) AS r ORDER BY seq"
            ),
            &[&room, &(n as i64)],
            |r| Ok(row::message(&id, r, 0, &mut skipped).ok()),
        )?;
        Ok(read.into_iter().flatten().collect())
    }

    fn calls(&self, room: &str, before: i64, limit: usize) -> Result<Vec<CallRow>, StoreError> {
        self.rows(
            &format!(
                "SELECT {CALL_COLUMNS} FROM calls WHERE room = $1 AND turn < $2 ORDER BY turn DESC LIMIT $3"
            ),
            &[&room, &before, &(limit as i64)],
            row::call,
        )
    }

    fn costs(&self, since: i64, limit: usize) -> Result<Vec<CostRow>, StoreError> {
        self.rows(
            "SELECT to_char(to_timestamp(started / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
                    room, persona, agent, kind, count(*), count(*) FILTER (WHERE outcome = 'error'),
                    coalesce(sum(prompt_tokens), 0)::float8, coalesce(sum(completion_tokens), 0)::float8,
                    coalesce(sum(cached_tokens), 0)::float8, avg(ended - started)::float8
             FROM calls WHERE started >= $1
             GROUP BY day, room, persona, agent, kind
             ORDER BY day DESC, room, persona, agent, kind LIMIT $2",
            &[&since, &(limit as i64)],
            row::cost,
        )
    }

    fn people_messages(&self, since: i64) -> Result<Vec<(String, u64)>, StoreError> {
        self.rows(
            "SELECT room, count(*) FROM messages WHERE persona IS NULL AND time >= $1
             GROUP BY room ORDER BY room LIMIT 10000",
            &[&since],
            |r| Ok((r.text(0)?, r.count(1)?)),
        )
    }

    fn shown_message(&self, room: &str, id: &str) -> Result<Option<crate::ShownMessage>, StoreError> {
        Ok(self
            .rows(
                &format!("SELECT {SHOWN_COLUMNS} FROM shown WHERE room = $1 AND id = $2"),
                &[&room, &id],
                row::shown,
            )?
            .pop())
    }

    fn owners(&self) -> Result<Vec<PartitionOwner>, StoreError> {
        // A lease run out is nobody's: its rooms move at the next round.
        let held = self.rows(
            "SELECT l.key, coalesce(nullif(m.about, ''), l.holder),
                    (extract(epoch FROM l.held_since) * 1000)::BIGINT
             FROM leases l LEFT JOIN members m ON m.id = l.holder
             WHERE starts_with(l.key, 'partition:') AND l.holder IS NOT NULL AND l.expires_at > now()
             ORDER BY l.key",
            &[],
            |r| Ok((r.text(0)?, r.text(1)?, r.opt_count(2)?)),
        )?;
        Ok(held
            .into_iter()
            .filter_map(|(key, process, since)| {
                let partition = key.strip_prefix("partition:")?.parse::<u32>().ok()?;
                Some(PartitionOwner {
                    partition,
                    process,
                    since,
                })
            })
            .collect())
    }
}
