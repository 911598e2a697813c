//! `tactful demo`: the embedded default a newcomer runs first.
//!
//! A web room on 127.0.0.1:7878 with two personas: Guide, in ambient mode,
//! answers questions about tactful from the documentation built into the
//! binary (the offline `kb` agent: BM25 search helped by example questions
//! in people's words, `docs/questions.toml`, a small learned model that
//! tells questions for the docs from chatter, a citation); Host, in mention
//! mode, speaks only when addressed. With `OPENAI_API_KEY` set (and
//! optionally `OPENAI_BASE_URL` and `TACTFUL_MODEL`), both use that model
//! instead, Guide with the documentation its search finds put before it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use tactful_agents::kb::{DEFAULT_MIN_SCORE, KbDoc};
use tactful_agents::openai::OpenAiConfig;

use crate::config::{AgentConfig, Config, ConfigError, questions_for};

const DEMO_TOML: &str = include_str!("demo.toml");

/// The documentation Guide answers from, as built into the binary.
pub fn builtin_docs() -> Vec<KbDoc> {
    [
        ("docs/faq.md", include_str!("../../../docs/faq.md")),
        ("README.md", include_str!("../../../README.md")),
        ("docs/config.md", include_str!("../../../docs/config.md")),
        ("docs/replay.md", include_str!("../../../docs/replay.md")),
    ]
    .into_iter()
    .map(|(source, text)| KbDoc {
        source: source.to_owned(),
        text: text.to_owned(),
    })
    .collect()
}

/// The example questions for the built-in documentation's sections.
const BUILTIN_QUESTIONS: &str = include_str!("../../../docs/questions.toml");

/// Guide's agent: the built-in documentation and its example questions,
/// answered offline or, `answer_with`, by a model.
fn guide(answer_with: Option<Box<AgentConfig>>) -> Result<AgentConfig, ConfigError> {
    let docs = builtin_docs();
    let questions = questions_for(&docs, BUILTIN_QUESTIONS).map_err(|e| ConfigError {
        path: PathBuf::from("docs/questions.toml (built in)"),
        position: None,
        message: e.to_string(),
        snippet: None,
    })?;
    Ok(AgentConfig::Kb {
        docs,
        min_score: DEFAULT_MIN_SCORE,
        questions,
        answer_with,
    })
}

/// The demo's config as a file to start one's own from (`tactful demo
/// --print-config`): Guide's documents are files beside it instead of the
/// ones built into the binary.
pub fn printable() -> String {
    let header = "# tactful demo --print-config: the demo's config, to start your own from.\n\
                  # Save it as tactful.toml, point Guide's `paths` at your documents, then\n\
                  # `tactful check -c tactful.toml` and `tactful run -c tactful.toml`.\n\n";
    let text = DEMO_TOML
        .replace(
            "paths = []      # filled with the documentation built into the binary",
            // The documents the demo has built in, and no others: in
            // tactful's checkout the printed config decides as the demo.
            "paths = [\"README.md\", \"docs/faq.md\", \"docs/config.md\", \"docs/replay.md\"]   # Markdown files, or folders of them, beside this file",
        )
        .replace(
            "# questions: the example questions built in, docs/questions.toml",
            "questions = \"docs/questions.toml\"   # optional: questions people ask, by section",
        );
    format!("{header}{text}")
}

/// The demo's config. `env` answers environment lookups (`OPENAI_API_KEY`,
/// `OPENAI_BASE_URL`, `TACTFUL_MODEL`).
pub fn config(
    listen: Option<SocketAddr>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let mut c = Config::parse(DEMO_TOML, Path::new("(built-in demo config)"), &|_| None)?;
    let mut answer_with = None;
    if let Some(key) = env("OPENAI_API_KEY").filter(|k| !k.trim().is_empty()) {
        let model = AgentConfig::OpenAi(OpenAiConfig {
            base_url: env("OPENAI_BASE_URL").unwrap_or_else(|| "https://api.openai.com/v1".to_owned()),
            model: env("TACTFUL_MODEL").unwrap_or_else(|| "gpt-4o-mini".to_owned()),
            api_key: Some(key),
            temperature: None,
            max_tokens: Some(600),
            timeout: Duration::from_secs(60),
            headers: Default::default(),
        });
        // Guide keeps the docs: the model answers with the sections its
        // search finds before it, and cites them.
        answer_with = Some(Box::new(model.clone()));
        c.agents.insert("host".to_owned(), model);
    }
    c.agents.insert("docs".to_owned(), guide(answer_with)?);
    if let (Some(addr), Some(web)) = (listen, c.platforms.web.as_mut()) {
        web.listen = addr;
    }
    // The operator console beside the room: every decision and why.
    if let Some(web) = c.platforms.web.as_mut() {
        web.console = true;
    }
    Ok(c)
}

/// `--listen`: an address (`127.0.0.1:7878`, `[::1]:7878`) or a host name
/// and port (`localhost:7890`), resolved here so a name works too.
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs as _;
    if let Ok(addr) = s.parse() {
        return Ok(addr);
    }
    let addrs: Vec<SocketAddr> = s
        .to_socket_addrs()
        .map_err(|e| format!("{s:?} is not an address like 127.0.0.1:7878 or localhost:7878 ({e})"))?
        .collect();
    // `localhost` is both ::1 and 127.0.0.1; browsers try both, so the
    // IPv4 one is as good and works where IPv6 is off.
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| format!("{s:?} names no address"))
}

/// `--token`: the web room's token. Off loopback one is required, so when
/// none is given one is made up; returns the token to put in the URL.
pub fn set_token(c: &mut Config, token: Option<String>) -> Result<Option<String>, String> {
    let Some(web) = c.platforms.web.as_mut() else {
        return Ok(None);
    };
    let token = match token {
        Some(t) if t.trim().is_empty() => return Err("--token must not be blank".to_owned()),
        Some(t) => Some(t),
        None if web.listen.ip().is_loopback() => None,
        None => Some(made_up_token()?),
    };
    web.auth_token.clone_from(&token);
    Ok(token)
}

/// 128 random bits from the OS, as hex.
fn made_up_token() -> Result<String, String> {
    tactful_web::access::new_secret().map_err(|e| format!("no random source for a token ({e}); pass --token"))
}

/// Where the demo keeps its rooms unless told otherwise:
/// `$XDG_STATE_HOME/tactful/demo-<port>.db`, else
/// `~/.local/state/tactful/demo-<port>.db` (the folder is created): one
/// store per port, so two demos side by side keep apart (and the same port
/// twice is refused with where the first one is). Without either
/// variable, nothing is kept.
pub fn default_store(env: &dyn Fn(&str) -> Option<std::ffi::OsString>, port: u16) -> anyhow::Result<PathBuf> {
    let folder = match (env("XDG_STATE_HOME"), env("HOME")) {
        (Some(state), _) if !state.is_empty() => PathBuf::from(state).join("tactful"),
        (_, Some(home)) if !home.is_empty() => PathBuf::from(home).join(".local/state/tactful"),
        _ => return Ok(PathBuf::from(":memory:")),
    };
    std::fs::create_dir_all(&folder).with_context(|| {
        format!(
            "cannot create {} for the demo's rooms (or pass --store)",
            folder.display()
        )
    })?;
    Ok(folder.join(format!("demo-{port}.db")))
}

/// Which backend the demo's personas use, for the banner.
pub fn backend(c: &Config) -> String {
    let uses = |agent: &str| match c.agents.get(agent) {
        Some(AgentConfig::OpenAi(o)) => format!("the model {} at {}", o.model, o.base_url),
        Some(AgentConfig::Kb {
            answer_with: Some(m), ..
        }) => match &**m {
            AgentConfig::OpenAi(o) => format!(
                "the model {} at {}, answering from the built-in documentation",
                o.model, o.base_url
            ),
            _ => "a model answering from the built-in documentation".to_owned(),
        },
        Some(AgentConfig::Kb { .. }) => "the built-in documentation (offline)".to_owned(),
        _ => "a built-in offline agent".to_owned(),
    };
    let model = matches!(c.agents.get("host"), Some(AgentConfig::OpenAi(_)));
    let how = if model {
        "OPENAI_API_KEY is set; --offline uses the built-in agents"
    } else {
        "set OPENAI_API_KEY to use a model"
    };
    format!("Guide uses {}, Host {} ({how})", uses("docs"), uses("host"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_config_is_valid_offline_and_with_a_model() {
        let c = config(None, &|_| None).expect("valid");
        assert!(
            matches!(&c.agents["docs"], AgentConfig::Kb { docs, questions, .. } if docs.len() == 4 && questions.len() > 60),
            "Guide has the built-in docs and their questions"
        );
        assert_eq!(
            backend(&c),
            "Guide uses the built-in documentation (offline), Host a built-in offline agent (set OPENAI_API_KEY to use a model)"
        );
        let env = |k: &str| match k {
            "OPENAI_API_KEY" => Some("sk-x".to_owned()),
            "TACTFUL_MODEL" => Some("llama3.2".to_owned()),
            "OPENAI_BASE_URL" => Some("http://localhost:11434/v1".to_owned()),
            _ => None,
        };
        let c = config(Some("127.0.0.1:0".parse().expect("addr")), &env).expect("valid");
        assert_eq!(
            backend(&c),
            "Guide uses the model llama3.2 at http://localhost:11434/v1, answering from the built-in documentation, Host the model llama3.2 at http://localhost:11434/v1 (OPENAI_API_KEY is set; --offline uses the built-in agents)"
        );
        assert_eq!(c.platforms.web.as_ref().map(|w| w.listen.port()), Some(0));
    }

    /// What `--print-config` prints is a working config where the docs
    /// are: in tactful's own checkout, Guide reads README.md and docs/.
    #[test]
    fn the_printed_config_runs_beside_its_documents() {
        let text = printable();
        assert!(!text.contains("paths = []"), "{text}");
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tactful.toml");
        let c = Config::parse(&text, &root, &|_| None).expect("valid");
        match &c.agents["docs"] {
            AgentConfig::Kb { docs, questions, .. } => {
                assert!(
                    questions.len() > 60,
                    "the printed config reads docs/questions.toml"
                );
                let sources: Vec<&str> = docs.iter().map(|d| d.source.as_str()).collect();
                assert!(
                    sources.contains(&"README.md") && sources.contains(&"docs/faq.md"),
                    "{sources:?}"
                );
            }
            other => panic!("Guide is a kb agent: {other:?}"),
        }
        assert_eq!(c.platforms.web.as_ref().map(|w| w.examples.len()), Some(3));
    }

    #[test]
    fn listen_takes_host_names_and_a_token_is_made_up_off_loopback() {
        assert_eq!(
            parse_listen("localhost:7890"),
            Ok("127.0.0.1:7890".parse().expect("addr"))
        );
        assert_eq!(
            parse_listen("[::1]:7890"),
            Ok("[::1]:7890".parse().expect("addr"))
        );
        assert!(parse_listen("localhost").is_err());
        let mut c = config(Some("127.0.0.1:0".parse().expect("addr")), &|_| None).expect("valid");
        assert_eq!(set_token(&mut c, None), Ok(None), "loopback needs none");
        let mut c = config(Some("0.0.0.0:0".parse().expect("addr")), &|_| None).expect("valid");
        let made = set_token(&mut c, None).expect("made up").expect("a token");
        assert_eq!(made.len(), 32);
        assert_ne!(
            set_token(&mut c, None).expect("again"),
            Some(made.clone()),
            "random each time"
        );
        assert_eq!(
            set_token(&mut c, Some("s3cret".into())),
            Ok(Some("s3cret".into()))
        );
        assert_eq!(
            c.platforms.web.as_ref().and_then(|w| w.auth_token.as_deref()),
            Some("s3cret")
        );
        assert!(set_token(&mut c, Some("  ".into())).is_err());
    }

    #[test]
    fn the_demo_keeps_its_rooms_in_the_state_folder() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = dir.path().join("state");
        let env = |k: &str| (k == "XDG_STATE_HOME").then(|| state.clone().into_os_string());
        let path = default_store(&env, 7878).expect("a path");
        assert_eq!(path, state.join("tactful/demo-7878.db"));
        assert!(state.join("tactful").is_dir(), "the folder is created");
        let home = dir.path().to_owned();
        let env = |k: &str| (k == "HOME").then(|| home.clone().into_os_string());
        assert_eq!(
            default_store(&env, 7890).expect("a path"),
            dir.path().join(".local/state/tactful/demo-7890.db")
        );
        assert_eq!(
            default_store(&|_| None, 7878).expect("a path"),
            PathBuf::from(":memory:")
        );
    }
}
