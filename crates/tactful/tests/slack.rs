//! tactful on Slack, against an in-process double of the Web API and of
//! Socket Mode (`slack_double`, events from slack-morphism's models): two
//! personas (two Slack apps) and two people in a channel, a thread, a DM,
//! an ambient channel; then an envelope whose ack was lost, a
//! `disconnect` envelope, and a `kill -9` with a message waiting.

#![cfg(feature = "slack")]

use crate::common;
use crate::slack_double;

use std::path::Path;
use std::time::Duration;

use common::{Reaper, free_port, metric, settle};
use slack_double::{AMBIENT, App, CHANNEL, Double, PRIVATE, Shown, bot_message, dm, in_thread, message};

const DOCS_BOT: &str = "xoxb-1-docs-test-secret";
const DOCS_APP: &str = "xapp-1-A0DOCS-docs-app-secret";
const CHEF_BOT: &str = "xoxb-2-chef-test-secret";
const CHEF_APP: &str = "xapp-1-A0CHEF-chef-app-secret";
const DOCS: usize = 0;
const CHEF: usize = 1;
const ALICE: &str = "U0ALICE";
const BOB: &str = "U0BOB";
const DM: &str = "D0ALICEDOCS";

fn apps() -> Vec<App> {
    vec![
        App {
            app_id: "A0DOCS".into(),
            bot_token: DOCS_BOT.into(),
            app_token: DOCS_APP.into(),
            user: "U0DOCSBOT".into(),
            bot_id: "B0DOCS".into(),
            name: "docs-bot".into(),
        },
        App {
            app_id: "A0CHEF".into(),
            bot_token: CHEF_BOT.into(),
            app_token: CHEF_APP.into(),
            user: "U0CHEFBOT".into(),
            bot_id: "B0CHEF".into(),
            name: "chef-bot".into(),
        },
    ]
}

async fn double() -> Double {
    Double::start(apps(), &[(ALICE, "Alice"), (BOB, "Bob")]).await
}

fn config(double: &Double, metrics_port: u16, store: &str) -> String {
    format!(
        r##"
[store]
path = "{store}"

[server]
listen = "127.0.0.1:{metrics_port}"

[platforms.slack]
api_url = "{api}/api"

[[persona]]
id = "docs"
agent = "docs"
slack = {{ bot_token = "${{DOCS_BOT}}", app_token = "${{DOCS_APP}}" }}

[[persona]]
id = "chef"
agent = "chef"
slack = {{ bot_token = "${{CHEF_BOT}}", app_token = "${{CHEF_APP}}" }}

[agents.docs]
kind = "script"
rules = [
  {{ when = "(?i)shout", reply = "Hey <!channel> and <@U0ALICE>: look & see" }},
  {{ when = "(?i)who am i", reply = "you are {{from_name}} ({{from}})" }},
  {{ when = "(?i)essay", reply = "{essay}" }},
  {{ when = "(?i)never mind", reply = "NO_REPLY" }},
  {{ when = "", reply = "docs answers {{msg_id}}" }},
]

[agents.chef]
kind = "script"
rules = [{{ when = "", reply = "chef answers {{msg_id}}" }}]

[rooms.default]
mode = "mention"
rate_limit = "off"

[rooms."slack:{PRIVATE}"]
allowed_users = ["U0ALICE"]

[rooms."slack:{AMBIENT}"]
mode = "ambient"
ambient = {{ flush_messages = 1, cooldown_seconds = 0 }}
"##,
        api = double.url,
        essay = "lorem ipsum ".repeat(450),
    )
}

fn start_tactful(dir: &Path, config: &str) -> Reaper {
    crate::common::run_tactful(
        dir,
        config,
        &[
            ("DOCS_BOT", DOCS_BOT),
            ("DOCS_APP", DOCS_APP),
            ("CHEF_BOT", CHEF_BOT),
            ("CHEF_APP", CHEF_APP),
        ],
    )
}

/// Waits until `token`'s app shows `text` in `channel` in thread `thread`
/// (`None`: at the root), and checks it is the only app message there that
/// answers `text`.
async fn answered(double: &Double, channel: &str, thread: Option<&str>, token: &str, text: &str) -> Shown {
    let what = format!("{text:?} in {channel} thread {thread:?}");
    double
        .wait_until(&what, |d| {
            d.bot_messages(channel).iter().any(|m| {
                m.thread_ts.as_deref() == thread && m.token.as_deref() == Some(token) && m.text == text
            })
        })
        .await;
    let found: Vec<Shown> = double
        .bot_messages(channel)
        .into_iter()
        .filter(|m| m.text == text)
        .collect();
    assert_eq!(found.len(), 1, "answered once: {found:?}");
    found.into_iter().next().expect("the answer")
}

/// [`answered`] for the commonest case: docs's answer to `q`, in the
/// thread under it.
async fn docs_answered(double: &Double, q: &str) -> Shown {
    answered(double, CHANNEL, Some(q), DOCS_BOT, &format!("docs answers {q}")).await
}

async fn both_live(double: &Double) {
    double
        .wait_until("both apps on Socket Mode", |d| {
            d.connected(DOCS) && d.connected(CHEF)
        })
        .await;
}

/// Every envelope sent was acknowledged (or superseded by its retry).
async fn all_acked(double: &Double) {
    double
        .wait_until("every envelope acknowledged", |d| {
            d.envelopes().iter().all(|e| e.acked)
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_channels_threads_dms_lost_acks_and_disconnects() {
    let double = double().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let _tactful = start_tactful(dir.path(), &config(&double, metrics, ":memory:"));
    both_live(&double).await;
    let both = [DOCS, CHEF];
    let mut heard = 0.0;

    // A mention, as an `app_mention` to docs's app and then a `message`
    // to both: heard once, answered in a thread under it.
    let q = double.post_mentioning(
        DOCS,
        &both,
        message(CHANNEL, ALICE, "<@U0DOCSBOT> how do I reset?"),
    );
    heard += 1.0;
    let first = docs_answered(&double, &q).await;
    assert!(
        double
            .calls()
            .iter()
            .any(|c| c.method == "users.info" && c.body["user"] == ALICE),
        "the speaker's name was looked up"
    );

    // A reply in that thread, mentioning nobody: the thread is docs's
    // (its answer is the last persona message there), so docs answers,
    // in the thread. (Once the answer is delivered: the engine knows its
    // Slack id from then on.)
    settle(metrics, heard);
    let r = double.post(&both, in_thread(message(CHANNEL, BOB, "thanks, and then?"), &q));
    heard += 1.0;
    answered(&double, CHANNEL, Some(&q), DOCS_BOT, &format!("docs answers {r}")).await;
    assert_ne!(first.ts, r);

    // A follow-up docs decides to leave unanswered: its placeholder comes
    // and goes, Bob sees :eyes: on his message (a follow-up in docs's
    // thread is addressed to docs), and the thread stays docs's.
    settle(metrics, heard);
    let hush = double.post(&both, in_thread(message(CHANNEL, BOB, "never mind"), &q));
    heard += 1.0;
    double
        .wait_until("the silent turn's placeholder deleted", |d| {
            d.calls()
                .iter()
                .any(|c| c.method == "chat.delete" && c.token == DOCS_BOT)
        })
        .await;
    double
        .wait_until("docs reacts with :eyes:", |d| {
            d.calls().iter().any(|c| {
                c.method == "reactions.add"
                    && c.token == DOCS_BOT
                    && c.body["timestamp"] == hush.as_str()
                    && c.body["name"] == "eyes"
                    && c.status == 200
            })
        })
        .await;
    settle(metrics, heard);
    let again = double.post(&both, in_thread(message(CHANNEL, BOB, "one more thing"), &q));
    heard += 1.0;
    answered(
        &double,
        CHANNEL,
        Some(&q),
        DOCS_BOT,
        &format!("docs answers {again}"),
    )
    .await;
    assert!(
        double
            .bot_messages(CHANNEL)
            .iter()
            .all(|m| !m.text.contains(&hush)),
        "silence"
    );

    // Chatter, another app's bot message and an edit: no answer, and the
    // edit is not a new message.
    let chatter = double.post(&both, message(CHANNEL, BOB, "lunch anyone?"));
    let bot = double.post(
        &both,
        bot_message(CHANNEL, "B0DEPLOY", "deploy-bot", "<@U0DOCSBOT> deploy finished"),
    );
    heard += 2.0;
    double.edit(&chatter, "lunch anyone? 12:30");

    // Another app's bot user mentioning docs, the `app_mention` first: it
    // does not say it is a bot, the profile does, so the loop guards hold
    // (bots are not answered here).
    double.add_bot_user("U0OTHERBOT", "other-bot");
    let mut beep = message(CHANNEL, "U0OTHERBOT", "<@U0DOCSBOT> beep");
    beep.sender.bot_id = Some("B0OTHER".into());
    let beep = double.post_mentioning(DOCS, &[DOCS], beep);
    heard += 1.0;

    // A long answer: every part in the thread, none in the channel.
    let q = double.post(&both, message(CHANNEL, ALICE, "<@U0DOCSBOT> write an essay"));
    heard += 1.0;
    settle(metrics, heard);
    let essay: Vec<Shown> = double
        .bot_messages(CHANNEL)
        .into_iter()
        .filter(|m| m.text.contains("ipsum"))
        .collect();
    assert_eq!(essay.len(), 2, "two parts: {essay:#?}");
    assert!(
        essay.iter().all(|m| m.thread_ts.as_deref() == Some(q.as_str())),
        "{essay:#?}"
    );

    // <!channel> and a user mention in an agent's output: sent escaped,
    // pinging nobody.
    let q = double.post(&both, message(CHANNEL, ALICE, "<@U0DOCSBOT> shout it"));
    heard += 1.0;
    answered(
        &double,
        CHANNEL,
        Some(&q),
        DOCS_BOT,
        "Hey &lt;!channel&gt; and &lt;@U0ALICE&gt;: look &amp; see",
    )
    .await;
    for c in double.calls() {
        let text = c.body["text"].as_str().unwrap_or_default();
        assert!(
            !text.contains("<!") && !text.contains("<@"),
            "no mention markup leaves tactful: {c:?}"
        );
    }

    // The speaker reads as their Slack display name.
    let q = double.post(&both, message(CHANNEL, BOB, "<@U0DOCSBOT> who am i?"));
    heard += 1.0;
    answered(
        &double,
        CHANNEL,
        Some(&q),
        DOCS_BOT,
        "you are Bob (slack:T0DOUBLE:U0BOB)",
    )
    .await;

    // A 429 with Retry-After: waited out, answered once.
    double.flood_next_post(CHEF_BOT);
    let q = double.post(&both, message(CHANNEL, BOB, "<@U0CHEFBOT> once more"));
    heard += 1.0;
    answered(&double, CHANNEL, Some(&q), CHEF_BOT, &format!("chef answers {q}")).await;
    let calls = double.calls();
    let limited = calls.iter().position(|c| c.status == 429).expect("a 429");
    let retry = calls[limited + 1..]
        .iter()
        .find(|c| c.token == CHEF_BOT && c.method == "chat.postMessage")
        .expect("the retry");
    assert!(
        retry.at.duration_since(calls[limited].at) >= Duration::from_millis(900),
        "the retry waited for Retry-After"
    );

    // A room that lets Alice in only, named by her Slack user id.
    let bob_asks = double.post(&both, message(PRIVATE, BOB, "<@U0DOCSBOT> let me in"));
    let q = double.post(&both, message(PRIVATE, ALICE, "<@U0DOCSBOT> and me?"));
    heard += 2.0;
    answered(&double, PRIVATE, Some(&q), DOCS_BOT, &format!("docs answers {q}")).await;

    // A DM (an `im` channel), to docs's app only.
    let q = double.post(&[DOCS], dm(DM, ALICE, "psst, a question"));
    heard += 1.0;
    double
        .wait_until("docs answers the DM, in line", |d| {
            d.bot_messages(DM).iter().any(|m| {
                m.token.as_deref() == Some(DOCS_BOT)
                    && m.text == format!("docs answers {q}")
                    && m.thread_ts.is_none()
            })
        })
        .await;

    // Ambient: a question answered once, by one persona.
    double.post(
        &both,
        message(AMBIENT, ALICE, "does anyone know where the keys are?"),
    );
    heard += 1.0;
    settle(metrics, heard);
    assert_eq!(
        double.bot_messages(AMBIENT).len(),
        1,
        "one answer in the ambient channel"
    );
    assert!(
        double
            .bot_messages(PRIVATE)
            .iter()
            .all(|m| m.thread_ts.as_deref() != Some(bob_asks.as_str())),
        "Bob is not on the room's allowlist"
    );
    for quiet in [&chatter, &bot, &beep] {
        assert!(
            double
                .bot_messages(CHANNEL)
                .iter()
                .all(|m| m.thread_ts.as_deref() != Some(quiet.as_str())),
            "{quiet} stays unanswered"
        );
    }
    // The apps' own messages (which Slack shows every app), edits,
    // deletions and the second event of the mention were not heard again.
    assert_eq!(metric(metrics, "tactful_messages_in_total"), Some(heard));
    all_acked(&double).await;

    // docs's acks are lost on the way: Slack sends the envelope again,
    // and the message is heard and answered once.
    double.lose_acks(DOCS, true);
    let q = double.post(&[DOCS], message(CHANNEL, ALICE, "<@U0DOCSBOT> are you there?"));
    heard += 1.0;
    docs_answered(&double, &q).await;
    settle(metrics, heard);
    double.lose_acks(DOCS, false);
    assert!(double.redeliver_unacked() >= 1, "an envelope went unacknowledged");
    all_acked(&double).await;
    settle(metrics, heard);
    assert_eq!(metric(metrics, "tactful_messages_in_total"), Some(heard));
    docs_answered(&double, &q).await;

    // Frames that are not what Slack documents: logged, acknowledged when
    // they have an envelope id (they would never parse better), and the
    // app goes on listening.
    double.send_frame(DOCS, "this is not JSON {");
    double.send_frame(
        DOCS,
        r#"{"type":"events_api","envelope_id":"bad-1","accepts_response_payload":false,"payload":{"type":"event_callback","team_id":"T0DOUBLE","api_app_id":"A0DOCS","event_id":"Ev0","event_time":1,"event":{"type":"message","channel":42,"ts":["no"]}}}"#,
    );
    double.send_frame(
        DOCS,
        r#"{"type":"events_api","envelope_id":"bad-2","payload":null}"#,
    );
    double.send_frame(DOCS, r#"{"type":"who_knows","envelope_id":"bad-3"}"#);
    double
        .wait_until("the malformed envelopes acknowledged", |d| {
            ["bad-1", "bad-2", "bad-3"].iter().all(|id| d.acked(id))
        })
        .await;
    let q = double.post(&both, message(CHANNEL, ALICE, "<@U0DOCSBOT> still listening?"));
    heard += 1.0;
    docs_answered(&double, &q).await;

    // A `disconnect` envelope: the app opens a new socket, and what was
    // said in between arrives there.
    let (opens, _) = double.opens(DOCS);
    double.disconnect(DOCS);
    let q = double.post(&both, message(CHANNEL, BOB, "<@U0DOCSBOT> while you were away"));
    heard += 1.0;
    docs_answered(&double, &q).await;
    // The answer may come first: chef's app hears the message too and
    // docs posts through the Web API, which needs no socket.
    double
        .wait_until("a new socket through apps.connections.open", |d| {
            d.opens(DOCS).0 > opens
        })
        .await;
    settle(metrics, heard);
    assert_eq!(metric(metrics, "tactful_messages_in_total"), Some(heard));
    all_acked(&double).await;

    // An `app_mention` from someone whose profile cannot be read: whether
    // they are a bot cannot be told, so that event is left unacknowledged
    // (for Slack to deliver again); the `message` copy, which says, is
    // taken and answered once.
    let q = double.post_mentioning(
        DOCS,
        &[DOCS],
        message(CHANNEL, "U0STRANGER", "<@U0DOCSBOT> hello?"),
    );
    heard += 1.0;
    docs_answered(&double, &q).await;
    settle(metrics, heard);
    assert_eq!(metric(metrics, "tactful_messages_in_total"), Some(heard));
    let copies: Vec<_> = double.envelopes().into_iter().filter(|e| e.ts == q).collect();
    assert_eq!(copies.len(), 2);
    assert!(!copies[0].acked && copies[1].acked, "{copies:#?}");
    // Slack delivers that `app_mention` again: the message is stored by
    // now, so it is acknowledged without a word, and not heard again.
    // (Only that one: the answer's own echo may not have been read yet.)
    assert_eq!(double.redeliver_unacked_of(&[&q]), 1);
    all_acked(&double).await;
    settle(metrics, heard);
    assert_eq!(metric(metrics, "tactful_messages_in_total"), Some(heard));

    // No `chat.update` repeats the one before it on the same message: the
    // final edit is not sent again when streaming showed it already (it
    // would spend the rate limit twice).
    let updates: Vec<(String, String)> = double
        .calls()
        .iter()
        .filter(|c| c.method == "chat.update")
        .map(|c| {
            let arg = |k: &str| c.body[k].as_str().unwrap_or_default().to_owned();
            (arg("ts"), arg("text"))
        })
        .collect();
    assert!(!updates.is_empty());
    for (i, u) in updates.iter().enumerate() {
        let before = updates[..i].iter().rev().find(|b| b.0 == u.0);
        assert_ne!(before, Some(u), "an identical chat.update again: {updates:#?}");
    }
}

/// A burst of people tactful has not seen before, while `users.info` is
/// slow: every envelope is acknowledged inside Slack's 3 s from when it
/// went out (the names wait on one allowance per app, not in turn), every
/// message is heard once, and the names looked up serve the next ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_new_speakers_is_acknowledged_in_time() {
    let double = double().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let _tactful = start_tactful(dir.path(), &config(&double, metrics, ":memory:"));
    both_live(&double).await;
    let people: Vec<(String, String)> = (0..20)
        .map(|i| (format!("U0NEW{i:02}"), format!("Newcomer {i}")))
        .collect();
    double.add_people(&people);
    double.slow_users_info(Duration::from_millis(250));
    let said: Vec<String> = people
        .iter()
        .map(|(id, _)| double.post(&[DOCS, CHEF], message(CHANNEL, id, "hello all")))
        .collect();
    all_acked(&double).await;
    for e in double.envelopes() {
        let (Some(sent), Some(acked)) = (e.sent_at, e.acked_at) else {
            panic!("never acknowledged: {e:#?}");
        };
        assert!(
            acked.duration_since(sent) < slack_double::ACK_DEADLINE,
            "envelope {} acknowledged {:?} after it went out",
            e.id,
            acked.duration_since(sent)
        );
        assert_eq!(e.attempt, 0, "nothing delivered again");
    }
    settle(metrics, said.len() as f64);
    assert_eq!(
        metric(metrics, "tactful_messages_in_total"),
        Some(said.len() as f64)
    );
    // The lookups went on behind the acks: once Slack answered about the
    // last newcomer, they are known by name (asked until the answer says
    // so, a few times at most: the answer may still be on its way).
    let (last, _) = people.last().expect("people");
    double
        .wait_until("users.info answered for the last newcomer", |d| {
            d.calls()
                .iter()
                .any(|c| c.method == "users.info" && c.body["user"] == last.as_str() && c.status == 200)
        })
        .await;
    let mut names = Vec::new();
    for _ in 0..5 {
        let q = double.post(&[DOCS, CHEF], message(CHANNEL, last, "<@U0DOCSBOT> who am i"));
        double
            .wait_until("an answer to who am i", |d| {
                d.bot_messages(CHANNEL)
                    .iter()
                    .any(|m| m.thread_ts.as_deref() == Some(q.as_str()) && m.text.starts_with("you are"))
            })
            .await;
        let answer = double
            .bot_messages(CHANNEL)
            .into_iter()
            .find(|m| m.thread_ts.as_deref() == Some(q.as_str()) && m.text.starts_with("you are"))
            .expect("the answer");
        names.push(answer.text.clone());
        if answer.text == format!("you are Newcomer 19 (slack:T0DOUBLE:{last})") {
            break;
        }
    }
    assert!(
        names.last().is_some_and(|n| n.starts_with("you are Newcomer 19")),
        "{names:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_waiting_through_a_kill_is_answered_once_after_the_restart() {
    let double = double().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let metrics = free_port();
    let config = config(&double, metrics, &store.display().to_string());
    let tactful = start_tactful(dir.path(), &config);
    both_live(&double).await;
    let q = double.post(&[DOCS, CHEF], message(CHANNEL, ALICE, "<@U0DOCSBOT> before"));
    docs_answered(&double, &q).await;
    settle(metrics, 1.0);
    all_acked(&double).await;
    // What the store keeps for Slack once docs answered in the thread.
    saved_thread(&store, &q).await;

    // kill -9, then a message while tactful is down; after the restart, a
    // retry of the answered one (as if its ack had been lost).
    drop(tactful);
    double
        .wait_until("both sockets gone", |d| !d.connected(DOCS) && !d.connected(CHEF))
        .await;
    let later = double.post(
        &[DOCS, CHEF],
        message(CHANNEL, BOB, "<@U0DOCSBOT> while you were down"),
    );
    let _tactful = start_tactful(dir.path(), &config);
    both_live(&double).await;
    docs_answered(&double, &later).await;
    all_acked(&double).await;
    double.redeliver(DOCS, &q);
    all_acked(&double).await;
    settle(metrics, 2.0);
    // Nothing answered twice.
    docs_answered(&double, &q).await;
    assert_eq!(
        double.bot_messages(CHANNEL).len(),
        2,
        "{:#?}",
        double.bot_messages(CHANNEL)
    );
    // The thread docs answered in before the kill is still docs's: a
    // follow-up there, naming no one, reaches it.
    let r = double.post(
        &[DOCS, CHEF],
        in_thread(message(CHANNEL, BOB, "and after that?"), &q),
    );
    answered(&double, CHANNEL, Some(&q), DOCS_BOT, &format!("docs answers {r}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_app_token_is_said_plainly_and_never_shown() {
    use std::io::BufRead as _;
    let double = double().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let wrong = "xapp-1-A0DOCS-not-the-right-secret";
    let cfg = dir.path().join("tactful.toml");
    std::fs::write(&cfg, config(&double, free_port(), ":memory:")).expect("config");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tactful"))
        .args(["run", "-c"])
        .arg(&cfg)
        .envs([
            ("DOCS_BOT", DOCS_BOT),
            ("DOCS_APP", wrong),
            ("CHEF_BOT", CHEF_BOT),
            ("CHEF_APP", CHEF_APP),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tactful starts");
    let stderr = child.stderr.take().expect("stderr");
    let _reap = Reaper(child);
    let line = tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.contains("apps.connections.open refused the app-level token"))
    })
    .await
    .expect("reads")
    .expect("the refusal is logged");
    assert!(
        line.contains("docs") && line.contains("connections:write"),
        "{line}"
    );
    assert!(!line.contains(wrong), "{line}");
    assert!(!line.contains("Slack: Slack"), "said to be Slack's once: {line}");
    // chef's app, whose tokens are right, listens all the same.
    double
        .wait_until("chef on Socket Mode", |d| d.connected(CHEF))
        .await;
}

/// Polls `metric` until `ok` holds for it (60 s at most).
async fn metric_until(port: u16, name: &str, ok: impl Fn(f64) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let value = tokio::task::spawn_blocking({
            let name = name.to_owned();
            move || metric(port, &name)
        })
        .await
        .expect("reads");
        if value.is_some_and(&ok) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{name} stayed at {value:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_store_cannot_take_stays_unacknowledged_until_slack_delivers_it_again() {
    let double = double().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let metrics = free_port();
    let _tactful = start_tactful(
        dir.path(),
        &config(&double, metrics, &store.display().to_string()),
    );
    both_live(&double).await;

    // Another process holds the store's write lock: the first message is
    // taken but cannot be saved in time, the store turns unhealthy, and
    // the next is refused. Neither envelope is acknowledged.
    let lock = rusqlite::Connection::open(&store).expect("opens");
    lock.execute_batch("BEGIN IMMEDIATE").expect("locks");
    // Both apps get each message: the copy that comes second waits for
    // the first one's outcome rather than being acknowledged at once.
    let both = [DOCS, CHEF];
    let first = double.post(&both, message(CHANNEL, ALICE, "<@U0DOCSBOT> one"));
    metric_until(metrics, "tactful_store_healthy", |v| v == 0.0).await;
    let second = double.post(&both, message(CHANNEL, BOB, "<@U0DOCSBOT> two"));
    metric_until(metrics, "tactful_refused_total", |v| v >= 1.0).await;

    // None of the four envelopes is acknowledged within Slack's deadline.
    double
        .wait_until("all four envelopes past the ack deadline, unacknowledged", |d| {
            d.unacknowledged(&first) && d.unacknowledged(&second)
        })
        .await;
    for ts in [&first, &second] {
        let copies = double.envelopes().into_iter().filter(|e| &e.ts == ts).count();
        assert_eq!(copies, 2, "one per app");
    }

    // The lock goes; Slack delivers them all again: each message is
    // answered once, in its thread, and the thread state is saved again
    // (a refusal must not stop it).
    lock.execute_batch("ROLLBACK").expect("unlocks");
    drop(lock);
    metric_until(metrics, "tactful_store_healthy", |v| v == 1.0).await;
    assert_eq!(double.redeliver_unacked_of(&[&first, &second]), 4);
    docs_answered(&double, &first).await;
    docs_answered(&double, &second).await;
    all_acked(&double).await;
    settle(metrics, 2.0);
    assert_eq!(
        double.bot_messages(CHANNEL).len(),
        2,
        "{:#?}",
        double.bot_messages(CHANNEL)
    );
    for ts in [&first, &second] {
        saved_thread(&store, ts).await;
    }
}

/// Waits until the store holds Slack's thread state with a persona's
/// answer in the thread under `parent` (written by the store's own
/// thread: looked for until it is there, 30 s at most).
async fn saved_thread(store: &Path, parent: &str) {
    let db = rusqlite::Connection::open(store).expect("opens");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let saved: Option<serde_json::Value> = db
            .query_row(
                "SELECT value FROM platform_state WHERE key = 'slack.threads:docs'",
                [],
                |r| r.get::<_, String>(0),
            )
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok());
        let there = saved.as_ref().is_some_and(|v| {
            v["last"]
                .as_array()
                .is_some_and(|l| l.iter().any(|e| e[0] == CHANNEL && e[1] == parent))
        });
        if there {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the thread under {parent} never saved: {saved:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A four-part answer, the process killed with `kill -9` while Slack has
/// shown its third part but not yet answered `chat.postMessage` (the
/// worst moment), then started again on the same store: the answer is
/// finished in its thread, nothing is lost, and only that part can be
/// shown twice (`chat.postMessage` takes no idempotency key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_answer_cut_by_a_kill_is_finished_without_doubling_its_parts() {
    use common::split;
    let double = double().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let cfg = split::told_by_docs(&config(&double, free_port(), &store.display().to_string()));
    let in_flight = split::marker(100);
    double.stall_post_with(&in_flight);
    let first = start_tactful(dir.path(), &cfg);
    both_live(&double).await;
    let q = double.post(
        &[DOCS, CHEF],
        message(CHANNEL, ALICE, "<@U0DOCSBOT> the story please"),
    );
    double
        .wait_until("the third part shown", |d| {
            d.bot_messages(CHANNEL)
                .iter()
                .any(|m| m.text.contains(&in_flight))
        })
        .await;
    drop(first); // SIGKILL
    let posts = || -> Vec<Shown> {
        double
            .bot_messages(CHANNEL)
            .into_iter()
            .filter(|m| m.token.as_deref() == Some(DOCS_BOT) && !m.deleted)
            .collect()
    };
    let texts = |posts: &[Shown]| posts.iter().map(|m| m.text.clone()).collect::<Vec<_>>();
    assert!(
        !split::finished(&texts(&posts()), split::LINES),
        "killed before the end"
    );
    let _second = start_tactful(dir.path(), &cfg);
    let last = split::marker(split::LINES - 1);
    double
        .wait_until("the answer finished", |d| {
            d.bot_messages(CHANNEL).iter().any(|m| m.text.contains(&last))
        })
        .await;
    let posts = posts();
    split::once_but_the_part_in_flight(&texts(&posts), split::LINES);
    assert!(
        posts.iter().all(|m| m.thread_ts.as_deref() == Some(q.as_str())),
        "every part in the question's thread: {posts:#?}"
    );
}
