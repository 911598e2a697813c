//! One service per store file.
//!
//! SQLite lets two processes write one file, and two tactful services on
//! one store would hand out the same message ids and answer each other's
//! turns. So a service claims its store for as long as it runs: an
//! exclusive advisory lock on `<store>.lock` (released by the OS when the
//! process ends, even by `kill -9`). Reading the store (tests, tools) needs
//! no claim.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

/// Held while a service uses its store; dropping it releases the claim.
#[derive(Debug)]
pub struct Claim {
    _file: Option<File>,
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

/// Claims the store at `path` for this process; `who` (a URL, say) is
/// written into the lock file so a second service can say where the first
/// one is. `:memory:` needs no claim.
pub fn claim(path: &Path, who: &str) -> Result<Claim, ClaimError> {
    if path.as_os_str() == ":memory:" {
        return Ok(Claim { _file: None });
    }
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
    Ok(Claim { _file: Some(file) })
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
        claim(Path::new(":memory:"), "x").expect("nothing to claim");
        claim(Path::new(":memory:"), "y").expect("nothing to claim");
    }
}
