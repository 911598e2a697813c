//! One service per store.
//!
//! SQLite lets two processes write one file, and two tactful services on
//! one store would hand out the same message ids and answer each other's
//! turns. So a service claims its store for as long as it runs: an
//! exclusive advisory lock on `<store>.lock` (released by the OS when the
//! process ends, even by `kill -9`). On PostgreSQL the claim is a
//! session-level advisory lock on the database and schema, held by a
//! connection of its own (released by the server when that connection
//! ends, however the process ends). Reading the store (tests, tools, the
//! console) needs no claim.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

use crate::Location;

/// Held while a service uses its store; dropping it releases the claim.
#[derive(Debug)]
pub struct Claim {
    _file: Option<File>,
    _session: Option<tokio_postgres::Client>,
}

/// Why a store could not be claimed.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Another running process holds it.
    #[error("another tactful is already using the store {path}{by}: stop it, or give this one another store")]
    Taken {
        /// The store's path.
        path: String,
        /// ` (pid N: what it said)` when the holder wrote who it is.
        by: String,
    },
    /// The database cannot be asked.
    #[error("cannot claim the store {url}: {source}")]
    Database {
        /// The URL, without its password.
        url: String,
        /// Why.
        source: crate::StoreError,
    },
    /// The lock file cannot be made.
    #[error("cannot lock the store {path} ({lock}): {source}")]
    Io {
        /// The store's path.
        path: String,
        /// The lock file.
        lock: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Claims the store at `at` for this process; `who` (a URL, say) is
/// written where a second service can read it and say where the first one
/// is. `:memory:` needs no claim.
pub fn claim(at: &Location, who: &str) -> Result<Claim, ClaimError> {
    match at {
        Location::Memory => Ok(Claim {
            _file: None,
            _session: None,
        }),
        Location::File(path) => claim_file(path, who),
        Location::Postgres(url) => claim_database(url, who),
    }
}

/// The key of the advisory lock that claims the connection's database and
/// schema (non-negative, so `pg_locks` shows it whole in `objid`).
const CLAIM_KEY: &str =
    "(hashtext('tactful:' || current_database() || '.' || current_schema())::bigint & 2147483647)";

fn claim_database(url: &str, who: &str) -> Result<Claim, ClaimError> {
    let database = |source| ClaimError::Database {
        url: crate::location::masked(url),
        source,
    };
    let client = crate::postgres::connect(url).map_err(database)?;
    let ask = |sql: &str, params: crate::postgres::Params<'_>| {
        crate::postgres::rows(&client, sql, params, |r| Ok(r.clone())).map_err(database)
    };
    // Who holds it is read from the holder's session name.
    let name: String = format!("tactful pid {}: {who}", std::process::id())
        .chars()
        .filter(|c| !c.is_control())
        .take(63)
        .collect();
    ask("SELECT set_config('application_name', $1, false)", &[&name])?;
    let got = ask(&format!("SELECT pg_try_advisory_lock({CLAIM_KEY})"), &[])?;
    if got.first().and_then(|r| r.try_get::<_, bool>(0).ok()) == Some(true) {
        return Ok(Claim {
            _file: None,
            _session: Some(client),
        });
    }
    let holder = ask(
        &format!(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid)
             WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objsubid = 1
               AND l.objid::bigint = {CLAIM_KEY} AND l.database = (
                   SELECT oid FROM pg_database WHERE datname = current_database())"
        ),
        &[],
    )?;
    let said = holder
        .first()
        .and_then(|r| r.try_get::<_, String>(0).ok())
        .and_then(|s| s.strip_prefix("tactful ").map(str::to_owned))
        .unwrap_or_default();
    Err(ClaimError::Taken {
        path: crate::location::masked(url),
        by: if said.is_empty() {
            String::new()
        } else {
            format!(" ({said})")
        },
    })
}

fn claim_file(path: &Path, who: &str) -> Result<Claim, ClaimError> {
    let lock = lock_path(path);
    let io = |source| ClaimError::Io {
        path: path.display().to_string(),
        lock: lock.display().to_string(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut said = String::new();
            let _ = file.read_to_string(&mut said);
            let said = said.trim();
            return Err(ClaimError::Taken {
                path: path.display().to_string(),
                by: if said.is_empty() {
                    String::new()
                } else {
                    format!(" ({said})")
                },
            });
        }
        Err(TryLockError::Error(e)) => return Err(io(e)),
    }
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    write!(file, "pid {}: {who}", std::process::id()).map_err(io)?;
    file.flush().map_err(io)?;
    Ok(Claim {
        _file: Some(file),
        _session: None,
    })
}

fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_is_refused_with_who_holds_it_until_the_first_ends() {
        let dir = tempfile::tempdir().expect("dir");
        let db = dir.path().join("demo.db");
        let db = Location::File(db);
        let first = claim(&db, "http://127.0.0.1:7878/").expect("claimed");
        let err = claim(&db, "http://127.0.0.1:7879/")
            .expect_err("taken")
            .to_string();
        assert!(err.contains("already using the store"), "{err}");
        assert!(
            err.contains("http://127.0.0.1:7878/"),
            "says where the first one is: {err}"
        );
        drop(first);
        claim(&db, "again").expect("free again");
        claim(&Location::Memory, "x").expect("nothing to claim");
        claim(&Location::Memory, "y").expect("nothing to claim");
    }
}
