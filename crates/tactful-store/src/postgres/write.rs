//! Each [`Op`] as PostgreSQL statements, inside the batch's transaction.
//! Statements are prepared once per connection and kept.

use std::collections::HashMap;

use tactful_core::{Message, MsgId, PersonaId, ThreadId};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Statement, Transaction};

use super::Params;
use crate::StoreError;
use crate::calls::to_i64;
use crate::ops::{Op, kind_name, mentions_json, to_json};
use crate::shown::add_reaction;

/// The columns a message is written with (`messages`, `inbox`), in the
/// order of [`MessageRow::params`].
pub(crate) const MESSAGE_INSERT_COLUMNS: &str = "room, id, sender_id, sender_name, is_bot, persona, text, \
     reply_to, thread, mentions, is_dm, dm_to, time, sender_handle";

/// Their placeholders.
pub(crate) const MESSAGE_VALUES: &str = "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14";

/// A message as the values of [`MESSAGE_INSERT_COLUMNS`].
pub(crate) struct MessageRow<'a> {
    text: [&'a str; 5],
    opt: [Option<&'a str>; 5],
    flags: [bool; 2],
    mentions: Option<String>,
    time: i64,
}

impl<'a> MessageRow<'a> {
    pub(crate) fn new(m: &'a Message, persona: Option<&'a PersonaId>) -> Self {
        MessageRow {
            text: [
                m.room.as_str(),
                m.id.as_str(),
                m.sender.id.as_str(),
                &m.sender.name,
                &m.text,
            ],
            opt: [
                persona.map(PersonaId::as_str),
                m.reply_to.as_ref().map(MsgId::as_str),
                m.thread.as_ref().map(ThreadId::as_str),
                m.dm_to.as_ref().map(PersonaId::as_str),
                m.sender.handle.as_deref(),
            ],
            flags: [m.sender.is_bot, m.is_dm],
            mentions: mentions_json(m),
            time: m.time.as_millis() as i64,
        }
    }

    pub(crate) fn params(&self) -> [&(dyn ToSql + Sync); 14] {
        [
            &self.text[0],
            &self.text[1],
            &self.text[2],
            &self.text[3],
            &self.flags[0],
            &self.opt[0],
            &self.text[4],
            &self.opt[1],
            &self.opt[2],
            &self.mentions,
            &self.flags[1],
            &self.opt[3],
            &self.time,
            &self.opt[4],
        ]
    }
}

/// One batch's transaction and the connection's prepared statements.
pub(crate) struct Writer<'a, 't> {
    tx: &'a Transaction<'t>,
    prepared: &'a mut HashMap<String, Statement>,
}

impl<'a, 't> Writer<'a, 't> {
    pub(crate) fn new(tx: &'a Transaction<'t>, prepared: &'a mut HashMap<String, Statement>) -> Self {
        Writer { tx, prepared }
    }

    async fn statement(&mut self, sql: &str) -> Result<Statement, StoreError> {
        if let Some(s) = self.prepared.get(sql) {
            return Ok(s.clone());
        }
        let s = self.tx.prepare(sql).await?;
        self.prepared.insert(sql.to_owned(), s.clone());
        Ok(s)
    }

    async fn exec(&mut self, sql: &str, params: Params<'_>) -> Result<u64, StoreError> {
        let s = self.statement(sql).await?;
        Ok(self.tx.execute(&s, params).await?)
    }

    async fn insert_message(&mut self, m: &Message, persona: Option<&PersonaId>) -> Result<(), StoreError> {
        let row = MessageRow::new(m, persona);
        self.exec(
            &format!("INSERT INTO messages ({MESSAGE_INSERT_COLUMNS}) VALUES ({MESSAGE_VALUES}) ON CONFLICT DO NOTHING"),
            &row.params(),
        )
        .await?;
        Ok(())
    }

    pub(crate) async fn apply_one(&mut self, op: &Op) -> Result<(), StoreError> {
        match op {
            Op::Heard(m) => self.insert_message(m, None).await?,
            Op::Reply { out, heard } => {
                self.insert_message(heard, Some(&out.persona)).await?;
                self.exec(
                    "INSERT INTO outbox (room, local_id, turn, kind, persona, notice)
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                    &[
                        &out.room.as_str(),
                        &out.id.as_str(),
                        &(out.turn.0 as i64),
                        &kind_name(out.kind),
                        &out.persona.as_str(),
                        &out.notice,
                    ],
                )
                .await?;
            }
            Op::PartDelivered {
                room,
                local,
                part,
                platform,
            } => {
                self.exec(
                    "UPDATE outbox SET parts_done = greatest(parts_done, $3) WHERE room = $1 AND local_id = $2",
                    &[&room.as_str(), &local.as_str(), &(*part as i64 + 1)],
                )
                .await?;
                if *part == 0 {
                    self.set_platform_id(room.as_str(), local.as_str(), platform.as_str())
                        .await?;
                }
            }
            Op::Delivered {
                room,
                local,
                platform,
            } => {
                self.exec(
                    "UPDATE outbox SET delivered = true WHERE room = $1 AND local_id = $2",
                    &[&room.as_str(), &local.as_str()],
                )
                .await?;
                self.set_platform_id(room.as_str(), local.as_str(), platform.as_str())
                    .await?;
            }
            Op::Placeholder {
                turn,
                room,
                persona,
                id,
            } => {
                self.exec(
                    "INSERT INTO placeholders (turn, room, persona, platform_id) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (turn) DO UPDATE SET room = excluded.room, persona = excluded.persona,
                         platform_id = excluded.platform_id",
                    &[&(turn.0 as i64), &room.as_str(), &persona.as_str(), &id.as_str()],
                )
                .await?;
            }
            Op::PlaceholderGone(turn) => {
                self.exec("DELETE FROM placeholders WHERE turn = $1", &[&(turn.0 as i64)])
                    .await?;
            }
            Op::Decision(d) => {
                self.exec(
                    "INSERT INTO decisions (at, room, msg, persona, outcome, reason, turn)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    &[
                        &(d.at.as_millis() as i64),
                        &d.room.as_str(),
                        &d.msg.as_str(),
                        &d.persona.as_str(),
                        &d.outcome.as_str(),
                        &d.reason.as_str(),
                        &d.turn.map(|t| t.0 as i64),
                    ],
                )
                .await?;
            }
            Op::Snapshot(room, snapshot) => {
                self.exec(
                    "INSERT INTO snapshots (room, json) VALUES ($1, $2)
                     ON CONFLICT (room) DO UPDATE SET json = excluded.json",
                    &[&room.as_str(), &to_json(snapshot)],
                )
                .await?;
            }
            Op::Counters(c) => {
                self.exec(
                    "INSERT INTO counters (id, json) VALUES (0, $1)
                     ON CONFLICT (id) DO UPDATE SET json = excluded.json",
                    &[&to_json(c)],
                )
                .await?;
            }
            Op::TurnStarted(t) => {
                let msgs: Vec<&str> = t.msgs.iter().map(MsgId::as_str).collect();
                self.exec(
                    "INSERT INTO pending_turns (turn, kind, room, persona, msgs, addressed)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (turn) DO UPDATE SET kind = excluded.kind, room = excluded.room,
                         persona = excluded.persona, msgs = excluded.msgs, addressed = excluded.addressed",
                    &[
                        &(t.turn.0 as i64),
                        &kind_name(t.kind),
                        &t.room.as_str(),
                        &t.persona.as_str(),
                        &to_json(&msgs),
                        &t.addressed,
                    ],
                )
                .await?;
            }
            Op::TurnEnded(turn) => {
                self.exec("DELETE FROM pending_turns WHERE turn = $1", &[&(turn.0 as i64)])
                    .await?;
            }
            Op::PlatformState { key, value } => {
                self.exec(
                    "INSERT INTO platform_state (key, value) VALUES ($1, $2)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    &[key, value],
                )
                .await?;
            }
            Op::Shown { msg: m, keep } => {
                self.exec(
                    "INSERT INTO shown (room, id, key, sender_id, sender_name, is_bot, text, reply_to, time)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
                    &[
                        &m.room.as_str(),
                        &m.id.as_str(),
                        &m.key,
                        &m.sender.as_str(),
                        &m.sender_name,
                        &m.is_bot,
                        &m.text,
                        &m.reply_to.as_ref().map(MsgId::as_str),
                        &(m.time.as_millis() as i64),
                    ],
                )
                .await?;
                self.exec(
                    "DELETE FROM shown WHERE room = $1 AND seq <= (
                         SELECT seq FROM shown WHERE room = $1 ORDER BY seq DESC LIMIT 1 OFFSET $2)",
                    &[&m.room.as_str(), &(keep.max(&1).to_owned() as i64)],
                )
                .await?;
            }
            Op::ShownEdit { room, id, text } => {
                self.exec(
                    "UPDATE shown SET text = $3 WHERE room = $1 AND id = $2",
                    &[&room.as_str(), &id.as_str(), text],
                )
                .await?;
            }
            Op::ShownDelete { room, id } => {
                self.exec(
                    "DELETE FROM shown WHERE room = $1 AND id = $2",
                    &[&room.as_str(), &id.as_str()],
                )
                .await?;
            }
            Op::ShownReact { room, id, emoji, by } => {
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
                        &[&room.as_str(), &id.as_str(), &json],
                    )
                    .await?;
                }
            }
            Op::CallStarted(c) => {
                self.exec(
                    "INSERT INTO calls (turn, kind, room, persona, agent, msg, started)
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
                    &[
                        &(c.turn.0 as i64),
                        &kind_name(c.kind),
                        &c.room.as_str(),
                        &c.persona.as_str(),
                        &c.agent,
                        &c.msg,
                        &(c.at.as_millis() as i64),
                    ],
                )
                .await?;
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
                    &[
                        &(e.turn.0 as i64),
                        &e.at.map(|t| t.as_millis() as i64),
                        &e.outcome,
                        &e.error,
                        &e.prompt_tokens.map(to_i64),
                        &e.completion_tokens.map(to_i64),
                        &e.cached_tokens.map(to_i64),
                    ],
                )
                .await?;
            }
            Op::Fence(lease) => {
                // FOR SHARE: a takeover (an UPDATE of this row) waits until
                // this batch is committed or rolled back, so it is ordered
                // entirely before the new holder's first write.
                let s = self
                    .statement(
                        "SELECT 1 FROM leases WHERE key = $1 AND holder = $2 AND epoch = $3
                         AND expires_at > now() FOR SHARE",
                    )
                    .await?;
                let held = self
                    .tx
                    .query_opt(&s, &[&lease.key, &lease.holder, &lease.epoch])
                    .await?;
                if held.is_none() {
                    return Err(StoreError::Fenced {
                        key: lease.key.clone(),
                        epoch: lease.epoch,
                    });
                }
            }
            Op::Decided { room, id } => {
                self.exec(
                    "UPDATE inbox SET decided = true WHERE room = $1 AND id = $2",
                    &[&room.as_str(), &id.as_str()],
                )
                .await?;
            }
            Op::CallsInterrupted => {
                self.exec(
                    "UPDATE calls SET outcome = 'interrupted' WHERE ended IS NULL AND outcome IS NULL",
                    &[],
                )
                .await?;
            }
        }
        Ok(())
    }

    async fn set_platform_id(&mut self, room: &str, local: &str, platform: &str) -> Result<(), StoreError> {
        self.exec(
            "UPDATE messages SET platform_id = $3 WHERE room = $1 AND id = $2",
            &[&room, &local, &platform],
        )
        .await?;
        Ok(())
    }
}
