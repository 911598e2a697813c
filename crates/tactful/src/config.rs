//! Loading `tactful.toml`.
//!
//! The file is deserialised straight from its text so every error can name
//! the key and the line: unknown keys and bad values are reported by the
//! TOML reader with their position, and checks across keys (a persona's
//! agent must exist, a room override must name a persona...) use the spans
//! kept in [`Spanned`] fields. `${NAME}` in any string is replaced by the
//! environment variable `NAME` while reading (`$${` writes a literal `${`);
//! a missing variable is an error at its line. Expanded values never appear
//! in errors, so an API key in the environment stays out of the output.

mod advice;
mod agents;
mod budget;
mod cluster;
mod hooks;
mod live_rooms;
mod paths;
mod platforms;
mod rooms;
mod schedules;
mod store;
mod unknown_keys;
mod web;

pub use agents::{AgentConfig, questions_for};
use agents::{AgentKind, RawAgent};

pub use web::WebSettings;
use web::{RawWeb, web_settings};

use rooms::{LayerCtx, RawRoom, check_resolved, room_layer};
use store::RawStore;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use live_rooms::DEFAULT as DEFAULT_LAYER;
use regex::Regex;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use tactful_agents::acp::{AcpAgent, AcpConfig};
use tactful_agents::command::{CommandAgent, CommandConfig};
use tactful_agents::kb::{KbAgent, KbDoc, KbQuestions, QuestionsError};
use tactful_agents::openai::{OpenAiAgent, OpenAiConfig};
use tactful_agents::{Agent, ScriptAgent, ScriptRule};
use tactful_config::{Checker, EnvString, EnvValues, referenced_vars, with_env};
pub use tactful_config::{ConfigError, expand_env};
use tactful_core::engine::ContextLimits;
use tactful_core::{
    AmbientPatch, EngineConfig, GatePatch, Mode, OnError, PersonaId, PersonaSpec, PolicyPatch, PolicyTable,
    RateLimit, RoomId, RoomLayer, UserId,
};
use tactful_runtime::seam::PlatformConfig;
pub use tactful_store::Location;
use toml::Spanned;

/// The whole configuration, ready to build an engine and its agents from.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it was read from.
    pub path: PathBuf,
    /// What the engine needs.
    pub engine: EngineConfig,
    /// Agent backends by `[agents]` key.
    pub agents: BTreeMap<String, AgentConfig>,
    /// tactful's contract text for agent instructions: the built-in one, or
    /// the file named by `instructions_file`.
    pub contract: Arc<str>,
    /// `[platforms.*]`.
    pub platforms: Platforms,
    /// `[runtime]`.
    pub runtime: RuntimeSettings,
    /// `[server] listen`: where `/healthz`, `/metrics` and the console are
    /// served.
    pub server: Option<std::net::SocketAddr>,
    /// `[server] console_token`: what the console asks for (required off
    /// loopback).
    pub console_token: Option<String>,
    /// Where state is kept: `[store] path`, the SQLite file (relative
    /// paths are read from the config's folder; default `tactful.db`
    /// there; `:memory:` keeps nothing across restarts), or `[store] url`,
    /// a PostgreSQL database.
    pub store: Location,
    /// `[cluster]`: this process shares the PostgreSQL store with others,
    /// each owning a share of the rooms.
    pub cluster: Option<tactful_runtime::ClusterConfig>,
    /// `[[hook]]`: what runs the before-send hooks `engine.hooks` names.
    pub hooks: tactful_agents::hooks::Hooks,
    /// What reading the file found worth a warning (a secret written into
    /// it), for [`Config::warnings`].
    notes: Vec<String>,
}

/// The chat platforms to serve.
#[derive(Debug, Clone, Default)]
pub struct Platforms {
    /// `[platforms.web]`: the built-in web room.
    pub web: Option<WebSettings>,
    /// Every other configured platform, by table name, as its own crate
    /// read it (see `registry.rs`).
    pub connected: Vec<(&'static str, Arc<dyn PlatformConfig>)>,
}

impl Platforms {
    /// Whether any platform is configured.
    pub fn any(&self) -> bool {
        self.web.is_some() || !self.connected.is_empty()
    }

    /// The settings of platform `name`, as its crate's type `T`.
    pub fn get<T: PlatformConfig>(&self, name: &str) -> Option<&T> {
        let (_, settings) = self.connected.iter().find(|(n, _)| *n == name)?;
        (settings.as_ref() as &dyn std::any::Any).downcast_ref()
    }
}

/// `[runtime]`: how the live service behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeSettings {
    /// `edit_interval_ms`: streaming edits at most this often.
    pub edit_interval: Duration,
    /// `shutdown_grace_seconds`: how long shutdown waits for turns.
    pub shutdown_grace: Duration,
    /// `max_concurrent_turns`: agent turns running at once, process-wide;
    /// more wait in order.
    pub max_concurrent_turns: usize,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        RuntimeSettings {
            edit_interval: Duration::from_millis(1000),
            shutdown_grace: Duration::from_secs(10),
            max_concurrent_turns: tactful_runtime::DEFAULT_MAX_CONCURRENT_TURNS,
        }
    }
}

// ---------------------------------------------------------------------------
// The file's shape.

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    instructions_file: Option<Spanned<EnvString>>,
    #[serde(default)]
    persona: Vec<RawPersona>,
    #[serde(default)]
    agents: BTreeMap<Spanned<String>, RawAgent>,
    #[serde(default)]
    rooms: BTreeMap<Spanned<String>, RawRoom>,
    #[serde(default)]
    hook: Vec<hooks::RawHook>,
    #[serde(default)]
    schedule: Vec<schedules::RawSchedule>,
    #[serde(default)]
    context: Option<Spanned<RawContext>>,
    runtime: Option<RawRuntime>,
    server: Option<RawServer>,
    store: Option<RawStore>,
    cluster: Option<cluster::RawCluster>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    listen: Spanned<EnvString>,
    console_token: Option<Spanned<EnvString>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRuntime {
    edit_interval_ms: Option<Spanned<u64>>,
    shutdown_grace_seconds: Option<Spanned<u64>>,
    max_concurrent_turns: Option<Spanned<usize>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPersona {
    id: Spanned<EnvString>,
    name: Option<EnvString>,
    agent: Spanned<EnvString>,
    #[serde(default)]
    prompt: EnvString,
    #[serde(default)]
    aliases: Vec<EnvString>,
    ambient_agent: Option<Spanned<EnvString>>,
    budget: Option<budget::RawBudget>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContext {
    history: Option<usize>,
    max_turns: Option<usize>,
    max_chars: Option<usize>,
}

// ---------------------------------------------------------------------------
// From the file's shape to the engine's config.

/// Whether `id` can be written as an `@handle` (see
/// [`tactful_core::addressing::text_mentions`]).
fn is_valid_handle(id: &str) -> bool {
    let probe = format!("@{id}");
    let mut mentions = tactful_core::addressing::text_mentions(&probe);
    mentions.next() == Some(id) && mentions.next().is_none()
}

impl Config {
    /// Why the store cannot be used where the file puts it, if that can be
    /// told before opening it (its folder does not exist): `check` and
    /// `run` refuse the config with this one sentence.
    pub fn store_problem(&self) -> Option<String> {
        advice::store_problem(&self.store)
    }

    /// Where a platform may keep files of its own (Matrix's SDK state):
    /// beside the store's file, or, when the store is a database, beside
    /// the config (as `tactful.*`); nowhere for an in-memory store.
    pub fn local_files(&self) -> Option<PathBuf> {
        match &self.store {
            Location::Memory => None,
            Location::File(path) => Some(path.clone()),
            Location::Postgres(_) => Some(self.path.parent().unwrap_or(Path::new(".")).join("tactful.db")),
        }
    }

    /// What is valid but will not work as written, or not as meant: an
    /// agent's program that is not installed, a script that is not where
    /// the agent runs, a secret written into the file, an agent nothing
    /// uses. `tactful check` prints these; `tactful run` logs them at WARN.
    pub fn warnings(&self) -> Vec<String> {
        let path_var = std::env::var_os("PATH");
        let mut out = Vec::new();
        for (name, agent) in &self.agents {
            let (command, args, dir) = match agent {
                AgentConfig::Command(c) => (&c.command, &c.args, &c.working_dir),
                AgentConfig::Acp(c) => (&c.command, &c.args, &c.working_dir),
                _ => continue,
            };
            let key = format!("agents.{}", quote_key(name));
            out.extend(paths::missing(
                &key,
                command,
                args,
                dir.as_deref(),
                path_var.as_deref(),
            ));
        }
        out.extend(self.notes.iter().cloned());
        out.extend(advice::unused_agents(self));
        out.extend(advice::unencrypted_store(&self.store));
        for (_, platform) in &self.platforms.connected {
            out.extend(platform.warnings(&self.engine.policies));
        }
        for hook in self.hooks.iter() {
            if let tactful_agents::hooks::HookKind::Command(c) = &hook.kind {
                let key = format!("hook \"{}\"", hook.name);
                out.extend(paths::missing(
                    &key,
                    &c.command,
                    &c.args,
                    c.working_dir.as_deref(),
                    path_var.as_deref(),
                ));
            }
        }
        out
    }

    /// Every secret value the config holds (API keys, tokens, passwords,
    /// and environment or header values named like one), for
    /// [`tactful_core::secrets::register`]: logs and errors mask them.
    pub fn secrets(&self) -> Vec<String> {
        let named = |m: &BTreeMap<String, String>| -> Vec<String> {
            m.iter()
                .filter(|(k, _)| tactful_core::secrets::is_secret_name(k))
                .map(|(_, v)| v.clone())
                .collect()
        };
        let mut out = Vec::new();
        for agent in self.agents.values() {
            match agent {
                AgentConfig::OpenAi(c) => {
                    out.extend(c.api_key.clone());
                    out.extend(named(&c.headers));
                }
                AgentConfig::Command(c) => out.extend(named(&c.env)),
                AgentConfig::Acp(c) => out.extend(named(&c.env)),
                AgentConfig::Script(_) | AgentConfig::Kb { .. } => {}
            }
        }
        for hook in self.hooks.iter() {
            if let tactful_agents::hooks::HookKind::Command(c) = &hook.kind {
                out.extend(named(&c.env));
            }
        }
        out.extend(self.store.password());
        if let Some(web) = &self.platforms.web {
            out.extend(web.auth_token.clone());
        }
        out.extend(self.console_token.clone());
        out.extend(self.platforms.connected.iter().flat_map(|(_, p)| p.secrets()));
        out.retain(|s| !s.trim().is_empty());
        out
    }

    /// Reads and checks a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let src = std::fs::read_to_string(path).map_err(|e| ConfigError {
            path: path.to_owned(),
            position: None,
            message: format!("cannot read the config: {e}"),
            snippet: None,
        })?;
        Config::parse(&src, path, &|k| std::env::var(k).ok())
    }

    /// Parses config text; `env` answers `${NAME}` lookups.
    pub fn parse(
        src: &str,
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let check = Checker { src, path };
        // The values live in a thread-local only while this call reads.
        let values: EnvValues = referenced_vars(src)
            .into_iter()
            .filter_map(|k| env(&k).map(|v| (k, v)))
            .collect();
        let toml_error = |e: toml::de::Error| {
            let message = unknown_keys::explain(e.message(), src, e.span().map(|s| s.start));
            match e.span() {
                Some(span) => check.at(span, message),
                None => check.nowhere(message),
            }
        };
        with_env(values, || {
            // Parsed once; the platforms' parts are cut out for their
            // crates to read (spans still point into this file), the rest
            // is tactful's own.
            let mut root = toml::de::DeTable::parse(src).map_err(toml_error)?;
            let cut = platforms::cut(&mut root);
            let raw = RawConfig::deserialize(toml::de::Deserializer::from(root)).map_err(toml_error)?;
            let platforms = platforms::read_all(cut, &raw.persona, &check)?;
            build(raw, platforms, &check)
        })
    }
}

fn build(raw: RawConfig, platforms: Platforms, check: &Checker<'_>) -> Result<Config, ConfigError> {
    // Agents first: personas refer to them.
    let mut agents = BTreeMap::new();
    let mut reasoning_kept = Vec::new();
    let mut answered_with = Vec::new();
    for (name, agent) in raw.agents {
        if agent.strip_reasoning == Some(false) {
            reasoning_kept.push(Arc::from(name.get_ref().as_str()));
        }
        if let Some(with) = &agent.answer_with {
            answered_with.push((name.get_ref().clone(), with.clone()));
        }
        let built = agents::build_agent(name.get_ref(), agent, check)?;
        agents.insert(name.into_inner(), built);
    }
    agents::resolve_answer_with(&mut agents, answered_with, check)?;
    let contract: Arc<str> = match &raw.instructions_file {
        None => Arc::from(tactful_core::prompt::DEFAULT_CONTRACT),
        Some(f) => {
            let rel = Path::new(&f.get_ref().0);
            let full = check
                .path
                .parent()
                .map_or_else(|| rel.to_owned(), |dir| dir.join(rel));
            let text = std::fs::read_to_string(&full).map_err(|e| {
                check.at(
                    f.span(),
                    format!("`instructions_file`: cannot read {}: {e}", full.display()),
                )
            })?;
            Arc::from(text)
        }
    };

    if raw.persona.is_empty() {
        return Err(check.nowhere("no personas: add at least one [[persona]] table with `id` and `agent`"));
    }
    let mut personas: Vec<PersonaSpec> = Vec::new();
    for (i, p) in raw.persona.iter().enumerate() {
        let id = &p.id.get_ref().0;
        if !is_valid_handle(id) {
            return Err(check.at(
                p.id.span(),
                format!("`persona[{i}].id` = {id:?} cannot be written as an @handle: use letters, digits and `_`, with single `.` or `-` inside"),
            ));
        }
        if let Some(first) = personas
            .iter()
            .position(|q| tactful_core::addressing::handle_eq(q.id.as_str(), id))
        {
            return Err(check.at(
                p.id.span(),
                format!("`persona[{i}].id` = {id:?} is already used by persona[{first}] (ids are compared without case)"),
            ));
        }
        let agent = &p.agent.get_ref().0;
        let known_agent = |key: &str, name: &String, span| {
            if agents.contains_key(name) {
                return Ok(());
            }
            let known: Vec<&str> = agents.keys().map(String::as_str).collect();
            Err(check.at(
                span,
                format!(
                    "`persona[{i}].{key}` = {name:?} names no [agents.{name}] table (defined: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            ))
        };
        known_agent("agent", agent, p.agent.span())?;
        if let Some(a) = &p.ambient_agent {
            known_agent("ambient_agent", &a.get_ref().0, a.span())?;
        }
        personas.push(PersonaSpec {
            id: id.as_str().into(),
            name: Arc::from(p.name.as_ref().map_or(id.as_str(), |n| n.0.as_str())),
            aliases: p.aliases.iter().map(|a| UserId::new(a.0.as_str())).collect(),
            agent: Arc::from(agent.as_str()),
            prompt: Arc::from(p.prompt.0.as_str()),
            ambient_agent: p
                .ambient_agent
                .as_ref()
                .map(|a| Arc::from(a.get_ref().0.as_str())),
            budget: budget::persona_budget(p.budget.clone()),
        });
    }

    let mut policies = PolicyTable::default();
    let mut max_concurrent_flushes = EngineConfig::default().max_concurrent_flushes;
    for (room, table) in raw.rooms {
        let key = format!("rooms.{}", quote_key(room.get_ref()));
        let is_default = room.get_ref() == "default";
        let ctx = LayerCtx {
            personas: &personas,
            agents: &agents,
            check,
            is_default,
        };
        let (layer, flushes) = room_layer(&key, table, &ctx)?;
        if let Some(n) = flushes {
            max_concurrent_flushes = n;
        }
        if is_default {
            policies.default = layer;
        } else {
            policies.rooms.insert(room.into_inner().into(), layer);
        }
    }
    for (_, platform) in &platforms.connected {
        for (room, defaults) in platform.room_defaults() {
            let layer = policies.rooms.entry(room).or_default();
            layer.all = std::mem::take(&mut layer.all).over(&defaults);
        }
    }
    check_resolved(&policies, &personas, check)?;
    let (hook_scopes, hooks) = hooks::build(raw.hook, &personas, check)?;
    let schedules = schedules::build(raw.schedule, &personas, check)?;

    let mut context = ContextLimits::default();
    if let Some(c) = raw.context {
        let span = c.span();
        let c = c.into_inner();
        let positive = |v: Option<usize>, key: &str| -> Result<Option<usize>, ConfigError> {
            match v {
                Some(0) => Err(check.at(span.clone(), format!("`context.{key}` must be at least 1"))),
                v => Ok(v),
            }
        };
        if let Some(v) = positive(c.history, "history")? {
            context.history = v;
        }
        if let Some(v) = positive(c.max_turns, "max_turns")? {
            context.max_turns = v;
        }
        if let Some(v) = positive(c.max_chars, "max_chars")? {
            context.max_chars = v;
        }
        if context.max_turns > context.history {
            return Err(check.at(
                span,
                format!(
                    "`context.max_turns` ({}) cannot exceed `context.history` ({}): a turn cannot see more than the room keeps",
                    context.max_turns, context.history
                ),
            ));
        }
    }

    let mut runtime = RuntimeSettings::default();
    if let Some(r) = raw.runtime {
        if let Some(v) = &r.edit_interval_ms {
            runtime.edit_interval = Duration::from_millis(*v.get_ref());
        }
        if let Some(v) = &r.shutdown_grace_seconds {
            runtime.shutdown_grace = Duration::from_secs(*v.get_ref());
        }
        if let Some(v) = &r.max_concurrent_turns {
            runtime.max_concurrent_turns = at_least(v, 1, "runtime.max_concurrent_turns", check)?;
        }
    }

    let server: Option<std::net::SocketAddr> = match &raw.server {
        Some(s) => Some(s.listen.get_ref().0.parse().map_err(|_| {
            check.at(
                s.listen.span(),
                "`server.listen` must be an address and port, like \"127.0.0.1:9090\"",
            )
        })?),
        None => None,
    };
    let console_token = raw
        .server
        .as_ref()
        .and_then(|s| s.console_token.as_ref())
        .map(|t| t.get_ref().0.trim().to_owned());
    if let (Some(s), Some(addr)) = (&raw.server, server) {
        if console_token.as_deref() == Some("") {
            let span = s.console_token.as_ref().map_or(s.listen.span(), |t| t.span());
            return Err(check.at(span, "`server.console_token` is empty: give it a long random value, or leave it out on a loopback address"));
        }
        if console_token.is_none() && !addr.ip().is_loopback() {
            return Err(check.at(
                s.listen.span(),
                format!("`server.listen` = {addr} is reachable from other machines: set `server.console_token` (the console shows every room and can change how personas behave)"),
            ));
        }
    }

    let folder = check.path.parent().unwrap_or(Path::new("."));
    let store = store::location(check, raw.store.as_ref(), folder)?;
    let cluster = cluster::settings(check, raw.cluster.as_ref(), &store)?;

    Ok(Config {
        notes: advice::literal_secrets(check.src),
        path: check.path.to_owned(),
        server,
        console_token,
        store,
        cluster,
        platforms,
        runtime,
        engine: EngineConfig {
            personas,
            policies,
            context,
            max_concurrent_flushes,
            seed: 0,
            reasoning_kept,
            hooks: hook_scopes,
            schedules,
        },
        hooks,
        agents,
        contract,
    })
}

fn quote_key(k: &str) -> String {
    if !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        k.to_owned()
    } else {
        format!("{k:?}")
    }
}

fn persona_ids(personas: &[PersonaSpec]) -> String {
    personas
        .iter()
        .map(|p| p.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks a whole number is at least `min`.
fn at_least<T: Copy + PartialOrd + fmt::Display>(
    v: &Spanned<T>,
    min: T,
    key: &str,
    check: &Checker<'_>,
) -> Result<T, ConfigError> {
    let x = *v.get_ref();
    if x < min {
        return Err(check.at(v.span(), format!("`{key}` must be at least {min}, got {x}")));
    }
    Ok(x)
}

/// Checks a number of seconds is finite and in `[min, max]` (`min`
/// excluded when `exclusive_min`).
fn seconds(
    v: &Spanned<f64>,
    key: &str,
    exclusive_min: bool,
    check: &Checker<'_>,
) -> Result<Duration, ConfigError> {
    let x = *v.get_ref();
    let low_ok = if exclusive_min { x > 0.0 } else { x >= 0.0 };
    if !x.is_finite() || !low_ok || x > 86_400.0 {
        let low = if exclusive_min {
            "more than 0"
        } else {
            "at least 0"
        };
        return Err(check.at(
            v.span(),
            format!("`{key}` must be {low} and at most 86400 seconds, got {x}"),
        ));
    }
    Ok(Duration::from_secs_f64(x))
}

#[cfg(test)]
mod tests;
