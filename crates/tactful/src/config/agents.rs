//! `[agents.NAME]`: each agent table checked against its kind (keys that
//! belong to another kind are errors at their line) and built into an
//! [`AgentConfig`].

#[allow(clippy::wildcard_imports)]
use super::*;

/// One `[agents.NAME]` table.
#[derive(Debug, Clone)]
pub enum AgentConfig {
    /// `kind = "script"`.
    Script(ScriptAgent),
    /// `kind = "command"`.
    Command(CommandConfig),
    /// `kind = "openai"`.
    OpenAi(OpenAiConfig),
    /// `kind = "acp"`.
    Acp(AcpConfig),
    /// `kind = "kb"`: markdown documents, read when the config is loaded.
    Kb {
        /// The documents.
        docs: Vec<KbDoc>,
        /// The relevance threshold.
        min_score: f32,
        /// `questions`: example questions for its sections (checked against
        /// the documents when the file is read).
        questions: Vec<KbQuestions>,
        /// `answer_with`: the agent that answers with the sections found
        /// before it (its config, resolved when the file is read); `None`
        /// quotes the sections offline.
        answer_with: Option<Box<AgentConfig>>,
    },
}

impl AgentConfig {
    /// The config spelling of the backend kind.
    pub fn kind(&self) -> &'static str {
        match self {
            AgentConfig::Script(_) => "script",
            AgentConfig::Command(_) => "command",
            AgentConfig::OpenAi(_) => "openai",
            AgentConfig::Acp(_) => "acp",
            AgentConfig::Kb { .. } => "kb",
        }
    }

    /// The backend, ready to run turns; prompts use `contract`.
    pub fn build(&self, contract: &Arc<str>) -> Arc<dyn Agent> {
        match self {
            AgentConfig::Script(a) => Arc::new(a.clone()),
            AgentConfig::Command(c) => Arc::new(CommandAgent::new(c.clone(), contract.clone())),
            AgentConfig::Acp(c) => Arc::new(AcpAgent::new(c.clone(), contract.clone())),
            AgentConfig::Kb {
                docs,
                min_score,
                questions,
                answer_with: None,
            } => Arc::new(kb_agent(docs, *min_score, questions)),
            AgentConfig::Kb {
                docs,
                min_score,
                questions,
                answer_with: Some(model),
            } => Arc::new(tactful_agents::kb::GroundedAgent::new(
                kb_agent(docs, *min_score, questions),
                model.build(contract),
            )),
            AgentConfig::OpenAi(c) => Arc::new(
                OpenAiAgent::new(c.clone(), contract.clone())
                    .expect("headers were checked when the config was read"),
            ),
        }
    }
}

/// A kb agent over `docs`, with its example questions (if any; checked
/// when the config was read, so a failure here is a config built by hand,
/// which gets the kb without them and a warning, not a panic).
fn kb_agent(docs: &[KbDoc], min_score: f32, questions: &[KbQuestions]) -> KbAgent {
    if questions.is_empty() {
        return KbAgent::new(docs, min_score);
    }
    KbAgent::new(docs, min_score)
        .with_questions(questions)
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "a kb's example questions do not fit its documents; left out");
            KbAgent::new(docs, min_score)
        })
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(super) enum AgentKind {
    Script,
    Command,
    OpenAi,
    Acp,
    Kb,
}

impl AgentKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            AgentKind::Script => "script",
            AgentKind::Command => "command",
            AgentKind::OpenAi => "openai",
            AgentKind::Acp => "acp",
            AgentKind::Kb => "kb",
        }
    }
}

/// Every key any agent kind takes; each kind checks that only its own are
/// set, so a key in the wrong table is reported at its line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAgent {
    kind: Spanned<AgentKind>,
    // script
    rules: Option<Spanned<Vec<RawRule>>>,
    // command
    command: Option<Spanned<EnvString>>,
    args: Option<Spanned<Vec<EnvString>>>,
    env: Option<Spanned<BTreeMap<String, EnvString>>>,
    working_dir: Option<Spanned<EnvString>>,
    // openai
    base_url: Option<Spanned<EnvString>>,
    model: Option<Spanned<EnvString>>,
    api_key: Option<Spanned<EnvString>>,
    temperature: Option<Spanned<f64>>,
    max_tokens: Option<Spanned<u32>>,
    headers: Option<Spanned<BTreeMap<String, EnvString>>>,
    // command and openai
    timeout_ms: Option<Spanned<u64>>,
    // acp
    session_ttl_seconds: Option<Spanned<u64>>,
    max_sessions: Option<Spanned<usize>>,
    allow_permissions: Option<Spanned<Vec<Spanned<String>>>>,
    inactivity_timeout_ms: Option<Spanned<u64>>,
    // kb
    paths: Option<Spanned<Vec<EnvString>>>,
    min_score: Option<Spanned<f64>>,
    questions: Option<Spanned<EnvString>>,
    pub(super) answer_with: Option<Spanned<String>>,
    // every kind
    pub(super) strip_reasoning: Option<bool>,
}

/// Tool kinds an ACP agent may ask permission for.
const TOOL_KINDS: &[&str] = &[
    "read",
    "edit",
    "delete",
    "move",
    "search",
    "execute",
    "think",
    "fetch",
    "switch_mode",
    "other",
];

/// The default deadline of one command or model turn.
const DEFAULT_AGENT_TIMEOUT: Duration = Duration::from_secs(60);
/// The default OpenAI-compatible endpoint.
const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    when: Spanned<EnvString>,
    #[serde(default)]
    reply: EnvString,
    #[serde(default)]
    delay_ms: u64,
    #[serde(default)]
    fail: bool,
}

/// An agent key: its name, where it is set (if it is), and the kinds it
/// belongs to.
/// The keys of an `[agents.*]` table that only some kinds take.
const KIND_KEYS: &[(&str, &[AgentKind])] = {
    use AgentKind::{Acp, Command, Kb, OpenAi, Script};
    const PROCESS: &[AgentKind] = &[Command, Acp];
    &[
        ("rules", &[Script]),
        ("command", PROCESS),
        ("args", PROCESS),
        ("env", PROCESS),
        ("working_dir", PROCESS),
        ("base_url", &[OpenAi]),
        ("model", &[OpenAi]),
        ("api_key", &[OpenAi]),
        ("temperature", &[OpenAi]),
        ("max_tokens", &[OpenAi]),
        ("headers", &[OpenAi]),
        ("timeout_ms", &[Command, OpenAi]),
        ("session_ttl_seconds", &[Acp]),
        ("max_sessions", &[Acp]),
        ("allow_permissions", &[Acp]),
        ("inactivity_timeout_ms", &[Acp]),
        ("paths", &[Kb]),
        ("min_score", &[Kb]),
        ("questions", &[Kb]),
        ("answer_with", &[Kb]),
    ]
};

/// The keys an agent of `kind` takes, for "unknown field" errors: the
/// table holds every kind's keys, but a `kb` agent's author wants its own.
pub(super) fn keys_of(kind: AgentKind) -> Vec<&'static str> {
    std::iter::once("kind")
        .chain(
            KIND_KEYS
                .iter()
                .filter(|(_, kinds)| kinds.contains(&kind))
                .map(|(k, _)| *k),
        )
        .chain(std::iter::once("strip_reasoning"))
        .collect()
}

/// Where key `k` (one of [`KIND_KEYS`]) is written in `a`, if it is.
fn span_of(a: &RawAgent, k: &str) -> Option<std::ops::Range<usize>> {
    match k {
        "rules" => a.rules.as_ref().map(|v| v.span()),
        "command" => a.command.as_ref().map(|v| v.span()),
        "args" => a.args.as_ref().map(|v| v.span()),
        "env" => a.env.as_ref().map(|v| v.span()),
        "working_dir" => a.working_dir.as_ref().map(|v| v.span()),
        "base_url" => a.base_url.as_ref().map(|v| v.span()),
        "model" => a.model.as_ref().map(|v| v.span()),
        "api_key" => a.api_key.as_ref().map(|v| v.span()),
        "temperature" => a.temperature.as_ref().map(|v| v.span()),
        "max_tokens" => a.max_tokens.as_ref().map(|v| v.span()),
        "headers" => a.headers.as_ref().map(|v| v.span()),
        "timeout_ms" => a.timeout_ms.as_ref().map(|v| v.span()),
        "session_ttl_seconds" => a.session_ttl_seconds.as_ref().map(|v| v.span()),
        "max_sessions" => a.max_sessions.as_ref().map(|v| v.span()),
        "allow_permissions" => a.allow_permissions.as_ref().map(|v| v.span()),
        "inactivity_timeout_ms" => a.inactivity_timeout_ms.as_ref().map(|v| v.span()),
        "paths" => a.paths.as_ref().map(|v| v.span()),
        "min_score" => a.min_score.as_ref().map(|v| v.span()),
        "questions" => a.questions.as_ref().map(|v| v.span()),
        "answer_with" => a.answer_with.as_ref().map(|v| v.span()),
        _ => None,
    }
}

/// Gives each kb agent with `answer_with = "<agent>"` that agent's config:
/// it must exist and not be a kb agent itself (a kb cannot answer for a
/// kb).
pub(super) fn resolve_answer_with(
    agents: &mut BTreeMap<String, AgentConfig>,
    wanted: Vec<(String, Spanned<String>)>,
    check: &Checker<'_>,
) -> Result<(), ConfigError> {
    for (kb, with) in wanted {
        let name = with.get_ref();
        let model = match agents.get(name) {
            Some(AgentConfig::Kb { .. }) => {
                return Err(check.at(
                    with.span(),
                    format!("`agents.{kb}.answer_with`: {name:?} is a kb agent too; name a model (kind openai, acp or command)"),
                ));
            }
            Some(m) => m.clone(),
            None => {
                let known: Vec<&str> = agents.keys().map(String::as_str).collect();
                return Err(check.at(
                    with.span(),
                    format!(
                        "`agents.{kb}.answer_with`: there is no agent {name:?} (agents: {})",
                        known.join(", ")
                    ),
                ));
            }
        };
        if let Some(AgentConfig::Kb { answer_with, .. }) = agents.get_mut(&kb) {
            *answer_with = Some(Box::new(model));
        }
    }
    Ok(())
}

/// Example questions written as TOML (`text`), checked against `docs`:
/// every key must name one of their sections.
pub fn questions_for(docs: &[KbDoc], text: &str) -> Result<Vec<KbQuestions>, QuestionsError> {
    let list = tactful_agents::kb::parse_questions(text)?;
    tactful_agents::kb::check_questions(docs, &list)?;
    Ok(list)
}

/// Reads a markdown file, or every `.md` file in a folder (sorted), into
/// `docs`; `shown` is how the path is cited.
fn read_markdown(path: &Path, shown: &str, docs: &mut Vec<KbDoc>) -> std::io::Result<()> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        entries.sort();
        for e in entries {
            let name = e
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let shown = format!("{}/{name}", shown.trim_end_matches('/'));
            docs.push(KbDoc {
                source: shown,
                text: std::fs::read_to_string(&e)?,
            });
        }
        Ok(())
    } else {
        docs.push(KbDoc {
            source: shown.to_owned(),
            text: std::fs::read_to_string(path)?,
        });
        Ok(())
    }
}

/// The keys a subprocess agent (command, acp) is started with.
struct ProcessSettings {
    command: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    working_dir: Option<PathBuf>,
}

fn process_settings(
    a: &RawAgent,
    key: &dyn Fn(&str) -> String,
    required: &dyn Fn(&str) -> ConfigError,
    check: &Checker<'_>,
) -> Result<ProcessSettings, ConfigError> {
    let command = a.command.as_ref().ok_or_else(|| required("command"))?;
    if command.get_ref().0.trim().is_empty() {
        return Err(check.at(command.span(), format!("`{}` must not be empty", key("command"))));
    }
    Ok(ProcessSettings {
        command: paths::program(&command.get_ref().0, check.path),
        args: a
            .args
            .as_ref()
            .map(|v| v.get_ref().iter().map(|s| s.0.clone()).collect())
            .unwrap_or_default(),
        env: a
            .env
            .as_ref()
            .map(|v| {
                v.get_ref()
                    .iter()
                    .map(|(k, s)| (k.clone(), s.0.clone()))
                    .collect()
            })
            .unwrap_or_default(),
        // Relative to the config file, so a config works from any directory.
        working_dir: paths::working_dir(a.working_dir.as_ref().map(|d| d.get_ref().0.as_str()), check.path),
    })
}

/// Checks one `[agents.NAME]` table against its kind.
pub(super) fn build_agent(name: &str, a: RawAgent, check: &Checker<'_>) -> Result<AgentConfig, ConfigError> {
    let kind = *a.kind.get_ref();
    let key = |k: &str| format!("agents.{}.{k}", quote_key(name));
    // Keys that belong to other kinds are mistakes worth a clear word.
    for (k, kinds) in KIND_KEYS {
        if let Some(span) = span_of(&a, k)
            && !kinds.contains(&kind)
        {
            return Err(check.at(
                span,
                format!("`{}` does not apply to kind = \"{}\"", key(k), kind.name()),
            ));
        }
    }
    let required = |k: &str| {
        check.at(
            a.kind.span(),
            format!("`{}` is required for kind = \"{}\"", key(k), kind.name()),
        )
    };
    let timeout = match &a.timeout_ms {
        Some(t) => Duration::from_millis(at_least(t, 1, &key("timeout_ms"), check)?),
        None => DEFAULT_AGENT_TIMEOUT,
    };
    Ok(match kind {
        AgentKind::Script => {
            let Some(rules) = a.rules else {
                return Err(check.at(
                    a.kind.span(),
                    format!("`agents.{name}`: kind = \"script\" needs `rules = [{{ when = \"<regex>\", reply = \"...\" }}]`"),
                ));
            };
            let mut compiled = Vec::new();
            for r in rules.into_inner() {
                let when = Regex::new(&r.when.get_ref().0).map_err(|e| {
                    check.at(
                        r.when.span(),
                        format!(
                            "`{}`: `when` is not a valid regular expression: {e}",
                            key("rules")
                        ),
                    )
                })?;
                compiled.push(ScriptRule {
                    when,
                    reply: r.reply.0,
                    delay: Duration::from_millis(r.delay_ms),
                    fail: r.fail,
                });
            }
            AgentConfig::Script(ScriptAgent::new(compiled))
        }
        AgentKind::Command => {
            let p = process_settings(&a, &key, &required, check)?;
            AgentConfig::Command(CommandConfig {
                command: p.command,
                args: p.args,
                env: p.env,
                working_dir: p.working_dir,
                timeout,
            })
        }
        AgentKind::Acp => {
            let p = process_settings(&a, &key, &required, check)?;
            let mut allow = Vec::new();
            for kind in a.allow_permissions.map(|v| v.into_inner()).unwrap_or_default() {
                if !TOOL_KINDS.contains(&kind.get_ref().as_str()) {
                    return Err(check.at(
                        kind.span(),
                        format!(
                            "`{}`: {:?} is not a tool kind (one of: {})",
                            key("allow_permissions"),
                            kind.get_ref(),
                            TOOL_KINDS.join(", ")
                        ),
                    ));
                }
                allow.push(kind.into_inner());
            }
            let ttl = match &a.session_ttl_seconds {
                Some(v) => at_least(v, 1, &key("session_ttl_seconds"), check)?,
                None => 1800,
            };
            let max_sessions = match &a.max_sessions {
                Some(v) => at_least(v, 1, &key("max_sessions"), check)?,
                None => 32,
            };
            let inactivity = match &a.inactivity_timeout_ms {
                Some(v) => at_least(v, 1, &key("inactivity_timeout_ms"), check)?,
                None => 120_000,
            };
            AgentConfig::Acp(AcpConfig {
                command: p.command,
                args: p.args,
                env: p.env,
                working_dir: p.working_dir,
                session_ttl: Duration::from_secs(ttl),
                max_sessions,
                allow_permissions: allow,
                inactivity_timeout: Duration::from_millis(inactivity),
            })
        }
        AgentKind::Kb => {
            let paths = a.paths.ok_or_else(|| required("paths"))?;
            let span = paths.span();
            let base = check.path.parent().map(Path::to_path_buf).unwrap_or_default();
            let mut docs = Vec::new();
            for p in paths.into_inner() {
                let path = base.join(&p.0);
                read_markdown(&path, &p.0, &mut docs).map_err(|e| {
                    check.at(
                        span.clone(),
                        format!("`{}`: cannot read {}: {e}", key("paths"), path.display()),
                    )
                })?;
            }
            let min_score = match &a.min_score {
                Some(m) if !(*m.get_ref() > 0.0 && m.get_ref().is_finite()) => {
                    return Err(check.at(m.span(), format!("`{}` must be more than 0", key("min_score"))));
                }
                Some(m) => *m.get_ref() as f32,
                None => tactful_agents::kb::DEFAULT_MIN_SCORE,
            };
            let questions = match &a.questions {
                Some(q) => {
                    let path = base.join(&q.get_ref().0);
                    let text = std::fs::read_to_string(&path).map_err(|e| {
                        check.at(
                            q.span(),
                            format!("`{}`: cannot read {}: {e}", key("questions"), path.display()),
                        )
                    })?;
                    questions_for(&docs, &text).map_err(|e| {
                        check.at(
                            q.span(),
                            format!("`{}`: {}: {e}", key("questions"), q.get_ref().0),
                        )
                    })?
                }
                None => Vec::new(),
            };
            // `answer_with` is resolved once every agent is read.
            AgentConfig::Kb {
                docs,
                min_score,
                questions,
                answer_with: None,
            }
        }
        AgentKind::OpenAi => {
            let model = a.model.ok_or_else(|| required("model"))?;
            let headers: BTreeMap<String, String> = a
                .headers
                .map(|h| h.into_inner().into_iter().map(|(k, v)| (k, v.0)).collect())
                .unwrap_or_default();
            let base_url = match a.base_url {
                Some(u) => {
                    let url = u.get_ref().0.clone();
                    if !(url.starts_with("http://") || url.starts_with("https://")) {
                        return Err(check.at(
                            u.span(),
                            format!("`{}` must start with http:// or https://", key("base_url")),
                        ));
                    }
                    url
                }
                None => DEFAULT_OPENAI_BASE_URL.to_owned(),
            };
            if let Some(t) = &a.temperature
                && !(0.0..=2.0).contains(t.get_ref())
            {
                return Err(check.at(
                    t.span(),
                    format!("`{}` must be between 0 and 2", key("temperature")),
                ));
            }
            let config = OpenAiConfig {
                base_url,
                model: model.into_inner().0,
                api_key: a.api_key.map(|k| k.into_inner().0).filter(|k| !k.is_empty()),
                temperature: a.temperature.map(|t| *t.get_ref()),
                max_tokens: a.max_tokens.map(|m| *m.get_ref()),
                timeout,
                headers,
            };
            // Check headers now, so a bad one is a config error, not a turn
            // error later.
            OpenAiAgent::new(config.clone(), Arc::from(""))
                .map_err(|e| check.nowhere(format!("`{}`: {e}", key("headers"))))?;
            AgentConfig::OpenAi(config)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Result<Config, ConfigError> {
        // Beside the repository's README, so `paths` finds a document.
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../t.toml");
        Config::parse(src, &here, &|_| None)
    }

    const KB: &str = r#"
[[persona]]
id = "guide"
agent = "docs"

[agents.docs]
kind = "kb"
paths = ["README.md"]
"#;

    #[test]
    fn a_kb_answers_with_a_model_it_names() {
        let c = parse(&format!(
            "{KB}answer_with = \"llm\"\n\n[agents.llm]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n"
        ))
        .expect("valid");
        match &c.agents["docs"] {
            AgentConfig::Kb {
                answer_with: Some(m), ..
            } => assert!(matches!(**m, AgentConfig::OpenAi(_))),
            other => panic!("a kb answering with the model: {other:?}"),
        }
        let e = parse(&format!("{KB}answer_with = \"nobody\"\n")).expect_err("no such agent");
        let text = e.to_string();
        assert!(
            text.contains("`agents.docs.answer_with`: there is no agent \"nobody\" (agents: docs)"),
            "{text}"
        );
        assert!(text.contains(":9:"), "names the line: {text}");
        let e = parse(&format!("{KB}answer_with = \"docs\"\n")).expect_err("a kb for a kb");
        assert!(e.to_string().contains("is a kb agent too"), "{e}");
    }

    /// `questions`: read beside the config, every key checked against the
    /// documents; a misnamed section, a malformed file or a missing one is
    /// an error naming the config's line and the file's.
    #[test]
    fn a_kb_reads_its_questions_and_refuses_a_section_it_does_not_have() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(
            dir.path().join("guide.md"),
            "# Guide\n\n## Stopping loops\n\nSet max_bot_turns.\n\n## Costs\n\nSet a budget.\n",
        )
        .expect("doc");
        let config = dir.path().join("tactful.toml");
        let src = "[[persona]]\nid = \"guide\"\nagent = \"docs\"\n\n[agents.docs]\nkind = \"kb\"\npaths = [\"guide.md\"]\nquestions = \"questions.toml\"\n";
        let write = |q: &str| std::fs::write(dir.path().join("questions.toml"), q).expect("questions");
        let parse = || Config::parse(src, &config, &|_| None);

        write(
            "\"guide.md#Stopping loops\" = [\"the bots keep replying to each other\"]\n\"guide.md#Costs\" = [\"how much will this cost us\", \"cap the spend\"]\n",
        );
        match &parse().expect("valid").agents["docs"] {
            AgentConfig::Kb { questions, .. } => {
                let asks: usize = questions.iter().map(|q| q.asks.len()).sum();
                assert_eq!((questions.len(), asks), (2, 3));
            }
            other => panic!("a kb agent: {other:?}"),
        }

        write("# renamed since\n\n\"guide.md#Stopping loop\" = [\"bots loop\"]\n");
        let e = parse().expect_err("no such section").to_string();
        assert!(
            e.contains(
                "`agents.docs.questions`: questions.toml: line 3: no section \"guide.md#Stopping loop\""
            ),
            "{e}"
        );
        assert!(e.contains("did you mean \"guide.md#Stopping loops\"?"), "{e}");
        assert!(e.contains(":8:"), "names the config's line: {e}");

        write("\"guide.md#Costs\" = [\"cap the spend\"\n");
        let e = parse().expect_err("unclosed array").to_string();
        assert!(
            e.contains("`agents.docs.questions`: questions.toml: line 1, column 36: unclosed array"),
            "{e}"
        );

        std::fs::remove_file(dir.path().join("questions.toml")).expect("rm");
        let e = parse().expect_err("no file").to_string();
        assert!(
            e.contains("`agents.docs.questions`: cannot read") && e.contains("questions.toml"),
            "{e}"
        );
    }
}
