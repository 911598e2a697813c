//! tactful on Zulip, against an in-process double of the REST API and
//! the events queues (`zulip_double`, itself checked by Zulip's own
//! client in `zulip_client.rs`): two personas (two bots) and two people;
//! mentions, topics, DMs, chatter, an ambient stream, the floor,
//! streaming, silence; then restarts, an expired queue, a renamed topic,
//! a 429 storm and bad input.

#![cfg(feature = "zulip")]

use crate::common;
use crate::zulip_double;

use std::path::Path;
use std::time::Duration;

use common::{Reaper, free_port, settle};
use serde_json::json;
use zulip_double::{AMBIENT, Double, GENERAL, Msg};

const DOCS: (&str, &str, &str) = (
    "Docs Bot",
    "docs-bot@example.org",
    "docskey00000000000000000000000ab",
);
const CHEF: (&str, &str, &str) = ("Chef", "chef-bot@example.org", "chefkey00000000000000000000000ab");
const ALICE: (&str, &str, &str) = ("Alice", "alice@example.org", "alicekey0000000000000000000000ab");
const BOB: (&str, &str, &str) = ("Bob", "bob@example.org", "bobkey000000000000000000000000ab");

async fn double() -> Double {
    Double::start(&[DOCS, CHEF], &[ALICE, BOB]).await
}

fn config(double: &Double, metrics_port: u16, store: &str, streams: &str, extra: &str) -> String {
    format!(
        r##"
[store]
path = "{store}"

[server]
listen = "127.0.0.1:{metrics_port}"

[platforms.zulip]
site = "{url}"
streams = [{streams}]

[[persona]]
id = "docs"
agent = "docs"
zulip = {{ email = "{docs_email}", api_key = "${{DOCS_ZULIP}}" }}

[[persona]]
id = "chef"
agent = "chef"
zulip = {{ email = "{chef_email}", api_key = "${{CHEF_ZULIP}}" }}

[agents.docs]
kind = "script"
rules = [
  {{ when = "(?i)shout", reply = "Hey @**all** and @**topic**: look" }},
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
        docs_email = DOCS.1,
        chef_email = CHEF.1,
        essay = "lorem ipsum ".repeat(120),
    )
}

const STREAMS: &str = r#""general", "ambient""#;

fn start(dir: &Path, config: &str) -> Reaper {
    common::run_tactful(dir, config, &[("DOCS_ZULIP", DOCS.2), ("CHEF_ZULIP", CHEF.2)])
}

async fn both_live(double: &Double) {
    double
        .wait_until("both bots polling their queues", |d| {
            d.has_queue("Docs Bot") && d.has_queue("Chef")
        })
        .await;
}

/// Waits until `bot` wrote `text` in `topic` of `stream` (a DM: `None`),
/// and checks it is the only such message.
async fn answered(double: &Double, bot: &str, stream: Option<u64>, topic: &str, text: &str) -> Msg {
    let what = format!("{bot}: {text:?} in {stream:?} {topic:?}");
    double
        .wait_until(&what, |d| {
            d.messages_by(bot)
                .iter()
                .any(|m| m.stream_id == stream && m.topic == topic && m.content == text)
        })
        .await;
    let found: Vec<Msg> = double
        .messages(None)
        .into_iter()
        .filter(|m| m.content == text)
        .collect();
    assert_eq!(found.len(), 1, "answered once: {found:#?}");
    found.into_iter().next().expect("the answer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zulip_mentions_topics_dms_streaming_and_silence() {
    let double = double().await;
    double.set_max_message_length(600);
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let _tactful = start(dir.path(), &config(&double, metrics, ":memory:", STREAMS, ""));
    both_live(&double).await;
    let mut heard = 0.0;

    // A mention: docs answers once, in the topic, its placeholder edited
    // into the answer.
    let q = double.post("Alice", GENERAL, "Setup", "@**Docs Bot** how do I reset?");
    heard += 1.0;
    let first = answered(
        &double,
        "Docs Bot",
        Some(GENERAL),
        "Setup",
        &format!("docs answers {q}"),
    )
    .await;
    assert!(first.edited, "the placeholder became the answer");
    assert!(double.messages_by("Chef").is_empty(), "chef was not asked");
    assert!(
        double
            .typing()
            .iter()
            .any(|(u, f)| *u == double.user("Docs Bot") && f["topic"] == "Setup"),
        "docs showed it was typing"
    );

    // A follow-up in docs's topic, naming nobody: docs answers there.
    settle(metrics, heard);
    let r = double.post("Bob", GENERAL, "Setup", "thanks, and then?");
    heard += 1.0;
    answered(
        &double,
        "Docs Bot",
        Some(GENERAL),
        "Setup",
        &format!("docs answers {r}"),
    )
    .await;

    // The topic renamed: a follow-up there is still docs's, answered in
    // the topic as it is now called.
    settle(metrics, heard);
    double.rename_topic(GENERAL, "Setup", "Resetting");
    let r = double.post("Bob", GENERAL, "Resetting", "one more question");
    heard += 1.0;
    answered(
        &double,
        "Docs Bot",
        Some(GENERAL),
        "Resetting",
        &format!("docs answers {r}"),
    )
    .await;

    // One message moved alone to another topic: that topic is not docs's
    // (its answer stayed), and "Resetting" still is.
    settle(metrics, heard);
    double.move_message(r, "Elsewhere");
    let other = double.post("Alice", GENERAL, "Elsewhere", "anyone?");
    heard += 1.0;

    // Silence: no answer, the placeholder gone, :eyes: on the message.
    settle(metrics, heard);
    let hush = double.post("Bob", GENERAL, "Resetting", "never mind");
    heard += 1.0;
    double
        .wait_until("docs reacts to what it left unanswered", |d| {
            d.reactions()
                .iter()
                .any(|(u, m, e)| *u == d.user("Docs Bot") && *m == hush && e == "eyes")
        })
        .await;
    settle(metrics, heard);
    assert_eq!(
        double.messages_by("Docs Bot").len(),
        3,
        "three answers, the silent turn's placeholder deleted"
    );
    assert!(
        double
            .messages_by("Docs Bot")
            .iter()
            .all(|m| !m.content.ends_with(&other.to_string())),
        "a topic a message was moved to is not docs's"
    );

    // Chatter, a silent mention and a wildcard: no answer.
    double.post("Bob", GENERAL, "lunch", "lunch anyone?");
    double.post("Bob", GENERAL, "lunch", "as @_**Docs Bot** said yesterday");
    double.post("Alice", GENERAL, "lunch", "@**all** the build is green");
    heard += 3.0;

    // A DM to chef: chef answers.
    let d = double.dm("Alice", &["Chef"], "what's for dinner?");
    heard += 1.0;
    answered(&double, "Chef", None, "", &format!("chef answers {d}")).await;

    // A long answer: cut under the server's 600 characters, in the topic.
    let q = double.post("Alice", GENERAL, "Docs", "@**Docs Bot** write an essay");
    heard += 1.0;
    settle(metrics, heard);
    let parts: Vec<Msg> = double
        .messages_by("Docs Bot")
        .into_iter()
        .filter(|m| m.content.contains("ipsum"))
        .collect();
    assert!(parts.len() >= 3, "1,440 characters in parts of 600: {parts:#?}");
    assert!(
        parts.iter().all(|m| m.topic == "Docs"
            && m.content.chars().count() <= 600
            && !m.content.contains("truncated")),
        "{parts:#?}"
    );
    let _ = q;

    // An answer with wildcards notifies nobody.
    let q = double.post("Alice", GENERAL, "Docs", "@**Docs Bot** shout it");
    heard += 1.0;
    answered(
        &double,
        "Docs Bot",
        Some(GENERAL),
        "Docs",
        "Hey \u{FF20}**all** and \u{FF20}**topic**: look",
    )
    .await;
    settle(metrics, heard);
    let _ = q;
    assert!(
        double.messages_by("Chef").iter().all(|m| m.stream_id.is_none()),
        "chef spoke only in the DM"
    );
    assert_eq!(
        double.messages_by("Docs Bot").len(),
        3 + parts.len() + 1,
        "no answer to chatter, a silent mention or @**all**"
    );

    // Where bots may not delete their own messages, a silent turn's
    // placeholder says it was withdrawn.
    double.forbid_own_deletes();
    let q = double.post("Alice", GENERAL, "Docs", "@**Docs Bot** never mind");
    heard += 1.0;
    double
        .wait_until("the placeholder marked withdrawn", |d| {
            d.messages_by("Docs Bot")
                .iter()
                .any(|m| m.topic == "Docs" && m.content == "_(withdrawn)_")
        })
        .await;
    settle(metrics, heard);
    assert!(
        double.reactions().iter().any(|(_, m, e)| *m == q && e == "eyes"),
        "and the question has its :eyes:"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambient_stream_answers_a_batch_and_passes_the_floor() {
    let double = double().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let extra = format!(
        r#"
[rooms."zulip:{AMBIENT}"]
mode = "ambient"
ambient = {{ flush_messages = 2, cooldown_seconds = 0 }}
floor = {{ max_speakers = 1 }}
"#
    );
    let _tactful = start(dir.path(), &config(&double, metrics, ":memory:", STREAMS, &extra));
    both_live(&double).await;
    double.post("Alice", AMBIENT, "docs", "anyone know where the docs live?");
    let second = double.post("Bob", AMBIENT, "docs", "I looked on the wiki");
    settle(metrics, 2.0);
    let answers: Vec<Msg> = ["Docs Bot", "Chef"]
        .iter()
        .flat_map(|b| double.messages_by(b))
        .collect();
    assert_eq!(answers.len(), 1, "one batch, one speaker: {answers:#?}");
    assert!(answers[0].content.ends_with(&second.to_string()), "{answers:#?}");
    assert_eq!(answers[0].topic, "docs", "in the batch's topic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_and_an_expired_queue_miss_nothing_and_answer_nothing_twice() {
    let double = double().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let store = store.to_str().expect("utf-8 path");
    let metrics = free_port();
    let cfg = config(&double, metrics, store, STREAMS, "");
    let mut tactful = start(dir.path(), &cfg);
    both_live(&double).await;
    let q1 = double.post("Alice", GENERAL, "t", "@**Docs Bot** first");
    answered(
        &double,
        "Docs Bot",
        Some(GENERAL),
        "t",
        &format!("docs answers {q1}"),
    )
    .await;
    settle(metrics, 1.0);

    // The server forgets the queues (a restart of its own): the bots
    // register again and fetch what was said meanwhile.
    let before = double.registered("Docs Bot");
    let q2 = double.forget_queues_and_post("Bob", GENERAL, "t", "@**Chef** while the queues were gone");
    answered(&double, "Chef", Some(GENERAL), "t", &format!("chef answers {q2}")).await;
    assert!(
        double.registered("Docs Bot") > before,
        "docs registered a new queue"
    );
    settle(metrics, 2.0);

    // tactful dies; questions come while it is down, among much chatter.
    tactful.0.kill().expect("kill");
    let _ = tactful.0.wait();
    let q3 = double.post(
        "Alice",
        GENERAL,
        "t",
        "@**Docs Bot** asked while tactful was down",
    );
    for n in 0..450 {
        double.post("Bob", GENERAL, "chatter", &format!("chatter {n}"));
    }
    let q4 = double.dm("Bob", &["Chef"], "and this too");
    let _tactful = start(dir.path(), &cfg);
    answered(
        &double,
        "Docs Bot",
        Some(GENERAL),
        "t",
        &format!("docs answers {q3}"),
    )
    .await;
    answered(&double, "Chef", None, "", &format!("chef answers {q4}")).await;
    settle(metrics, 452.0);
    for (bot, q) in [("Docs Bot", q1), ("Chef", q2), ("Docs Bot", q3), ("Chef", q4)] {
        let n = double
            .messages_by(bot)
            .iter()
            .filter(|m| m.content.ends_with(&format!(" {q}")))
            .count();
        assert_eq!(n, 1, "{q} answered once");
    }
    assert_eq!(
        double.messages_by("Docs Bot").len() + double.messages_by("Chef").len(),
        4,
        "four answers, none to the chatter"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_storm_bad_events_and_a_stream_the_bot_is_not_in() {
    let double = double().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let streams = format!("{STREAMS}, \"quiet\"");
    let (_tactful, logs) = common::run_tactful_logged(
        dir.path(),
        &config(&double, metrics, ":memory:", &streams, ""),
        &[("DOCS_ZULIP", DOCS.2), ("CHEF_ZULIP", CHEF.2)],
    );
    let _shown = common::ShownOnPanic(logs.clone());
    both_live(&double).await;

    // The bots are not subscribed to `quiet`: said in the log and on
    // /healthz.
    logs.wait_for("the missing stream", |l| {
        l.contains("WARN") && l.contains("not subscribed to stream \"quiet\"")
    });
    let health = || {
        common::http_get(metrics, "/healthz")
            .map(|(_, b)| b)
            .unwrap_or_default()
    };
    assert!(health().contains("not subscribed to stream"), "{}", health());
    // Subscribed since: heard there, and reported no more.
    double.subscribe("Docs Bot", zulip_double::QUIET);
    double.subscribe("Chef", zulip_double::QUIET);
    let q = double.post(
        "Alice",
        zulip_double::QUIET,
        "t",
        "@**Docs Bot** can you hear me here?",
    );
    answered(
        &double,
        "Docs Bot",
        Some(zulip_double::QUIET),
        "t",
        &format!("docs answers {q}"),
    )
    .await;
    let q = double.post("Alice", zulip_double::QUIET, "t", "@**Chef** and you?");
    answered(
        &double,
        "Chef",
        Some(zulip_double::QUIET),
        "t",
        &format!("chef answers {q}"),
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while health().contains("not subscribed") {
        assert!(std::time::Instant::now() < deadline, "{}", health());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Bad input: an event nobody knows, a message event without its
    // message, a 1 MB message, a message by docs's bot from another
    // session.
    double.push_raw("Docs Bot", json!({"type": "made_up_event"}));
    double.push_raw("Docs Bot", json!({"type": "message", "flags": []}));
    double.push_raw(
        "Docs Bot",
        json!({"type": "message", "message": "not an object", "flags": []}),
    );
    let huge = format!("@**Docs Bot** {}", "x".repeat(1_000_000));
    double.post("Alice", GENERAL, "big", &huge);
    double.post(
        "Docs Bot",
        GENERAL,
        "t",
        "@**Chef** written by docs's bot by hand",
    );
    let q = double.post("Alice", GENERAL, "t", "@**Docs Bot** still there?");
    answered(
        &double,
        "Docs Bot",
        Some(GENERAL),
        "t",
        &format!("docs answers {q}"),
    )
    .await;
    assert!(
        double
            .messages_by("Chef")
            .iter()
            .all(|m| m.stream_id == Some(zulip_double::QUIET)),
        "a persona's own message is not a question"
    );

    // A 429 storm: no request before the reset, then the answer.
    let until = double.storm(2.0);
    let q = double.post("Alice", GENERAL, "t", "@**Docs Bot** during the storm");
    answered(
        &double,
        "Docs Bot",
        Some(GENERAL),
        "t",
        &format!("docs answers {q}"),
    )
    .await;
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
    for line in logs.lines() {
        assert!(!line.contains(DOCS.2) && !line.contains(CHEF.2), "{line}");
    }
}

#[test]
fn zulip_mistakes_name_key_and_line_and_show_no_key() {
    let good = r#"
[[persona]]
id = "docs"
agent = "main"
zulip = { email = "docs-bot@chat.example.org", api_key = "${DOCS_ZULIP_KEY}" }

[agents.main]
kind = "script"
rules = [{ when = "", reply = "ok" }]

[platforms.zulip]
site = "https://chat.example.org"
streams = ["general"]
"#;
    let env = [("DOCS_ZULIP_KEY", DOCS.2)];
    let o = common::check_config(good, &env);
    assert!(o.status.success(), "{}", common::said(&o));
    common::each_mistake_is_named(
        good,
        &[
            (
                "https://chat.example.org",
                "chat.example.org",
                "platforms.zulip.site",
            ),
            (r#"["general"]"#, "[]", "is empty"),
            (r#"["general"]"#, r#"[""]"#, "platforms.zulip.streams"),
            ("docs-bot@chat.example.org", "docs-bot", "persona[0].zulip.email"),
            ("${DOCS_ZULIP_KEY}", "short", "persona[0].zulip.api_key"),
            ("zulip = {", "zulip = { colour = \"red\",", "colour"),
        ],
        &env,
        DOCS.2,
    );
}

/// `tactful doctor` asks each bot who it is: a good key names the bot, a
/// wrong one fails with a fix, and neither key is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_each_bot_or_says_what_to_fix() {
    let double = double().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let wrong = "wrongkey0000000000000000000000ab";
    let cfg = config(&double, metrics, ":memory:", STREAMS, "")
        .replace("${DOCS_ZULIP}", DOCS.2)
        .replace("${CHEF_ZULIP}", wrong);
    let (code, table, log) = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || common::doctor(&dir, &cfg)
    })
    .await
    .expect("doctor ran");
    let docs = table
        .lines()
        .find(|l| l.contains("Zulip docs"))
        .unwrap_or_default();
    assert!(docs.contains("Docs Bot"), "{table}");
    assert!(table.contains("zulip.api_key"), "a fix names the key: {table}");
    assert_eq!(code, Some(1), "a check failed: {table}");
    for secret in [DOCS.2, wrong] {
        assert!(!table.contains(secret) && !log.contains(secret), "{table}\n{log}");
    }
}
