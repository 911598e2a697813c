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
mod hooks;
mod live_rooms;
mod paths;
mod platforms;
mod rooms;
mod schedules;
mod unknown_keys;
mod web;

pub use agents::AgentConfig;
use agents::{AgentKind, RawAgent};

pub use web::WebSettings;
use web::{RawWeb, web_settings};

use rooms::{LayerCtx, RawRoom, check_resolved, room_layer};

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
use tactful_agents::kb::{KbAgent, KbDoc};
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
    /// `[store] path`: the SQLite file state is kept in. Relative paths are
    /// read from the config's folder; default `tactful.db` there;
    /// `:memory:` keeps nothing across restarts.
    pub store: PathBuf,
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
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStore {
    path: Option<Spanned<EnvString>>,
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
    let store = match raw.store.as_ref().and_then(|s| s.path.as_ref()) {
        Some(p) if p.get_ref().0.trim().is_empty() => {
            return Err(check.at(
                p.span(),
                "`store.path` is empty: name a file, or \":memory:\" to keep nothing",
            ));
        }
        Some(p) if p.get_ref().0 == ":memory:" => PathBuf::from(":memory:"),
        Some(p) => folder.join(&p.get_ref().0),
        None => folder.join("tactful.db"),
    };

    Ok(Config {
        notes: advice::literal_secrets(check.src),
        path: check.path.to_owned(),
        server,
        console_token,
        store,
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
mod tests {
    use super::*;

    fn parse(src: &str) -> Result<Config, ConfigError> {
        Config::parse(src, Path::new("t.toml"), &|k| {
            (k == "TOKEN").then(|| "s3cret".to_owned())
        })
    }

    const MINIMAL: &str = r#"
[[persona]]
id = "docs"
agent = "main"

[agents.main]
kind = "script"
rules = [{ when = "(?i)reset", reply = "[[reply_to:{msg_id}]]\nHold the button." }]
"#;

    #[test]
    fn minimal_config_loads_with_defaults() {
        let c = parse(MINIMAL).expect("valid");
        assert_eq!(c.engine.personas.len(), 1);
        assert_eq!(c.engine.personas[0].name.as_ref(), "docs");
        let p = c.engine.policies.resolve(&"any".into(), &"docs".into());
        assert_eq!(p.mode, Mode::Mention);
        assert_eq!(p.rate_limit.map(|r| r.replies), Some(6));
    }

    fn err(src: &str) -> ConfigError {
        parse(src).expect_err("should fail")
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let e = err(&format!(
            "{MINIMAL}\n[rooms.default]\nmode = \"all\"\nmod = \"x\"\n"
        ));
        assert_eq!(e.position.map(|p| p.0), Some(12), "{e}");
        assert!(e.message.contains("unknown field `mod`"), "{e}");
        assert!(e.to_string().starts_with("t.toml:12:1: "), "{e}");
    }

    #[test]
    fn bad_values_name_their_line() {
        let e = err(&format!("{MINIMAL}\n[rooms.default]\nmode = \"loud\"\n"));
        assert_eq!(e.position.map(|p| p.0), Some(11));
        assert!(e.message.contains("loud"));
        let e = err(&format!("{MINIMAL}\n[rooms.default]\nmax_bot_turns = 0\n"));
        assert_eq!(e.position.map(|p| p.0), Some(11));
        assert!(e.message.contains("rooms.default.max_bot_turns"), "{e}");
        let e = err(&format!(
            "{MINIMAL}\n[rooms.default]\nrate_limit = {{ replies = 0, per_seconds = 5 }}\n"
        ));
        assert_eq!(e.position.map(|p| p.0), Some(11));
        assert!(e.message.contains("replies"), "{e}");
    }

    #[test]
    fn cross_references_are_checked() {
        let e = err(
            "[[persona]]\nid = \"docs\"\nagent = \"nope\"\n[agents.main]\nkind = \"script\"\nrules = []\n",
        );
        assert_eq!(e.position.map(|p| p.0), Some(3));
        assert!(
            e.message.contains("persona[0].agent") && e.message.contains("main"),
            "{e}"
        );
        let e = err(&format!("{MINIMAL}\n[rooms.ops.personas.chef]\nmode = \"all\"\n"));
        assert_eq!(e.position.map(|p| p.0), Some(10));
        assert!(e.message.contains("rooms.ops.personas.chef"), "{e}");
        let e = err(&format!(
            "{MINIMAL}\n[[persona]]\nid = \"DOCS\"\nagent = \"main\"\n"
        ));
        assert!(e.message.contains("already used"), "{e}");
        let e = err("[[persona]]\nid = \"docs bot\"\nagent = \"m\"\n");
        assert!(e.message.contains("@handle"), "{e}");
        let e = err("[agents.m]\nkind = \"script\"\nrules = [{ when = \"(\" }]\n");
        assert_eq!(e.position.map(|p| p.0), Some(3));
        assert!(e.message.contains("regular expression"), "{e}");
    }

    #[test]
    fn env_is_expanded_and_missing_vars_are_errors_without_values() {
        let c = parse(&MINIMAL.replace("Hold the button.", "key ${TOKEN} $${LITERAL}")).expect("valid");
        let AgentConfig::Script(agent) = &c.agents["main"] else {
            panic!("a script agent")
        };
        assert!(format!("{agent:?}").contains("key s3cret ${LITERAL}"));
        let e = err(&MINIMAL.replace("Hold the button.", "${MISSING_VAR}"));
        assert_eq!(e.position.map(|p| p.0), Some(8));
        assert!(e.message.contains("MISSING_VAR"), "{e}");
        // A failing config never echoes a secret that was expanded.
        let e = err(&format!(
            "{}\n[rooms.default]\nsilence_token = \"${{TOKEN}}\"\nbogus = 1\n",
            MINIMAL
        ));
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }

    #[test]
    fn rate_limit_can_be_switched_off_and_layers_apply() {
        let c = parse(&format!(
            "{MINIMAL}\n[rooms.default]\nrate_limit = \"off\"\n[rooms.\"#ops\"]\nmode = \"observe\"\n[rooms.\"#ops\".personas.docs]\nmode = \"all\"\n"
        ))
        .expect("valid");
        let p = c.engine.policies.resolve(&"x".into(), &"docs".into());
        assert_eq!(p.rate_limit, None);
        assert_eq!(
            c.engine.policies.resolve(&"#ops".into(), &"docs".into()).mode,
            Mode::All
        );
    }

    #[test]
    fn context_limits_are_checked() {
        let e = err(&format!("{MINIMAL}\n[context]\nhistory = 10\nmax_turns = 20\n"));
        assert!(e.message.contains("max_turns"), "{e}");
        let e = err(&format!("{MINIMAL}\n[context]\nmax_chars = 0\n"));
        assert!(e.message.contains("context.max_chars"), "{e}");
    }

    const PERSONA: &str = "[[persona]]\nid = \"docs\"\nagent = \"main\"\n\n";

    #[test]
    fn agent_kinds_load_with_defaults_and_env() {
        let c = parse(&format!(
            "{PERSONA}[agents.main]\nkind = \"openai\"\nmodel = \"gpt-4o-mini\"\napi_key = \"${{TOKEN}}\"\n\n[agents.cmd]\nkind = \"command\"\ncommand = \"./agent\"\nargs = [\"--fast\"]\nenv = {{ KEY = \"${{TOKEN}}\" }}\n"
        ))
        .expect("valid");
        let AgentConfig::OpenAi(o) = &c.agents["main"] else {
            panic!("openai")
        };
        assert_eq!(o.base_url, "https://api.openai.com/v1");
        assert_eq!(o.api_key.as_deref(), Some("s3cret"));
        assert_eq!(o.timeout, Duration::from_secs(60));
        let AgentConfig::Command(cmd) = &c.agents["cmd"] else {
            panic!("command")
        };
        assert_eq!(
            (cmd.command.as_str(), cmd.args.as_slice()),
            ("./agent", &["--fast".to_owned()][..])
        );
        assert_eq!(cmd.env["KEY"], "s3cret");
        assert_eq!(c.contract.as_ref(), tactful_core::prompt::DEFAULT_CONTRACT);
    }

    #[test]
    fn agent_keys_are_checked_against_their_kind() {
        let e = err(&format!(
            "{PERSONA}[agents.main]\nkind = \"command\"\ncommand = \"x\"\nmodel = \"gpt\"\n"
        ));
        assert_eq!(e.position.map(|p| p.0), Some(8), "{e}");
        assert!(
            e.message
                .contains("`agents.main.model` does not apply to kind = \"command\""),
            "{e}"
        );
        let e = err(&format!("{PERSONA}[agents.main]\nkind = \"openai\"\n"));
        assert!(e.message.contains("`agents.main.model` is required"), "{e}");
        let e = err(&format!("{PERSONA}[agents.main]\nkind = \"command\"\n"));
        assert!(e.message.contains("`agents.main.command` is required"), "{e}");
        let e = err(&format!(
            "{PERSONA}[agents.main]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"localhost:11434\"\n"
        ));
        assert!(e.message.contains("http://"), "{e}");
        let e = err(&format!(
            "{PERSONA}[agents.main]\nkind = \"openai\"\nmodel = \"m\"\nheaders = {{ \"bad header\" = \"v\" }}\n"
        ));
        assert!(e.message.contains("bad header"), "{e}");
        let e = err(&format!("{PERSONA}[agents.main]\nkind = \"llama\"\n"));
        assert!(e.message.contains("unknown variant `llama`"), "{e}");
    }

    #[test]
    fn acp_agents_load_and_their_permissions_are_checked() {
        let c = parse(&format!(
            "{PERSONA}[agents.main]\nkind = \"acp\"\ncommand = \"claude-code-acp\"\nallow_permissions = [\"read\", \"search\"]\n"
        ))
        .expect("valid");
        let AgentConfig::Acp(a) = &c.agents["main"] else {
            panic!("acp")
        };
        assert_eq!(a.allow_permissions, ["read", "search"]);
        assert_eq!((a.session_ttl, a.max_sessions), (Duration::from_secs(1800), 32));
        assert_eq!(a.inactivity_timeout, Duration::from_secs(120));
        let e = err(&format!(
            "{PERSONA}[agents.main]\nkind = \"acp\"\ncommand = \"x\"\nallow_permissions = [\"read\", \"everything\"]\n"
        ));
        assert_eq!(e.position.map(|p| p.0), Some(8), "{e}");
        assert!(e.message.contains("\"everything\" is not a tool kind"), "{e}");
        let e = err(&format!(
            "{PERSONA}[agents.main]\nkind = \"acp\"\ncommand = \"x\"\ntimeout_ms = 5\n"
        ));
        assert!(e.message.contains("does not apply to kind = \"acp\""), "{e}");
        let e = err(&format!(
            "{PERSONA}[agents.main]\nkind = \"acp\"\ncommand = \"x\"\nmax_sessions = 0\n"
        ));
        assert!(e.message.contains("max_sessions"), "{e}");
    }

    #[test]
    fn instructions_file_replaces_the_contract() {
        let dir = std::env::temp_dir().join(format!("tactful-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("contract.md"), "Be {name}. {silence}").expect("write");
        let src = format!("instructions_file = \"contract.md\"\n{MINIMAL}");
        let c = Config::parse(&src, &dir.join("tactful.toml"), &|_| None).expect("valid");
        assert_eq!(c.contract.as_ref(), "Be {name}. {silence}");
        let e = Config::parse(&src, &dir.join("sub/tactful.toml"), &|_| None).expect_err("missing file");
        assert_eq!(e.position.map(|p| p.0), Some(1));
        assert!(e.message.contains("instructions_file"), "{e}");
    }

    #[test]
    fn expand_env_handles_edge_cases() {
        let env = |k: &str| (k == "A").then(|| "1".to_owned());
        assert_eq!(expand_env("$A ${A} $${A} $", &env).as_deref(), Ok("$A 1 ${A} $"));
        assert!(expand_env("${A", &env).is_err());
        assert!(expand_env("${}", &env).is_err());
        assert!(expand_env("${B}", &env).is_err());
    }
}

#[cfg(all(test, feature = "matrix"))]
mod matrix_tests {
    use super::*;

    const BASE: &str = r#"
[[persona]]
id = "docs"
agent = "main"
matrix = { user_id = "@docs:example.org", password = "pw" }

[agents.main]
kind = "script"
rules = []
"#;

    fn parse(src: &str) -> Result<Config, ConfigError> {
        Config::parse(src, Path::new("t.toml"), &|_| None)
    }

    #[test]
    fn a_matrix_account_per_persona() {
        let c = parse(&format!(
            "{BASE}\n[platforms.matrix]\nhomeserver = \"https://matrix.example.org/\"\ninvites_from = [\"example.org\"]\nrooms = [\"#team:example.org\"]\n"
        ))
        .expect("valid");
        let m = c
            .platforms
            .get::<tactful_matrix::MatrixSettings>("matrix")
            .cloned()
            .expect("matrix");
        assert_eq!(m.homeserver, "https://matrix.example.org");
        assert_eq!(m.personas[0].user_id, "@docs:example.org");
        assert!(matches!(&m.personas[0].auth, tactful_matrix::MatrixAuth::Password(p) if p == "pw"));
        assert_eq!(m.rooms, ["#team:example.org"]);
        assert_eq!(
            tactful_matrix::config::describe(&m, &["@docs:example.org".to_owned()]),
            "on Matrix at https://matrix.example.org as @docs:example.org"
        );
    }

    /// The platform registry: sections are cut out for their crates, and
    /// mistakes around them still name their line.
    #[test]
    fn platform_sections_are_read_by_their_platform_with_lines() {
        let e = parse(&format!("{BASE}\n[platforms.telegraph]\ntoken = \"x\"\n")).expect_err("unknown");
        assert_eq!(e.position.map(|p| p.0), Some(11), "{e}");
        assert!(e.message.contains("unknown platform `telegraph`"), "{e}");
        // An unknown key inside a platform's own section: its line.
        let e = parse(&format!(
            "{BASE}\n[platforms.matrix]\nhomeserver = \"https://m.example.org\"\nhomesever = \"x\"\n"
        ))
        .expect_err("typo");
        assert_eq!(e.position.map(|p| p.0), Some(13), "{e}");
        assert!(e.message.contains("unknown field `homesever`"), "{e}");
        // ... and inside a persona's sub-table for it.
        let typo = BASE.replace("password = \"pw\"", "pasword = \"pw\"");
        let e = parse(&format!(
            "{typo}\n[platforms.matrix]\nhomeserver = \"https://m.example.org\"\n"
        ))
        .expect_err("persona typo");
        assert_eq!(e.position.map(|p| p.0), Some(5), "{e}");
        assert!(e.message.contains("unknown field `pasword`"), "{e}");
        assert!(!e.to_string().contains("\"pw\""), "the secret stays masked: {e}");
        let web = BASE.replace("matrix = {", "web = { x = 1 }\nmatrix = {");
        let e = parse(&format!(
            "{web}\n[platforms.matrix]\nhomeserver = \"https://m.example.org\"\n"
        ))
        .expect_err("persona web");
        assert!(
            e.message.contains("the web room has no per-persona settings"),
            "{e}"
        );
        // ${ENV} expands inside a platform's section too.
        let c = Config::parse(
            &format!("{BASE}\n[platforms.matrix]\nhomeserver = \"${{HS}}\"\n"),
            Path::new("t.toml"),
            &|k| (k == "HS").then(|| "https://hs.example.org".to_owned()),
        )
        .expect("valid");
        assert_eq!(
            c.platforms
                .get::<tactful_matrix::MatrixSettings>("matrix")
                .map(|m| m.homeserver.as_str()),
            Some("https://hs.example.org")
        );
    }

    #[test]
    fn matrix_mistakes_name_key_and_line() {
        let e = parse(&format!(
            "{BASE}\n[platforms.matrix]\nhomeserver = \"matrix.example.org\"\n"
        ))
        .expect_err("no scheme");
        assert_eq!(e.position.map(|p| p.0), Some(12), "{e}");
        assert!(e.message.contains("platforms.matrix.homeserver"), "{e}");

        let e = parse(BASE).expect_err("no platform table");
        assert!(e.message.contains("no [platforms.matrix] table"), "{e}");

        let bad_user = BASE.replace("@docs:example.org", "docs");
        let e = parse(&format!(
            "{bad_user}\n[platforms.matrix]\nhomeserver = \"https://m.example.org\"\n"
        ))
        .expect_err("bad user id");
        assert_eq!(e.position.map(|p| p.0), Some(5), "{e}");
        assert!(e.message.contains("persona[0].matrix.user_id"), "{e}");

        let both = BASE.replace("password = \"pw\"", "password = \"pw\", access_token = \"t\"");
        let e = parse(&format!(
            "{both}\n[platforms.matrix]\nhomeserver = \"https://m.example.org\"\n"
        ))
        .expect_err("both secrets");
        assert!(e.message.contains("keep one"), "{e}");
        assert!(!e.message.contains("\"pw\""), "no secret in the message: {e}");

        let e = parse(&format!(
            "{BASE}\n[platforms.matrix]\nhomeserver = \"https://m.example.org\"\nrooms = [\"team\"]\n"
        ))
        .expect_err("bad room");
        assert_eq!(e.position.map(|p| p.0), Some(13), "{e}");
    }
}
