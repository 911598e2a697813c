//! tactful on a real Matrix homeserver: Synapse from PyPI on 127.0.0.1,
//! people played by matrix-nio (`tests/matrix/humans.py`), `tactful run`
//! with five personas as five Matrix accounts.
//!
//! Nothing here sleeps and hopes: every wait polls the homeserver or
//! tactful's `/metrics` (`tactful_busy` is 0 once every decided turn,
//! batch and delivery is done) within a bound.

#![cfg(feature = "matrix")]

use crate::common;
use crate::matrix_setup;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Reaper, free_port, metric, settle};
use serde_json::{Value, json};

use matrix_setup::{Humans, SERVER, Synapse, mxid, password, venv};

/// The messages `user` posted that are still shown (not redacted).
fn shown_by<'a>(messages: &'a [Value], user: &str) -> Vec<&'a Value> {
    let id = mxid(user);
    messages
        .iter()
        .filter(|m| m["sender"] == id.as_str() && m["redacted"] == false)
        .collect()
}

const PERSONAS: [&str; 5] = ["helper", "gatekeeper", "ambient", "ping", "pong"];

fn config(homeserver: &str, store: &Path, banter: &str, metrics_port: u16) -> String {
    let mut personas = String::new();
    for p in PERSONAS {
        personas += &*format!(
            "[[persona]]\nid = \"{p}\"\nagent = \"{p}\"\nmatrix = {{ user_id = \"{id}\", password = \"{pw}\" }}\n\n",
            id = mxid(p),
            pw = password(p)
        );
    }
    format!(
        r##"
[store]
path = "{store}"

[server]
listen = "127.0.0.1:{metrics_port}"

[platforms.matrix]
homeserver = "{homeserver}"
invites_from = ["{SERVER}"]

{personas}
{helper}
[agents.gatekeeper]
kind = "script"
rules = [{{ when = "\\?", reply = "Gatekeeper says: try the drawer." }}]

[agents.gate]
kind = "script"
rules = [{{ when = "\\?", reply = "REPLY" }}, {{ when = "", reply = "SKIP" }}]

[agents.ambient]
kind = "script"
rules = [{{ when = "\\?", reply = "Ambient says: the keys are in the drawer." }}]

[agents.ping]
kind = "script"
rules = [{{ when = "", reply = "ping!" }}]

[agents.pong]
kind = "script"
rules = [{{ when = "", reply = "pong!" }}]

[rooms.default]
mode = "mention"
rate_limit = "off"

[rooms.default.personas.gatekeeper]
mode = "all"
reply_gate = {{ enabled = true, agent = "gate" }}

[rooms.default.personas.ambient]
mode = "ambient"
ambient = {{ flush_messages = 1, cooldown_seconds = 0 }}

[rooms."matrix:{banter}"]
mode = "all"
ignore_bots = false
max_bot_turns = 3

[rooms."matrix:{banter}".personas.helper]
mode = "observe"

[rooms."matrix:{banter}".personas.gatekeeper]
mode = "observe"

[rooms."matrix:{banter}".personas.ambient]
mode = "observe"
"##,
        store = store.display(),
        helper = common::conf::help_desk("helper", false),
    )
}

fn start_tactful(dir: &Path, config: &str) -> Reaper {
    let cfg = dir.join("tactful.toml");
    std::fs::write(&cfg, config).expect("config");
    Reaper(
        Command::new(env!("CARGO_BIN_EXE_tactful"))
            .args(["run", "-c"])
            .arg(&cfg)
            .env(
                "TACTFUL_LOG",
                "info,tactful_runtime=debug,matrix_sdk=warn,matrix_sdk_base=warn",
            )
            .stdout(Stdio::null())
            .stderr(if std::env::var_os("TACTFUL_TEST_STDERR").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("tactful starts"),
    )
}

#[test]
fn personas_behave_in_a_real_matrix_room() {
    let Some(venv) = venv() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut synapse = Synapse::start(venv.clone(), dir.path());
    let mut people = Humans::start(&venv, &synapse.url());
    for user in ["alice", "bob"].iter().chain(PERSONAS.iter()) {
        people.register(user);
    }
    people.login("alice");
    people.login("bob");

    // Before tactful ever runs: a room with a question for helper, and the
    // personas invited. That question is history, never answered.
    let invite: Vec<String> = ["bob", "helper", "gatekeeper", "ambient"]
        .iter()
        .map(|u| mxid(u))
        .collect();
    let room = people.call(json!({"op": "create", "as": "alice", "invite": invite, "name": "team"}));
    let room = room.as_str().expect("room id").to_owned();
    people.call(json!({"op": "join", "as": "bob", "room": room}));
    let old = people.send("alice", &room, "helper, what is the wifi password?", &["helper"]);
    let invite: Vec<String> = ["ping", "pong"].iter().map(|u| mxid(u)).collect();
    let banter = people.call(json!({"op": "create", "as": "alice", "invite": invite, "name": "banter"}));
    let banter = banter.as_str().expect("room id").to_owned();

    let metrics = free_port();
    let store = dir.path().join("tactful.db");
    let config = config(&synapse.url(), &store, &banter, metrics);
    let mut tactful = start_tactful(dir.path(), &config);
    people.wait_members("alice", &room, &["helper", "gatekeeper", "ambient"]);
    people.wait_members("alice", &banter, &["ping", "pong"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while metric(metrics, "tactful_backlog_total").unwrap_or(0.0) < 1.0 {
        assert!(
            Instant::now() < deadline,
            "the question from before start was never recorded as backlog"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut heard = 0.0;

    // An @mention: exactly one reply, from helper, as a Matrix reply.
    let q = people.send("alice", &room, "helper, how do I reset the router?", &["helper"]);
    heard += 1.0;
    people.wait_messages("alice", &room, "helper's reply", |m| {
        shown_by(m, "helper").iter().any(|r| r["reply_to"] == q.as_str())
    });
    settle(metrics, heard);
    let m = people.messages("alice", &room);
    let replies = shown_by(&m, "helper");
    assert_eq!(replies.len(), 1, "one reply from helper: {replies:#?}");
    assert_eq!(replies[0]["body"], "Hold the **reset** button for `5 s`.");
    // The Markdown reaches people rendered, in the reply as clients that
    // apply edits show it and in every edit's fallback (what clients,
    // notifications and bridges that do not apply edits show); the final
    // edit is sent once.
    assert_eq!(
        replies[0]["formatted_body"], "<p>Hold the <strong>reset</strong> button for <code>5 s</code>.</p>",
        "{:#?}",
        replies[0]
    );
    let edits = replies[0]["edits"].as_array().expect("edits");
    assert!(!edits.is_empty(), "the placeholder was edited into the answer");
    for e in edits {
        assert_eq!(
            e["body"],
            format!("* {}", e["new_body"].as_str().unwrap_or_default())
        );
        assert_eq!(
            e["formatted_body"],
            format!("* {}", e["new_formatted_body"].as_str().unwrap_or_default()),
            "the fallback carries the formatted text: {e:#?}"
        );
    }
    assert!(
        edits.windows(2).all(|w| w[0]["new_body"] != w[1]["new_body"]),
        "no edit repeats the one before: {edits:#?}"
    );
    assert_eq!(replies[0]["reply_to"], q.as_str(), "a real Matrix reply");
    assert!(
        replies[0]["mentions"]
            .as_array()
            .is_some_and(|u| u.iter().any(|u| u == mxid("alice").as_str())),
        "the reply mentions its author: {:?}",
        replies[0]
    );
    assert!(shown_by(&m, "gatekeeper").is_empty() && shown_by(&m, "ambient").is_empty());
    assert!(
        !replies.iter().any(|r| r["reply_to"] == old.as_str()),
        "the question from before start is not answered"
    );

    // Asked directly, helper chooses silence: an `m.reaction` (👀) on the
    // message, and no reply.
    let hush = people.send("alice", &room, "helper, never mind", &["helper"]);
    heard += 1.0;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = people.call(json!({"op": "reactions", "as": "alice", "room": room}));
        let found = r.as_array().is_some_and(|all| {
            all.iter().any(|x| {
                x["sender"] == mxid("helper").as_str() && x["target"] == hush.as_str() && x["key"] == "👀"
            })
        });
        if found {
            break;
        }
        assert!(Instant::now() < deadline, "no reaction from helper: {r:#?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    settle(metrics, heard);
    let m = people.messages("alice", &room);
    assert!(
        !shown_by(&m, "helper")
            .iter()
            .any(|r| r["reply_to"] == hush.as_str() && !r["redacted"].as_bool().unwrap_or(false)),
        "no reply to the message it chose not to answer"
    );

    // Chatter: the gate says SKIP, the ambient batch stays silent.
    people.send("bob", &room, "nice weather today", &[]);
    heard += 1.0;
    settle(metrics, heard);
    let m = people.messages("alice", &room);
    assert_eq!(shown_by(&m, "helper").len(), 1, "chatter gets no reply");
    assert!(shown_by(&m, "gatekeeper").is_empty() && shown_by(&m, "ambient").is_empty());

    // An open question: gatekeeper (all + gate) and ambient would both
    // answer; the floor lets one speak.
    people.send("bob", &room, "does anyone know where the spare keys are?", &[]);
    heard += 1.0;
    people.wait_messages("alice", &room, "an answer to the open question", |m| {
        shown_by(m, "gatekeeper").len() + shown_by(m, "ambient").len() >= 1
    });
    settle(metrics, heard);
    let m = people.messages("alice", &room);
    let answers = shown_by(&m, "gatekeeper").len() + shown_by(&m, "ambient").len();
    assert_eq!(answers, 1, "one answer across the personas: {m:#?}");

    // Two personas that answer bots: the rally stops at max_bot_turns.
    people.send("alice", &banter, "serve!", &[]);
    heard += 1.0;
    settle(metrics, heard);
    let m = people.messages("alice", &banter);
    let rally = shown_by(&m, "ping").len() + shown_by(&m, "pong").len();
    assert_eq!(
        rally, 3,
        "max_bot_turns = 3 bot messages in a row, then quiet: {m:#?}"
    );

    // A DM: answered without a mention.
    let dm = people.call(json!({"op": "create", "as": "bob", "invite": [mxid("helper")], "direct": true}));
    let dm = dm.as_str().expect("room id").to_owned();
    people.wait_members("bob", &dm, &["helper"]);
    people.send("bob", &dm, "got a minute?", &[]);
    heard += 1.0;
    let m = people.wait_messages("bob", &dm, "helper's DM answer", |m| {
        shown_by(m, "helper")
            .iter()
            .any(|r| r["body"] == "Happy to help, bob.")
    });
    assert_eq!(shown_by(&m, "helper").len(), 1, "one answer in the DM: {m:#?}");

    // The homeserver dies right after a question and comes back: the
    // question is answered once, and the conversation goes on.
    let q = people.send("alice", &room, "helper: reset it again?", &["helper"]);
    heard += 1.0;
    synapse.kill();
    synapse.run();
    people.wait_messages("alice", &room, "the answer after the homeserver restart", |m| {
        shown_by(m, "helper").iter().any(|r| r["reply_to"] == q.as_str())
    });
    let q2 = people.send("alice", &room, "helper: and the wifi?", &["helper"]);
    heard += 1.0;
    people.wait_messages("alice", &room, "the next answer", |m| {
        shown_by(m, "helper").iter().any(|r| r["reply_to"] == q2.as_str())
    });
    settle(metrics, heard);
    let m = people.messages("alice", &room);
    for question in [&q, &q2] {
        let n = shown_by(&m, "helper")
            .iter()
            .filter(|r| r["reply_to"] == question.as_str())
            .count();
        assert_eq!(n, 1, "answered exactly once across the restart: {m:#?}");
    }

    // tactful restarts: nothing is answered again; a message sent while it
    // was down is heard and answered after.
    let before = people.messages("alice", &room);
    drop(tactful);
    let q3 = people.send("alice", &room, "helper: reset, while you were away?", &["helper"]);
    tactful = start_tactful(dir.path(), &config);
    people.wait_messages(
        "alice",
        &room,
        "the answer to the message sent while tactful was down",
        |m| shown_by(m, "helper").iter().any(|r| r["reply_to"] == q3.as_str()),
    );
    settle(metrics, 1.0);
    let after = people.messages("alice", &room);
    for p in ["helper", "gatekeeper", "ambient"] {
        let extra = shown_by(&after, p).len() - shown_by(&before, p).len();
        let want = usize::from(p == "helper");
        assert_eq!(
            extra, want,
            "{p} said {extra} new things after the restart: {after:#?}"
        );
    }
    let m = people.messages("alice", &banter);
    assert_eq!(
        shown_by(&m, "ping").len() + shown_by(&m, "pong").len(),
        3,
        "the rally did not restart"
    );

    // `tactful doctor` beside the running service: every account signs in
    // (as a device of the doctor's own, logged out again) and the
    // service's own sessions go on: it still answers.
    let doctor = |config: &str| common::doctor(dir.path(), config).1;
    let row = |table: &str, p: &str| -> String {
        table
            .lines()
            .find(|l| l.starts_with(&format!("Matrix {p} (")))
            .unwrap_or_else(|| panic!("no row for {p}: {table}"))
            .to_owned()
    };
    let table = doctor(&config);
    for p in PERSONAS {
        assert!(
            row(&table, p).contains(&format!("signed in as {}", mxid(p))),
            "{table}"
        );
    }
    let q4 = people.send("alice", &room, "helper: reset, after the doctor?", &["helper"]);
    people.wait_messages("alice", &room, "an answer after the doctor", |m| {
        shown_by(m, "helper").iter().any(|r| r["reply_to"] == q4.as_str())
    });
    // A wrong password: that account fails, with a fix, and no password
    // is shown.
    let wrong = config.replace(&password("helper"), "pw-not-the-right-secret");
    let table = doctor(&wrong);
    assert!(row(&table, "helper").contains("FAIL"), "{table}");
    assert!(table.contains("check @helper"), "{table}");
    assert!(!table.contains("pw-"), "{table}");
    drop(tactful);
}

/// A four-message answer on a real Synapse, the process killed with
/// `kill -9` as soon as a person sees its second message, then started
/// again on the same store: the answer is finished, nothing is lost, and
/// no message is shown twice (each part's transaction id is its key, so
/// even the one in flight is one event).
#[test]
fn a_split_answer_cut_by_a_kill_is_finished_without_doubling_its_parts() {
    use common::split;
    let Some(venv) = venv() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let synapse = Synapse::start(venv.clone(), dir.path());
    let mut people = Humans::start(&venv, &synapse.url());
    for user in ["alice", "helper"] {
        people.register(user);
    }
    people.login("alice");
    let room =
        people.call(json!({"op": "create", "as": "alice", "invite": [mxid("helper")], "name": "story"}));
    let room = room.as_str().expect("room id").to_owned();
    let store = dir.path().join("tactful.db");
    let config = format!(
        r##"
[store]
path = "{store}"

[platforms.matrix]
homeserver = "{homeserver}"
invites_from = ["{SERVER}"]

[[persona]]
id = "helper"
agent = "helper"
matrix = {{ user_id = "{id}", password = "{pw}" }}

[agents.helper]
kind = "script"
rules = [{{ when = "(?i)story", reply = "{story}" }}]

[rooms.default]
mode = "mention"
rate_limit = "off"
max_reply_chars = 100000
"##,
        store = store.display(),
        homeserver = synapse.url(),
        id = mxid("helper"),
        pw = password("helper"),
        story = split::story(split::LONG),
    );
    let first = start_tactful(dir.path(), &config);
    people.wait_members("alice", &room, &["helper"]);
    people.send("alice", &room, "helper, the story please", &["helper"]);
    let second = split::marker(250);
    let bodies = |m: &[Value]| -> Vec<String> {
        shown_by(m, "helper")
            .iter()
            .filter_map(|r| r["body"].as_str().map(str::to_owned))
            .collect()
    };
    people.wait_messages("alice", &room, "the second message", |m| {
        bodies(m).iter().any(|b| b.contains(&second))
    });
    drop(first); // SIGKILL
    let _second = start_tactful(dir.path(), &config);
    let m = people.wait_messages("alice", &room, "the answer finished", |m| {
        split::finished(&bodies(m), split::LONG)
    });
    let posts = bodies(&m);
    split::once_but_the_part_in_flight(&posts, split::LONG);
    let mut shown = posts.clone();
    shown.dedup();
    assert_eq!(shown.len(), posts.len(), "no message shown twice: {posts:#?}");
}
