//! Slack across processes: two `tactful run` processes on one PostgreSQL
//! database and the Slack double. One process listens with the persona's
//! app; a channel owned by the other is answered by that one, over the
//! Web API, in a thread under the question. A follow-up in that thread
//! without a mention is heard by the listener, which knows the thread is
//! the persona's from the answer's own event (not from a post it made
//! itself), so the persona answers it too; a silent turn's placeholder,
//! posted and deleted by the owner, leaves the thread the persona's; the
//! later parts of a split answer a new owner finishes go where the dead
//! owner put the first. Only the listener saves the thread state.

#![cfg(feature = "slack")]

use crate::common;
use crate::leases;
use crate::slack_double;

use common::{Reaper, run_tactful};
use leases::{cluster_toml, holder, shares, wait_db};
use slack_double::{App, Double, in_thread, message};
use tactful_core::RoomId;
use tactful_store::testing::Schema;
use tactful_store::{partition_key, partition_of};

const DOCS_BOT: &str = "xoxb-1-docs-cluster-secret";
const DOCS_APP: &str = "xapp-1-A0DOCS-docs-cluster-secret";
const DOCS: usize = 0;
const ALICE: &str = "U0ALICE";
const BOB: &str = "U0BOB";

fn config(url: &str, api: &str) -> String {
    format!(
        r##"
{cluster}

[platforms.slack]
api_url = "{api}/api"

[[persona]]
id = "docs"
agent = "docs"
slack = {{ bot_token = "${{DOCS_BOT}}", app_token = "${{DOCS_APP}}" }}

[agents.docs]
kind = "script"
rules = [
  {{ when = "(?i)never mind", reply = "NO_REPLY" }},
  {{ when = "", reply = "docs answers {{msg_id}}" }},
]

[rooms.default]
mode = "mention"
rate_limit = "off"
"##,
        cluster = cluster_toml(url, 2),
    )
}

/// Waits until docs's answer `text` is in `channel`, in the thread under
/// `parent`, and its owner has recorded where it went (a follow-up
/// replying to it is known to reply to docs from then on); checks it is
/// there once.
async fn answered(schema: &Schema, double: &Double, channel: &str, parent: &str, text: &str) {
    double
        .wait_until(&format!("{text:?} under {parent}"), |d| {
            d.bot_messages(channel)
                .iter()
                .any(|m| m.thread_ts.as_deref() == Some(parent) && m.text == text && !m.deleted)
        })
        .await;
    let found = double
        .bot_messages(channel)
        .into_iter()
        .filter(|m| m.text == text && !m.deleted)
        .count();
    assert_eq!(found, 1, "{text:?} once");
    let ts = double
        .bot_messages(channel)
        .into_iter()
        .find(|m| m.text == text)
        .expect("the answer")
        .ts;
    wait_db("the answer's Slack id on record", || {
        schema
            .column(&format!("SELECT id FROM messages WHERE platform_id = '{ts}'"))
            .is_ok_and(|ids| ids.len() == 1)
    });
}

fn docs_app() -> App {
    App {
        app_id: "A0DOCS".into(),
        bot_token: DOCS_BOT.into(),
        app_token: DOCS_APP.into(),
        user: "U0DOCSBOT".into(),
        bot_id: "B0DOCS".into(),
        name: "docs-bot".into(),
    }
}

/// A later part of a split answer sent by a process that did not post the
/// first (its poster died mid-answer; the room's new owner carries on,
/// with no record of where the first part went) goes where the first did:
/// the thread under the message answered, not the channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_part_from_a_process_that_did_not_post_the_first_goes_to_its_thread() {
    use tactful_core::{MsgId, PersonaId};
    use tactful_runtime::{OutMessage, Platform};
    use tactful_slack::{SlackPersona, SlackPlatform, SlackSettings};

    let double = Double::start(vec![docs_app()], &[(ALICE, "Alice")]).await;
    let settings = || SlackSettings {
        api_url: format!("{}/api", double.url),
        everyone_addresses: false,
        personas: vec![SlackPersona {
            id: PersonaId::new("docs"),
            bot_token: DOCS_BOT.into(),
            app_token: DOCS_APP.into(),
        }],
        max_backoff: std::time::Duration::from_secs(1),
    };
    let q = double.post(
        &[DOCS],
        message("C0TEAM", ALICE, "<@U0DOCSBOT> the long answer, please"),
    );
    let (docs, room, asked) = (
        PersonaId::new("docs"),
        RoomId::new("slack:C0TEAM"),
        MsgId::new(q.clone()),
    );
    let part = |text: &'static str| OutMessage {
        persona: &docs,
        room: &room,
        thread: None,
        text,
        reply_to: None,
        key: None,
        placeholder: false,
        follows: None,
        first_replied_to: None,
    };
    let first = SlackPlatform::new(settings(), &Default::default())
        .expect("built")
        .send(OutMessage {
            reply_to: Some(&asked),
            ..part("part one")
        })
        .await
        .expect("posted");
    let taker = SlackPlatform::new(settings(), &Default::default()).expect("built");
    taker
        .send(OutMessage {
            follows: Some(&first),
            first_replied_to: Some(&asked),
            ..part("part two")
        })
        .await
        .expect("posted");
    let shown = double.bot_messages("C0TEAM");
    let thread_of = |text: &str| shown.iter().find(|m| m.text == text).map(|m| m.thread_ts.clone());
    assert_eq!(thread_of("part one"), Some(Some(q.clone())));
    assert_eq!(
        thread_of("part two"),
        Some(Some(q)),
        "in the thread, not the channel"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_answered_by_one_process_is_followed_by_the_one_listening() {
    let Some(schema) = Schema::new() else { return };
    let double = Double::start(vec![docs_app()], &[(ALICE, "Alice"), (BOB, "Bob")]).await;
    // Each process names itself to PostgreSQL (`node0`, `node1`), so the
    // writes of Slack's thread state can be told apart.
    let nodes: Vec<(tempfile::TempDir, Reaper)> = (0..2)
        .map(|i| {
            let url = schema
                .url
                .replace("application_name=", &format!("application_name=node{i}_"));
            let d = tempfile::tempdir().expect("temp dir");
            let p = run_tactful(
                d.path(),
                &config(&url, &double.url),
                &[("DOCS_BOT", DOCS_BOT), ("DOCS_APP", DOCS_APP)],
            );
            (d, p)
        })
        .collect();
    wait_db("two processes sharing the partitions", || {
        let s = shares(&schema);
        s.len() == 2 && s.iter().sum::<usize>() == 256
    });
    schema
        .exec(
            "CREATE TABLE state_writes (writer TEXT, key TEXT);
             CREATE FUNCTION note_state_write() RETURNS trigger AS $$ BEGIN
                 INSERT INTO state_writes VALUES (split_part(current_setting('application_name'), '_', 1), NEW.key);
                 RETURN NEW;
             END $$ LANGUAGE plpgsql;
             CREATE TRIGGER state_written AFTER INSERT OR UPDATE ON platform_state
                 FOR EACH ROW EXECUTE FUNCTION note_state_write();",
        )
        .expect("a trigger noting who writes the platforms' state");
    wait_db("one of them listening with docs's app", || {
        holder(&schema, "account:slack:docs").is_some_and(|p| nodes.iter().any(|n| n.1.id() == p))
    });
    double
        .wait_until("docs's app on Socket Mode", |d| d.connected(DOCS))
        .await;
    let listener = holder(&schema, "account:slack:docs").expect("held");
    // A channel whose room the other process owns.
    let channel = (0..1000)
        .map(|i| format!("C0TEAM{i}"))
        .find(|c| {
            let key = partition_key(partition_of(&RoomId::new(format!("slack:{c}"))));
            holder(&schema, &key).is_some_and(|owner| owner != listener)
        })
        .expect("a channel the listener does not own");

    let q = double.post(&[DOCS], message(&channel, ALICE, "<@U0DOCSBOT> how do I reset?"));
    answered(&schema, &double, &channel, &q, &format!("docs answers {q}")).await;

    // A follow-up in docs's thread, mentioning nobody: addressed to docs.
    let r = double.post(&[DOCS], in_thread(message(&channel, BOB, "and then?"), &q));
    answered(&schema, &double, &channel, &q, &format!("docs answers {r}")).await;

    // One docs leaves unanswered: its placeholder comes and goes (the
    // reaction says it read it), and the thread stays docs's.
    let hush = double.post(&[DOCS], in_thread(message(&channel, BOB, "never mind"), &q));
    double
        .wait_until("the silent turn's placeholder deleted", |d| {
            d.calls()
                .iter()
                .any(|c| c.method == "chat.delete" && c.status == 200)
        })
        .await;
    double
        .wait_until("docs's :eyes: on the follow-up it leaves", |d| {
            d.calls().iter().any(|c| {
                c.method == "reactions.add" && c.body["timestamp"] == hush.as_str() && c.status == 200
            })
        })
        .await;
    let again = double.post(&[DOCS], in_thread(message(&channel, BOB, "one more thing"), &q));
    answered(&schema, &double, &channel, &q, &format!("docs answers {again}")).await;

    // The thread state is saved by the listener alone: it follows every
    // answer from the events; the owner knows only its own posts, and
    // saving them would overwrite what the listener saved.
    let listening = nodes
        .iter()
        .position(|n| n.1.id() == listener)
        .expect("the listener is ours");
    let writers = || {
        schema
            .column("SELECT DISTINCT writer FROM state_writes WHERE key LIKE 'slack.threads%'")
            .expect("asks")
    };
    wait_db("the listener saving the thread state", || !writers().is_empty());
    assert_eq!(writers(), [Some(format!("node{listening}"))]);
    // Under docs's app's own key (a process listening with another app
    // saves under that one's).
    assert_eq!(
        schema
            .column("SELECT DISTINCT key FROM state_writes WHERE key LIKE 'slack.threads%'")
            .expect("asks"),
        [Some("slack.threads:docs".to_owned())]
    );
}
