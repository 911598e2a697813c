//! The `tactful` command.

use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use tactful::config::Config;
use tactful::replay::{self, ReplayOptions};
use tactful::scenario;

/// mimalloc in place of glibc's allocator: the live service allocates and
/// frees many small buffers on several threads (messages, SQL parameters
/// and rows, HTTP bodies), where glibc's took about a fifth of the
/// process's time in a profile under load (BENCHMARKS.md, "Where
/// tactful's half goes").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// tactful puts AI agents into group chats as good citizens: they read the
/// whole room, speak when addressed or useful, and stay quiet otherwise.
#[derive(Debug, Parser)]
#[command(name = "tactful", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a config against a scripted conversation on a virtual clock and
    /// print every decision, agent call and reply as JSON lines.
    Replay {
        /// The config file (TOML).
        #[arg(short, long, value_name = "CONFIG")]
        config: PathBuf,
        /// The conversation: one JSON message a line.
        #[arg(value_name = "SCENARIO.jsonl")]
        scenario: PathBuf,
        /// Include the rendered prompt in every agent_call line.
        #[arg(long)]
        prompts: bool,
        /// Seed for ambient flush jitter: the same seed gives the same replay.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Print a table of agent calls and replies per persona instead of
        /// the trace.
        #[arg(long, conflicts_with = "prompts")]
        stats: bool,
        /// How to print the trace: `json` (one JSON object a line, the
        /// default) or `text` (one block per message with each persona's
        /// decision, prompts as plain text).
        #[arg(long, value_enum, default_value_t = replay::TraceFormat::Json, conflicts_with = "stats")]
        format: replay::TraceFormat,
        /// When the virtual clock starts, as an RFC 3339 time
        /// (2026-03-28T23:00:00Z): what scheduled turns run by. Scenario
        /// times count from it. Default: 1970-01-01T00:00:00Z.
        #[arg(long, value_name = "TIME", value_parser = replay::parse_start)]
        start: Option<tactful_core::Timestamp>,
    },
    /// Score a config's decisions on a labelled conversation: a scenario
    /// whose messages say what each persona should do with them
    /// (`"expect": {"docs": "reply", "chef": "silent"}`). Prints precision,
    /// recall and F1 of speaking per persona, what it cost, and every miss
    /// and false alarm with its decision and reason.
    Eval {
        /// The config file (TOML).
        #[arg(short, long, value_name = "CONFIG")]
        config: PathBuf,
        /// The labelled conversation: one JSON message a line.
        #[arg(value_name = "LABELLED.jsonl")]
        labelled: PathBuf,
        /// `text` (a table and the cases, the default) or `json`.
        #[arg(long, value_enum, default_value_t = EvalFormat::Text)]
        format: EvalFormat,
        /// Seed for ambient flush jitter: the same seed scores the same.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// A second config: both scored side by side, with the messages
        /// whose outcome differs.
        #[arg(long, value_name = "OTHER.toml")]
        compare: Option<PathBuf>,
        /// Keep real agents' answers in FILE, keyed by their exact
        /// request: a rerun pays only for prompts it has not seen.
        #[arg(long, value_name = "FILE")]
        cache: Option<PathBuf>,
        /// Real agent calls made at once (those the engine asks for at
        /// the same moment); the scores do not depend on it.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
        jobs: u16,
    },
    /// Start a web chat room with two demo personas: no account, no API
    /// key, no network needed. Open the printed URL.
    Demo {
        /// Where to listen: `127.0.0.1:7878` (the default), `localhost:7890`,
        /// `0.0.0.0:7878` (then a token is needed; one is made up if not
        /// given); port 0 picks a free one.
        #[arg(long, value_name = "ADDR", value_parser = tactful::demo::parse_listen)]
        listen: Option<std::net::SocketAddr>,
        /// The token people need to open the room (`?token=...` in the URL).
        #[arg(long, value_name = "TOKEN")]
        token: Option<String>,
        /// The SQLite file the rooms are kept in (default: demo-<port>.db in
        /// $XDG_STATE_HOME/tactful or ~/.local/state/tactful; `:memory:`
        /// keeps nothing).
        #[arg(long, value_name = "PATH")]
        store: Option<PathBuf>,
        /// Use the built-in offline agents even when `OPENAI_API_KEY` is
        /// set (a key exported for other tools would switch the demo to
        /// that model).
        #[arg(long)]
        offline: bool,
        /// Print the demo's config (to start your own from) and exit.
        #[arg(long)]
        print_config: bool,
    },
    /// Run tactful live: the configured platforms and personas, until
    /// Ctrl-C or SIGTERM.
    Run {
        /// The config file (TOML).
        #[arg(short, long, value_name = "CONFIG")]
        config: PathBuf,
    },
    /// Check what the file cannot say: that each agent answers, each
    /// platform account's credentials work, the store's folder is writable
    /// and the ports are free. Prints a fix for each failure.
    Doctor {
        /// The config file (TOML).
        #[arg(short, long, value_name = "CONFIG")]
        config: PathBuf,
    },
    /// Check a config file and summarise it.
    Check {
        /// The config file (TOML).
        #[arg(short, long, value_name = "CONFIG")]
        config: PathBuf,
    },
}

/// Errors in what the user gave us (exit status 2), as opposed to failures
/// while running (exit status 1).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct InputError(String);

fn main() -> ExitCode {
    tactful::logging::init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // `tactful eval … | head`: the reader has what it wanted.
        Err(e) if stdout_closed(&e) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(input) = e.downcast_ref::<InputError>() {
                eprintln!("error: {input}");
                ExitCode::from(2)
            } else {
                eprintln!("error: {e:#}");
                ExitCode::from(1)
            }
        }
    }
}

/// Whether `e` is a write to a stdout whose reader has gone.
fn stdout_closed(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        let kind = c
            .downcast_ref::<io::Error>()
            .map(io::Error::kind)
            // The trace is written through serde_json, which wraps it.
            .or_else(|| {
                c.downcast_ref::<serde_json::Error>()
                    .and_then(|j| j.io_error_kind())
            });
        kind == Some(io::ErrorKind::BrokenPipe)
    })
}

/// Writes a report to stdout; an error (a closed pipe) is returned, not a
/// panic as `print!` would.
fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// A line on stdout for the person running the service. A closed stdout
/// (the terminal went away, a pipe nobody reads) must not stop the service,
/// so write errors are ignored where `println!` would panic.
fn say(line: &str) {
    use std::io::Write as _;
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn load_config(path: &Path) -> anyhow::Result<Config> {
    let c = Config::load(path).map_err(|e| InputError(e.to_string()))?;
    register_secrets(&c);
    Ok(c)
}

/// From here on, logs and errors mask the config's secrets.
fn register_secrets(c: &Config) {
    for s in c.secrets() {
        tactful_core::secrets::register(&s);
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Demo {
            listen,
            token,
            store,
            offline,
            print_config,
        } => {
            if print_config {
                print!("{}", tactful::demo::printable());
                return Ok(());
            }
            let env = |k: &str| if offline { None } else { std::env::var(k).ok() };
            let mut c = tactful::demo::config(listen, &env).map_err(|e| InputError(e.to_string()))?;
            let token = tactful::demo::set_token(&mut c, token).map_err(InputError)?;
            register_secrets(&c);
            let port = c.platforms.web.as_ref().map_or(0, |w| w.listen.port());
            c.store = tactful::config::Location::from_path(&match store {
                Some(path) => path,
                None => tactful::demo::default_store(&|k| std::env::var_os(k), port)?,
            });
            let query = token.map(|t| format!("?token={t}")).unwrap_or_default();
            let backend = tactful::demo::backend(&c);
            let kept = if !c.store.is_kept() {
                "nothing is kept after it stops".to_owned()
            } else {
                format!("rooms are kept in {}", c.store)
            };
            let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
            runtime.block_on(tactful::live::run(&c, |at| {
                let addr = at.web.map_or_else(|| "(no web room)".to_owned(), |a| a.to_string());
                say(&format!(
                    "tactful demo: open http://{addr}/{query} (Ctrl-C to stop)\n  \
                     Guide (ambient) answers questions about tactful; Host (mention) speaks when addressed.\n  \
                     {backend}; {kept}.\n  \
                     Why each persona spoke or not: http://{addr}/console{query}"
                ));
            }))?;
            say("tactful: stopped");
            Ok(())
        }
        Command::Run { config } => {
            let c = load_config(&config)?;
            if let Some(p) = c.store_problem() {
                return Err(InputError(format!("{}: {p}", config.display())).into());
            }
            for w in c.warnings() {
                tracing::warn!("{}: {w}", config.display());
            }
            let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
            runtime.block_on(tactful::live::run(&c, |at| {
                if let Some(web) = at.web {
                    say(&format!("tactful: web room at http://{web}/ (Ctrl-C to stop)"));
                }
                for line in &at.networks {
                    say(&format!("tactful: {line} (Ctrl-C to stop)"));
                }
                if let Some(s) = at.server {
                    say(&format!(
                        "tactful: console at http://{s}/console, health at http://{s}/healthz, metrics at http://{s}/metrics"
                    ));
                }
            }))?;
            say("tactful: stopped");
            Ok(())
        }
        Command::Doctor { config } => {
            let c = load_config(&config)?;
            let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
            let rows = runtime.block_on(tactful::doctor::run(&c, |row| {
                eprintln!("  checked {}: {}", row.what, if row.ok { "ok" } else { "FAIL" });
            }));
            say(&tactful::doctor::table(&rows));
            let failed = rows.iter().filter(|r| !r.ok).count();
            if failed > 0 {
                anyhow::bail!("{failed} of {} checks failed", rows.len());
            }
            Ok(())
        }
        Command::Check { config } => {
            let c = load_config(&config)?;
            if let Some(p) = c.store_problem() {
                return Err(InputError(format!("{}: {p}", config.display())).into());
            }
            // A database that does not answer is the verdict: said before
            // anything else, so nothing printed reads "ok" first.
            let database = match &c.store {
                tactful::config::Location::Postgres(_) => {
                    let row = tactful::doctor::database(&c.store);
                    if !row.ok {
                        return Err(InputError(format!(
                            "{}: the store cannot be reached: {}; {}",
                            config.display(),
                            row.detail,
                            row.fix.unwrap_or_default()
                        ))
                        .into());
                    }
                    Some(row.detail)
                }
                _ => None,
            };
            let warnings = c.warnings();
            for w in &warnings {
                eprintln!("warning: {}: {w}", config.display());
            }
            if warnings.is_empty() {
                println!("{}: ok", config.display());
            } else {
                println!("{}: ok, with {} warning(s)", config.display(), warnings.len());
            }
            let policies = &c.engine.policies;
            for p in &c.engine.personas {
                let agent = &c.agents[p.agent.as_ref()];
                // The mode it has by default, then each configured room's.
                let mode = |room: &tactful_core::RoomId| {
                    let policy = policies.resolve(room, &p.id);
                    let gate = if policy.reply_gate.is_some() {
                        " + gate"
                    } else {
                        ""
                    };
                    format!("{}{gate}", policy.mode.as_str())
                };
                let default = mode(&tactful_core::RoomId::new(""));
                let mut modes = format!("{default} by default");
                for room in policies.rooms.keys() {
                    modes.push_str(&format!("; {} in {:?}", mode(room), room.as_str()));
                }
                println!(
                    "  persona {} ({}) speaks through agent {:?} (kind {}): {modes}",
                    p.id,
                    p.name,
                    p.agent,
                    agent.kind()
                );
            }
            let platforms: Vec<&str> = c
                .platforms
                .web
                .iter()
                .map(|_| "web")
                .chain(c.platforms.connected.iter().map(|(name, _)| *name))
                .collect();
            println!(
                "  platforms: {}",
                if platforms.is_empty() {
                    "none (tactful demo still runs; tactful run needs one)".to_owned()
                } else {
                    platforms.join(", ")
                }
            );
            let rooms = &c.engine.policies.rooms;
            println!(
                "  rooms: default{}",
                rooms.keys().map(|r| format!(", {r:?}")).collect::<String>()
            );
            let mut listening = Vec::new();
            if let Some(web) = &c.platforms.web {
                listening.push(format!("web room on http://{}/", web.listen));
            }
            if let Some(s) = c.server {
                listening.push(format!("health, metrics and console on http://{s}/"));
            }
            if !listening.is_empty() {
                println!("  listens: {}", listening.join("; "));
            }
            match &c.store {
                tactful::config::Location::Memory => {
                    println!("  store: in memory (nothing is kept across a restart)")
                }
                tactful::config::Location::File(path) => println!(
                    "  store: {}",
                    std::path::absolute(path)
                        .unwrap_or_else(|_| path.clone())
                        .display()
                ),
                tactful::config::Location::Postgres(_) => {
                    println!("  store: {}", database.as_deref().unwrap_or_default());
                }
            }
            if let Some(cluster) = &c.cluster {
                println!(
                    "  cluster: shares the store with the other processes run on it; each owns a share of the rooms, and a dead one's rooms move after {} s",
                    cluster.lease.as_secs()
                );
                for (name, _) in &c.platforms.connected {
                    if tactful_store::connection_partition(name).is_some() {
                        println!(
                            "  cluster: {name} posts only through its connection: one process at a time owns every {name} room and connects it"
                        );
                    }
                }
            }
            for h in &c.engine.hooks {
                println!("  hook {} before each reply{}", h.name, hook_scope(h));
            }
            let now = tactful_runtime::wall_clock();
            for s in &c.engine.schedules {
                let mut next = Vec::new();
                let mut t = now;
                while next.len() < 3
                    && let Some(n) = s.next_after(t)
                {
                    next.push(s.local(n));
                    t = n;
                }
                println!(
                    "  schedule {} ({:?} in {}): {} in {}; next: {}",
                    s.name,
                    s.expr.as_ref(),
                    s.tz.name(),
                    s.persona,
                    s.room,
                    if next.is_empty() {
                        "never".to_owned()
                    } else {
                        next.join(", ")
                    }
                );
            }
            Ok(())
        }
        Command::Eval {
            config,
            labelled: path,
            format,
            seed,
            compare,
            cache,
            jobs,
        } => {
            let c = load_config(&config)?;
            let other = compare.as_deref().map(load_config).transpose()?;
            let src = std::fs::read_to_string(&path)
                .map_err(|e| InputError(format!("{}: cannot read the labelled file: {e}", path.display())))?;
            let ids: Vec<&str> = c.engine.personas.iter().map(|p| p.id.as_str()).collect();
            let events = scenario::parse(&src, &path, &ids).map_err(|e| InputError(e.to_string()))?;
            if events.iter().all(|e| e.expect.is_empty()) {
                return Err(InputError(format!(
                    "{}: no message has an `expect` label, so there is nothing to score (add \"expect\": {{\"<persona>\": \"reply\"}} to the messages that should be answered)",
                    path.display()
                ))
                .into());
            }
            if let Some(other) = &other {
                // Its labels must name the second config's personas too.
                let ids: Vec<&str> = other.engine.personas.iter().map(|p| p.id.as_str()).collect();
                scenario::parse(&src, &path, &ids).map_err(|e| {
                    InputError(format!(
                        "{e} (with --compare {})",
                        compare.as_deref().unwrap_or(&path).display()
                    ))
                })?;
            }
            let mut cache = cache
                .as_deref()
                .map(tactful::replay::AnswerCache::open)
                .transpose()?;
            let options = tactful::eval::EvalOptions {
                seed,
                jobs: usize::from(jobs),
            };
            let report = tactful::eval::evaluate(&c, events.clone(), options, cache.as_mut())?;
            let Some((other, other_path)) = other.zip(compare) else {
                match format {
                    EvalFormat::Text => emit(&report.text())?,
                    EvalFormat::Json => emit(&format!("{}\n", report.json()))?,
                }
                return Ok(());
            };
            let second = tactful::eval::evaluate(&other, events, options, cache.as_mut())?;
            let both = tactful::eval::Comparison {
                a: (config.display().to_string(), report),
                b: (other_path.display().to_string(), second),
            };
            match format {
                EvalFormat::Text => emit(&both.text())?,
                EvalFormat::Json => emit(&format!("{}\n", both.json()))?,
            }
            Ok(())
        }
        Command::Replay {
            config,
            scenario: path,
            prompts,
            seed,
            stats,
            start,
            format,
        } => {
            let c = load_config(&config)?;
            let src = std::fs::read_to_string(&path)
                .map_err(|e| InputError(format!("{}: cannot read the scenario: {e}", path.display())))?;
            let ids: Vec<&str> = c.engine.personas.iter().map(|p| p.id.as_str()).collect();
            let events = scenario::parse(&src, &path, &ids).map_err(|e| InputError(e.to_string()))?;
            let stdout = io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            let options = ReplayOptions {
                prompts,
                seed,
                stats,
                start,
                format,
                // One call at a time, as before `eval --jobs`.
                jobs: 1,
            };
            let s = replay::run(&c, events, options, &mut out).context("replay failed")?;
            if stats {
                use std::io::Write as _;
                out.write_all(s.stats_table(&c).as_bytes())?;
                out.flush()?;
            }
            eprintln!(
                "replayed {} messages over {:.1}s of virtual time: {} decisions, {} agent calls, {} sent, {} silent, {} withheld, {} cancelled, {} errors",
                s.messages,
                s.end.saturating_since(s.start).as_secs_f64(),
                s.decisions,
                s.agent_calls,
                s.sends,
                s.silent,
                s.withheld,
                s.cancelled,
                s.errors
            );
            Ok(())
        }
    }
}

/// How `tactful eval` prints its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum EvalFormat {
    /// A table per persona and the misses and false alarms, for people.
    Text,
    /// One JSON object, for programs.
    Json,
}

/// Which replies a hook sees, for `tactful check`.
fn hook_scope(h: &tactful_core::hooks::HookScope) -> String {
    let list = |v: Vec<&str>| v.join(", ");
    let mut out = String::new();
    if !h.personas.is_empty() {
        out.push_str(&format!(
            " of {}",
            list(h.personas.iter().map(|p| p.as_str()).collect())
        ));
    }
    if !h.rooms.is_empty() {
        out.push_str(&format!(
            " in {}",
            list(h.rooms.iter().map(|r| r.as_str()).collect())
        ));
    }
    out
}
