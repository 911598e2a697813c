//! For tests of tactful and of crates around it: a PostgreSQL schema of
//! their own, made fresh and dropped at the end (feature `testing`).
//!
//! The database is `$TACTFUL_TEST_DATABASE_URL`, else user `postgres` at
//! 127.0.0.1:5432 (what `scripts/test` provides, starting a private server
//! when none answers). Without one, [`Schema::new`] returns `None` (the
//! test is skipped with a note), or fails when `TACTFUL_REQUIRE_PEERS` is
//! set, as `scripts/test` does.

pub mod tls;

use std::sync::atomic::{AtomicU32, Ordering};

use crate::{Location, StoreError};

/// The database PostgreSQL tests use.
pub fn database_url() -> String {
    std::env::var("TACTFUL_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A schema of one test's own, dropped with it.
#[derive(Debug)]
pub struct Schema {
    /// Its name (also the session name of connections made with [`Schema::url`]).
    pub name: String,
    /// A URL that puts the schema first on the search path.
    pub url: String,
}

impl Schema {
    /// A fresh schema, or `None` without a database (see the module).
    pub fn new() -> Option<Schema> {
        static N: AtomicU32 = AtomicU32::new(0);
        let base = database_url();
        let name = format!(
            "t_{}_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        );
        if let Err(e) = run(&base, &format!("CREATE SCHEMA {name}")) {
            assert!(
                std::env::var_os("TACTFUL_REQUIRE_PEERS").is_none(),
                "PostgreSQL is needed at {base} (TACTFUL_TEST_DATABASE_URL): {e}"
            );
            eprintln!("skipped: no PostgreSQL at {base} ({e})");
            return None;
        }
        let sep = if base.contains('?') { '&' } else { '?' };
        Some(Schema {
            url: format!("{base}{sep}options=-csearch_path%3D{name}&application_name={name}"),
            name,
        })
    }

    /// The store in this schema.
    pub fn location(&self) -> Location {
        Location::Postgres(self.url.clone())
    }

    /// Runs `sql` (several statements) in the schema, as an operator would.
    pub fn exec(&self, sql: &str) -> Result<(), StoreError> {
        run(&self.url, sql)
    }

    /// The first column of what `sql` returns, as text (`NULL` as
    /// `None`): what a test asks the database directly (who holds a
    /// lease, how many rows a message has).
    pub fn column(&self, sql: &str) -> Result<Vec<Option<String>>, StoreError> {
        let client = crate::postgres::connect(&self.url)?;
        let rows = futures_executor::block_on(client.simple_query(sql))?;
        Ok(rows
            .iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => Some(r.get(0).map(str::to_owned)),
                _ => None,
            })
            .collect())
    }
}

impl Schema {
    /// A connection of its own in the schema, whose transaction may stay
    /// open between calls: a test plays another process's writes with it.
    pub fn session(&self) -> Result<Session, StoreError> {
        Ok(Session(crate::postgres::connect(&self.url)?))
    }
}

/// See [`Schema::session`].
pub struct Session(tokio_postgres::Client);

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Session")
    }
}

impl Session {
    /// Runs `sql` (several statements), waiting as long as it waits.
    pub fn run(&self, sql: &str) -> Result<(), StoreError> {
        Ok(futures_executor::block_on(self.0.batch_execute(sql))?)
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = run(&database_url(), &format!("DROP SCHEMA {} CASCADE", self.name));
    }
}

fn run(url: &str, sql: &str) -> Result<(), StoreError> {
    let client = crate::postgres::connect(url)?;
    futures_executor::block_on(client.batch_execute(sql))?;
    Ok(())
}
