//! Reloading the config file while `tactful run` runs (SIGHUP).
//!
//! The file is read and checked first, with the same rules and messages as
//! `tactful check`; a file that does not pass changes nothing (the error,
//! with its line, is logged and the running config stays). A file that
//! passes has its room policies (`[rooms.*]`) applied to the running
//! engine at once; transcripts, ambient buffers, rate ledgers and turns in
//! flight are kept. Other sections that changed (personas, agents,
//! platforms, hooks, schedules, the store or the server) are not applied
//! yet: they are named in a WARN line as needing a restart, and the next
//! reload compares against what actually runs.
//!
//! The console's `POST /console/api/reload` runs the same [`Reloader`]
//! (they share one, so they never race over what runs).

use std::path::PathBuf;

use std::sync::Arc;

use crate::live_policies::LivePolicies;

use crate::config::Config;

/// What one reload did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Reloaded {
    /// The file did not pass its check; nothing changed.
    Refused {
        /// Why, with the file's line.
        error: String,
    },
    /// Room policies applied; `restart_needed` names the other sections
    /// that changed but are not applied.
    Applied {
        /// Whether `[rooms.*]` changed (and was applied).
        rooms_changed: bool,
        /// Top-level sections changed in the file but not applied.
        restart_needed: Vec<String>,
    },
}

/// The running config as far as a reload is concerned.
pub struct Reloader {
    path: PathBuf,
    /// The file's sections as they run now.
    running: toml::Table,
    policies: Arc<LivePolicies>,
}

impl Reloader {
    /// A reloader for the service started from `config` (read from its
    /// file, as it was read at start).
    pub fn new(config: &Config, policies: Arc<LivePolicies>) -> Reloader {
        Reloader {
            path: config.path.clone(),
            running: sections(&config.path).unwrap_or_default(),
            policies,
        }
    }

    /// Reads the file again and applies what can be applied live.
    pub fn reload(&mut self) -> Reloaded {
        let config = match Config::load(&self.path) {
            Ok(c) => c,
            Err(e) => {
                let e = e.to_string();
                tracing::error!("the config was not reloaded; the running one stays: {e}");
                return Reloaded::Refused { error: e };
            }
        };
        let new = sections(&self.path).unwrap_or_default();
        let changed = |key: &str| self.running.get(key) != new.get(key);
        let rooms_changed = changed("rooms");
        let mut keys: Vec<&String> = self.running.keys().chain(new.keys()).collect();
        keys.sort();
        keys.dedup();
        let restart_needed: Vec<String> = keys
            .into_iter()
            .filter(|k| k.as_str() != "rooms" && changed(k))
            .cloned()
            .collect();
        if rooms_changed {
            // The console's layers stay on top of the file's new ones.
            self.policies.file_reloaded(config);
            match new.get("rooms") {
                Some(r) => self.running.insert("rooms".to_owned(), r.clone()),
                None => self.running.remove("rooms"),
            };
        }
        if restart_needed.is_empty() {
            tracing::info!(rooms_changed, "config reloaded");
        } else {
            tracing::warn!(
                rooms_changed,
                "config reloaded; these sections changed but apply only after a restart: {}",
                restart_needed.join(", ")
            );
        }
        Reloaded::Applied {
            rooms_changed,
            restart_needed,
        }
    }
}

/// The file's top-level tables, `${ENV}` unexpanded (a change of an
/// environment variable alone is not seen).
fn sections(path: &std::path::Path) -> Option<toml::Table> {
    std::fs::read_to_string(path).ok()?.parse::<toml::Table>().ok()
}

/// Watches SIGHUP from now on: from this call, SIGHUP no longer stops the
/// process (its default). Call it before anything slow at start.
#[cfg(unix)]
pub fn watch_sighup() -> Option<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .inspect_err(|e| tracing::warn!("cannot watch SIGHUP, so the config cannot be reloaded: {e}"))
        .ok()
}

/// One [`Reloader`] for SIGHUP and the console.
pub type SharedReloader = Arc<std::sync::Mutex<Reloader>>;

/// Reloads with the shared reloader, off the async threads (it reads the
/// file); `why` says in the log what asked.
pub async fn reload_shared(reloader: &SharedReloader, why: &'static str) -> Reloaded {
    let reloader = reloader.clone();
    tokio::task::spawn_blocking(move || {
        let mut r = reloader.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        tracing::info!(path = %r.path.display(), "{why}: reloading the config");
        r.reload()
    })
    .await
    .unwrap_or_else(|e| Reloaded::Refused {
        error: format!("the reload stopped: {e}"),
    })
}

/// Reloads on every SIGHUP until the process ends.
#[cfg(unix)]
pub async fn on_sighup(mut hup: tokio::signal::unix::Signal, reloader: SharedReloader) {
    while hup.recv().await.is_some() {
        reload_shared(&reloader, "SIGHUP").await;
    }
}
