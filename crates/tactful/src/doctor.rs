//! `tactful doctor -c FILE`: what `check` cannot see from the file alone.
//! Each agent gets a one-word turn (through the engine, with the prompt a
//! live turn would have), each platform account is checked against its
//! service (`getMe`, `users/@me`, `auth.test` and `apps.connections.open`,
//! `whoami`, an IRC welcome), the store's folder must be writable and the
//! listeners' ports free. One row per check, with a fix for each failure;
//! everything is masked as the logs are (the config's secrets never show).
//!
//! Nothing is changed: no message is sent, no room joined, the store is
//! only read. Checks run one after another, each bounded in time.

use std::time::{Duration, Instant};

use serde::Serialize;
use tactful_core::secrets::redact;
use tactful_core::{EngineConfig, Message, Output, PersonaSpec, Timestamp};

use crate::config::{AgentConfig, Config};

/// How long an agent has to answer the doctor's turn.
const AGENT_WAIT: Duration = Duration::from_secs(60);

/// One check and what it found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Row {
    /// What was checked: `agent main`, `Telegram docs (getMe)`, `store`.
    pub what: String,
    /// Whether it passed.
    pub ok: bool,
    /// What it found, or why it failed.
    pub detail: String,
    /// What to do, for a failure.
    pub fix: Option<String>,
}

impl Row {
    fn ok(what: impl Into<String>, detail: impl Into<String>) -> Row {
        Row {
            what: what.into(),
            ok: true,
            detail: redact(&detail.into()).into_owned(),
            fix: None,
        }
    }

    fn failed(what: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Row {
        Row {
            what: what.into(),
            ok: false,
            detail: redact(&detail.into()).into_owned(),
            fix: Some(redact(&fix.into()).into_owned()),
        }
    }
}

/// Runs every check of `config`; `progress` hears each row as it is done
/// (some checks take seconds).
pub async fn run(config: &Config, mut progress: impl FnMut(&Row)) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut add = |row: Row| {
        progress(&row);
        rows.push(row);
    };
    add(store(config));
    if let Some(web) = &config.platforms.web {
        add(port("web room", web.listen, "platforms.web.listen"));
    }
    if let Some(server) = config.server {
        add(port("server", server, "server.listen"));
    }
    for (name, agent) in &config.agents {
        add(agent_row(config, name, agent).await);
    }
    for row in platforms(config).await {
        add(row);
    }
    rows
}

/// The rows as a table: what, status, detail, and the fix under a failure.
pub fn table(rows: &[Row]) -> String {
    let width = rows.iter().map(|r| r.what.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for r in rows {
        let pad = width - r.what.chars().count();
        out.push_str(&format!(
            "{}{}  {}  {}\n",
            r.what,
            " ".repeat(pad),
            if r.ok { "ok  " } else { "FAIL" },
            r.detail
        ));
        if let Some(fix) = &r.fix {
            out.push_str(&format!("{}  fix:  {fix}\n", " ".repeat(width)));
        }
    }
    let failed = rows.iter().filter(|r| !r.ok).count();
    if failed == 0 {
        out.push_str(&format!("all {} checks passed\n", rows.len()));
    } else {
        out.push_str(&format!("{failed} of {} checks failed\n", rows.len()));
    }
    out
}

fn store(config: &Config) -> Row {
    let path = match &config.store {
        tactful_store::Location::Memory => {
            return Row::ok("store", "in memory: nothing is kept after a stop");
        }
        tactful_store::Location::Postgres(_) => return database(&config.store),
        tactful_store::Location::File(path) => path,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Row::failed(
            "store",
            format!("the folder {} does not exist", dir.display()),
            format!("create it (mkdir -p {}) or change [store] path", dir.display()),
        );
    }
    let probe = dir.join(format!(".tactful-doctor-{}", std::process::id()));
    if let Err(e) = std::fs::write(&probe, b"") {
        return Row::failed(
            "store",
            format!("cannot write in {}: {e}", dir.display()),
            "let the user running tactful write there, or change [store] path",
        );
    }
    let _ = std::fs::remove_file(&probe);
    if !path.exists() {
        return Row::ok(
            "store",
            format!("{} will be made on the first start", path.display()),
        );
    }
    match tactful_store::Reader::open(&config.store).and_then(|r| r.rooms()) {
        Ok(rooms) => Row::ok("store", format!("{}: {} rooms kept", path.display(), rooms.len())),
        Err(e) => Row::failed(
            "store",
            format!("{}: {e}", path.display()),
            "is it a tactful store? move it away to start afresh, or point [store] path at the right file",
        ),
    }
}

/// A PostgreSQL store: whether the database answers, and what it holds
/// (nothing yet until the first start makes the tables).
pub fn database(at: &tactful_store::Location) -> Row {
    let reader = match tactful_store::Reader::open(at) {
        Ok(r) => r,
        Err(e) => {
            return Row::failed(
                "store",
                tactful_core::secrets::redact(&e.to_string()).into_owned(),
                "is the database running and reachable from here, and are the user, password and database name in `store.url` right?",
            );
        }
    };
    let transport = at.transport().unwrap_or_default();
    match reader.rooms() {
        Ok(rooms) => Row::ok("store", format!("{at} ({transport}): {} rooms kept", rooms.len())),
        Err(e) if e.is_not_set_up() => Row::ok(
            "store",
            format!("{at} ({transport}) answers; its tables will be made on the first start"),
        ),
        Err(e) => Row::failed(
            "store",
            format!("{at}: {}", tactful_core::secrets::redact(&e.to_string())),
            "is it a tactful database? point `store.url` at the right database or schema",
        ),
    }
}

fn port(what: &str, addr: std::net::SocketAddr, key: &str) -> Row {
    if addr.port() == 0 {
        return Row::ok(what, format!("{addr}: a free port is picked at start"));
    }
    match std::net::TcpListener::bind(addr) {
        Ok(_) => Row::ok(what, format!("{addr} is free")),
        Err(e) => Row::failed(
            what,
            format!("cannot listen on {addr}: {e}"),
            format!("is tactful (or something else) running there already? stop it, or change {key}"),
        ),
    }
}

/// A one-word turn for agent `name`, made by the engine as a live turn
/// would be, and the agent's answer.
async fn agent_row(config: &Config, name: &str, agent: &AgentConfig) -> Row {
    let what = format!("agent {name} ({})", agent.kind());
    let Some(request) = doctor_turn(config, name) else {
        return Row::failed(
            what,
            "the engine made no turn for it",
            "this is a bug in tactful doctor: please report it",
        );
    };
    let built = agent.build(&config.contract);
    let started = Instant::now();
    let answer = tokio::time::timeout(AGENT_WAIT, built.run(&request, &mut tactful_agents::NoDeltas)).await;
    let took = started.elapsed().as_millis();
    match answer {
        Ok(Ok(reply)) => {
            let text: String = reply.text.trim().chars().take(40).collect();
            Row::ok(what, format!("answered in {took} ms: {text:?}"))
        }
        Ok(Err(e)) => Row::failed(what, e.to_string(), agent_fix(agent)),
        Err(_) => Row::failed(
            what,
            format!("no answer within {} s", AGENT_WAIT.as_secs()),
            agent_fix(agent),
        ),
    }
}

fn agent_fix(agent: &AgentConfig) -> String {
    match agent.kind() {
        "openai" => "check base_url (is the server running and reachable?), model and api_key".to_owned(),
        "command" | "acp" => {
            "check command, args and working_dir: run the program by hand from the config's folder".to_owned()
        }
        other => format!("check the [agents] table of kind {other:?}"),
    }
}

/// The turn the engine makes for "@doctor Reply with one word: ok" from a
/// persona speaking through `agent`.
fn doctor_turn(config: &Config, agent: &str) -> Option<tactful_core::TurnRequest> {
    let mut engine = tactful_core::Engine::new(EngineConfig {
        personas: vec![PersonaSpec::new("doctor", agent)],
        context: config.engine.context,
        ..EngineConfig::default()
    })
    .ok()?;
    let now = Timestamp::from_millis(0);
    engine.handle_message(
        now,
        Message::new(
            "doctor-1",
            "doctor",
            "tactful-doctor",
            "@doctor Reply with one word: ok",
            now,
        ),
    );
    while let Some(output) = engine.poll_output() {
        if let Output::CallAgent(req) = output {
            return Some(*req);
        }
    }
    None
}

/// Each configured platform's probes, on platforms built as `run` builds
/// them but never started.
async fn platforms(config: &Config) -> Vec<Row> {
    if config.platforms.connected.is_empty() {
        return Vec::new();
    }
    let mut store = match tactful_runtime::Store::open(std::path::Path::new(":memory:")) {
        Ok(s) => s,
        Err(e) => {
            return vec![Row::failed(
                "platforms",
                e.to_string(),
                "this is a bug: please report it",
            )];
        }
    };
    let built = match crate::registry::build(config, &mut store) {
        Ok(b) => b,
        Err(e) => {
            return vec![Row::failed(
                "platforms",
                format!("{e:#}"),
                "fix the [platforms] tables (tactful check says more)",
            )];
        }
    };
    let mut rows = Vec::new();
    for (_, platform) in built {
        for probe in platform.probe().await {
            rows.push(match probe.outcome {
                Ok(found) => Row::ok(probe.what, found),
                Err(f) => Row::failed(probe.what, f.cause, f.fix),
            });
        }
        platform.close().await;
    }
    rows
}
