//! Messages exactly as a platform that keeps its history in tactful (the
//! web room) shows them.
//!
//! The web room writes each message here before anyone sees it, so what
//! people saw survives `kill -9`, and a reply part sent again after a
//! restart is recognised by its idempotency key instead of being shown
//! twice.

use rusqlite::{OptionalExtension, Transaction, params};
use tactful_core::{MsgId, RoomId, Timestamp, UserId};

use crate::{Store, StoreError};

/// A message as a room shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShownMessage {
    /// The id the platform knows it by.
    pub id: MsgId,
    /// The room.
    pub room: RoomId,
    /// For a persona's reply part: its idempotency key (see the runtime's
    /// delivery path), so a resend is recognised.
    pub key: Option<String>,
    /// The author's account id (a persona's id for replies).
    pub sender: UserId,
    /// The author's display name.
    pub sender_name: String,
    /// Whether the author is a bot.
    pub is_bot: bool,
    /// The text.
    pub text: String,
    /// What it replies to, by platform id.
    pub reply_to: Option<MsgId>,
    /// When.
    pub time: Timestamp,
    /// Reactions on it, in the order they came: each emoji with who put
    /// it there.
    pub reactions: Vec<(String, Vec<String>)>,
}

/// The most distinct reactions kept on one message.
const MAX_REACTIONS: usize = 20;

/// Adds `by`'s `emoji` to message `id` of `room` (once; nothing for a
/// message the room no longer keeps).
pub(crate) fn react(
    tx: &Transaction<'_>,
    room: &str,
    id: &str,
    emoji: &str,
    by: &str,
) -> Result<(), StoreError> {
    let stored: Option<Option<String>> = tx
        .prepare_cached("SELECT reactions FROM shown WHERE room = ?1 AND id = ?2")?
        .query_row(params![room, id], |r| r.get(0))
        .optional()?;
    let Some(stored) = stored else {
        return Ok(());
    };
    let mut all = parse(stored.as_deref());
    let kinds = all.len();
    match all.iter_mut().find(|(e, _)| e == emoji) {
        Some((_, who)) if who.iter().any(|w| w == by) => return Ok(()),
        Some((_, who)) => who.push(by.to_owned()),
        None if kinds >= MAX_REACTIONS => return Ok(()),
        None => all.push((emoji.to_owned(), vec![by.to_owned()])),
    }
    let json = serde_json::to_string(&all).unwrap_or_default();
    tx.prepare_cached("UPDATE shown SET reactions = ?3 WHERE room = ?1 AND id = ?2")?
        .execute(params![room, id, json])?;
    Ok(())
}

/// Stored reactions; what cannot be read is none.
fn parse(stored: Option<&str>) -> Vec<(String, Vec<String>)> {
    stored
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

/// Inserts `m` (once: the same id or key again changes nothing) and keeps
/// the room's newest `keep` messages.
pub(crate) fn insert(tx: &Transaction<'_>, m: &ShownMessage, keep: usize) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO shown (room, id, key, sender_id, sender_name, is_bot, text, reply_to, time)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        m.room.as_str(),
        m.id.as_str(),
        m.key,
        m.sender.as_str(),
        m.sender_name,
        m.is_bot,
        m.text,
        m.reply_to.as_ref().map(MsgId::as_str),
        m.time.as_millis() as i64,
    ])?;
    tx.prepare_cached(
        "DELETE FROM shown WHERE room = ?1 AND seq <= (
             SELECT seq FROM shown WHERE room = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
    )?
    .execute(params![m.room.as_str(), keep.max(1) as i64])?;
    Ok(())
}

impl Store {
    /// The newest `limit` shown messages of every room, oldest first.
    pub fn shown(&self, limit: usize) -> Result<Vec<ShownMessage>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT room, id, key, sender_id, sender_name, is_bot, text, reply_to, time, reactions FROM (
                 SELECT *, row_number() OVER (PARTITION BY room ORDER BY seq DESC) AS n FROM shown)
             WHERE n <= ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([limit as i64], |r| {
            Ok(ShownMessage {
                room: RoomId::new(r.get::<_, String>(0)?),
                id: MsgId::new(r.get::<_, String>(1)?),
                key: r.get(2)?,
                sender: UserId::new(r.get::<_, String>(3)?),
                sender_name: r.get(4)?,
                is_bot: r.get(5)?,
                text: r.get(6)?,
                reply_to: r.get::<_, Option<String>>(7)?.map(MsgId::new),
                time: Timestamp::from_millis(r.get::<_, i64>(8)?.max(0) as u64),
                reactions: parse(r.get::<_, Option<String>>(9)?.as_deref()),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
