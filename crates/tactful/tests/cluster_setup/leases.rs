//! What the database says about who holds what, for the cluster tests and
//! benchmarks (no platform in it: every cluster test can take it).
#![allow(dead_code)] // each user takes some of it

use std::time::{Duration, Instant};

use tactful_store::testing::Schema;

/// The `[store]` and `[cluster]` tables every cluster test's processes
/// share: the database at `url`, leases of `lease` seconds.
pub fn cluster_toml(url: &str, lease: u64) -> String {
    format!("[store]\nurl = \"{url}\"\n\n[cluster]\nenabled = true\nlease_seconds = {lease}\n")
}

/// The pid of the live process holding `key` (its `about` says
/// `<host> pid N`); `None` before the first process made the tables.
pub fn holder(schema: &Schema, key: &str) -> Option<u32> {
    schema
        .column(&format!(
            "SELECT m.about FROM leases l JOIN members m ON m.id = l.holder
             WHERE l.key = '{key}' AND l.expires_at > now()"
        ))
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .next()
        .and_then(|about| about.rsplit(' ').next()?.parse().ok())
}

/// How many partitions each live process holds, fewest first.
pub fn shares(schema: &Schema) -> Vec<usize> {
    schema
        .column(
            "SELECT count(*) FROM leases WHERE key LIKE 'partition:%' AND holder IS NOT NULL
             AND expires_at > now() GROUP BY holder ORDER BY 1",
        )
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// Waits (60 s at most) until `done` holds of the database.
pub fn wait_db(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
