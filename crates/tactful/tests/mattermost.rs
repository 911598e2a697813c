//! tactful on Mattermost, against an in-process double of the REST API v4
//! and the event stream (`mattermost_double`, itself checked by the
//! vendor's client in `mattermost_client.rs`): two personas (two bot
//! accounts) and two people; mentions, threads, DMs, chatter, an ambient
//! channel, the floor, streaming, silence; then restarts, dropped streams,
//! a 429 storm and bad input.

#![cfg(feature = "mattermost")]

use crate::common;
use crate::mattermost_double;

use std::path::Path;
use std::time::Duration;

use common::{Reaper, free_port, settle};
use mattermost_double::{AMBIENT, Double, Post, TOWN};
use serde_json::json;

const DOCS_TOKEN: &str = "docstoken00000000000000001";
const CHEF_TOKEN: &str = "cheftoken00000000000000002";

async fn double() -> Double {
    Double::start(
        &[("docs-bot", DOCS_TOKEN), ("chef", CHEF_TOKEN)],
        &[
            ("alice", "alicetoken0000000000000003"),
            ("bob", "bobtoken000000000000000004"),
        ],
    )
    .await
}

/// The config: docs and chef on Mattermost, `extra` appended.
fn config(double: &Double, metrics_port: u16, store: &str, channels: &str, extra: &str) -> String {
    format!(
        r##"
[store]
path = "{store}"

[server]
listen = "127.0.0.1:{metrics_port}"

[platforms.mattermost]
url = "{url}"
channels = [{channels}]

[[persona]]
id = "docs"
agent = "docs"
mattermost = {{ token = "${{DOCS_MM}}" }}

[[persona]]
id = "chef"
agent = "chef"
mattermost = {{ token = "${{CHEF_MM}}" }}

[agents.docs]
kind = "script"
rules = [
  {{ when = "(?i)shout", reply = "Hey @channel and @all: look" }},
  {{ when = "(?i)essay", reply = "{essay}" }},
  {{ when = "(?i)never mind", reply = "NO_REPLY" }},
  # Slow enough that typing is shown first (an instant answer needs none).
  {{ when = "how do I reset", reply = "docs answers {{msg_id}}", delay_ms = 300 }},
  {{ when = "", reply = "docs answers {{msg_id}}" }},
]

[agents.chef]
kind = "script"
rules = [{{ when = "", reply = "chef answers {{msg_id}}" }}]

[rooms.default]
mode = "mention"
rate_limit = "off"
{extra}
"##,
        url = double.url,
        essay = "lorem ipsum ".repeat(120),
    )
}

const BOTH_CHANNELS: &str = r#""myteam/town-square", "ch000000000000000000000002""#;

fn start(dir: &Path, config: &str) -> Reaper {
    common::run_tactful(dir, config, &[("DOCS_MM", DOCS_TOKEN), ("CHEF_MM", CHEF_TOKEN)])
}

async fn both_live(double: &Double) {
    double
        .wait_until("both bots on the event stream", |d| {
            d.connected("docs-bot") && d.connected("chef")
        })
        .await;
}

/// Waits until `bot` posted `text` in `channel` in thread `root` ("" for
/// none), and checks it is the only such post.
async fn answered(double: &Double, bot: &str, channel: &str, root: &str, text: &str) -> Post {
    let what = format!("{bot}: {text:?} in {channel} thread {root:?}");
    double
        .wait_until(&what, |d| {
            d.posts_by(bot, channel)
                .iter()
                .any(|p| p.root_id == root && p.message == text)
        })
        .await;
    let found: Vec<Post> = double
        .posts(channel)
        .into_iter()
        .filter(|p| p.message == text && p.delete_at == 0)
        .collect();
    assert_eq!(found.len(), 1, "answered once: {found:#?}");
    found.into_iter().next().expect("the answer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mattermost_mentions_threads_dms_streaming_and_silence() {
    let double = double().await;
    double.set_max_post_size(600);
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let _tactful = start(
        dir.path(),
        &config(&double, metrics, ":memory:", BOTH_CHANNELS, ""),
    );
    both_live(&double).await;
    let mut heard = 0.0;

    // A mention: docs answers once, in a thread under the question, its
    // placeholder edited into the answer (streaming edits in place).
    let q = double.post("alice", TOWN, "@docs-bot how do I reset?", "");
    heard += 1.0;
    let first = answered(&double, "docs-bot", TOWN, &q, &format!("docs answers {q}")).await;
    assert!(first.edit_at > 0, "the placeholder became the answer: {first:#?}");
    assert!(double.posts_by("chef", TOWN).is_empty(), "chef was not asked");
    assert!(
        double
            .typing()
            .iter()
            .any(|(u, c, _)| *u == double.user("docs-bot") && c == TOWN),
        "docs showed it was typing"
    );

    // A reply in docs's thread, naming nobody: docs answers, there.
    settle(metrics, heard);
    let r = double.post("bob", TOWN, "thanks, and then?", &q);
    heard += 1.0;
    answered(&double, "docs-bot", TOWN, &q, &format!("docs answers {r}")).await;

    // Silence in docs's thread: no answer, its placeholder gone, an :eyes:
    // on Bob's post.
    settle(metrics, heard);
    let hush = double.post("bob", TOWN, "never mind", &q);
    heard += 1.0;
    double
        .wait_until("docs reacts to the post it left unanswered", |d| {
            d.reactions()
                .iter()
                .any(|r| r.post_id == hush && r.user_id == d.user("docs-bot") && r.emoji_name == "eyes")
        })
        .await;
    settle(metrics, heard);
    assert_eq!(
        double.posts_by("docs-bot", TOWN).len(),
        2,
        "two answers so far, the silent turn's placeholder deleted"
    );

    // Chatter, and an @here: no answer from anyone.
    double.post("bob", TOWN, "lunch anyone?", "");
    double.post("alice", TOWN, "@here the build is green", "");
    heard += 2.0;

    // A DM to chef: chef answers, in line.
    let dm = double.direct("alice", "chef");
    let d = double.post("alice", &dm, "what's for dinner?", "");
    heard += 1.0;
    answered(&double, "chef", &dm, "", &format!("chef answers {d}")).await;

    // A long answer: cut under the server's 600 characters, every part in
    // the thread.
    let q = double.post("alice", TOWN, "@docs-bot write an essay", "");
    heard += 1.0;
    settle(metrics, heard);
    let parts: Vec<Post> = double
        .posts_by("docs-bot", TOWN)
        .into_iter()
        .filter(|p| p.message.contains("ipsum"))
        .collect();
    assert!(parts.len() >= 3, "1,440 characters in parts of 600: {parts:#?}");
    assert!(
        parts
            .iter()
            .all(|p| p.root_id == q && p.message.chars().count() <= 600),
        "{parts:#?}"
    );

    // An answer saying @channel notifies nobody.
    let q = double.post("alice", TOWN, "@docs-bot shout it", "");
    heard += 1.0;
    answered(
        &double,
        "docs-bot",
        TOWN,
        &q,
        "Hey \u{FF20}channel and \u{FF20}all: look",
    )
    .await;
    settle(metrics, heard);

    // Nothing else was said: chatter, @here and the DM left no stray post.
    let chef_posts = double.posts_by("chef", TOWN);
    assert!(chef_posts.is_empty(), "{chef_posts:#?}");
    let docs_answers = double.posts_by("docs-bot", TOWN).len();
    assert_eq!(docs_answers, 2 + parts.len() + 1, "no answer to chatter or @here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambient_channel_answers_a_batch_and_passes_the_floor() {
    let double = double().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let extra = format!(
        r#"
[rooms."mm:{AMBIENT}"]
mode = "ambient"
ambient = {{ flush_messages = 2, cooldown_seconds = 0 }}
floor = {{ max_speakers = 1 }}
"#
    );
    let _tactful = start(
        dir.path(),
        &config(&double, metrics, ":memory:", BOTH_CHANNELS, &extra),
    );
    both_live(&double).await;
    double.post("alice", AMBIENT, "anyone know where the docs live?", "");
    let second = double.post("bob", AMBIENT, "I looked on the wiki", "");
    settle(metrics, 2.0);
    let answers: Vec<Post> = ["docs-bot", "chef"]
        .iter()
        .flat_map(|b| double.posts_by(b, AMBIENT))
        .collect();
    assert_eq!(answers.len(), 1, "one batch, one speaker: {answers:#?}");
    assert!(
        answers[0].message.ends_with(&second),
        "the batch's last message: {answers:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_and_dropped_streams_miss_nothing_and_answer_nothing_twice() {
    let double = double().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let store = store.to_str().expect("utf-8 path");
    let metrics = free_port();
    let cfg = config(&double, metrics, store, BOTH_CHANNELS, "");
    let mut tactful = start(dir.path(), &cfg);
    both_live(&double).await;
    let q1 = double.post("alice", TOWN, "@docs-bot first", "");
    answered(&double, "docs-bot", TOWN, &q1, &format!("docs answers {q1}")).await;
    settle(metrics, 1.0);

    // The socket drops; the connection resumes by its sequence number and
    // the server sends what it held.
    double.drop_sockets();
    let q2 = double.post("alice", TOWN, "@docs-bot while the socket was down", "");
    answered(&double, "docs-bot", TOWN, &q2, &format!("docs answers {q2}")).await;
    assert!(
        double.opened("docs-bot").contains(&true),
        "docs resumed its connection"
    );

    // The server forgets the connection (a server restart): a new hello,
    // and what was said meanwhile is fetched over REST.
    double.forget_connections();
    double.drop_sockets();
    let q3 = double.post("bob", TOWN, "@chef while the server restarted", "");
    answered(&double, "chef", TOWN, &q3, &format!("chef answers {q3}")).await;
    settle(metrics, 3.0);

    // tactful dies; two questions come while it is down.
    tactful.0.kill().expect("kill");
    let _ = tactful.0.wait();
    double
        .wait_until("both sockets gone", |d| {
            !d.connected("docs-bot") && !d.connected("chef")
        })
        .await;
    // More than the 1,000 posts `since=` answers with: the oldest question
    // is read back page by page.
    let q4 = double.post("alice", TOWN, "@docs-bot asked while tactful was down", "");
    for n in 0..1050 {
        double.post("bob", TOWN, &format!("chatter {n}"), "");
    }
    let q5 = double.post("bob", TOWN, "@chef and this too", "");
    let _tactful = start(dir.path(), &cfg);
    answered(&double, "docs-bot", TOWN, &q4, &format!("docs answers {q4}")).await;
    answered(&double, "chef", TOWN, &q5, &format!("chef answers {q5}")).await;
    settle(metrics, 1052.0);
    // Nothing from before the kill was answered again.
    for (bot, q) in [("docs-bot", &q1), ("docs-bot", &q2), ("chef", &q3)] {
        let n = double
            .posts_by(bot, TOWN)
            .iter()
            .filter(|p| p.root_id == **q)
            .count();
        assert_eq!(n, 1, "{q} answered once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_storm_bad_events_and_a_channel_the_bot_is_not_in() {
    let double = double().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let channels = format!("{BOTH_CHANNELS}, \"myteam/quiet\"");
    let (_tactful, logs) = common::run_tactful_logged(
        dir.path(),
        &config(&double, metrics, ":memory:", &channels, ""),
        &[("DOCS_MM", DOCS_TOKEN), ("CHEF_MM", CHEF_TOKEN)],
    );
    let _shown = common::ShownOnPanic(logs.clone());
    both_live(&double).await;

    // The bots are not in `quiet`: said in the log and on /healthz.
    logs.wait_for("the missing channel", |l| {
        l.contains("WARN") && l.contains("not a member of channel myteam/quiet")
    });
    let health = || {
        common::http_get(metrics, "/healthz")
            .map(|(_, b)| b)
            .unwrap_or_default()
    };
    assert!(
        health().contains("not a member of channel myteam/quiet"),
        "{}",
        health()
    );
    // Added to it: reported no more.
    double.add_member("docs-bot", mattermost_double::QUIET);
    double.add_member("chef", mattermost_double::QUIET);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while health().contains("quiet") {
        assert!(std::time::Instant::now() < deadline, "{}", health());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Taken out of it again: said again.
    double.remove_member("chef", mattermost_double::QUIET);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !health().contains("not a member of channel myteam/quiet") {
        assert!(std::time::Instant::now() < deadline, "{}", health());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    double.add_member("chef", mattermost_double::QUIET);

    // Bad input: an event nobody knows, a posted event whose post is not
    // JSON, a 1 MB post, a post by docs's own bot from another session.
    double.send_raw("docs-bot", "made_up_event", json!({"x": 1}));
    double.send_raw(
        "docs-bot",
        "posted",
        json!({"post": "{not json", "channel_type": "O"}),
    );
    let huge = format!("@docs-bot {}", "x".repeat(1_000_000));
    double.send_raw(
        "docs-bot",
        "posted",
        json!({"channel_type": "O", "sender_name": "@alice", "post": json!({
            "id": "po999999999999999999999999", "create_at": 1, "update_at": 1, "user_id": double.user("alice"),
            "channel_id": TOWN, "root_id": "", "message": huge, "type": "", "props": {},
        }).to_string()}),
    );
    double.post("docs-bot", TOWN, "@chef posted by docs-bot by hand", "");
    let q = double.post("alice", TOWN, "@docs-bot still there?", "");
    answered(&double, "docs-bot", TOWN, &q, &format!("docs answers {q}")).await;
    assert!(
        double.posts_by("chef", TOWN).is_empty(),
        "a persona's own post is not a question"
    );

    // A 429 storm: no request of either bot before the reset, then the
    // answer.
    let until = double.storm(2.0);
    let q = double.post("alice", TOWN, "@docs-bot during the storm", "");
    answered(&double, "docs-bot", TOWN, &q, &format!("docs answers {q}")).await;
    let calls = double.calls();
    let first = calls.iter().find(|c| c.status == 429).expect("a 429");
    let during: Vec<_> = calls
        .iter()
        .filter(|c| c.at > first.at + Duration::from_millis(300) && c.at < until)
        .collect();
    assert!(during.is_empty(), "requests before the reset: {during:#?}");
    assert!(
        logs.lines().iter().any(|l| l.contains("rate limited")),
        "the 429 was logged"
    );

    // The tokens never reach the log.
    for line in logs.lines() {
        assert!(!line.contains(DOCS_TOKEN) && !line.contains(CHEF_TOKEN), "{line}");
    }
}

#[test]
fn mattermost_mistakes_name_key_and_line_and_show_no_token() {
    let good = r#"
[[persona]]
id = "docs"
agent = "main"
mattermost = { token = "${DOCS_MM}" }

[agents.main]
kind = "script"
rules = [{ when = "", reply = "ok" }]

[platforms.mattermost]
url = "https://chat.example.org"
channels = ["myteam/town-square"]
"#;
    let env = [("DOCS_MM", DOCS_TOKEN)];
    let o = common::check_config(good, &env);
    assert!(o.status.success(), "{}", common::said(&o));
    common::each_mistake_is_named(
        good,
        &[
            (
                "https://chat.example.org",
                "chat.example.org",
                "platforms.mattermost.url",
            ),
            (
                "myteam/town-square",
                "town square",
                "platforms.mattermost.channels",
            ),
            (r#"["myteam/town-square"]"#, "[]", "is empty"),
            (
                "${DOCS_MM}",
                "xoxb-not-a-mattermost-token",
                "persona[0].mattermost.token",
            ),
            ("mattermost = {", "mattermost = { colour = \"red\",", "colour"),
            ("channels =", "channel =", "channel"),
        ],
        &env,
        DOCS_TOKEN,
    );
}

/// `tactful doctor` asks each bot who it is: a good token names the bot, a
/// wrong one fails with a fix, and neither token is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_each_bot_or_says_what_to_fix() {
    let double = double().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let good = config(&double, metrics, ":memory:", BOTH_CHANNELS, "")
        .replace("${DOCS_MM}", DOCS_TOKEN)
        .replace("${CHEF_MM}", "wrongtoken0000000000000000");
    let (code, table, log) = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || common::doctor(&dir, &good)
    })
    .await
    .expect("doctor ran");
    let docs = table
        .lines()
        .find(|l| l.contains("Mattermost docs"))
        .unwrap_or_default();
    assert!(docs.contains("@docs-bot"), "{table}");
    let chef = table
        .lines()
        .find(|l| l.contains("Mattermost chef"))
        .unwrap_or_default();
    assert!(!chef.contains("@chef"), "{table}");
    assert!(table.contains("mattermost.token"), "a fix names the key: {table}");
    assert_eq!(code, Some(1), "a check failed: {table}");
    for secret in [DOCS_TOKEN, "wrongtoken0000000000000000"] {
        assert!(!table.contains(secret) && !log.contains(secret), "{table}\n{log}");
    }
}
