//! What the cluster test and the failover benchmark share: the config of a
//! process (one Telegram bot on the Bot API double, `[cluster]` on a
//! PostgreSQL schema) and what the database says about who holds what.
#![allow(dead_code)] // each user takes some of it

pub mod leases;

#[allow(unused_imports)] // the benchmarks wait on their own terms
pub use leases::{cluster_toml, holder, shares, wait_db};

use serde_json::{Value, json};

use crate::telegram_double::{Bot, Double};

/// The bot's token (the double accepts any; `${DOCS_TOKEN}` in the config).
pub const TOKEN: &str = "7101:AAHdocs-cluster-token-secret";

/// The lease of the bot's account: whichever process holds it polls.
pub const DOCS_ACCOUNT: &str = "account:telegram:docs";

/// The one bot, as the Bot API double knows it.
pub fn bot() -> Bot {
    Bot {
        token: TOKEN.into(),
        id: 7101,
        username: "docs_bot".into(),
        name: "Docs".into(),
    }
}

/// The person writing in the groups, as Telegram describes her.
pub fn alice() -> Value {
    json!({"id": 111, "is_bot": false, "first_name": "Alice", "username": "alice"})
}

/// Group `id`, as Telegram describes it.
pub fn group(id: i64) -> Value {
    json!({"id": id, "type": "supergroup", "title": format!("group {id}")})
}

/// Alice says `@docs_bot <text>` in group `chat`; returns the message id.
pub fn mention(double: &Double, chat: i64, text: &str) -> i64 {
    let text = format!("@docs_bot {text}");
    double.post(
        &[TOKEN],
        group(chat),
        alice(),
        json!({"text": text, "entities": [{"type": "mention", "offset": 0, "length": 9}]}),
    )
}

/// A process's config: the store in `url`, Telegram at `api_url`, leases of
/// `lease` seconds, a script agent answering "docs answers <msg id>" after
/// `delay_ms`.
pub fn config(url: &str, api_url: &str, lease: u64, delay_ms: u64) -> String {
    format!(
        r##"
{cluster}

[platforms.telegram]
api_url = "{api_url}"
poll_timeout_secs = 1

[[persona]]
id = "docs"
agent = "docs"
telegram = {{ token = "${{DOCS_TOKEN}}" }}

[agents.docs]
kind = "script"
rules = [{{ when = "", reply = "[[reply_to:{{msg_id}}]] docs answers {{msg_id}}", delay_ms = {delay_ms} }}]

[rooms.default]
mode = "mention"
rate_limit = "off"
"##,
        cluster = cluster_toml(url, lease),
    )
}

/// [`config`], with the web room served on 127.0.0.1:`port`.
pub fn config_with_web(url: &str, api_url: &str, lease: u64, delay_ms: u64, port: u16) -> String {
    format!(
        "{}\n[platforms.web]\nlisten = \"127.0.0.1:{port}\"\n",
        config(url, api_url, lease, delay_ms)
    )
}

/// A `tactful run` of this build (the benchmarks' processes), killed when
/// dropped.
pub struct Node {
    pub child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Node {
    /// Stops the process with SIGTERM (what it decided is written before
    /// it exits) and waits for it: 60 s at most, then it is killed and
    /// this fails, as a process that does not stop when asked is a fault.
    pub fn terminate(&mut self) {
        let pid = self.child.id().to_string();
        let asked = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .is_ok_and(|s| s.success());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while asked && std::time::Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!("tactful (pid {pid}) did not stop on SIGTERM within 60 s");
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `tactful run` on `config` with the bot's token; quiet, unless
/// `TACTFUL_BENCH_STDERR` is set (its log level `TACTFUL_BENCH_LOG`,
/// `warn` by default).
pub fn start_node(config: &str) -> Node {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tactful.toml");
    std::fs::write(&path, config).expect("config");
    let child = Command::new(env!("CARGO_BIN_EXE_tactful"))
        .args(["run", "-c"])
        .arg(&path)
        .env("DOCS_TOKEN", TOKEN)
        .env(
            "TACTFUL_LOG",
            std::env::var("TACTFUL_BENCH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(Stdio::null())
        .stderr(if std::env::var_os("TACTFUL_BENCH_STDERR").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()
        .expect("tactful starts");
    Node { child, _dir: dir }
}
