//! tactful against a Telegram server nobody on the team wrote: the npm
//! package `telegram-test-api` (4.2.x), run by `tests/telegram/emulator.mjs`
//! behind a thin wrapper that fixes only its gaps no real server has. The
//! bots' base URL points at it and its client API plays the people.
//!
//! The wrapper adds `setMessageReaction`, which the package lacks, checked
//! as the Bot API documents it (the message must exist; one emoji from the
//! list bots may use).
//!
//! What it does that a real server may also do is left for tactful to
//! cope with: `getUpdates` answers at once (no long poll), and
//! `sendChatAction`, which it lacks, fails with HTTP 500.
//!
//! `scripts/test` installs the package; without it a plain `cargo test`
//! skips this test with a message (and fails instead when
//! `TACTFUL_REQUIRE_PEERS` is set, as `scripts/test` does).

#![cfg(feature = "telegram")]

use crate::common;
use crate::telegram_setup;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Reaper, free_port, settle};
use serde_json::{Value, json};
use telegram_setup::{AMBIENT, BANTER, CHEF, DOCS, TEAM, config, start_tactful};

/// The emulator process, spoken to in JSON lines.
struct Emulator {
    _child: Reaper,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    url: String,
}

impl Emulator {
    fn start(dir: &Path) -> Emulator {
        let bots = json!({
            DOCS: {"username": "docs_bot", "name": "Docs"},
            CHEF: {"username": "ChefBot", "name": "Chef"},
        });
        let mut child = Command::new("node")
            .arg(dir.join("emulator.mjs"))
            .arg(bots.to_string())
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if std::env::var_os("TACTFUL_TEST_STDERR").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("node starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut e = Emulator {
            _child: Reaper(child),
            stdin,
            stdout,
            url: String::new(),
        };
        e.url = e.read()["ready"].as_str().expect("the emulator's URL").to_owned();
        e
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("a line from the emulator");
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        assert!(v.get("error").is_none(), "the emulator says: {v}");
        v
    }

    fn ask(&mut self, cmd: Value) -> Value {
        writeln!(self.stdin, "{cmd}").expect("write to the emulator");
        self.read()
    }

    /// A person says `text` (with `extra` fields) in `chat`; it reaches
    /// the bot of `token`. Returns its message id.
    fn say(&mut self, token: &str, user: Value, chat: Value, text: &str, extra: Value) -> i64 {
        self.ask(
            json!({"op": "say", "token": token, "user": user, "chat": chat, "text": text, "extra": extra}),
        )["message_id"]
            .as_i64()
            .expect("a message id")
    }

    /// The bots' messages still shown (deleted ones are gone from the
    /// emulator's storage).
    fn bot_messages(&mut self) -> Vec<Value> {
        self.ask(json!({"op": "bot_messages"}))["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Waits (60 s at most) for the bot of `token` to show `text` in
    /// `chat` (in reply to message `id`, if given), and checks it is the
    /// only such answer.
    fn shows(&mut self, chat: i64, id: Option<i64>, token: &str, text: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let all = self.bot_messages();
            let answers: Vec<&Value> = all
                .iter()
                .filter(|m| m["chat_id"] == chat && id.is_none_or(|id| m["reply_to"] == id))
                .filter(|m| id.is_some() || m["text"] == text)
                .collect();
            if let Some(found) = answers.iter().find(|m| m["token"] == token && m["text"] == text) {
                assert_eq!(answers.len(), 1, "answered once: {answers:?}");
                return (*found).clone();
            }
            assert!(
                Instant::now() < deadline,
                "no {text:?} in reply to {id:?} in {chat}: {all:?}"
            );
            // The emulator has no way to wait for a bot message.
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (60 s at most) until every bot of `tokens` has asked for
    /// updates once: what is said before that is dated before tactful
    /// started, and is history by design, never answered.
    fn wait_polling(&mut self, tokens: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let calls = self.ask(json!({"op": "calls"}))["calls"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            // (The emulator names methods as they were written in the
            // request's path, in any case.)
            let polled = |t: &str| {
                calls.iter().any(|c| {
                    c["token"] == t
                        && c["method"]
                            .as_str()
                            .is_some_and(|m| m.eq_ignore_ascii_case("getUpdates"))
                })
            };
            if tokens.iter().all(|t| polled(t)) {
                return;
            }
            assert!(Instant::now() < deadline, "tactful never polled: {calls:?}");
            // The emulator has no way to wait for a call.
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (60 s at most) for the bot of `token` to react with `emoji`
    /// to message `id` of `chat`, and checks it reacted once.
    fn reacted(&mut self, chat: i64, id: i64, token: &str, emoji: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let all = self.ask(json!({"op": "reactions"}))["reactions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let on: Vec<&Value> = all
                .iter()
                .filter(|r| r["chat_id"] == chat && r["message_id"] == id)
                .collect();
            if !on.is_empty() {
                assert_eq!(
                    on,
                    [&json!({"token": token, "chat_id": chat, "message_id": id, "emoji": [emoji]})],
                    "one reaction"
                );
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no reaction on {id} in {chat}: {all:?}"
            );
            // The emulator has no way to wait for a call.
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn answered(&mut self, chat: i64, id: i64, token: &str, text: &str) -> Value {
        self.shows(chat, Some(id), token, text)
    }
}

fn alice() -> Value {
    json!({"id": 111, "first_name": "Alice", "username": "alice"})
}

fn bob() -> Value {
    json!({"id": 222, "first_name": "Bob", "username": "bob"})
}

fn group(id: i64) -> Value {
    json!({"id": id, "type": "supergroup", "title": format!("group {id}")})
}

#[test]
fn telegram_against_the_telegram_test_api_emulator() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/telegram");
    let installed = root.join("node_modules/telegram-test-api/package.json").exists();
    if !installed {
        assert!(
            std::env::var_os("TACTFUL_REQUIRE_PEERS").is_none(),
            "telegram-test-api is missing: run scripts/test"
        );
        eprintln!("skipping: telegram-test-api is not installed (scripts/test installs it)");
        return;
    }
    let mut emu = Emulator::start(&root);
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let _tactful = start_tactful(dir.path(), &config(&emu.url, &dir.path().join("t.db"), metrics));
    emu.wait_polling(&[DOCS, CHEF]);
    let mut heard = 0.0;

    // A mention after emoji; the answer replies to it.
    let q = emu.say(
        DOCS,
        alice(),
        group(TEAM),
        "🎉🎉 @docs_bot how do I reset?",
        json!({"entities": [{"type": "mention", "offset": 5, "length": 9}]}),
    );
    heard += 1.0;
    let first = emu.answered(TEAM, q, DOCS, &format!("docs answers {q}"));

    // A text_mention, by user id.
    let q = emu.say(
        CHEF,
        bob(),
        group(TEAM),
        "Chef, taste this",
        json!({"entities": [{"type": "text_mention", "offset": 0, "length": 4,
            "user": {"id": 7002, "is_bot": true, "first_name": "Chef"}}]}),
    );
    heard += 1.0;
    emu.answered(TEAM, q, CHEF, &format!("chef answers {q}"));

    // /command@bot.
    let q = emu.say(
        DOCS,
        alice(),
        group(TEAM),
        "/reset@docs_bot",
        json!({"entities": [{"type": "bot_command", "offset": 0, "length": 15}]}),
    );
    heard += 1.0;
    emu.answered(TEAM, q, DOCS, &format!("docs answers {q}"));

    // A reply to the persona's message.
    let q = emu.say(
        DOCS,
        bob(),
        group(TEAM),
        "thanks, and then?",
        json!({"reply_to_message": {"message_id": first["message_id"], "date": 0, "chat": group(TEAM),
            "from": {"id": 7001, "is_bot": true, "first_name": "Docs", "username": "docs_bot"},
            "text": first["text"]}}),
    );
    heard += 1.0;
    emu.answered(TEAM, q, DOCS, &format!("docs answers {q}"));

    // Addressed, and docs chooses silence: Alice sees 👀 on her message
    // rather than wondering whether anyone heard her.
    let quiet = emu.say(
        DOCS,
        alice(),
        group(TEAM),
        "@docs_bot never mind",
        json!({"entities": [{"type": "mention", "offset": 0, "length": 9}]}),
    );
    heard += 1.0;
    emu.reacted(TEAM, quiet, DOCS, "👀");

    // Chatter, and a DM.
    let chatter = emu.say(DOCS, alice(), group(TEAM), "lunch anyone?", json!({}));
    let dm = json!({"id": 111, "type": "private", "first_name": "Alice", "username": "alice"});
    let q = emu.say(DOCS, alice(), dm, "psst, a question", json!({}));
    heard += 2.0;
    // (A DM's answer quotes nothing: there is no one else to tell apart.)
    emu.shows(111, None, DOCS, &format!("docs answers {q}"));

    // Ambient: heard through one bot, both personas listen; answered once.
    emu.say(
        CHEF,
        alice(),
        group(AMBIENT),
        "does anyone know where the keys are?",
        json!({}),
    );
    // Banter between the bots, three turns at most.
    emu.say(DOCS, bob(), group(BANTER), "hello bots", json!({}));
    heard += 2.0;
    settle(metrics, heard);
    let shown = emu.bot_messages();
    let in_chat = |chat: i64| shown.iter().filter(|m| m["chat_id"] == chat).count();
    assert_eq!(in_chat(AMBIENT), 1, "one answer in the ambient group: {shown:?}");
    assert_eq!(in_chat(BANTER), 3, "max_bot_turns between the bots: {shown:?}");
    assert!(
        !shown.iter().any(|m| m["reply_to"] == chatter),
        "chatter stays unanswered: {shown:?}"
    );
    // Every answer went through although typing failed with a 500 each
    // time, and the short polls did not flood the emulator.
    let calls = emu.ask(json!({"op": "calls"}))["calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        calls.iter().any(|c| c["method"]
            .as_str()
            .is_some_and(|m| m.eq_ignore_ascii_case("sendChatAction"))
            && c["status"] == 500),
        "typing was tried: {calls:?}"
    );
}
