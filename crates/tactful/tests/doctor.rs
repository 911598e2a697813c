//! `tactful doctor` against the platforms' test doubles: a good config
//! passes every check (and changes nothing), a broken one fails each
//! broken part with its cause and a fix, and no secret is ever printed.

use crate::common;
use crate::discord_double;
use crate::slack_double;
use crate::telegram_double;

const TG: &str = "7001:AAHdocs-doctor-token-secret";
const TG_WRONG: &str = "7009:AAHnot-a-known-token-secret";
const DC: &str = "NzAwMQ.docs.doctor-token-secret";
const DC_WRONG: &str = "NzAwOQ.nope.doctor-token-secret";
const KEY: &str = "sk-doctor-SECRET-key-000";
const SL_BOT: &str = "xoxb-1-docs-doctor-secret";
const SL_APP: &str = "xapp-1-A0DOCS-doctor-app-secret";
const SL_WRONG_BOT: &str = "xoxb-9-nope-doctor-secret";
const SL_WRONG_APP: &str = "xapp-1-A0NOPE-doctor-app-secret";

/// What each platform's account is signed in with.
struct Tokens<'a> {
    telegram: &'a str,
    discord: &'a str,
    slack: (&'a str, &'a str),
}

const GOOD: Tokens<'static> = Tokens {
    telegram: TG,
    discord: DC,
    slack: (SL_BOT, SL_APP),
};
const WRONG: Tokens<'static> = Tokens {
    telegram: TG_WRONG,
    discord: DC_WRONG,
    slack: (SL_WRONG_BOT, SL_WRONG_APP),
};

/// Where the doubles listen.
struct Urls {
    telegram: String,
    discord: String,
    slack: String,
}

fn config(t: &Tokens<'_>, urls: &Urls, model: &str, web: u16, store: &str) -> String {
    let (tg, dc, (sl_bot, sl_app)) = (t.telegram, t.discord, t.slack);
    let (telegram, discord, slack) = (&urls.telegram, &urls.discord, &urls.slack);
    format!(
        r#"
[[persona]]
id = "docs"
name = "Docs"
agent = "main"
telegram = {{ token = "{tg}" }}
discord = {{ token = "{dc}" }}
slack = {{ bot_token = "{sl_bot}", app_token = "{sl_app}" }}

[[persona]]
id = "llm"
name = "Llm"
agent = "remote"

[agents.main]
kind = "script"
rules = [{{ when = "", reply = "ok" }}]

[agents.remote]
kind = "openai"
base_url = "{model}"
model = "m"
api_key = "{KEY}"
timeout_ms = 5000

[platforms.telegram]
api_url = "{telegram}"

[platforms.discord]
api_url = "{discord}"
gateway_url = "ws://127.0.0.1:9"

[platforms.slack]
api_url = "{slack}"

[platforms.web]
listen = "127.0.0.1:{web}"

[store]
path = "{store}"
"#
    )
}

/// The table's line about `what`, and the fix under it (if any).
fn row<'a>(table: &'a str, what: &str) -> (&'a str, Option<&'a str>) {
    let mut lines = table.lines();
    while let Some(line) = lines.next() {
        if line.starts_with(what) {
            let fix = lines
                .clone()
                .next()
                .filter(|l| l.trim_start().starts_with("fix:"));
            return (line, fix);
        }
    }
    panic!("no row {what:?} in:\n{table}");
}

/// A model server that answers every request with one streamed word.
fn model_server() -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut r = BufReader::new(s.try_clone().expect("clone"));
            let mut length = 0;
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0; length];
            let _ = r.read_exact(&mut body);
            let chunk = r#"{"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}"#;
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: {chunk}\n\ndata: [DONE]\n\n"
            );
        }
    });
    format!("http://127.0.0.1:{port}/v1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_passes_a_good_config_and_names_each_broken_part_with_a_fix() {
    let telegram = telegram_double::Double::start(vec![telegram_double::Bot {
        token: TG.into(),
        id: 7001,
        username: "docs_bot".into(),
        name: "Docs".into(),
    }])
    .await;
    let discord = discord_double::Double::start(vec![discord_double::Bot {
        token: DC.into(),
        id: 7001,
        name: "docs-bot".into(),
        roles: vec![],
    }])
    .await;
    let slack = slack_double::Double::start(
        vec![slack_double::App {
            app_id: "A0DOCS".into(),
            bot_token: SL_BOT.into(),
            app_token: SL_APP.into(),
            user: "U0DOCSBOT".into(),
            bot_id: "B0DOCS".into(),
            name: "docs-bot".into(),
        }],
        &[],
    )
    .await;
    let urls = Urls {
        telegram: telegram.url.clone(),
        discord: format!("{}/discord-proxy", discord.url),
        slack: format!("{}/api", slack.url),
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let web = common::free_port();

    // Everything right.
    let good = config(&GOOD, &urls, &model_server(), web, &store.display().to_string());
    let (code, table, stderr) = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || common::doctor(&dir, &good)
    })
    .await
    .expect("doctor");
    assert_eq!(code, Some(0), "{table}\n{stderr}");
    assert!(row(&table, "agent main (script)").0.contains("ok"), "{table}");
    assert!(
        row(&table, "agent remote (openai)").0.contains("answered in"),
        "{table}"
    );
    assert!(
        row(&table, "Telegram docs (getMe)").0.contains("@docs_bot"),
        "{table}"
    );
    assert!(
        row(&table, "Discord docs (users/@me)").0.contains("docs-bot"),
        "{table}"
    );
    assert!(
        row(&table, "Slack docs (auth.test)").0.contains("docs-bot"),
        "{table}"
    );
    assert!(
        row(&table, "Slack docs (apps.connections.open)").0.contains("ok"),
        "{table}"
    );
    assert!(row(&table, "web room").0.contains("is free"), "{table}");
    assert!(
        row(&table, "store").0.contains("will be made on the first start"),
        "{table}"
    );
    assert!(table.contains("all 8 checks passed"), "{table}");
    assert!(!store.exists(), "the doctor made no store");
    assert!(
        telegram.calls().iter().all(|c| c.method == "getMe"),
        "getMe only: nothing sent, no update taken"
    );

    // Everything wrong: a refused model server, tokens the platforms do
    // not know, a store folder that is missing, the web port taken.
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let bad = config(
        &WRONG,
        &urls,
        &format!("http://127.0.0.1:{refused}/v1"),
        taken.local_addr().expect("addr").port(),
        &dir.path().join("missing/tactful.db").display().to_string(),
    );
    let (code, table, stderr) = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || common::doctor(&dir, &bad)
    })
    .await
    .expect("doctor");
    assert_eq!(code, Some(1), "{table}\n{stderr}");
    let (line, fix) = row(&table, "agent remote (openai)");
    assert!(
        line.contains(&format!(
            "connection refused: http://127.0.0.1:{refused}/v1/chat/completions"
        )),
        "{table}"
    );
    assert!(fix.is_some_and(|f| f.contains("base_url")), "{table}");
    let (line, fix) = row(&table, "Telegram docs (getMe)");
    assert!(line.contains("FAIL"), "{table}");
    assert!(fix.is_some_and(|f| f.contains("@BotFather")), "{table}");
    let (line, fix) = row(&table, "Discord docs (users/@me)");
    assert!(line.contains("FAIL"), "{table}");
    assert!(fix.is_some_and(|f| f.contains("discord.token")), "{table}");
    let (line, fix) = row(&table, "Slack docs (auth.test)");
    assert!(line.contains("FAIL"), "{table}");
    assert!(fix.is_some_and(|f| f.contains("slack.bot_token")), "{table}");
    let (line, fix) = row(&table, "Slack docs (apps.connections.open)");
    assert!(line.contains("FAIL"), "{table}");
    assert!(fix.is_some_and(|f| f.contains("slack.app_token")), "{table}");
    let (line, fix) = row(&table, "store");
    assert!(line.contains("does not exist"), "{table}");
    assert!(fix.is_some_and(|f| f.contains("mkdir -p")), "{table}");
    let (line, fix) = row(&table, "web room");
    assert!(line.contains("cannot listen"), "{table}");
    assert!(fix.is_some_and(|f| f.contains("platforms.web.listen")), "{table}");
    assert!(row(&table, "agent main (script)").0.contains("ok"), "{table}");
    assert!(table.contains("7 of 8 checks failed"), "{table}");
    assert!(stderr.contains("error: 7 of 8 checks failed"), "{stderr}");
    for secret in [
        TG,
        TG_WRONG,
        DC,
        DC_WRONG,
        KEY,
        SL_BOT,
        SL_APP,
        SL_WRONG_BOT,
        SL_WRONG_APP,
        "AAHnot-a-known",
        "doctor-token-secret",
        "doctor-secret",
    ] {
        assert!(
            !table.contains(secret) && !stderr.contains(secret),
            "{secret} shown:\n{table}\n{stderr}"
        );
    }
    drop(taken);
}

/// Nothing listening where a platform's server should be: every row names
/// the cause and the address, not "error sending request" or a transport
/// error's Debug form; the Matrix SDK's own dump of the error is not in the
/// log either.
#[test]
fn a_server_that_is_not_there_is_named_with_the_cause() {
    let dir = tempfile::tempdir().expect("temp dir");
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let base = format!("http://127.0.0.1:{refused}");
    let config = format!(
        r#"
[[persona]]
id = "docs"
agent = "main"
telegram = {{ token = "123456:AAHabcdefghijklmnopqrstuvwxyz012345" }}
discord = {{ token = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GaBcDe.abcdefghijklmnopqrstuvwxyz0123456789" }}
slack = {{ bot_token = "xoxb-1-2-abcdef", app_token = "xapp-1-A1-2-abcdef" }}
matrix = {{ user_id = "@docs:example.org", access_token = "syt_abcdef" }}

[agents.main]
kind = "script"
rules = []

[platforms.telegram]
api_url = "{base}"
[platforms.discord]
api_url = "{base}"
[platforms.slack]
api_url = "{base}/api"
[platforms.matrix]
homeserver = "{base}"

[store]
path = ":memory:"
"#
    );
    let (code, table, stderr) = common::doctor(dir.path(), &config);
    assert_eq!(code, Some(1), "{table}\n{stderr}");
    for (what, said) in [
        ("Telegram docs (getMe)", format!("connection refused: {base}")),
        (
            "Discord docs (users/@me)",
            format!("Discord: did not answer: connection refused: {base}/api/v10/users/@me"),
        ),
        (
            "Slack docs (auth.test)",
            format!("Slack: connection refused: {base}/api"),
        ),
        (
            "Slack docs (apps.connections.open)",
            format!("Slack: connection refused: {base}/api"),
        ),
        (
            "Matrix docs (@docs:example.org)",
            format!("connection refused: {base}/"),
        ),
    ] {
        let (line, _) = row(&table, what);
        assert!(
            line.contains("FAIL") && line.trim_end().ends_with(&said),
            "{what}: {line}\n{table}"
        );
    }
    assert!(!stderr.contains("reqwest::Error"), "{stderr}");
    assert!(!table.contains("hyper_util"), "{table}");
}
