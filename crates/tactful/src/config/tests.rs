//! The config reader's tests: what loads, and what is refused with its key
//! and line.

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
    let e =
        err("[[persona]]\nid = \"docs\"\nagent = \"nope\"\n[agents.main]\nkind = \"script\"\nrules = []\n");
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

/// `[cluster]` shares a PostgreSQL store; on a SQLite file it is refused
/// at its line, as is a lease too short to renew or too long to wait for.
#[test]
fn a_cluster_needs_a_database_and_a_sane_lease() {
    let e = err(&format!("{MINIMAL}\n[cluster]\nenabled = true\n"));
    assert_eq!(e.position.map(|p| p.0), Some(11), "{e}");
    assert!(
        e.message
            .contains("`cluster.enabled` needs a store every process reaches"),
        "{e}"
    );
    let db = "[store]\nurl = \"postgres://tactful@db.internal/tactful\"\n";
    let c = parse(&format!("{MINIMAL}\n{db}\n[cluster]\nenabled = true\n")).expect("valid");
    let cluster = c.cluster.expect("on");
    assert_eq!(
        cluster.lease,
        std::time::Duration::from_secs(10),
        "ten seconds by default"
    );
    assert!(
        cluster.about.contains(&std::process::id().to_string()),
        "{}",
        cluster.about
    );
    let c = parse(&format!(
        "{MINIMAL}\n{db}\n[cluster]\nenabled = false\nlease_seconds = 30\n"
    ))
    .expect("valid");
    assert!(c.cluster.is_none(), "off");
    for (lease, ok) in [(1, false), (2, true), (300, true), (301, false)] {
        let got = parse(&format!(
            "{MINIMAL}\n{db}\n[cluster]\nenabled = true\nlease_seconds = {lease}\n"
        ));
        match got {
            Ok(c) => {
                assert!(ok, "{lease} s accepted");
                assert_eq!(c.cluster.map(|c| c.lease.as_secs()), Some(lease));
            }
            Err(e) => {
                assert!(!ok, "{lease} s refused: {e}");
                assert_eq!(e.position.map(|p| p.0), Some(15), "{e}");
                assert!(e.message.contains("`cluster.lease_seconds` = "), "{e}");
            }
        }
    }
    let e = err(&format!(
        "{MINIMAL}\n{db}\n[cluster]\nenabled = true\nlease = 3\n"
    ));
    assert!(e.message.contains("unknown field `lease`"), "{e}");
}
