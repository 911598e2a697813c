//! The store in PostgreSQL, for several tactful processes on one database.
//!
//! The driver is tokio-postgres: the asynchronous client the `postgres`
//! crate wraps, kept by the same people, with `LISTEN`/`NOTIFY` and
//! pipelining, and without sqlx's compile-time query checking (which needs
//! a database at build time) or its macros. The store's callers are
//! synchronous (the writer thread, the console's blocking reads, the start
//! before the runtime runs), so each connection's I/O runs on a small
//! thread of its own and a call waits for its answer with a plain executor
//! (`futures_executor::block_on`): that never touches the caller's tokio
//! runtime, whose threads it may be called from at start.
//!
//! A lost connection is made again on the next call; until then every call
//! fails with an error [`crate::StoreError::is_transient`] calls transient,
//! so the writer keeps its batch and tries again.

pub(crate) mod announce;
pub(crate) mod cluster;
mod read;
mod schema;
pub(crate) mod tls;
#[macro_use]
mod values;
mod write;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::time::Duration;

use tactful_core::{Message, MsgId, RoomId};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

pub(crate) use read::Reader;

use crate::backend::Backend;
use crate::location::masked;
use crate::records::{PendingRow, StoredMessage};
use crate::records::{Placeholder, Unsent};
use crate::row::{self, MESSAGE_COLUMNS, PENDING_COLUMNS, Row, SHOWN_COLUMNS, UNSENT_COLUMNS};
use crate::{Op, ShownMessage, StoreError};

/// A query's parameters.
pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// How long connecting may take when the URL does not say
/// (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long what was sent may go unacknowledged before the connection is
/// given up, when the URL does not say (`tcp_user_timeout`; Linux). A
/// network that drops packets (a cut, not a refusal) would otherwise hold
/// a query for as long as TCP retries, a quarter of an hour: the
/// coordinator must learn within about a lease that the store is out of
/// reach, to stop listening with connections another process may take.
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may sit idle before TCP checks the path
/// (`keepalives_idle`; tokio-postgres's own default is two hours): a
/// `LISTEN` connection waiting for news learns of a cut this way.
const KEEPALIVES_IDLE: Duration = Duration::from_secs(10);

/// Waits for `f` on the calling thread (see the module's note).
fn wait<F: Future>(f: F) -> F::Output {
    futures_executor::block_on(f)
}

/// Whether `e` may pass if the same call is made again later: the
/// connection is gone or cannot be made, the server is starting, stopping
/// or out of resources, or the transaction lost a race.
pub(crate) fn is_transient(e: &tokio_postgres::Error) -> bool {
    // A certificate refused is refused again until someone changes the
    // URL or the server.
    if tls::is_tls_refusal(e) {
        return false;
    }
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        let code = code.code();
        return code.starts_with("08")
            || code.starts_with("53")
            || code.starts_with("57P")
            || code == "40001"
            || code == "40P01";
    }
    let io = std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>());
    io || e.to_string().contains("timeout")
}

impl Row for tokio_postgres::Row {
    fn text(&self, i: usize) -> Result<String, StoreError> {
        Ok(self.try_get(i)?)
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        Ok(self.try_get(i)?)
    }
    fn int(&self, i: usize) -> Result<i64, StoreError> {
        Ok(self.try_get(i)?)
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        Ok(self.try_get(i)?)
    }
    fn flag(&self, i: usize) -> Result<bool, StoreError> {
        Ok(self.try_get(i)?)
    }
    fn opt_float(&self, i: usize) -> Result<Option<f64>, StoreError> {
        Ok(self.try_get(i)?)
    }
}

/// How tactful connects to `url`: the URL's settings, with tactful's
/// defaults where it says nothing, and the TLS it asks for (see [`tls`]).
/// Every connection (the writer's, the console's, the claim's, a
/// listener's) is made with these.
pub(crate) fn config(
    url: &str,
) -> Result<(tokio_postgres::Config, tokio_postgres_rustls::MakeRustlsConnect), StoreError> {
    let shown = masked(url);
    let bad = |why: String| StoreError::Tls {
        url: shown.clone(),
        why,
    };
    let (rest, tls) = tls::split(url).map_err(bad)?;
    let mut config: tokio_postgres::Config = rest.parse().map_err(|source| StoreError::Connect {
        url: shown.clone(),
        source,
    })?;
    config.ssl_mode(tls.ssl_mode());
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(TCP_USER_TIMEOUT);
    }
    // Unset reads as tokio-postgres's two hours.
    if config.get_keepalives() && config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
        config.keepalives_idle(KEEPALIVES_IDLE);
    }
    if config.get_application_name().is_none() {
        config.application_name("tactful");
    }
    // The durability SQLite's WAL with `synchronous = NORMAL` gives: a
    // commit survives tactful being killed at any instant (the server has
    // it), and a crash of the database server itself may lose the last
    // fraction of a second. It spares every commit a wait for the
    // server's disk (BENCHMARKS.md). A URL that sets it keeps its own.
    let options = config.get_options().unwrap_or_default().to_owned();
    if !options.contains("synchronous_commit") {
        config.options(format!("{options} -c synchronous_commit=off").trim());
    }
    let connector = tls.connector().map_err(bad)?;
    Ok((config, connector))
}

/// Runs `task` on a thread named `name` with a runtime of its own (a
/// connection's I/O lives there), and returns the first thing it sends.
pub(crate) fn on_own_thread<T, F>(
    name: &str,
    task: impl FnOnce(std::sync::mpsc::SyncSender<Result<T, StoreError>>) -> F + Send + 'static,
) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: Future<Output = ()>,
{
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new().name(name.into()).spawn(move || {
        match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt.block_on(task(tx)),
            Err(e) => {
                let _ = tx.send(Err(StoreError::Io(e)));
            }
        }
    })?;
    rx.recv()
        .map_err(|_| StoreError::Io(std::io::Error::other(format!("the thread {name} stopped"))))?
}

/// Connects to `url`, its I/O on a thread of its own that ends with the
/// connection.
pub(crate) fn connect(url: &str) -> Result<Client, StoreError> {
    let (config, tls) = config(url)?;
    let shown = masked(url);
    on_own_thread("tactful-postgres", move |ready| async move {
        match config.connect(tls).await {
            Ok((client, connection)) => {
                let _ = ready.send(Ok(client));
                if let Err(e) = connection.await {
                    tracing::warn!("the store's connection to {shown} ended: {e}");
                }
            }
            Err(source) => {
                let _ = ready.send(Err(StoreError::Connect { url: shown, source }));
            }
        }
    })
}

/// Runs `sql` and reads every row with `f`.
pub(crate) fn rows<T>(
    client: &Client,
    sql: &str,
    params: Params<'_>,
    mut f: impl FnMut(&tokio_postgres::Row) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    wait(client.query(sql, params))?.iter().map(&mut f).collect()
}

/// The writer's connection, made again when it is lost.
pub(crate) struct Postgres {
    url: String,
    client: Option<Client>,
    /// Statements the writer prepared on this connection, by their SQL.
    prepared: HashMap<String, Statement>,
}

impl Postgres {
    /// Connects to `url` and brings its schema up to date.
    pub(crate) fn open(url: &str) -> Result<Postgres, StoreError> {
        let mut client = connect(url)?;
        schema::migrate(&mut client, &masked(url))?;
        Ok(Postgres {
            url: url.to_owned(),
            client: Some(client),
            prepared: HashMap::new(),
        })
    }

    /// The connection, made again if it was lost.
    fn client(&mut self) -> Result<&mut Client, StoreError> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = None;
            self.prepared.clear();
            let client = connect(&self.url)?;
            tracing::info!("the store is connected again to {}", masked(&self.url));
            self.client = Some(client);
        }
        Ok(self.client.as_mut().expect("connected above"))
    }

    fn rows<T>(
        &mut self,
        sql: &str,
        params: Params<'_>,
        f: impl FnMut(&tokio_postgres::Row) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let read = rows(self.client()?, sql, params, f);
        self.forget_if_lost(read)
    }

    /// After an error that may mean the connection is gone, the next call
    /// connects afresh: the server may have ended the session before the
    /// client noticed (`is_closed` is not yet true).
    fn forget_if_lost<T>(&mut self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(e) = &result
            && e.is_transient()
        {
            self.client = None;
            self.prepared.clear();
        }
        result
    }
}

impl Backend for Postgres {
    fn apply(&mut self, ops: &[Op]) -> Result<(), StoreError> {
        self.client()?;
        let Postgres { client, prepared, .. } = self;
        let client = client.as_mut().expect("connected above");
        let written = wait(write::Writer::new(client, prepared).commit(ops));
        self.forget_if_lost(written)
    }

    fn state(&mut self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .rows("SELECT value FROM platform_state WHERE key = $1", &[&key], |r| {
                r.text(0)
            })?
            .pop())
    }

    fn state_insert_new(&mut self, key: &str, value: &str) -> Result<(), StoreError> {
        self.rows(
            "INSERT INTO platform_state (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&key, &value],
            |_| Ok(()),
        )?;
        Ok(())
    }

    fn platform_state(&mut self) -> Result<BTreeMap<String, String>, StoreError> {
        Ok(self
            .rows("SELECT key, value FROM platform_state", &[], |r| {
                Ok((r.text(0)?, r.text(1)?))
            })?
            .into_iter()
            .collect())
    }

    fn shown(&mut self, limit: usize) -> Result<Vec<ShownMessage>, StoreError> {
        self.rows(
            &format!(
                "SELECT {SHOWN_COLUMNS} FROM (
                     SELECT *, row_number() OVER (PARTITION BY room ORDER BY seq DESC) AS n FROM shown) AS s
                 WHERE n <= $1 ORDER BY seq"
            ),
            &[&(limit as i64)],
            row::shown,
        )
    }

    fn decision_count(&mut self, room: &RoomId) -> Result<u64, StoreError> {
        let n = self.rows(
            "SELECT count(*) FROM decisions WHERE room = $1",
            &[&room.as_str()],
            |r| r.count(0),
        )?;
        Ok(n.first().copied().unwrap_or(0))
    }

    fn counters_json(&mut self) -> Result<Option<String>, StoreError> {
        Ok(self
            .rows("SELECT json FROM counters WHERE id = 0", &[], |r| r.text(0))?
            .pop())
    }

    fn room_names(&mut self) -> Result<Vec<String>, StoreError> {
        self.rows(
            "SELECT room FROM messages UNION SELECT room FROM snapshots ORDER BY 1",
            &[],
            |r| r.text(0),
        )
    }

    fn recent(
        &mut self,
        room: &RoomId,
        limit: usize,
        skipped: &mut Vec<String>,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        self.rows(
            &format!(
                "SELECT seq, platform_id, persona, {MESSAGE_COLUMNS}
                 FROM messages WHERE room = $1 ORDER BY seq DESC LIMIT $2"
            ),
            &[&room.as_str(), &(limit as i64)],
            |r| {
                Ok(StoredMessage {
                    seq: r.int(0)?,
                    platform_id: r.opt_text(1)?,
                    msg: row::message(room, r, 3, skipped)?,
                })
            },
        )
    }

    fn older_own(
        &mut self,
        room: &RoomId,
        before: i64,
        per_persona: usize,
    ) -> Result<Vec<(String, String, Option<String>)>, StoreError> {
        self.rows(
            "SELECT persona, id, platform_id FROM (
                 SELECT persona, id, platform_id, seq,
                        row_number() OVER (PARTITION BY persona ORDER BY seq DESC) AS n
                 FROM messages WHERE room = $1 AND persona IS NOT NULL AND seq < $2) AS own
             WHERE n <= $3 ORDER BY seq",
            &[&room.as_str(), &before, &(per_persona as i64)],
            |r| Ok((r.text(0)?, r.text(1)?, r.opt_text(2)?)),
        )
    }

    fn snapshot_json(&mut self, room: &RoomId) -> Result<Option<String>, StoreError> {
        Ok(self
            .rows(
                "SELECT json FROM snapshots WHERE room = $1",
                &[&room.as_str()],
                |r| r.text(0),
            )?
            .pop())
    }

    fn pending_rows(&mut self) -> Result<Vec<PendingRow>, StoreError> {
        self.rows(
            &format!("SELECT {PENDING_COLUMNS} FROM pending_turns ORDER BY turn"),
            &[],
            row::pending,
        )
    }

    fn message(
        &mut self,
        room: &RoomId,
        id: &MsgId,
        skipped: &mut Vec<String>,
    ) -> Result<Option<Message>, StoreError> {
        Ok(self
            .rows(
                &format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE room = $1 AND id = $2"),
                &[&room.as_str(), &id.as_str()],
                |r| row::message(room, r, 0, skipped),
            )?
            .pop())
    }

    fn unsent(&mut self) -> Result<Vec<Unsent>, StoreError> {
        self.rows(
            &format!(
                "SELECT {UNSENT_COLUMNS}
                 FROM outbox o JOIN messages m ON m.room = o.room AND m.id = o.local_id
                 WHERE o.delivered IS NULL ORDER BY m.seq"
            ),
            &[],
            row::unsent,
        )
    }

    fn placeholders(&mut self) -> Result<Vec<Placeholder>, StoreError> {
        self.rows(
            "SELECT turn, room, persona, platform_id, thread FROM placeholders ORDER BY turn",
            &[],
            row::placeholder,
        )
    }
}

#[cfg(test)]
mod connection_defaults_tests {
    use std::time::Duration;

    /// A network cut that drops packets is noticed within seconds, not
    /// TCP's quarter of an hour; a URL that says otherwise is kept.
    #[test]
    fn a_dead_path_is_given_up_within_seconds_unless_the_url_says() {
        let (c, _) = super::config("postgres://u@db:5432/x").expect("parses");
        assert_eq!(c.get_tcp_user_timeout(), Some(&super::TCP_USER_TIMEOUT));
        assert_eq!(c.get_keepalives_idle(), super::KEEPALIVES_IDLE);
        assert!(c.get_keepalives());
        let (c, _) =
            super::config("postgres://u@db:5432/x?tcp_user_timeout=30&keepalives_idle=60").expect("parses");
        assert_eq!(c.get_tcp_user_timeout(), Some(&Duration::from_secs(30)));
        assert_eq!(c.get_keepalives_idle(), Duration::from_secs(60));
    }
}
