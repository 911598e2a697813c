//! Several tactful processes on one PostgreSQL database, coordinated
//! through it alone: no cluster protocol of tactful's own.
//!
//! - **Members.** Each process joins with a random id and heartbeats; a
//!   member not seen for a lease's length is gone, and its row is removed
//!   at the next heartbeat of any process (the table lists the processes
//!   running, not every one that ever ran).
//! - **Leases.** A room belongs to one of [`PARTITIONS`] partitions
//!   ([`partition_of`]); a partition (or a bot account's connection) is
//!   held by one process at a time through a row in `leases`, with an
//!   expiry the holder renews and an epoch that goes up at every change of
//!   holder. Every write made under a lease carries it ([`crate::Op::Fence`]):
//!   once another process has taken the lease over, or it ran out while its
//!   holder was stopped, the old holder's writes are refused. Times are the
//!   database's (`now()`), so the machines' clocks do not matter.
//! - **Balance.** Each process holds about its share of the partitions:
//!   above it, it lets some go; below it, it takes free or expired ones.
//! - **Inbox.** A message received by any process is put in `inbox`, once
//!   per (room, message id), and the partition's owner is woken with a
//!   `NOTIFY`; the owner marks it decided ([`crate::Op::Decided`]) in the
//!   transaction that writes its decisions, so a message received twice (a
//!   redelivery, two processes hearing one event) is decided once.

use std::time::Duration;

use tactful_core::{Message, PersonaId, RoomId, Timestamp};
use tokio_postgres::AsyncMessage;
use tokio_postgres::types::ToSql;

use super::Postgres;
use super::values::{MESSAGE_INSERT_COLUMNS, MessageRow, Value};
use crate::location::masked;
use crate::row::{self, MESSAGE_COLUMNS, Row};
use crate::{Location, StoreError};

/// How many partitions rooms are spread over: fixed, so every process and
/// every version agrees where a room belongs.
pub const PARTITIONS: u32 = 256;

/// The `NOTIFY` channel that says a partition has a message waiting.
pub const INBOX_CHANNEL: &str = "tactful_inbox";

/// The `NOTIFY` channel that says some room's spend of a persona's own
/// budget changed ([`crate::Op::Spent`]): every process reads the others'
/// again ([`Cluster::spent_elsewhere`]).
pub const SPEND_CHANNEL: &str = "tactful_spend";

/// How many ids a block holds, as a power of two (see [`Cluster::id_block`]).
const ID_BLOCK_BITS: u32 = 40;

/// How long decided messages are kept in the inbox, so a platform's late
/// redelivery is still recognised.
const DECIDED_KEPT: &str = "1 day";

/// Platforms whose rooms only the holder of their connection can post to,
/// as `(platform, room prefix)`: on IRC a message is a line written on the
/// connection itself; on Matrix a post goes through the account's client,
/// which exists only where it logged in and syncs (it knows the rooms it
/// joined from its sync); on XMPP a post is a stanza on the account's
/// stream, in a room it joined there. Telegram, Slack and Discord take a post over
/// HTTP from any process. All the rooms of such a platform belong to one
/// partition ([`connection_partition`]), and the connection is held with
/// that partition's lease, so the process that owns the rooms is the one
/// that can post to them.
pub const CONNECTION_BOUND: &[(&str, &str)] = &[("irc", "irc:"), ("matrix", "matrix:"), ("xmpp", "xmpp:")];

/// The partition `room` belongs to (FNV-1a of its id: the same on every
/// machine and in every version, unlike the standard library's hasher);
/// for a room of a [`CONNECTION_BOUND`] platform, that platform's one
/// partition.
pub fn partition_of(room: &RoomId) -> u32 {
    let id = room.as_str();
    match CONNECTION_BOUND.iter().find(|(_, prefix)| id.starts_with(prefix)) {
        Some((_, prefix)) => fnv(prefix),
        None => fnv(id),
    }
}

/// The partition holding every room of `platform` and its connection, if
/// it is [`CONNECTION_BOUND`].
pub fn connection_partition(platform: &str) -> Option<u32> {
    CONNECTION_BOUND
        .iter()
        .find(|(name, _)| *name == platform)
        .map(|(_, prefix)| fnv(prefix))
}

fn fnv(text: &str) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % u64::from(PARTITIONS)) as u32
}

/// The lease key of partition `n`.
pub fn partition_key(n: u32) -> String {
    format!("partition:{n}")
}

/// The lease key of `persona`'s account on `platform` (its `[platforms]`
/// key): one process at a time listens with it.
pub fn account_key(platform: &str, persona: &PersonaId) -> String {
    format!("account:{platform}:{persona}")
}

/// A lease as its holder knows it: what to carry on every write made under
/// it ([`crate::Op::Fence`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// What is held: `partition:17`, `account:telegram:docs`.
    pub key: String,
    /// Who holds it (a [`Cluster::id`]).
    pub holder: String,
    /// Its epoch: one more at every change of holder.
    pub epoch: i64,
}

/// A process on the database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its id.
    pub id: String,
    /// What it said about itself when it joined (host, pid, listen).
    pub about: String,
}

/// A `NOTIFY` heard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification {
    /// The channel.
    pub channel: String,
    /// What it said.
    pub payload: String,
}

/// What one [`Cluster::balance`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Balance {
    /// Every lease this process holds now.
    pub held: Vec<Lease>,
    /// Of those, the ones it took in this round.
    pub gained: Vec<Lease>,
    /// Of those, the ones above its share, to let go
    /// ([`Cluster::release`]) once their rooms are handed over: still held
    /// until then, so nobody else starts on a room this process is still
    /// finishing.
    pub surplus: Vec<Lease>,
}

/// One process's membership, on a connection of its own.
pub struct Cluster {
    db: Postgres,
    me: String,
    /// What it says about itself, said again when it comes back after its
    /// row was removed (it was stopped or cut off past its lease).
    about: String,
    ttl: Duration,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("me", &self.me)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Joins the processes on the database at `at`, saying `about` itself;
    /// leases last `ttl` unless renewed.
    pub fn join(at: &Location, about: &str, ttl: Duration) -> Result<Cluster, StoreError> {
        let Location::Postgres(url) = at else {
            return Err(StoreError::NeedsPostgres("several processes"));
        };
        let mut cluster = Cluster {
            db: Postgres::open(url)?,
            me: crate::random_id(),
            about: about.to_owned(),
            ttl,
        };
        let me = cluster.me.clone();
        cluster.db.rows(
            "INSERT INTO members (id, about) VALUES ($1, $2)",
            &[&me, &about],
            |_| Ok(()),
        )?;
        Ok(cluster)
    }

    /// The first id of a block no other process has: an engine that starts
    /// its counters there (turns, reply ids) never hands out an id another
    /// process's engine does, whichever rooms move between them. A block is
    /// 2^40 ids.
    pub fn id_block(&mut self) -> Result<u64, StoreError> {
        let n = self.db.rows("SELECT nextval('id_blocks')", &[], |r| r.int(0))?;
        Ok(n.first().map_or(0, |&n| (n.max(0) as u64) << ID_BLOCK_BITS))
    }

    /// This process's id: the holder its leases name.
    pub fn id(&self) -> &str {
        &self.me
    }

    fn ttl_secs(&self) -> f64 {
        self.ttl.as_secs_f64()
    }

    /// Says this process is alive and renews every lease it still holds;
    /// returns those (a lease that ran out, say while the process was
    /// stopped, is not renewed: it may be another's already). Members not
    /// seen for a lease's length (killed, or stopped) leave `members` here,
    /// so it does not keep a row for every process that ever ran: their
    /// leases ran out with them, and one that comes back is a member again
    /// from its next heartbeat, under the same id and `about`. Decided
    /// messages older than a day leave the inbox here.
    pub fn heartbeat(&mut self) -> Result<Vec<Lease>, StoreError> {
        let (me, about, ttl) = (self.me.clone(), self.about.clone(), self.ttl_secs());
        self.db.rows(
            "INSERT INTO members (id, about) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET seen_at = now()",
            &[&me, &about],
            |_| Ok(()),
        )?;
        self.db.rows(
            "DELETE FROM members WHERE seen_at < now() - make_interval(secs => $1)",
            &[&ttl],
            |_| Ok(()),
        )?;
        self.db.rows(
            &format!("DELETE FROM inbox WHERE decided AND received_at < now() - interval '{DECIDED_KEPT}'"),
            &[],
            |_| Ok(()),
        )?;
        let mut held = self.db.rows(
            // Locked in key order, as a batch fenced by several of them
            // locks them (see the writer's `lock_leases_in_order`).
            "UPDATE leases SET expires_at = now() + make_interval(secs => $2)
             WHERE key IN (SELECT key FROM leases WHERE holder = $1 AND expires_at > now()
                           ORDER BY key FOR NO KEY UPDATE)
             RETURNING key, epoch",
            &[&me, &ttl],
            |r| {
                Ok(Lease {
                    key: r.text(0)?,
                    holder: me.clone(),
                    epoch: r.int(1)?,
                })
            },
        )?;
        held.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(held)
    }

    /// The processes seen within a lease's length, by id.
    pub fn members(&mut self) -> Result<Vec<Member>, StoreError> {
        let ttl = self.ttl_secs();
        self.db.rows(
            "SELECT id, about FROM members WHERE seen_at > now() - make_interval(secs => $1) ORDER BY id",
            &[&ttl],
            |r| {
                Ok(Member {
                    id: r.text(0)?,
                    about: r.text(1)?,
                })
            },
        )
    }

    /// Takes `key` if nobody holds it (or its holder let it run out), with
    /// the next epoch; `None` while another holds it. Asking again for a
    /// lease this process holds renews it, same epoch.
    pub fn acquire(&mut self, key: &str) -> Result<Option<Lease>, StoreError> {
        let (me, ttl) = (self.me.clone(), self.ttl_secs());
        let got = self.db.rows(
            "INSERT INTO leases AS l (key, holder, epoch, expires_at, held_since)
             VALUES ($1, $2, 1, now() + make_interval(secs => $3), now())
             ON CONFLICT (key) DO UPDATE SET
                 holder = $2,
                 epoch = CASE WHEN l.holder = $2 AND l.expires_at > now() THEN l.epoch ELSE l.epoch + 1 END,
                 held_since = CASE WHEN l.holder = $2 AND l.expires_at > now()
                                   THEN coalesce(l.held_since, now()) ELSE now() END,
                 expires_at = now() + make_interval(secs => $3)
             WHERE l.holder IS NULL OR l.holder = $2 OR l.expires_at <= now()
             RETURNING epoch",
            &[&key, &me, &ttl],
            |r| r.int(0),
        )?;
        Ok(got.first().map(|&epoch| Lease {
            key: key.to_owned(),
            holder: me.clone(),
            epoch,
        }))
    }

    /// Lets `lease` go at once (another may take it without waiting for it
    /// to run out); nothing if it is no longer this process's.
    pub fn release(&mut self, lease: &Lease) -> Result<(), StoreError> {
        self.db.rows(
            "UPDATE leases SET holder = NULL, expires_at = now()
             WHERE key = $1 AND holder = $2 AND epoch = $3",
            &[&lease.key, &lease.holder, &lease.epoch],
            |_| Ok(()),
        )?;
        Ok(())
    }

    /// One round of balancing `keys` (the partitions' lease keys) over the
    /// live members: renews what this process holds, names what is above
    /// its share (the greatest keys first) for the caller to let go, takes
    /// free or expired keys up to it. Run every few seconds, the processes settle on
    /// shares that differ by one at most.
    pub fn balance(&mut self, keys: &[String]) -> Result<Balance, StoreError> {
        let renewed = self.heartbeat()?;
        self.balance_with(keys, &renewed)
    }

    /// [`Cluster::balance`] of another set of keys (the bot accounts'),
    /// with the leases the round's [`Cluster::heartbeat`] renewed: each set
    /// is shared out on its own, so the accounts spread over the processes
    /// whatever the partitions do.
    pub fn balance_with(&mut self, keys: &[String], renewed: &[Lease]) -> Result<Balance, StoreError> {
        let mut held: Vec<Lease> = renewed
            .iter()
            .filter(|l| keys.contains(&l.key))
            .cloned()
            .collect();
        let members = self.members()?;
        let live = members.len().max(1);
        let share = keys.len().div_ceil(live);
        let mut out = Balance::default();
        held.sort_by(|a, b| a.key.cmp(&b.key));
        if held.len() > share {
            out.surplus = held[share..].to_vec();
        } else if held.len() < share {
            let me = self.me.clone();
            let free = self.db.rows(
                "SELECT k FROM unnest($1::text[]) AS k LEFT JOIN leases l ON l.key = k
                 WHERE l.key IS NULL OR l.holder IS NULL OR l.expires_at <= now()",
                &[&keys],
                |r| r.text(0),
            )?;
            // Start at this member's place among the members, so processes
            // balancing at once mostly reach for different keys.
            let place = members.iter().position(|m| m.id == me).unwrap_or(0);
            let start = free.len() * place / live;
            for key in free.iter().cycle().skip(start).take(free.len()) {
                if held.len() >= share {
                    break;
                }
                if let Some(lease) = self.acquire(key)? {
                    out.gained.push(lease.clone());
                    held.push(lease);
                }
            }
        }
        held.sort_by(|a, b| a.key.cmp(&b.key));
        out.held = held;
        Ok(out)
    }

    /// Leaves: every lease let go, the membership ended, so the others
    /// take over at once instead of after the leases run out.
    pub fn leave(&mut self) -> Result<(), StoreError> {
        let me = self.me.clone();
        self.db.rows(
            "UPDATE leases SET holder = NULL, expires_at = now()
             WHERE key IN (SELECT key FROM leases WHERE holder = $1 ORDER BY key FOR NO KEY UPDATE)",
            &[&me],
            |_| Ok(()),
        )?;
        self.db
            .rows("DELETE FROM members WHERE id = $1", &[&me], |_| Ok(()))?;
        Ok(())
    }

    /// Puts `msg` in the inbox and wakes its partition's owner; `false`
    /// when it was there already (received before, by any process). The
    /// runtime puts through its writer instead ([`crate::Op::Inbox`]), in
    /// order with a platform's sync state.
    pub fn put(&mut self, msg: &Message) -> Result<bool, StoreError> {
        let values = inbox_values(msg, false);
        let params: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        let woken = self.db.rows(&INBOX_PUT, &params, |_| Ok(()))?;
        Ok(!woken.is_empty())
    }

    /// What the rooms of partitions other than `held` spent (or hold for
    /// calls running) of their personas' own budgets and still counts at
    /// `now`, as (persona,
    /// bucket end, tokens) summed over those partitions: what this
    /// process adds to its own rooms' spend
    /// ([`tactful_core::Engine::spent_elsewhere`]). Spend no window counts
    /// any more is purged first.
    pub fn spent_elsewhere(
        &mut self,
        held: &[u32],
        now: Timestamp,
    ) -> Result<Vec<(PersonaId, Timestamp, u64)>, StoreError> {
        let now = now.as_millis().min(i64::MAX as u64) as i64;
        self.db.rows(
            "DELETE FROM spend WHERE bucket_end + per_ms <= $1",
            &[&now],
            |_| Ok(()),
        )?;
        let held: Vec<i64> = held.iter().map(|&p| i64::from(p)).collect();
        self.db.rows(
            "SELECT persona, bucket_end, LEAST(sum(tokens), 4611686018427387904)::BIGINT FROM spend
             WHERE part <> ALL($1) GROUP BY persona, bucket_end HAVING sum(tokens) > 0
             ORDER BY persona, bucket_end",
            &[&held],
            |r| {
                Ok((
                    PersonaId::new(r.text(0)?),
                    Timestamp::from_millis(r.int(1)?.max(0) as u64),
                    r.int(2)?.max(0) as u64,
                ))
            },
        )
    }

    /// Messages waiting to be decided in `partitions`, oldest first, at most
    /// `limit`.
    pub fn waiting(&mut self, partitions: &[u32], limit: usize) -> Result<Vec<Waiting>, StoreError> {
        let parts: Vec<i64> = partitions.iter().map(|&p| i64::from(p)).collect();
        self.read_waiting(
            &format!(
                "SELECT seq, context, room, {MESSAGE_COLUMNS} FROM inbox
                 WHERE part = ANY($1) AND NOT decided ORDER BY seq LIMIT $2"
            ),
            &[&parts, &(limit as i64)],
        )
    }

    /// Those of the inbox rows `seqs` (as [`InboxWake`]s name them) still
    /// waiting to be decided, oldest first. Read by their key: the
    /// notifications' rows alone, where [`Cluster::waiting`] looks in
    /// every partition held (with many partitions held and a busy inbox,
    /// most of the database's time went there).
    pub fn waiting_at(&mut self, seqs: &[i64]) -> Result<Vec<Waiting>, StoreError> {
        self.read_waiting(
            &format!(
                "SELECT seq, context, room, {MESSAGE_COLUMNS} FROM inbox
                 WHERE seq = ANY($1) AND NOT decided ORDER BY seq"
            ),
            &[&seqs],
        )
    }

    fn read_waiting(&mut self, sql: &str, params: super::Params<'_>) -> Result<Vec<Waiting>, StoreError> {
        let mut skipped = Vec::new();
        let read = self.db.rows(sql, params, |r| {
            Ok(Waiting {
                seq: r.int(0)?,
                context: r.flag(1)?,
                msg: row::message(&RoomId::new(r.text(2)?), r, 3, &mut skipped)?,
            })
        })?;
        for what in skipped {
            tracing::warn!("inbox: {what} could not be read");
        }
        Ok(read)
    }
}

/// What a notification on [`INBOX_CHANNEL`] says: a message is waiting in
/// this partition, in this inbox row (`<part>:<seq>`). A process of an
/// earlier version names the partition alone, and its owner then reads
/// every partition it holds; the other way round, an earlier version
/// ignores a payload it cannot parse, and its next round (within a
/// second) reads the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InboxWake {
    /// The partition.
    pub part: u32,
    /// The inbox row, when named.
    pub seq: Option<i64>,
}

impl InboxWake {
    /// Reads a notification's payload; `None` for one that is neither
    /// form (ignored: the next round reads everything anyway).
    pub fn parse(payload: &str) -> Option<InboxWake> {
        let (part, seq) = match payload.split_once(':') {
            Some((part, seq)) => (part, Some(seq.parse().ok()?)),
            None => (payload, None),
        };
        let part = part.parse().ok().filter(|p| *p < PARTITIONS)?;
        Some(InboxWake { part, seq })
    }
}

/// A message in the inbox, not yet decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// Its place in the inbox (later messages have greater ones).
    pub seq: i64,
    /// The message.
    pub msg: Message,
    /// Recorded as context only ([`crate::Op::Inbox`]).
    pub context: bool,
}

/// The values [`INBOX_PUT`] takes for `msg`.
pub(crate) fn inbox_values(msg: &Message, context: bool) -> Vec<Value> {
    let mut values = MessageRow::new(msg, None).values();
    values.push(Value::Int(i64::from(partition_of(&msg.room))));
    values.push(Value::Bool(context));
    values
}

/// Puts a message in the inbox (the values of [`MESSAGE_INSERT_COLUMNS`],
/// then its partition and whether it is context) and, when it is new,
/// wakes the partition's owner with the row ([`InboxWake`]): `pg_notify`
/// is sent at commit.
pub(crate) static INBOX_PUT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH put AS (
             INSERT INTO inbox ({MESSAGE_INSERT_COLUMNS}, part, context)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
             ON CONFLICT DO NOTHING RETURNING part, seq)
         SELECT pg_notify('{INBOX_CHANNEL}', part::text || ':' || seq::text) FROM put"
    )
});

/// Listens on `channel` of the database at `at`: every `NOTIFY` on it,
/// until the receiver is dropped (or the connection ends: the receiver
/// then yields `None`, and the caller listens again).
pub fn listen(
    at: &Location,
    channel: &str,
) -> Result<tokio::sync::mpsc::UnboundedReceiver<Notification>, StoreError> {
    let Location::Postgres(url) = at else {
        return Err(StoreError::NeedsPostgres("listening for other processes"));
    };
    let (config, tls) = super::config(url)?;
    let shown = masked(url);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let listen = format!("LISTEN {channel}");
    super::on_own_thread("tactful-listen", move |ready| async move {
        let (client, mut connection) = match config.connect(tls).await {
            Ok(c) => c,
            Err(source) => {
                let _ = ready.send(Err(StoreError::Connect { url: shown, source }));
                return;
            }
        };
        let forward = tx.clone();
        let pump = tokio::spawn(async move {
            while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                match message {
                    Ok(AsyncMessage::Notification(n)) => {
                        let _ = forward.send(Notification {
                            channel: n.channel().to_owned(),
                            payload: n.payload().to_owned(),
                        });
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!("listening to the store stopped: {e}");
                        break;
                    }
                }
            }
        });
        if let Err(e) = client.batch_execute(&listen).await {
            let _ = ready.send(Err(StoreError::Postgres(e)));
            return;
        }
        let _ = ready.send(Ok(()));
        // Until the receiver goes, or the connection ends.
        tokio::select! {
            () = tx.closed() => {}
            _ = pump => {}
        }
        drop(client);
    })?;
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_room_always_falls_in_the_same_partition_and_rooms_spread_evenly() {
        // Fixed values: a change here would move every room of a running
        // cluster to another owner at an upgrade.
        assert_eq!(
            partition_of(&RoomId::new("lobby")),
            partition_of(&RoomId::new("lobby"))
        );
        let known: Vec<u32> = ["lobby", "tg:-1001234567890", "discord:42"]
            .iter()
            .map(|r| partition_of(&RoomId::new(*r)))
            .collect();
        assert_eq!(known, [51, 93, 105]);
        let mut counts = vec![0u32; PARTITIONS as usize];
        for i in 0..25_600 {
            counts[partition_of(&RoomId::new(format!("tg:-100{i}"))) as usize] += 1;
        }
        let (min, max) = (counts.iter().min().copied(), counts.iter().max().copied());
        assert!(
            min >= Some(60) && max <= Some(150),
            "100 rooms a partition on average: {min:?}..{max:?}"
        );
    }

    /// Every IRC room, channel or private, is in the partition whose
    /// lease carries the IRC connection; a room merely named like one of
    /// another platform's is not.
    #[test]
    fn rooms_of_a_connection_bound_platform_share_its_partition() {
        let irc = connection_partition("irc").expect("IRC is connection-bound");
        for room in ["irc:#tactful", "irc:#other", "irc:dm:docs:alice", "irc:&local"] {
            assert_eq!(partition_of(&RoomId::new(room)), irc, "{room}");
        }
        let spread: std::collections::HashSet<u32> = (0..50)
            .map(|i| partition_of(&RoomId::new(format!("tg:irc:{i}"))))
            .collect();
        assert!(spread.len() > 30, "other rooms still spread: {spread:?}");
        let matrix = connection_partition("matrix").expect("Matrix is connection-bound");
        for room in ["matrix:!abc:example.org", "matrix:!other:example.net"] {
            assert_eq!(partition_of(&RoomId::new(room)), matrix, "{room}");
        }
        assert_eq!(connection_partition("telegram"), None);
    }
}
