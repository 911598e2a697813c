//! The `tactful` binary as a user runs it: exit codes and messages.

use std::path::Path;
use std::process::{Command, Output};

fn tactful(args: &[&str]) -> Output {
    tactful_with(args, &[])
}

/// [`tactful`] with more environment.
fn tactful_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tactful"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .env_remove("TACTFUL_LOG")
        .envs(env.iter().copied())
        .output()
        .expect("tactful runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn temp_file(name: &str, contents: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tactful-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write temp file");
    path
}

#[test]
fn replay_prints_json_lines_and_a_summary() {
    let o = tactful(&[
        "replay",
        "-c",
        "examples/quickstart/tactful.toml",
        "examples/quickstart/conversation.jsonl",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8(o.stdout.clone()).expect("utf-8");
    assert!(
        stdout
            .lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
    );
    assert!(stdout.contains(r#""type":"send""#));
    assert!(stderr(&o).contains("replayed 6 messages"), "{}", stderr(&o));
}

#[test]
fn a_bad_scenario_line_is_exit_2_and_names_the_line() {
    let bad = temp_file(
        "bad.jsonl",
        "{\"at\": 0, \"from\": \"a\", \"text\": \"ok\"}\n\n{\"at\": 1, \"from\": \"a\", \"txt\": \"oops\"}\n",
    );
    let o = tactful(&[
        "replay",
        "-c",
        "examples/quickstart/tactful.toml",
        bad.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("bad.jsonl:3: unknown field `txt`"), "{err}");
    assert!(o.stdout.is_empty(), "nothing is replayed from a bad scenario");
    assert!(!err.contains("panicked"));
}

#[test]
fn a_bad_config_is_exit_2_and_names_key_and_line() {
    let cfg = temp_file(
        "bad.toml",
        "[[persona]]\nid = \"docs\"\nagent = \"main\"\n\n[agents.main]\nkind = \"script\"\nrules = []\n\n[rooms.default]\nmode = \"shout\"\n",
    );
    let o = tactful(&["check", "-c", cfg.to_str().expect("utf-8 path")]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("bad.toml:10:8: unknown variant `shout`"), "{err}");
    assert!(err.contains("10 | mode = \"shout\""), "the line is shown: {err}");
}

#[test]
fn check_summarises_a_good_config() {
    let o = tactful(&["check", "-c", "examples/modes/tactful.toml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).expect("utf-8");
    assert!(out.contains("ok"));
    assert!(out.contains("persona docs (Docs)"));
    assert!(out.contains("\"lobby\""));
    assert!(out.contains("platforms: none"), "{out}");
}

#[cfg(feature = "telegram")]
#[test]
fn check_names_the_platforms_and_never_a_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = dir.path().join("tg.toml");
    std::fs::write(
        &cfg,
        "[[persona]]\nid = \"docs\"\nagent = \"a\"\ntelegram = { token = \"123456789:AAE-in-the-file\" }\n\n\
         [agents.a]\nkind = \"script\"\nrules = []\n\n[platforms.web]\n\n[platforms.telegram]\n",
    )
    .expect("config");
    let o = tactful(&["check", "-c", cfg.to_str().expect("utf-8 path")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("platforms: web, telegram"), "{out}");
    assert!(!out.contains("AAE-in-the-file") && !stderr(&o).contains("AAE-in-the-file"));
}

/// A silence reaction Telegram does not let bots use is said by `check`
/// (the config still loads): otherwise every silent answer there fails.
#[test]
fn check_warns_about_a_silence_emoji_telegram_refuses() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = dir.path().join("tg.toml");
    std::fs::write(
        &cfg,
        "[[persona]]\nid = \"docs\"\nagent = \"a\"\ntelegram = { token = \"${TG}\" }\n\n\
         [agents.a]\nkind = \"script\"\nrules = []\n\n[rooms.default]\nsilence_emoji = \"🫠\"\n\n[platforms.telegram]\n",
    )
    .expect("config");
    let o = Command::new(env!("CARGO_BIN_EXE_tactful"))
        .args(["check", "-c", cfg.to_str().expect("utf-8 path")])
        .env("TG", "123456789:AAE-from-the-env")
        .output()
        .expect("runs");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning: ")
            && stderr(&o)
                .contains("`rooms.default.silence_emoji = \"🫠\"` is not a reaction Telegram lets bots use"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let o = tactful(&["replay", "-c", "nope.toml", "nope.jsonl"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("nope.toml: cannot read the config"),
        "{}",
        stderr(&o)
    );
}

/// The README's command agent (`python3 agent.py`, no `working_dir`) works
/// from any directory: its script is found beside the config. A missing
/// script is named by `tactful check` before anything runs.
#[test]
fn a_command_agent_finds_its_script_beside_the_config_from_any_directory() {
    let dir = tempfile::tempdir().expect("dir");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/command-agent");
    for f in ["agent.py", "conversation.jsonl"] {
        std::fs::copy(example.join(f), dir.path().join(f)).expect("copy");
    }
    let config = std::fs::read_to_string(example.join("tactful.toml"))
        .expect("config")
        .lines()
        .filter(|l| !l.starts_with("working_dir"))
        .collect::<Vec<_>>()
        .join("\n");
    let cfg = dir.path().join("tactful.toml");
    std::fs::write(&cfg, config).expect("write");
    let elsewhere = tempfile::tempdir().expect("another dir");
    let run = |args: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_tactful"))
            .args(args)
            .current_dir(elsewhere.path())
            .output()
            .expect("tactful runs")
    };
    let o = run(&["check".as_ref(), "-c".as_ref(), cfg.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));

    let o = run(&[
        "replay".as_ref(),
        "-c".as_ref(),
        cfg.as_os_str(),
        dir.path().join("conversation.jsonl").as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let trace = String::from_utf8_lossy(&o.stdout);
    assert!(
        trace.lines().any(|l| l.contains(r#""type":"send""#)),
        "the agent answered:\n{trace}"
    );

    std::fs::remove_file(dir.path().join("agent.py")).expect("rm");
    let o = run(&["check".as_ref(), "-c".as_ref(), cfg.as_os_str()]);
    assert!(o.status.success(), "a warning, not an error: {}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("warning:") && err.contains("\"agent.py\" is not in"),
        "{err}"
    );
}

/// `check` shows when each schedule runs next, in its own zone, and which
/// replies each hook sees; a bad cron expression or zone is exit 2 at its
/// line and column.
#[test]
fn check_shows_schedules_and_hooks_and_refuses_a_bad_schedule() {
    let o = tactful(&["check", "-c", "examples/schedule/tactful.toml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).expect("utf-8");
    let morning = out
        .lines()
        .find(|l| l.contains("schedule morning"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(morning.contains("\"0 9 * * *\" in Europe/Berlin"), "{morning}");
    let next = morning.split("next: ").nth(1).unwrap_or_default();
    assert_eq!(next.split(", ").count(), 3, "{morning}");
    assert!(
        next.split(", ").all(|t| t.contains(" 09:00:00 CE")),
        "09:00 Berlin time, CET or CEST: {morning}"
    );
    let o = tactful(&["check", "-c", "examples/hooks/tactful.toml"]);
    let out = String::from_utf8(o.stdout).expect("utf-8");
    assert!(
        out.contains("hook review-strict before each reply of strict"),
        "{out}"
    );

    for (schedule, at, says) in [
        (
            "cron = \"0 9 * * * * *\"\ntimezone = \"UTC\"",
            "bad-schedule.toml:11:8:",
            "five fields",
        ),
        (
            "cron = \"@daily\"\ntimezone = \"Europe/Berlinn\"",
            "bad-schedule.toml:12:12:",
            "IANA time zone",
        ),
    ] {
        let cfg = temp_file(
            "bad-schedule.toml",
            &format!(
                "[[persona]]\nid = \"docs\"\nagent = \"main\"\n\n[agents.main]\nkind = \"script\"\nrules = []\n\n[[schedule]]\nname = \"s\"\n{schedule}\npersona = \"docs\"\nroom = \"main\"\nprompt = \"p\"\n"
            ),
        );
        let o = tactful(&["check", "-c", cfg.to_str().expect("utf-8 path")]);
        assert_eq!(o.status.code(), Some(2));
        let err = stderr(&o);
        assert!(err.contains(at) && err.contains(says), "{err}");
    }
}

/// `--start` moves the virtual clock's start over the scenario's own: 25
/// minutes later, the missed morning run is too old to make up.
#[test]
fn replay_start_sets_the_virtual_clock() {
    let run = |start: Option<&str>| {
        let mut args = vec![
            "replay",
            "-c",
            "examples/schedule/tactful.toml",
            "examples/schedule/conversation.jsonl",
        ];
        if let Some(s) = start {
            args.extend(["--start", s]);
        }
        let o = tactful(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8(o.stdout).expect("utf-8");
        out.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
            .filter(|v| v["type"] == "schedule" && v["schedule"] == "morning")
            .map(|v| {
                format!(
                    "{} {}",
                    v["event"].as_str().unwrap_or(""),
                    v["due"].as_str().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(None)[0], "caught_up 2026-03-28T08:00:00.000Z");
    assert_eq!(
        run(Some("2026-03-28T08:30:00Z"))[0],
        "fired 2026-03-29T07:00:00.000Z"
    );
    let o = tactful(&[
        "replay",
        "-c",
        "examples/schedule/tactful.toml",
        "examples/schedule/conversation.jsonl",
        "--start",
        "yesterday",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("RFC 3339"), "{}", stderr(&o));
}

/// A config whose store is `store` (a `[store]` body).
fn with_store(dir: &Path, store: &str) -> std::path::PathBuf {
    let cfg = dir.join("db.toml");
    std::fs::write(
        &cfg,
        format!(
            "[store]\n{store}\n\n[[persona]]\nid = \"docs\"\nagent = \"a\"\n\n\
             [agents.a]\nkind = \"script\"\nrules = []\n\n[platforms.web]\n"
        ),
    )
    .expect("config");
    cfg
}

#[test]
fn check_asks_a_postgres_store_and_never_prints_its_password() {
    let Some(schema) = tactful_store::testing::Schema::new() else {
        return;
    };
    // A password the server (trust auth) ignores, to see that it is hidden.
    let url = schema
        .url
        .replacen("postgres://postgres@", "postgres://postgres:hunter2@", 1);
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = with_store(dir.path(), &format!("url = {url:?}"));
    let o = tactful(&["check", "-c", cfg.to_str().expect("utf-8 path")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("answers; its tables will be made on the first start"),
        "{out}"
    );
    assert!(
        !out.contains("hunter2") && !stderr(&o).contains("hunter2"),
        "{out}"
    );
}

#[test]
fn check_refuses_a_postgres_store_that_does_not_answer() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Nothing listens on port 1 of the loopback.
    let cfg = with_store(
        dir.path(),
        "url = \"postgres://tactful:hunter2@127.0.0.1:1/chat\"",
    );
    let o = tactful(&["check", "-c", cfg.to_str().expect("utf-8 path")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("the store cannot be reached"), "{err}");
    assert!(err.contains("postgres://tactful:…@127.0.0.1:1/chat"), "{err}");
    assert!(err.to_lowercase().contains("connection refused"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    // The error is the verdict, said first: no "ok" and no summary before
    // it (it used to print `db.toml: ok, with 1 warning(s)` and the
    // personas, then fail), and the file's warning (a password written
    // in it) after it at most.
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(out, "", "nothing on stdout before the error");
    let says_ok = |text: &str| {
        text.split(|c: char| !c.is_alphanumeric())
            .any(|word| word.eq_ignore_ascii_case("ok"))
    };
    assert!(!says_ok(&err), "{err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("error:") && first.contains("the store cannot be reached"),
        "the error comes first: {err}"
    );
}

#[test]
fn check_reaches_a_store_that_speaks_only_tls_and_names_a_wrong_tls_setting_at_its_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A file that is not there, and a mode that is not one: the config's
    // errors, at the line, without the password.
    for (params, said) in [
        (
            "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
            "sslrootcert=/nonexistent/ca.pem",
        ),
        ("sslmode=verify_full", "sslmode=verify_full is not a mode"),
    ] {
        let cfg = with_store(
            dir.path(),
            &format!("url = \"postgres://tactful:hunter2@db.example.com/chat?{params}\""),
        );
        let o = tactful(&["check", "-c", cfg.to_str().expect("utf-8 path")]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains("db.toml:2:7: `store.url`: "), "{err}");
        assert!(err.contains(said), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }

    let Some((server, files)) = tactful_store::testing::tls::TlsServer::start() else {
        return;
    };
    let verified = format!("sslmode=verify-full&sslrootcert={}", files.ca.display());
    let cfg = with_store(
        dir.path(),
        &format!(
            "url = {:?}",
            server.url("postgres:hunter2", "127.0.0.1", &verified)
        ),
    );
    let o = tactful(&["check", "-c", cfg.to_str().expect("utf-8 path")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("(TLS, the certificate and host name verified) answers; its tables will be made on the first start"),
        "{out}"
    );
    // Asked without TLS, the server's refusal comes with what to add.
    let cfg = with_store(
        dir.path(),
        &format!("url = {:?}", server.url("postgres:hunter2", "127.0.0.1", "")),
    );
    let o = tactful(&["check", "-c", cfg.to_str().expect("utf-8 path")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("add sslmode=require"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

#[test]
fn a_store_with_a_path_and_a_url_or_a_foreign_url_is_refused_at_its_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = with_store(dir.path(), "path = \"t.db\"\nurl = \"postgres://db/chat\"");
    let o = tactful(&["check", "-c", cfg.to_str().expect("utf-8 path")]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("db.toml:3:7: `store.path` and `store.url` are both set"),
        "{err}"
    );

    let cfg = with_store(dir.path(), "url = \"mysql://root:hunter2@db/chat\"");
    let o = tactful(&["check", "-c", cfg.to_str().expect("utf-8 path")]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("db.toml:2:7: `store.url`: "), "{err}");
    assert!(err.contains("is not a PostgreSQL URL"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

/// `check` on a cluster config: the summary says the store is shared
/// (the web room works behind every process), and that IRC, which posts
/// only through its connection, has every room of its with the one
/// process that connects it.
#[test]
fn check_explains_a_cluster_and_where_irc_rooms_live() {
    let Some(schema) = tactful_store::testing::Schema::new() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = dir.path().join("cluster.toml");
    let body = |platform: &str| {
        format!(
            "[store]\nurl = {:?}\n\n[cluster]\nenabled = true\nlease_seconds = 5\n\n\
             [[persona]]\nid = \"docs\"\nagent = \"a\"\ntelegram = {{ token = \"${{DOCS_TOKEN}}\" }}\n\n\
             [agents.a]\nkind = \"script\"\nrules = []\n\n{platform}\n",
            schema.url
        )
    };
    std::fs::write(&cfg, body("[platforms.telegram]\n\n[platforms.web]")).expect("config");
    let o = tactful_with(
        &["check", "-c", cfg.to_str().expect("utf-8 path")],
        &[("DOCS_TOKEN", "123456789:AAEcheck-token")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("cluster: shares the store with the other processes run on it")
            && out.contains("move after 5 s"),
        "{out}"
    );
    std::fs::write(
        &cfg,
        body("[platforms.telegram]\n\n[platforms.irc]\nserver = \"irc.example.org\"\nchannels = [\"#team\"]"),
    )
    .expect("config");
    let o = tactful_with(
        &["check", "-c", cfg.to_str().expect("utf-8 path")],
        &[("DOCS_TOKEN", "123456789:AAEcheck-token")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("cluster: irc posts only through its connection: one process at a time owns every irc room and connects it"),
        "{out}"
    );
    assert!(!out.contains("telegram posts only"), "{out}");
}
