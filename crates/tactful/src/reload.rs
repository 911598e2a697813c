//! Reloading the config file while `tactful run` runs (SIGHUP, or the
//! console's `POST /console/api/reload`).
//!
//! The file is read and checked first, with the same rules and messages as
//! `tactful check`; a file that does not pass changes nothing (the error,
//! with its line, is logged and the running config stays). A file that
//! passes is applied at once, section by section, keeping transcripts,
//! ambient buffers, rate ledgers and turns in flight:
//! - `[rooms.*]`: every room's policies, from its next message on (the
//!   console's layers stay on top);
//! - `[[persona]]`, `[agents.*]`, `instructions_file`: the engine's personas
//!   (added, changed in place, or removed: a removed persona's turns end
//!   `cancelled`) and the agents later turns use; an agent whose table did
//!   not change keeps its running backend (an ACP agent's sessions);
//! - a chat platform whose `[platforms.<name>]` table or personas'
//!   `<name> = {...}` tables changed reconnects with the new settings.
//!
//! What cannot change under a running process (the store, `[server]`,
//! `[runtime]`, `[context]`, hooks, schedules, the web room's own table, a
//! platform added or removed) is named in a WARN line and in the answer as
//! needing a restart; the next reload compares against what actually runs.
//!
//! SIGHUP and the console share one [`Reloader`], so they never race over
//! what runs.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use tactful_agents::Agent;
use tactful_agents::kb::{KbDoc, KbQuestions};
use tactful_runtime::{PlatformSlot, RuntimeHandle};
use tactful_web::WebPlatform;

use crate::config::{AgentConfig, Config};
use crate::live_policies::LivePolicies;

/// What one reload did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Reloaded {
    /// The file did not pass its check (or the engine refused its
    /// personas); nothing changed.
    Refused {
        /// Why, with the file's line.
        error: String,
    },
    /// Applied; `restart_needed` names what changed but is not.
    Applied {
        /// Whether `[rooms.*]` changed (and was applied).
        rooms_changed: bool,
        /// Persona ids added (or back).
        personas_added: Vec<String>,
        /// Persona ids whose settings changed.
        personas_changed: Vec<String>,
        /// Persona ids removed (their turns were cancelled).
        personas_removed: Vec<String>,
        /// `[agents]` keys whose backend was rebuilt.
        agents_rebuilt: Vec<String>,
        /// Chat platforms reconnected with new settings.
        platforms_reconnected: Vec<String>,
        /// What changed in the file but applies only after a restart.
        restart_needed: Vec<String>,
    },
}

/// What a reload reaches in the running service.
pub struct Running {
    /// The room policies (file and console layers).
    pub policies: Arc<LivePolicies>,
    /// The runtime, for personas and agents.
    pub runtime: RuntimeHandle,
    /// The agents the engine runs with, by `[agents]` key.
    pub agents: HashMap<String, Arc<dyn Agent>>,
    /// The web room, which lists the personas as members.
    pub web: Option<WebPlatform>,
    /// The chat platforms, by `[platforms]` key.
    pub platforms: Vec<Arc<PlatformSlot>>,
}

/// The running config as far as a reload is concerned.
pub struct Reloader {
    path: PathBuf,
    /// The file's sections as they run now.
    running: toml::Table,
    /// The contract text agents were built with.
    contract: Arc<str>,
    /// What each kb agent read from files beside the config (its
    /// documents, its example questions): a change there rebuilds it
    /// though its table did not change.
    kb_read: BTreeMap<String, KbRead>,
    service: Running,
}

/// A kb agent's documents and example questions, as read from its files.
type KbRead = (Vec<KbDoc>, Vec<KbQuestions>);

/// What each kb agent of `c` read from its files.
fn kb_read(c: &Config) -> BTreeMap<String, KbRead> {
    c.agents
        .iter()
        .filter_map(|(name, a)| match a {
            AgentConfig::Kb { docs, questions, .. } => {
                Some((name.clone(), (docs.clone(), questions.clone())))
            }
            _ => None,
        })
        .collect()
}

/// The sections a reload applies; anything else that changed waits for a
/// restart.
const LIVE: &[&str] = &["rooms", "persona", "agents", "instructions_file", "platforms"];

impl Reloader {
    /// A reloader for the service started from `config` (read from its
    /// file, as it was read at start).
    pub fn new(config: &Config, service: Running) -> Reloader {
        Reloader {
            path: config.path.clone(),
            running: sections(&config.path).unwrap_or_default(),
            contract: config.contract.clone(),
            kb_read: kb_read(config),
            service,
        }
    }

    /// Reads the file again and applies what can be applied live.
    pub async fn reload(&mut self) -> Reloaded {
        let path = self.path.clone();
        let read = tokio::task::spawn_blocking(move || (Config::load(&path), sections(&path))).await;
        let (config, new) = match read {
            Ok((Ok(c), new)) => (c, new.unwrap_or_default()),
            Ok((Err(e), _)) => return refused(e.to_string()),
            Err(e) => return refused(format!("the reload stopped: {e}")),
        };
        let old = &self.running;
        let changed = |key: &str| old.get(key) != new.get(key);
        let mut restart_needed: Vec<String> = keys(old, &new)
            .into_iter()
            .filter(|k| !LIVE.contains(&k.as_str()) && changed(k))
            .collect();

        // Personas and agents, through the engine (which may refuse).
        let mut personas = PersonaChanges::default();
        let mut agents_rebuilt = Vec::new();
        let read = kb_read(&config);
        if changed("persona") || changed("agents") || changed("instructions_file") || read != self.kb_read {
            let (agents, rebuilt) = self.agents(&config, &new, &read);
            let update = tactful_runtime::Personas {
                personas: config.engine.personas.clone(),
                agents: agents.clone(),
                reasoning_kept: config.engine.reasoning_kept.clone(),
            };
            match self.service.runtime.set_personas(update).await {
                Ok(done) => {
                    personas = PersonaChanges {
                        added: ids(&done.added),
                        changed: ids(&done.changed),
                        removed: ids(&done.removed),
                    };
                    self.service.agents = agents;
                    agents_rebuilt = rebuilt;
                    self.contract = config.contract.clone();
                    self.kb_read = read;
                    if let Some(web) = &self.service.web {
                        web.set_personas(&config.engine.personas);
                    }
                }
                Err(Some(e)) => return refused(format!("{}: {e}", self.path.display())),
                Err(None) => return refused("the service is stopping".to_owned()),
            }
        }

        // Platforms: each one whose settings changed reconnects.
        let mut platforms_reconnected = Vec::new();
        let (old_p, new_p) = (platform_parts(old), platform_parts(&new));
        let names: Vec<&String> = old_p.keys().chain(new_p.keys()).collect();
        let mut rebuild = Vec::new();
        for name in names {
            if old_p.get(name) == new_p.get(name) || rebuild.contains(name) || restart_needed.contains(name) {
                continue;
            }
            let running = self.service.platforms.iter().any(|s| s.name() == name.as_str());
            let wanted = config.platforms.connected.iter().any(|(n, _)| n == name);
            // Sharing the store, a platform's accounts are leased from the
            // config read at start: a reload cannot move them.
            if name == "web" || !running || !wanted || config.cluster.is_some() {
                restart_needed.push(format!("platforms.{name}"));
            } else {
                rebuild.push(name.clone());
            }
        }
        if !rebuild.is_empty() {
            let (cfg, names) = (config.clone(), rebuild.clone());
            let built = tokio::task::spawn_blocking(move || crate::registry::build_some(&cfg, &names))
                .await
                .unwrap_or_else(|e| Err(anyhow::anyhow!("the setup stopped: {e}")));
            match built {
                Ok(built) => {
                    for (name, platform) in built {
                        if let Some(slot) = self.service.platforms.iter().find(|s| s.name() == name) {
                            slot.replace(platform, self.service.runtime.clone()).await;
                            platforms_reconnected.push(name.to_owned());
                        }
                    }
                }
                Err(e) => {
                    tracing::error!(
                        "the reloaded platforms could not be set up; the running ones stay: {e:#}"
                    );
                    restart_needed.extend(rebuild.iter().map(|n| format!("platforms.{n}")));
                }
            }
        }

        let rooms_changed = changed("rooms");
        // The console's layers stay on top of the file's new ones; it also
        // learns the new personas.
        self.service.policies.file_reloaded(config);
        for key in ["rooms", "persona", "agents", "instructions_file"] {
            set(&mut self.running, &new, key);
        }
        let mut platforms = new.get("platforms").cloned().and_then(|v| v.as_table().cloned());
        if let Some(running) = self.running.get("platforms").and_then(|v| v.as_table()) {
            // A platform left for a restart keeps what runs.
            for name in restart_needed.iter().filter_map(|k| k.strip_prefix("platforms.")) {
                match (running.get(name), platforms.as_mut()) {
                    (Some(v), Some(p)) => {
                        p.insert(name.to_owned(), v.clone());
                    }
                    (None, Some(p)) => {
                        p.remove(name);
                    }
                    _ => {}
                }
            }
        }
        match platforms {
            Some(p) => self.running.insert("platforms".to_owned(), toml::Value::Table(p)),
            None => self.running.remove("platforms"),
        };
        restart_needed.sort();
        restart_needed.dedup();
        let PersonaChanges {
            added,
            changed,
            removed,
        } = personas;
        let line = format!(
            "rooms_changed={rooms_changed} personas_added={added:?} personas_changed={changed:?} personas_removed={removed:?} agents_rebuilt={agents_rebuilt:?} platforms_reconnected={platforms_reconnected:?}"
        );
        if restart_needed.is_empty() {
            tracing::info!("config reloaded: {line}");
        } else {
            tracing::warn!(
                "config reloaded: {line}; these sections changed but apply only after a restart: {}",
                restart_needed.join(", ")
            );
        }
        Reloaded::Applied {
            rooms_changed,
            personas_added: added,
            personas_changed: changed,
            personas_removed: removed,
            agents_rebuilt,
            platforms_reconnected,
            restart_needed,
        }
    }

    /// The agents for `config`: the running backend of each whose table
    /// (and the contract, and for a kb what it `read` from its files) did
    /// not change, a new one for the others.
    fn agents(
        &self,
        config: &Config,
        new: &toml::Table,
        read: &BTreeMap<String, KbRead>,
    ) -> (HashMap<String, Arc<dyn Agent>>, Vec<String>) {
        let table = |t: &toml::Table, k: &str| t.get("agents").and_then(|a| a.get(k)).cloned();
        let mut rebuilt = Vec::new();
        let agents = config
            .agents
            .iter()
            .map(|(name, a)| {
                let same = table(&self.running, name) == table(new, name)
                    && self.contract == config.contract
                    && self.kb_read.get(name) == read.get(name);
                let agent = match self.service.agents.get(name) {
                    Some(running) if same => running.clone(),
                    _ => {
                        rebuilt.push(name.clone());
                        a.build(&config.contract)
                    }
                };
                (name.clone(), agent)
            })
            .collect();
        (agents, rebuilt)
    }
}

#[derive(Default)]
struct PersonaChanges {
    added: Vec<String>,
    changed: Vec<String>,
    removed: Vec<String>,
}

fn ids(list: &[tactful_core::PersonaId]) -> Vec<String> {
    list.iter().map(|p| p.to_string()).collect()
}

fn refused(error: String) -> Reloaded {
    tracing::error!("the config was not reloaded; the running one stays: {error}");
    Reloaded::Refused { error }
}

/// Every top-level key of either file, sorted.
fn keys(a: &toml::Table, b: &toml::Table) -> Vec<String> {
    let mut keys: Vec<String> = a.keys().chain(b.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    keys
}

fn set(running: &mut toml::Table, new: &toml::Table, key: &str) {
    match new.get(key) {
        Some(v) => running.insert(key.to_owned(), v.clone()),
        None => running.remove(key),
    };
}

/// Each platform's part of the file: its `[platforms.<name>]` table and
/// every persona's `<name> = {...}` table with the persona's id, so a
/// persona added to Telegram changes Telegram's part.
fn platform_parts(file: &toml::Table) -> BTreeMap<String, toml::Value> {
    let mut parts = BTreeMap::new();
    let Some(platforms) = file.get("platforms").and_then(|p| p.as_table()) else {
        return parts;
    };
    let personas = file.get("persona").and_then(|p| p.as_array());
    for (name, section) in platforms {
        let accounts: Vec<toml::Value> = personas
            .into_iter()
            .flatten()
            .filter_map(|p| {
                let part = p.get(name)?;
                Some(toml::Value::Array(vec![
                    p.get("id").cloned().unwrap_or(toml::Value::Boolean(false)),
                    part.clone(),
                ]))
            })
            .collect();
        parts.insert(
            name.clone(),
            toml::Value::Array(vec![section.clone(), toml::Value::Array(accounts)]),
        );
    }
    parts
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
pub type SharedReloader = Arc<tokio::sync::Mutex<Reloader>>;

/// Reloads with the shared reloader; `why` says in the log what asked.
pub async fn reload_shared(reloader: &SharedReloader, why: &'static str) -> Reloaded {
    let mut r = reloader.lock().await;
    tracing::info!(path = %r.path.display(), "{why}: reloading the config");
    r.reload().await
}

/// Reloads on every SIGHUP until the process ends.
#[cfg(unix)]
pub async fn on_sighup(mut hup: tokio::signal::unix::Signal, reloader: SharedReloader) {
    while hup.recv().await.is_some() {
        reload_shared(&reloader, "SIGHUP").await;
    }
}

#[cfg(test)]
mod tests {
    use super::platform_parts;

    fn parts(src: &str) -> std::collections::BTreeMap<String, toml::Value> {
        platform_parts(&src.parse::<toml::Table>().expect("toml"))
    }

    /// A persona's account belongs to its platform's part: a token that
    /// changes reconnects that platform, and no other.
    #[test]
    fn a_persona_account_changes_only_its_platform_part() {
        let before = parts(
            r#"
[[persona]]
id = "docs"
telegram = { token = "a" }
[platforms.telegram]
[platforms.irc]
server = "x"
"#,
        );
        let after = parts(
            r#"
[[persona]]
id = "docs"
telegram = { token = "b" }
[platforms.telegram]
[platforms.irc]
server = "x"
"#,
        );
        assert_ne!(before["telegram"], after["telegram"]);
        assert_eq!(before["irc"], after["irc"]);
        let renamed = parts(
            r#"
[[persona]]
id = "chef"
telegram = { token = "a" }
[platforms.telegram]
[platforms.irc]
server = "x"
"#,
        );
        assert_ne!(
            before["telegram"], renamed["telegram"],
            "the account is another persona's now"
        );
        assert!(parts("[[persona]]\nid = \"docs\"\n").is_empty());
    }
}
