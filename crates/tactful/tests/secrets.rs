//! Secrets never reach tactful's output: not `tactful check`'s error
//! snippets, not the log at any level, not when a server echoes them back,
//! not when an agent's error quotes them.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::Reaper;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A password with the characters JSON and URLs escape, as servers echo it.
const PASSWORD: &str = r#"hunter2-"quoted"\and/slash"#;
const TOKEN: &str = "syt_c2VjcmV0_accesstoken_0123456789";
const API_KEY: &str = "sk-live-abcdef0123456789";

fn tactful() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tactful"));
    c.env_remove("OPENAI_API_KEY").env_remove("TACTFUL_LOG");
    c
}

/// `tactful run` with its stderr read line by line on a thread.
struct Running {
    _child: Reaper,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(config: &Path, log: Option<&str>) -> Running {
        Running::start_piped(config, log).0
    }

    /// Also returns the service's stdout (its ready line).
    fn start_piped(config: &Path, log: Option<&str>) -> (Running, std::process::ChildStdout) {
        let mut cmd = tactful();
        cmd.args(["run", "-c"]).arg(config);
        if let Some(level) = log {
            cmd.env("TACTFUL_LOG", level);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tactful starts");
        let out = child.stdout.take().expect("stdout");
        let err = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let running = Running {
            _child: Reaper(child),
            lines,
            seen: Vec::new(),
        };
        (running, out)
    }

    /// Log lines until one satisfies `done` (30 s at most); all lines read.
    fn until(&mut self, what: &str, done: impl Fn(&str) -> bool) -> &[String] {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = done(&line);
                    self.seen.push(line);
                    if hit {
                        return &self.seen;
                    }
                }
                Err(_) => panic!("no log line {what} in:\n{}", self.seen.join("\n")),
            }
        }
    }
}

/// Every form a server may echo `secret` in: as written, JSON-escaped,
/// percent-encoded.
fn leaks(text: &str, secret: &str) -> bool {
    let json = serde_json::to_string(secret).expect("json");
    let mut pct = String::new();
    for b in secret.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            pct.push(b as char);
        } else {
            pct.push_str(&format!("%{b:02X}"));
        }
    }
    text.contains(secret) || text.contains(json.trim_matches('"')) || text.contains(&pct)
}

#[test]
fn check_masks_secret_values_on_the_line_it_quotes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tactful.toml");
    // An unknown key on a line that also holds a literal password, and a
    // literal API key of the wrong type.
    std::fs::write(
        &path,
        format!(
            "[[persona]]\nid = \"docs\"\nagent = \"a\"\nmatrix = {{ user_id = \"@d:x\", password = {}, typo = 1 }}\n\n\
             [agents.a]\nkind = \"script\"\n",
            toml::Value::String(PASSWORD.to_owned())
        ),
    )
    .expect("config");
    let out = tactful().args(["check", "-c"]).arg(&path).output().expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("typo"), "the error is still useful: {err}");
    assert!(err.contains(r#"password = "***""#), "{err}");
    assert!(!leaks(&err, PASSWORD) && !err.contains("hunter2"), "{err}");

    std::fs::write(
        &path,
        "[[persona]]\nid = \"docs\"\nagent = \"a\"\n\n[agents.a]\nkind = \"openai\"\nmodel = \"m\"\napi_key = 4242424242\n",
    )
    .expect("config");
    let out = tactful().args(["check", "-c"]).arg(&path).output().expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("4242424242"), "{err}");
    assert!(err.contains("api_key"), "{err}");
}

/// A homeserver that answers `/versions` and refuses everything else with
/// an error quoting the whole request back, headers and body.
async fn echoing_homeserver() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (r, mut w) = sock.into_split();
                let mut r = tokio::io::BufReader::new(r);
                let mut head = String::new();
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    head.push_str(&line);
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0u8; len];
                let _ = r.read_exact(&mut body).await;
                let request = format!("{head}{}", String::from_utf8_lossy(&body));
                let (status, json) = if head.contains("/_matrix/client/versions") {
                    (
                        "200 OK",
                        serde_json::json!({ "versions": ["v1.1", "v1.5", "v1.11"] }),
                    )
                } else {
                    (
                        "403 Forbidden",
                        serde_json::json!({ "errcode": "M_FORBIDDEN", "error": format!("Invalid login: {request}") }),
                    )
                };
                let json = json.to_string();
                let reply = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{json}",
                    json.len()
                );
                let _ = w.write_all(reply.as_bytes()).await;
            });
        }
    });
    port
}

#[cfg(feature = "matrix")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_homeserver_echoing_credentials_does_not_put_them_in_the_log() {
    let port = echoing_homeserver().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tactful.toml");
    std::fs::write(
        &path,
        format!(
            "[store]\npath = \":memory:\"\n\n\
             [[persona]]\nid = \"docs\"\nagent = \"a\"\nmatrix = {{ user_id = \"@docs:localhost\", password = {} }}\n\n\
             [[persona]]\nid = \"chef\"\nagent = \"a\"\nmatrix = {{ user_id = \"@chef:localhost\", access_token = \"{TOKEN}\" }}\n\n\
             [agents.a]\nkind = \"script\"\nrules = [{{ when = \"\", reply = \"ok\" }}]\n\n\
             [platforms.matrix]\nhomeserver = \"http://127.0.0.1:{port}\"\n",
            toml::Value::String(PASSWORD.to_owned())
        ),
    )
    .expect("config");
    // At the default level: the login failures are warnings.
    let mut run = Running::start(&path, None);
    let failed = |persona: &'static str| {
        move |l: &str| l.contains("WARN") && l.contains(persona) && l.contains("Invalid login")
    };
    run.until("about docs' failed login", failed("docs"));
    let log = run.until("about chef's failed token", failed("chef")).join("\n");
    assert!(log.contains("[redacted]"), "the echo was there, masked:\n{log}");
    assert!(!leaks(&log, PASSWORD), "{log}");
    assert!(!leaks(&log, TOKEN), "{log}");
}

#[cfg(feature = "irc")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nickserv_password_stays_out_of_a_trace_level_log() {
    // A minimal IRC server: welcome, no MOTD, then read what the client sends.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tactful.toml");
    std::fs::write(
        &path,
        format!(
            "[store]\npath = \":memory:\"\n\n\
             [[persona]]\nid = \"docs\"\nagent = \"a\"\nirc = {{ nick = \"docs\", password = {} }}\n\n\
             [agents.a]\nkind = \"script\"\nrules = [{{ when = \"\", reply = \"ok\" }}]\n\n\
             [platforms.irc]\nserver = \"127.0.0.1\"\nport = {port}\nchannels = [\"#t\"]\n",
            toml::Value::String(PASSWORD.to_owned())
        ),
    )
    .expect("config");
    let mut run = Running::start(&path, Some("trace"));
    let (sock, _) = tokio::time::timeout(Duration::from_secs(30), listener.accept())
        .await
        .expect("tactful connects")
        .expect("accept");
    let (r, mut w) = sock.into_split();
    let mut lines = tokio::io::BufReader::new(r).lines();
    let identified = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.starts_with("USER") {
                w.write_all(b":srv 001 docs :Welcome\r\n:srv 422 docs :No MOTD\r\n")
                    .await
                    .expect("write");
            }
            if line.contains("IDENTIFY") {
                return line;
            }
        }
        String::new()
    })
    .await
    .expect("the client identifies");
    assert!(
        identified.contains(PASSWORD),
        "the password was sent: {identified}"
    );
    // The library logs each line it sends at TRACE: that line is masked.
    let log = run
        .until("with the IDENTIFY line", |l| l.contains("IDENTIFY"))
        .join("\n");
    assert!(log.contains("IDENTIFY [redacted]"), "{log}");
    assert!(!leaks(&log, PASSWORD), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_failure_is_logged_with_its_reason_and_without_secrets() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tactful.toml");
    std::fs::write(
        &path,
        format!(
            "[store]\npath = \":memory:\"\n\n\
             [[persona]]\nid = \"docs\"\nagent = \"a\"\n\n\
             [agents.a]\nkind = \"command\"\ncommand = \"sh\"\n\
             args = [\"-c\", \"cat >/dev/null; echo \\\"upstream refused key $OPENAI_API_KEY\\\" >&2; exit 7\"]\n\
             env = {{ OPENAI_API_KEY = \"{API_KEY}\" }}\n\n\
             [platforms.web]\nlisten = \"127.0.0.1:0\"\n"
        ),
    )
    .expect("config");
    let (mut run, out) = Running::start_piped(&path, None);
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line).expect("the ready line");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("a URL")
        .trim_end_matches('/')
        .replacen("http://", "ws://", 1);
    let mut ws = common::enter(&format!("{url}/ws"), "Alice").await;
    common::say(
        &mut ws,
        serde_json::json!({ "type": "say", "room": "lobby", "text": "@docs hi", "mentions": ["docs"] }),
    )
    .await;
    let log = run
        .until("about the failed turn", |l| l.contains("agent turn failed"))
        .join("\n");
    assert!(log.contains("WARN"), "{log}");
    assert!(
        log.contains("exited with exit status: 7"),
        "the reason is there: {log}"
    );
    assert!(log.contains("upstream refused key [redacted]"), "{log}");
    assert!(!log.contains(API_KEY), "{log}");
}

/// A server answering every request with `body(request head)`, as a 401
/// unless the body says `"ok": true`: an API that quotes the credentials
/// it was sent back in its error.
#[cfg(any(feature = "telegram", feature = "discord", feature = "slack"))]
async fn echoing_server(body: fn(&str) -> serde_json::Value) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (r, mut w) = sock.into_split();
                let mut r = tokio::io::BufReader::new(r);
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).await.unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(line.trim_end());
                    head.push(' ');
                }
                let answer = body(head.trim());
                // An answer that says it is fine goes out as one (a step
                // that must pass before the call that echoes).
                let status = if answer["ok"] == true {
                    "200 OK"
                } else {
                    "401 Unauthorized"
                };
                let json = answer.to_string();
                let reply = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{json}",
                    json.len()
                );
                let _ = w.write_all(reply.as_bytes()).await;
            });
        }
    });
    port
}

/// Runs `tactful run` at trace level with one persona whose platform
/// sub-table is `persona_part` on `platform` (pointed at an
/// [`echoing_server`]), and checks the echoed `tokens` show masked only.
#[cfg(any(feature = "telegram", feature = "discord", feature = "slack"))]
fn echoed_token_stays_masked(persona_part: &str, platform: &str, tokens: &[&str]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tactful.toml");
    std::fs::write(
        &path,
        format!(
            "[store]\npath = \":memory:\"\n\n\
             [[persona]]\nid = \"docs\"\nagent = \"a\"\n{persona_part}\n\n\
             [agents.a]\nkind = \"script\"\nrules = [{{ when = \"\", reply = \"ok\" }}]\n\n{platform}"
        ),
    )
    .expect("config");
    let mut run = Running::start(&path, Some("trace"));
    let log = run
        .until("the failed call, echoing the request", |l| {
            l.contains("WARN") && l.contains("Unauthorized")
        })
        .join("\n");
    assert!(log.contains("[redacted]"), "the echo was there, masked:\n{log}");
    for token in tokens {
        assert!(!leaks(&log, token), "{log}");
    }
}

#[cfg(feature = "telegram")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_api_echoing_the_token_does_not_put_it_in_a_trace_level_log() {
    // The token is in every request's URL; this server quotes the request
    // back in its error, as a misconfigured proxy might.
    const BOT_TOKEN: &str = "7003:AAHsecret-bot-token-0123456789";
    let port = echoing_server(|head| {
        serde_json::json!({"ok": false, "error_code": 401, "description": format!("Unauthorized: {head}")})
    })
    .await;
    echoed_token_stays_masked(
        &format!("telegram = {{ token = \"{BOT_TOKEN}\" }}"),
        &format!("[platforms.telegram]\napi_url = \"http://127.0.0.1:{port}\"\n"),
        &[BOT_TOKEN],
    );
}

#[cfg(feature = "discord")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discord_api_echoing_the_token_does_not_put_it_in_a_trace_level_log() {
    // The token travels in the Authorization header; this server quotes
    // the request's headers back in its error.
    const BOT_TOKEN: &str = "NzAwMw.discord-token.0123456789-secret";
    let port =
        echoing_server(|head| serde_json::json!({"message": format!("401: Unauthorized {head}"), "code": 0}))
            .await;
    echoed_token_stays_masked(
        &format!("discord = {{ token = \"{BOT_TOKEN}\" }}"),
        &format!(
            "[platforms.discord]\napi_url = \"http://127.0.0.1:{port}\"\ngateway_url = \"ws://127.0.0.1:{port}\"\n"
        ),
        &[BOT_TOKEN],
    );
}

#[cfg(feature = "slack")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slack_api_echoing_the_tokens_does_not_put_them_in_a_trace_level_log() {
    // Each token travels as `Authorization: Bearer`; `auth.test` (bot
    // token) passes, so the app-level token is sent next, and that call's
    // error quotes the request's headers back.
    const BOT_TOKEN: &str = "xoxb-1234-5678-echoed-bot-secret";
    const APP_TOKEN: &str = "xapp-1-A1-echoed-app-secret";
    let port = echoing_server(|head| {
        if head.contains("auth.test") {
            serde_json::json!({"ok": true, "url": "https://echo.slack.com/", "team": "Echo",
                               "user": "docs", "team_id": "T1", "user_id": "U1", "bot_id": "B1"})
        } else {
            serde_json::json!({"ok": false, "error": format!("Unauthorized {head}")})
        }
    })
    .await;
    echoed_token_stays_masked(
        &format!("slack = {{ bot_token = \"{BOT_TOKEN}\", app_token = \"{APP_TOKEN}\" }}"),
        &format!("[platforms.slack]\napi_url = \"http://127.0.0.1:{port}/api\"\n"),
        &[BOT_TOKEN, APP_TOKEN],
    );
}

#[cfg(feature = "xmpp")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_xmpp_password_stays_out_of_a_trace_level_log() {
    use base64::Engine as _;
    // A minimal XMPP server that offers only SASL PLAIN, so the password
    // goes out (base64) in a line the client library logs at TRACE.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tactful.toml");
    std::fs::write(
        &path,
        format!(
            "[store]\npath = \":memory:\"\n\n\
             [[persona]]\nid = \"docs\"\nagent = \"a\"\nxmpp = {{ jid = \"docs@localhost\", password = {} }}\n\n\
             [agents.a]\nkind = \"script\"\nrules = [{{ when = \"\", reply = \"ok\" }}]\n\n\
             [platforms.xmpp]\nserver = \"127.0.0.1\"\nport = {port}\ntls = \"none\"\n",
            toml::Value::String(PASSWORD.to_owned())
        ),
    )
    .expect("config");
    let mut run = Running::start(&path, Some("info,tokio_xmpp=trace"));
    let (mut sock, _) = tokio::time::timeout(Duration::from_secs(30), listener.accept())
        .await
        .expect("tactful connects")
        .expect("accept");
    let auth = tokio::time::timeout(Duration::from_secs(30), async {
        let mut seen = String::new();
        let mut buf = [0u8; 4096];
        let mut greeted = false;
        loop {
            let n = sock.read(&mut buf).await.expect("read");
            assert!(n > 0, "the client hung up: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
            if !greeted && seen.contains("<stream:stream") {
                greeted = true;
                sock.write_all(
                    b"<?xml version='1.0'?><stream:stream xmlns='jabber:client' \
                      xmlns:stream='http://etherx.jabber.org/streams' id='s1' from='localhost' version='1.0'>\
                      <stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\
                      <mechanism>PLAIN</mechanism></mechanisms></stream:features>",
                )
                .await
                .expect("write");
            }
            if let Some(at) = seen.find("<auth")
                && let Some(end) = seen[at..].find("</auth>")
            {
                let auth = seen[at..at + end].to_owned();
                sock.write_all(
                    b"<failure xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><not-authorized/></failure>",
                )
                .await
                .expect("write");
                return auth;
            }
        }
    })
    .await
    .expect("the client authenticates");
    let wire = base64::engine::general_purpose::STANDARD.encode(format!("\0docs\0{PASSWORD}"));
    assert!(auth.contains(&wire), "the password went out as PLAIN: {auth}");
    // The library logs what it sends at TRACE: that line is masked.
    let log = run
        .until("with the auth line", |l| {
            l.contains("SEND") && l.contains("<auth")
        })
        .join("\n");
    assert!(log.contains("[redacted]"), "{log}");
    assert!(!leaks(&log, PASSWORD), "{log}");
    assert!(!log.contains(&wire), "{log}");
}
