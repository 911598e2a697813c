//! `[cluster]`: several tactful processes sharing one PostgreSQL store.
//! Each process owns the rooms of the partitions it holds; they find each
//! other only through the database (see ARCHITECTURE.md, "Several
//! processes on one database").

use std::time::Duration;

use serde::Deserialize;
use tactful_config::{Checker, ConfigError};
use tactful_runtime::cluster::{ClusterConfig, DEFAULT_LEASE};
use tactful_store::Location;
use toml::Spanned;

/// `[cluster]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCluster {
    enabled: Spanned<bool>,
    lease_seconds: Option<Spanned<u64>>,
}

/// The shortest lease: a renewal every third of it must reach the
/// database in time, even on a busy machine.
const MIN_LEASE_S: u64 = 2;
/// The longest: a dead process's rooms wait this long for a new owner.
const MAX_LEASE_S: u64 = 300;

/// The cluster `raw` asks for, checked against the store: sharing needs
/// a database every process reaches.
pub(super) fn settings(
    check: &Checker<'_>,
    raw: Option<&RawCluster>,
    store: &Location,
) -> Result<Option<ClusterConfig>, ConfigError> {
    let Some(raw) = raw.filter(|r| *r.enabled.get_ref()) else {
        return Ok(None);
    };
    if !matches!(store, Location::Postgres(_)) {
        return Err(check.at(
            raw.enabled.span(),
            "`cluster.enabled` needs a store every process reaches: set `[store] url = \"${TACTFUL_DATABASE_URL}\"` (PostgreSQL), or remove `[cluster]` to run one process on a SQLite file",
        ));
    }
    let lease = match &raw.lease_seconds {
        None => DEFAULT_LEASE,
        Some(s) if (MIN_LEASE_S..=MAX_LEASE_S).contains(s.get_ref()) => Duration::from_secs(*s.get_ref()),
        Some(s) => {
            return Err(check.at(
                s.span(),
                format!(
                    "`cluster.lease_seconds` = {} is out of range: {MIN_LEASE_S} to {MAX_LEASE_S} (a dead process's rooms move after about this long; 10 by default)",
                    s.get_ref()
                ),
            ));
        }
    };
    Ok(Some(ClusterConfig {
        lease,
        about: about(),
    }))
}

/// What this process tells the others about itself: host and pid, what an
/// operator looks for in the `members` table.
fn about() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("{host} pid {}", std::process::id())
}
