//! Each [`Op`] as PostgreSQL statements, inside the batch's transaction.
//! Statements are prepared once per connection and kept.

use std::collections::HashMap;

use tactful_core::{Message, MsgId, PersonaId};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use crate::StoreError;
use crate::calls::to_i64;
use crate::fan_out::{STATE_CHANNEL, ShownChange, ShownKind, WEB_CHANNEL};
use crate::ops::{Op, kind_name, to_json};
use crate::postgres::cluster::SPEND_CHANNEL;
use crate::postgres::values::{MESSAGE_INSERT_COLUMNS, MESSAGE_VALUES, MessageRow, ToValue, Value};
use crate::shown::add_reaction;

/// The most a `spend` column holds (2^61): two of them add up inside a
/// BIGINT.
const SPEND_CAP: u64 = 1 << 61;

/// The SQLSTATE `tactful_fence` raises for a lease no longer held.
pub(crate) const FENCED: &str = "TF001";

/// A statement queued in a batch.
struct Step {
    sql: String,
    params: Vec<Value>,
    /// A fence's lease, to name it when the statement fails with [`FENCED`].
    fence: Option<(String, i64)>,
}

/// One batch's transaction and the connection's prepared statements.
///
/// Statements are queued and sent together: tokio-postgres pipelines the
/// queries of futures polled at once, sending them in the order they are
/// first polled (the order they were queued), and the server runs them in
/// that order. A batch of dozens of statements is then one round trip
/// instead of dozens (BENCHMARKS.md). A read whose answer decides what to
/// write (a reaction) waits for what was queued before it.
pub(crate) struct Writer<'a> {
    tx: &'a Client,
    prepared: &'a mut HashMap<String, Statement>,
    queued: Vec<Step>,
}

impl<'a> Writer<'a> {
    /// A batch on `client`: `BEGIN` is queued, to go with the first
    /// statements.
    pub(crate) fn new(client: &'a Client, prepared: &'a mut HashMap<String, Statement>) -> Self {
        let mut w = Writer {
            tx: client,
            prepared,
            queued: Vec::new(),
        };
        w.exec("BEGIN", Vec::new());
        w
    }

    /// Queues `COMMIT` and sends the rest of the batch with it: the whole
    /// batch in one round trip when nothing in it had to wait. A batch
    /// that failed part way is rolled back (a failed statement aborts the
    /// transaction, and the `COMMIT` after it becomes a rollback; an error
    /// before the `COMMIT` was sent is followed by a `ROLLBACK`).
    pub(crate) async fn commit(mut self, ops: &[Op]) -> Result<(), StoreError> {
        self.lock_leases_in_order(ops);
        let mut written = Ok(());
        for op in ops {
            written = self.apply_one(op).await;
            if written.is_err() {
                break;
            }
        }
        if written.is_ok() {
            self.exec("COMMIT", Vec::new());
            written = self.flush().await;
        }
        if written.is_err() && !self.tx.is_closed() {
            let _ = self.tx.batch_execute("ROLLBACK").await;
        }
        written
    }

    /// A batch fenced by several leases (merged batches of several
    /// partitions) locks their rows first, in key order, the order the
    /// renewal locks them in too (`Cluster::heartbeat`): taken in the
    /// batch's own order, a renewal that had locked one of them and waited
    /// for another would deadlock with it, and PostgreSQL would abort one
    /// of the two after a second (a renewal that keeps failing loses the
    /// leases). The fences then find their rows locked already.
    fn lock_leases_in_order(&mut self, ops: &[Op]) {
        let mut keys: Vec<&str> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Fence(lease) => Some(lease.key.as_str()),
                _ => None,
            })
            .collect();
        keys.sort_unstable();
        keys.dedup();
        if keys.len() > 1 {
            self.exec(
                "SELECT 1 FROM leases WHERE key = ANY(string_to_array($1, ',')) ORDER BY key FOR SHARE",
                vals![keys.join(",")],
            );
        }
    }

    async fn statement(&mut self, sql: &str) -> Result<Statement, StoreError> {
        if let Some(s) = self.prepared.get(sql) {
            return Ok(s.clone());
        }
        let s = self.tx.prepare(sql).await?;
        self.prepared.insert(sql.to_owned(), s.clone());
        Ok(s)
    }

    fn state(&mut self, key: &str, value: &str) {
        self.exec(
            "INSERT INTO platform_state (key, value) VALUES ($1, $2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            vals![key, value],
        );
    }

    /// Tells the other processes' web rooms of a change (see
    /// [`crate::fan_out`]), at commit.
    fn announce(&mut self, kind: ShownKind, room: &str, id: &str, note: Option<&str>) {
        if let Some(payload) = ShownChange::payload(kind, room, id, note) {
            self.exec(&format!("SELECT pg_notify('{WEB_CHANNEL}', $1)"), vals![payload]);
        }
    }

    fn exec(&mut self, sql: &str, params: Vec<Value>) {
        self.queued.push(Step {
            sql: sql.to_owned(),
            params,
            fence: None,
        });
    }

    /// Sends everything queued (preparing what this connection has not
    /// prepared yet, also in one round trip) and checks the fences.
    pub(crate) async fn flush(&mut self) -> Result<(), StoreError> {
        let steps = std::mem::take(&mut self.queued);
        if steps.is_empty() {
            return Ok(());
        }
        let mut missing: Vec<&str> = steps
            .iter()
            .map(|s| s.sql.as_str())
            .filter(|sql| !self.prepared.contains_key(*sql))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        let tx = self.tx;
        let made = futures_util::future::try_join_all(missing.iter().map(|sql| tx.prepare(sql))).await?;
        for (sql, statement) in missing.into_iter().zip(made) {
            self.prepared.insert(sql.to_owned(), statement);
        }
        let prepared = &*self.prepared;
        let results = futures_util::future::try_join_all(steps.iter().map(|step| async move {
            let params: Vec<&(dyn ToSql + Sync)> =
                step.params.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
            let statement = prepared
                .get(&step.sql)
                .ok_or_else(|| StoreError::Io(std::io::Error::other("a statement was not prepared")))?;
            tx.query(statement, &params).await.map_err(|e| match &step.fence {
                Some((key, epoch)) if e.code().is_some_and(|c| c.code() == FENCED) => StoreError::Fenced {
                    key: key.clone(),
                    epoch: *epoch,
                },
                _ => StoreError::Postgres(e),
            })
        }))
        .await?;
        drop(results);
        Ok(())
    }

    fn insert_message(&mut self, m: &Message, persona: Option<&PersonaId>) {
        let row = MessageRow::new(m, persona);
        self.exec(
            &format!("INSERT INTO messages ({MESSAGE_INSERT_COLUMNS}) VALUES ({MESSAGE_VALUES}) ON CONFLICT DO NOTHING"),
            row.values(),
        );
    }

    pub(crate) async fn apply_one(&mut self, op: &Op) -> Result<(), StoreError> {
        match op {
            Op::Heard(m) => self.insert_message(m, None),
            Op::Reply { out, heard } => {
                self.insert_message(heard, Some(&out.persona));
                self.exec(
                    "INSERT INTO outbox (room, local_id, turn, kind, persona, notice)
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                    vals![
                        out.room.as_str(),
                        out.id.as_str(),
                        (out.turn.0 as i64),
                        kind_name(out.kind),
                        out.persona.as_str(),
                        out.notice
                    ],
                );
            }
            Op::PartDelivered {
                room,
                local,
                part,
                platform,
            } => {
                self.exec("UPDATE outbox SET parts_done = greatest(parts_done, $3) WHERE room = $1 AND local_id = $2", vals![room.as_str(), local.as_str(), (*part as i64 + 1)]);
                if *part == 0 {
                    self.set_platform_id(room.as_str(), local.as_str(), platform.as_str());
                }
            }
            Op::Delivered {
                room,
                local,
                platform,
            } => {
                self.exec(
                    "UPDATE outbox SET delivered = true WHERE room = $1 AND local_id = $2",
                    vals![room.as_str(), local.as_str()],
                );
                self.set_platform_id(room.as_str(), local.as_str(), platform.as_str());
            }
            Op::Placeholder {
                turn,
                room,
                persona,
                thread,
                id,
            } => {
                self.exec(
                    "INSERT INTO placeholders (turn, room, persona, platform_id, thread) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (turn) DO UPDATE SET room = excluded.room, persona = excluded.persona,
                         platform_id = excluded.platform_id, thread = excluded.thread",
                    vals![
                        (turn.0 as i64),
                        room.as_str(),
                        persona.as_str(),
                        id.as_str(),
                        thread.as_ref().map(|t| t.as_str().to_owned())
                    ],
                );
            }
            Op::PlaceholderGone(turn) => {
                self.exec("DELETE FROM placeholders WHERE turn = $1", vals![(turn.0 as i64)]);
            }
            Op::Decision(d) => {
                self.exec(
                    "INSERT INTO decisions (at, room, msg, persona, outcome, reason, turn)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    vals![
                        (d.at.as_millis() as i64),
                        d.room.as_str(),
                        d.msg.as_str(),
                        d.persona.as_str(),
                        d.outcome.as_str(),
                        d.reason.as_str(),
                        d.turn.map(|t| t.0 as i64)
                    ],
                );
            }
            Op::Snapshot(room, snapshot) => {
                self.exec(
                    "INSERT INTO snapshots (room, json) VALUES ($1, $2)
                     ON CONFLICT (room) DO UPDATE SET json = excluded.json",
                    vals![room.as_str(), to_json(snapshot)],
                );
            }
            Op::Counters(c) => {
                self.exec(
                    "INSERT INTO counters (id, json) VALUES (0, $1)
                     ON CONFLICT (id) DO UPDATE SET json = excluded.json",
                    vals![to_json(c)],
                );
            }
            Op::TurnStarted(t) => {
                let msgs: Vec<&str> = t.msgs.iter().map(MsgId::as_str).collect();
                self.exec(
                    "INSERT INTO pending_turns (turn, kind, room, persona, msgs, addressed)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (turn) DO UPDATE SET kind = excluded.kind, room = excluded.room,
                         persona = excluded.persona, msgs = excluded.msgs, addressed = excluded.addressed",
                    vals![
                        (t.turn.0 as i64),
                        kind_name(t.kind),
                        t.room.as_str(),
                        t.persona.as_str(),
                        to_json(&msgs),
                        t.addressed
                    ],
                );
            }
            Op::TurnEnded(turn) => {
                self.exec(
                    "DELETE FROM pending_turns WHERE turn = $1",
                    vals![(turn.0 as i64)],
                );
            }
            Op::PlatformState { key, value } => self.state(key, value),
            Op::ForgetState { key } => {
                self.exec("DELETE FROM platform_state WHERE key = $1", vals![key]);
            }
            Op::SharedState { key, value } => {
                self.state(key, value);
                // Keys are short (a room's name); a payload is at most
                // 8,000 bytes, and whoever hears it reads every setting.
                let key: String = key.chars().take(1_000).collect();
                self.exec(&format!("SELECT pg_notify('{STATE_CHANNEL}', $1)"), vals![key]);
            }
            Op::Shown { msg: m, keep } => {
                self.exec(
                    "INSERT INTO shown (room, id, key, sender_id, sender_name, is_bot, text, reply_to, time)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
                    vals![
                        m.room.as_str(),
                        m.id.as_str(),
                        m.key,
                        m.sender.as_str(),
                        m.sender_name,
                        m.is_bot,
                        m.text,
                        m.reply_to.as_ref().map(MsgId::as_str),
                        (m.time.as_millis() as i64)
                    ],
                );
                self.exec(
                    "DELETE FROM shown WHERE room = $1 AND seq <= (
                         SELECT seq FROM shown WHERE room = $1 ORDER BY seq DESC LIMIT 1 OFFSET $2)",
                    vals![m.room.as_str(), (keep.max(&1).to_owned() as i64)],
                );
                self.announce(ShownKind::New, m.room.as_str(), m.id.as_str(), None);
            }
            Op::ShownEdit { room, id, text } => {
                self.exec(
                    "UPDATE shown SET text = $3 WHERE room = $1 AND id = $2",
                    vals![room.as_str(), id.as_str(), text],
                );
                self.announce(ShownKind::Edit, room.as_str(), id.as_str(), None);
            }
            Op::ShownDelete { room, id } => {
                self.exec(
                    "DELETE FROM shown WHERE room = $1 AND id = $2",
                    vals![room.as_str(), id.as_str()],
                );
                self.announce(ShownKind::Delete, room.as_str(), id.as_str(), None);
            }
            Op::ShownReact { room, id, emoji, by } => {
                // What to write depends on what is there: the writes before
                // it go first.
                self.flush().await?;
                let s = self
                    .statement("SELECT reactions FROM shown WHERE room = $1 AND id = $2 FOR UPDATE")
                    .await?;
                let Some(row) = self.tx.query_opt(&s, &[&room.as_str(), &id.as_str()]).await? else {
                    return Ok(());
                };
                let stored: Option<String> = row.try_get(0)?;
                if let Some(json) = add_reaction(stored.as_deref(), emoji, by) {
                    self.exec(
                        "UPDATE shown SET reactions = $3 WHERE room = $1 AND id = $2",
                        vals![room.as_str(), id.as_str(), json],
                    );
                    self.announce(ShownKind::React, room.as_str(), id.as_str(), None);
                }
            }
            Op::ShownNote { room, id, note } => {
                self.announce(ShownKind::Note, room.as_str(), id.as_str(), Some(note));
            }
            Op::CallStarted(c) => {
                self.exec(
                    "INSERT INTO calls (turn, kind, room, persona, agent, msg, started)
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
                    vals![
                        (c.turn.0 as i64),
                        kind_name(c.kind),
                        c.room.as_str(),
                        c.persona.as_str(),
                        c.agent,
                        c.msg,
                        (c.at.as_millis() as i64)
                    ],
                );
            }
            Op::CallEnded(e) => {
                self.exec(
                    "UPDATE calls SET
                         ended = coalesce(ended, $2),
                         outcome = CASE WHEN outcome IS NULL OR outcome = 'answered'
                                        THEN coalesce($3, outcome) ELSE outcome END,
                         error = coalesce(error, $4),
                         prompt_tokens = coalesce(prompt_tokens, $5),
                         completion_tokens = coalesce(completion_tokens, $6),
                         cached_tokens = coalesce(cached_tokens, $7)
                     WHERE turn = $1",
                    vals![
                        (e.turn.0 as i64),
                        e.at.map(|t| t.as_millis() as i64),
                        e.outcome,
                        e.error,
                        e.prompt_tokens.map(to_i64),
                        e.completion_tokens.map(to_i64),
                        e.cached_tokens.map(to_i64)
                    ],
                );
            }
            Op::Fence(lease) => {
                // `tactful_fence` (schema.rs) locks the lease row FOR SHARE:
                // a takeover (an UPDATE of it) waits until this batch is
                // committed or rolled back, so it is ordered entirely before
                // the new holder's first write. Where the lease is not
                // held it raises FENCED, which aborts the transaction.
                self.queued.push(Step {
                    sql: "SELECT tactful_fence($1, $2, $3)".to_owned(),
                    params: vals![lease.key, lease.holder, lease.epoch],
                    fence: Some((lease.key.clone(), lease.epoch)),
                });
            }
            Op::Inbox { msg, context } => {
                self.exec(
                    &super::cluster::INBOX_PUT,
                    super::cluster::inbox_values(msg, *context),
                );
            }
            Op::Spent(s) => {
                // Capped (a broken usage report can say u64::MAX), so that
                // no sum of two overflows a BIGINT and fails the batch.
                let cap = |n: u128| n.min(u128::from(SPEND_CAP)) as i64;
                let tokens = s.tokens.clamp(-(SPEND_CAP as i64), SPEND_CAP as i64);
                self.exec(
                    &format!(
                        "INSERT INTO spend (persona, part, bucket_end, per_ms, tokens) VALUES ($1, $2, $3, $4, $5)
                         ON CONFLICT (persona, part, bucket_end) DO UPDATE
                         SET tokens = LEAST(GREATEST(spend.tokens + EXCLUDED.tokens, -{SPEND_CAP}), {SPEND_CAP}),
                             per_ms = GREATEST(spend.per_ms, EXCLUDED.per_ms)"
                    ),
                    vals![
                        s.persona.as_str(),
                        i64::from(crate::partition_of(&s.room)),
                        cap(u128::from(s.bucket_end.as_millis())),
                        cap(s.per.as_millis()),
                        tokens
                    ],
                );
                // The others read it at once rather than at their next
                // round (sent at commit, once per partition and batch).
                self.exec(
                    &format!("SELECT pg_notify('{SPEND_CHANNEL}', $1)"),
                    vals![crate::partition_of(&s.room).to_string()],
                );
            }
            Op::Decided { room, id } => {
                self.exec(
                    "UPDATE inbox SET decided = true WHERE room = $1 AND id = $2",
                    vals![room.as_str(), id.as_str()],
                );
            }
            Op::CallsInterrupted => {
                self.exec(
                    "UPDATE calls SET outcome = 'interrupted' WHERE ended IS NULL AND outcome IS NULL",
                    vals![],
                );
            }
        }
        Ok(())
    }

    fn set_platform_id(&mut self, room: &str, local: &str, platform: &str) {
        self.exec(
            "UPDATE messages SET platform_id = $3 WHERE room = $1 AND id = $2",
            vals![room, local, platform],
        );
    }
}
