//! Room policies as they run: the file's layers, with the console's on
//! top: per room ([`PolicyTable::live`]) and a default one
//! ([`PolicyTable::live_default`], room `default`).
//!
//! One [`LivePolicies`] is shared by the console (which sets and reverts a
//! room's layer) and the SIGHUP reloader (which replaces the file's part):
//! whichever changes, the engine gets the whole table again through
//! [`RuntimeHandle::set_policies`], so neither loses the other's. Each
//! console layer is kept in the store as TOML (`console:policy:<room>`,
//! empty once reverted) and each change is an audit entry
//! (`console:audit:<time>:<n>`), both in one transaction of the store's
//! one writer. A change is answered once that transaction is committed, so
//! the audit read after the answer has it (it was once answered first, and
//! an audit read at once missed the change one time in eight).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use tactful_config::ConfigError;
use tactful_core::policy::{PolicyTable, RoomLayer};
use tactful_core::{RoomId, Timestamp};
use tactful_runtime::RuntimeHandle;
use tactful_store::Op;
use tactful_web::WebPlatform;

use crate::config::Config;

/// The store key prefix of a room's console layer.
pub const POLICY_KEY: &str = "console:policy:";
/// The store key prefix of audit entries.
pub const AUDIT_KEY: &str = "console:audit:";

/// How long a change waits for the store to keep it before it is answered
/// anyway, saying so.
const KEEP_WAIT: Duration = Duration::from_secs(10);

/// Why a change asked for in the console was not made, or is not yet kept.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    /// The layer does not fit the running config: nothing changed.
    #[error(transparent)]
    Refused(#[from] ConfigError),
    /// The store cannot write now: nothing changed (a change applied but
    /// never kept would be lost at the next restart, unaudited).
    #[error("the store cannot write right now ({0}); nothing was changed: try again shortly")]
    StoreDown(String),
    /// Applied, but the store has not said it kept the change.
    #[error(
        "applied, but the store has not kept it yet ({0}): the audit shows it once it has, and a restart before then loses it"
    )]
    NotKept(String),
}

/// One change made in the console.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct AuditEntry {
    /// When (Unix milliseconds).
    pub at: u64,
    /// Who: the console token's name.
    pub who: String,
    /// The room.
    pub room: String,
    /// The console layer before (TOML; `null` when there was none).
    pub old: Option<String>,
    /// After (`null` once reverted to the file).
    pub new: Option<String>,
}

/// Console layers by room: the TOML as given, and as read.
#[derive(Clone, Debug, Default)]
pub struct Layers(BTreeMap<RoomId, (String, RoomLayer)>);

impl Layers {
    /// Puts the layers on `table`: room `default` as its
    /// [`PolicyTable::live_default`], the others as [`PolicyTable::live`].
    pub fn apply_to(&self, table: &mut PolicyTable) {
        layer_table(&self.0, table);
    }
}

fn layer_table(layers: &BTreeMap<RoomId, (String, RoomLayer)>, table: &mut PolicyTable) {
    table.live.clear();
    table.live_default = None;
    for (room, (_, layer)) in layers {
        if room.as_str() == crate::config::DEFAULT_LAYER {
            table.live_default = Some(layer.clone());
        } else {
            table.live.insert(room.clone(), layer.clone());
        }
    }
}

struct Inner {
    config: Config,
    /// Each room's console layer: its TOML as given, and as read.
    live: BTreeMap<RoomId, (String, RoomLayer)>,
    seq: u64,
}

/// The running room policies; see the module docs.
pub struct LivePolicies {
    inner: Mutex<Inner>,
    /// One console change at a time, from its check until the store kept
    /// it: the store gets the changes in the order they were made.
    changes: tokio::sync::Mutex<()>,
    handle: RuntimeHandle,
    /// The web room, whose introductions say each persona's mode.
    web: Option<WebPlatform>,
}

impl LivePolicies {
    /// The console layers kept in the store (`stored`: key → TOML), read
    /// against `config`; a layer the config no longer accepts is dropped
    /// with a WARN. Read before the engine starts, so its first message
    /// already sees them.
    pub fn stored(config: &Config, stored: &BTreeMap<String, String>) -> Layers {
        let mut live = BTreeMap::new();
        for (key, toml) in stored {
            let Some(room) = key.strip_prefix(POLICY_KEY) else {
                continue;
            };
            if toml.is_empty() {
                continue;
            }
            match config.live_room_layer(room, toml) {
                Ok(layer) => {
                    live.insert(RoomId::new(room), (toml.clone(), layer));
                }
                Err(e) => tracing::warn!(
                    room,
                    "a policy set in the console no longer fits the config and is dropped: {e}"
                ),
            }
        }
        Layers(live)
    }

    /// The running policies: `config`'s file with `layers` on top (as the
    /// engine already runs them).
    pub fn new(
        config: Config,
        layers: Layers,
        handle: RuntimeHandle,
        web: Option<WebPlatform>,
    ) -> LivePolicies {
        LivePolicies {
            inner: Mutex::new(Inner {
                config,
                live: layers.0,
                seq: 0,
            }),
            changes: tokio::sync::Mutex::new(()),
            handle,
            web,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The table in force: the file's, with the console's layers.
    pub fn table(&self) -> PolicyTable {
        let inner = self.lock();
        let mut table = inner.config.engine.policies.clone();
        layer_table(&inner.live, &mut table);
        table
    }

    fn apply(&self) {
        let table = self.table();
        if let Some(web) = &self.web {
            web.set_policies(&table);
        }
        self.handle.set_policies(table);
    }

    /// Room `room`'s console layer, as given.
    pub fn live_toml(&self, room: &str) -> Option<String> {
        self.lock().live.get(&RoomId::new(room)).map(|(t, _)| t.clone())
    }

    /// The running config (the file's part).
    pub fn with_config<T>(&self, f: impl FnOnce(&Config) -> T) -> T {
        f(&self.lock().config)
    }

    /// Sets `room`'s console layer to `toml`: checked like the file, then
    /// applied at once, stored, and audited as `who`'s; resolves once the
    /// store has kept the layer and its audit entry.
    pub async fn set(
        &self,
        room: &str,
        toml: &str,
        who: &str,
        now: Timestamp,
    ) -> Result<AuditEntry, ChangeError> {
        let _one = self.changes.lock().await;
        let layer = self.with_config(|config| config.live_room_layer(room, toml))?;
        self.writable()?;
        let (entry, ops) = {
            let mut inner = self.lock();
            let old = inner
                .live
                .insert(RoomId::new(room), (toml.to_owned(), layer))
                .map(|(t, _)| t);
            self.record(&mut inner, room, old, Some(toml.to_owned()), who, now)
        };
        self.apply();
        self.kept(ops).await?;
        Ok(entry)
    }

    /// Reverts `room` to the file's policy; `None` when the console had
    /// set nothing there. Resolves once the store has kept the change.
    pub async fn revert(
        &self,
        room: &str,
        who: &str,
        now: Timestamp,
    ) -> Result<Option<AuditEntry>, ChangeError> {
        let _one = self.changes.lock().await;
        if self.live_toml(room).is_none() {
            return Ok(None);
        }
        self.writable()?;
        let (entry, ops) = {
            let mut inner = self.lock();
            let Some((old, _)) = inner.live.remove(&RoomId::new(room)) else {
                return Ok(None);
            };
            self.record(&mut inner, room, Some(old), None, who, now)
        };
        self.apply();
        self.kept(ops).await?;
        Ok(Some(entry))
    }

    /// Saves `ops` the console made that decide nothing (a label on a
    /// decision) and waits until the store has kept them, as a policy
    /// change does; refused while the store cannot write.
    pub async fn keep(&self, ops: Vec<Op>) -> Result<(), ChangeError> {
        self.writable()?;
        self.kept(ops).await
    }

    /// Refuses a change while the store cannot write: applied, it would be
    /// lost at the next restart, and never audited.
    fn writable(&self) -> Result<(), ChangeError> {
        match self.handle.saver() {
            Some(saver) if !saver.health().is_ok() => Err(ChangeError::StoreDown(
                saver
                    .health()
                    .error()
                    .unwrap_or_else(|| "unknown error".to_owned()),
            )),
            _ => Ok(()),
        }
    }

    /// Saves a change's `ops` and waits (at most [`KEEP_WAIT`]) until the
    /// store has committed them: what the answer says is then what the
    /// store, the audit and every other process read. Without a store
    /// there is nothing to wait for.
    async fn kept(&self, ops: Vec<Op>) -> Result<(), ChangeError> {
        let Some(saver) = self.handle.saver() else {
            return Ok(());
        };
        match tokio::time::timeout(KEEP_WAIT, saver.save(ops)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ChangeError::NotKept(e.to_string())),
            Err(_) => Err(ChangeError::NotKept(format!(
                "no answer within {} s",
                KEEP_WAIT.as_secs()
            ))),
        }
    }

    /// The audit entry of a change and what keeps it: the room's layer
    /// (announced to the other processes at commit) and the entry, to be
    /// saved in one transaction.
    fn record(
        &self,
        inner: &mut Inner,
        room: &str,
        old: Option<String>,
        new: Option<String>,
        who: &str,
        now: Timestamp,
    ) -> (AuditEntry, Vec<Op>) {
        let entry = AuditEntry {
            at: now.as_millis(),
            who: who.to_owned(),
            room: room.to_owned(),
            old,
            new,
        };
        inner.seq += 1;
        let ops = vec![
            Op::SharedState {
                key: format!("{POLICY_KEY}{room}"),
                value: entry.new.clone().unwrap_or_default(),
            },
            Op::PlatformState {
                key: format!("{AUDIT_KEY}{:020}:{:06}", entry.at, inner.seq),
                value: serde_json::to_string(&entry).unwrap_or_default(),
            },
        ];
        tracing::info!(
            room,
            who,
            reverted = entry.new.is_none(),
            "room policy set in the console"
        );
        (entry, ops)
    }

    /// The console layers as the store holds them now (`stored`: key →
    /// value), set by this process or another sharing the store: applied
    /// when they differ from those running. `true` if anything changed.
    pub fn sync_stored(&self, stored: &BTreeMap<String, String>) -> bool {
        let changed = {
            let mut inner = self.lock();
            let now = LivePolicies::stored(&inner.config, stored).0;
            let same = now.len() == inner.live.len()
                && now
                    .iter()
                    .zip(&inner.live)
                    .all(|((r, (t, _)), (r2, (t2, _)))| r == r2 && t == t2);
            if !same {
                inner.live = now;
            }
            !same
        };
        if changed {
            tracing::info!("room policies set in a console: applied here");
            self.apply();
        }
        changed
    }

    /// The file was reloaded: its policies replace the file's part; the
    /// console layers stay on top (one the new file no longer accepts is
    /// dropped with a WARN).
    pub fn file_reloaded(&self, config: Config) {
        {
            let mut inner = self.lock();
            inner.live.retain(|room, (toml, layer)| match config.live_room_layer(room.as_str(), toml) {
                Ok(l) => {
                    *layer = l;
                    true
                }
                Err(e) => {
                    tracing::warn!(room = %room, "a policy set in the console no longer fits the reloaded config and is dropped: {e}");
                    false
                }
            });
            inner.config = config;
        }
        self.apply();
    }
}

/// Follows the room policies set in the consoles of every process sharing
/// the store at `at` (several processes on one PostgreSQL database): a
/// layer set in one process's console decides in the room's owner, which
/// may be another. Each announcement ([`tactful_store::STATE_CHANNEL`])
/// has the layers read back from the store and applied; so does every
/// (re)start of listening, for what was announced while nobody listened.
pub fn follow_others(
    live: std::sync::Arc<LivePolicies>,
    at: tactful_store::Location,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match tactful_store::listen(&at, tactful_store::STATE_CHANNEL) {
                Ok(mut changes) => {
                    read_back(&live, &at).await;
                    while let Some(n) = changes.recv().await {
                        if n.payload.starts_with(POLICY_KEY) {
                            read_back(&live, &at).await;
                        }
                    }
                    tracing::warn!(
                        "listening for policies set in other processes' consoles stopped; listening again"
                    );
                }
                Err(e) => tracing::warn!("cannot listen for policies set in other processes' consoles: {e}"),
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    })
}

/// Reads every console layer back (all of them: a page would drop those
/// past it) and applies what changed. A console change is made by hand,
/// so a connection each time costs nothing that matters.
async fn read_back(live: &LivePolicies, at: &tactful_store::Location) {
    let at = at.clone();
    let stored = tokio::task::spawn_blocking(move || {
        tactful_store::Store::open_at(&at).and_then(|mut s| s.platform_state())
    })
    .await;
    match stored {
        Ok(Ok(state)) => {
            live.sync_stored(&state);
        }
        Ok(Err(e)) => tracing::warn!("cannot read the policies set in the consoles: {e}"),
        Err(e) => tracing::warn!("cannot read the policies set in the consoles: {e}"),
    }
}
