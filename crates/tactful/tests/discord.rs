//! tactful on Discord, against an in-process double of the gateway and the
//! REST API (`discord_double`, payloads from twilight's model): two
//! personas (two bot applications) and two people in a guild channel, a
//! thread, a DM, an ambient channel and a channel where the bots may talk
//! to each other; then dropped and reconnected gateway connections.

#![cfg(feature = "discord")]
// The guild of the double is a large `json!` literal.

use crate::common;
use crate::discord_double;

use std::path::Path;
use std::time::Duration;

use common::{Reaper, free_port, metric, settle};
use discord_double::{
    AMBIENT, BANTER, Bot, CHANNEL, DM, DOCS_ROLE, Double, GUILD, Shown, THREAD, mention, message, reply, user,
};
use serde_json::json;
use tactful_runtime::At;
use twilight_model::id::Id;

const DOCS: &str = "NzAwMQ.docs.test-token-secret";
const CHEF: &str = "NzAwMg.chef.test-token-secret";
const DOCS_BOT: u64 = 7001;
const CHEF_BOT: u64 = 7002;

fn bots() -> Vec<Bot> {
    vec![
        Bot {
            token: DOCS.into(),
            id: DOCS_BOT,
            name: "docs-bot".into(),
            roles: vec![DOCS_ROLE],
        },
        Bot {
            token: CHEF.into(),
            id: CHEF_BOT,
            name: "chef-bot".into(),
            roles: vec![],
        },
    ]
}

fn config(double: &Double, metrics_port: u16) -> String {
    format!(
        r##"
[store]
path = ":memory:"

[server]
listen = "127.0.0.1:{metrics_port}"

[platforms.discord]
api_url = "{api}/discord-proxy"
gateway_url = "{gateway}"

[[persona]]
id = "docs"
agent = "docs"
discord = {{ token = "${{DOCS_TOKEN}}" }}

[[persona]]
id = "chef"
agent = "chef"
discord = {{ token = "${{CHEF_TOKEN}}" }}

[agents.docs]
kind = "script"
rules = [
  {{ when = "(?i)shout", reply = "Hey @everyone and @here, <@&{DOCS_ROLE}> and <@11>: look!" }},
  {{ when = "(?i)never mind", reply = "NO_REPLY" }},
  {{ when = "", reply = "docs answers {{msg_id}}" }},
]

[agents.chef]
kind = "script"
rules = [{{ when = "", reply = "chef answers {{msg_id}}" }}]

[rooms.default]
mode = "mention"
rate_limit = "off"

[rooms."discord:{AMBIENT}"]
mode = "ambient"
ambient = {{ flush_messages = 1, cooldown_seconds = 0 }}

[rooms."discord:{BANTER}"]
mode = "all"
ignore_bots = false
max_bot_turns = 3
"##,
        api = double.url,
        gateway = double.gateway(),
    )
}

fn start_tactful(dir: &Path, config: &str) -> Reaper {
    crate::common::run_tactful(dir, config, &[("DOCS_TOKEN", DOCS), ("CHEF_TOKEN", CHEF)])
}

fn alice() -> twilight_model::user::User {
    user(11, "alice", false)
}

fn bob() -> twilight_model::user::User {
    user(12, "bob", false)
}

/// Waits until `token`'s bot shows `text` in `channel` in reply to `id`,
/// and checks it is the only answer there.
async fn answered(double: &Double, channel: u64, id: u64, token: &str, text: &str) -> Shown {
    let what = format!("{text:?} in reply to {id} in {channel}");
    double
        .wait_until(&what, |v| {
            v.messages.iter().any(|m| {
                m.channel == channel
                    && m.reply_to == Some(id)
                    && m.token.as_deref() == Some(token)
                    && m.content == text
                    && !m.deleted
            })
        })
        .await;
    let found: Vec<Shown> = double
        .bot_messages(channel)
        .into_iter()
        .filter(|m| m.reply_to == Some(id))
        .collect();
    assert_eq!(found.len(), 1, "answered once: {found:?}");
    found.into_iter().next().expect("the answer")
}

fn answers(double: &Double, channel: u64, id: u64) -> Vec<Shown> {
    double
        .bot_messages(channel)
        .into_iter()
        .filter(|m| m.reply_to == Some(id))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_guilds_threads_dms_and_a_dropped_gateway() {
    let double = Double::start(bots()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let _tactful = start_tactful(dir.path(), &config(&double, metrics));
    double
        .wait_until("both bots through the gateway handshake", |_| {
            double.connected(DOCS) && double.connected(CHEF)
        })
        .await;
    let both = [DOCS, CHEF];
    let mut heard = 0.0;

    // A user mention, from the `mentions` array; every send parses no
    // mentions.
    let mut m = message(
        double.id(),
        CHANNEL,
        Some(GUILD),
        alice(),
        "<@7001> how do I reset?",
    );
    m.mentions = vec![mention(&user(DOCS_BOT, "docs-bot", true))];
    let q = double.post(&both, m);
    heard += 1.0;
    let first = answered(&double, CHANNEL, q, DOCS, &format!("docs answers {q}")).await;
    for c in double
        .calls()
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/messages"))
    {
        assert_eq!(c.body["allowed_mentions"], json!({"parse": []}), "{c:?}");
    }
    assert!(
        double
            .calls()
            .iter()
            .any(|c| c.path == format!("channels/{CHANNEL}/typing") && c.token == DOCS),
        "typing while the turn ran"
    );

    // A role mention: the role docs's bot holds.
    let mut m = message(double.id(), CHANNEL, Some(GUILD), bob(), "<@&500> anyone?");
    m.mention_roles = vec![Id::new(DOCS_ROLE)];
    let q = double.post(&both, m);
    heard += 1.0;
    answered(&double, CHANNEL, q, DOCS, &format!("docs answers {q}")).await;

    // The same role in a guild the gateway said nothing about, seen by
    // chef's bot alone: docs's roles there are asked over HTTP.
    let mut m = message(double.id(), 104, Some(901), bob(), "<@&500> other guild");
    m.mention_roles = vec![Id::new(DOCS_ROLE)];
    let q = double.post(&[CHEF], m);
    heard += 1.0;
    answered(&double, 104, q, DOCS, &format!("docs answers {q}")).await;
    assert!(
        double
            .calls()
            .iter()
            .any(|c| c.token == DOCS && c.path == format!("guilds/901/members/{DOCS_BOT}")),
        "docs's roles asked over HTTP"
    );

    // A reply to a persona's message.
    let m = reply(
        message(double.id(), CHANNEL, Some(GUILD), bob(), "thanks, and then?"),
        first.id,
    );
    let q = double.post(&both, m);
    heard += 1.0;
    answered(&double, CHANNEL, q, DOCS, &format!("docs answers {q}")).await;

    // @everyone in a person's message addresses nobody; chatter neither.
    let mut m = message(
        double.id(),
        CHANNEL,
        Some(GUILD),
        alice(),
        "@everyone standup in 5",
    );
    m.mention_everyone = true;
    let everyone = double.post(&both, m);
    let chatter = double.post(
        &both,
        message(double.id(), CHANNEL, Some(GUILD), bob(), "lunch anyone?"),
    );
    heard += 2.0;

    // @everyone, a role and a user in an agent's output: sent, pinging no
    // one.
    let mut m = message(double.id(), CHANNEL, Some(GUILD), alice(), "<@7001> shout it");
    m.mentions = vec![mention(&user(DOCS_BOT, "docs-bot", true))];
    let q = double.post(&both, m);
    heard += 1.0;
    answered(
        &double,
        CHANNEL,
        q,
        DOCS,
        "Hey @everyone and @here, <@&500> and <@11>: look!",
    )
    .await;
    let carrying: Vec<_> = double
        .calls()
        .into_iter()
        .filter(|c| {
            c.body["content"]
                .as_str()
                .is_some_and(|t| t.contains("@everyone"))
        })
        .collect();
    assert!(!carrying.is_empty());
    for c in carrying {
        assert_eq!(c.body["allowed_mentions"], json!({"parse": []}), "{c:?}");
    }

    // In a thread: the answer stays in it, and the persona joins it.
    let mut m = message(
        double.id(),
        THREAD,
        Some(GUILD),
        alice(),
        "<@7002> in the thread?",
    );
    m.mentions = vec![mention(&user(CHEF_BOT, "chef-bot", true))];
    let q = double.post(&both, m);
    heard += 1.0;
    answered(&double, THREAD, q, CHEF, &format!("chef answers {q}")).await;
    assert!(
        double.calls().iter().any(|c| c.method == "PUT"
            && c.path == format!("channels/{THREAD}/thread-members/@me")
            && c.token == CHEF),
        "chef joined the thread"
    );

    // A 429 with retry_after: waited out, answered once.
    double.flood_next_send(CHEF);
    let mut m = message(double.id(), CHANNEL, Some(GUILD), bob(), "<@7002> once more");
    m.mentions = vec![mention(&user(CHEF_BOT, "chef-bot", true))];
    let q = double.post(&both, m);
    heard += 1.0;
    answered(&double, CHANNEL, q, CHEF, &format!("chef answers {q}")).await;
    let calls = double.calls();
    let limited = calls.iter().position(|c| c.status == 429).expect("a 429");
    let retry = calls[limited + 1..]
        .iter()
        .find(|c| c.token == CHEF && c.method == "POST" && c.path.ends_with("/messages"))
        .expect("the retry");
    assert!(
        retry.at.duration_since(calls[limited].at) >= Duration::from_millis(900),
        "the retry waited for retry_after"
    );

    // A DM (no guild), to docs's bot only.
    let q = double.post(
        &[DOCS],
        message(double.id(), DM, None, alice(), "psst, a question"),
    );
    heard += 1.0;
    double
        .wait_until("docs answers the DM", |v| {
            v.messages.iter().any(|m| {
                m.channel == DM
                    && m.token.as_deref() == Some(DOCS)
                    && m.content == format!("docs answers {q}")
            })
        })
        .await;

    // Ambient: a question answered once; banter: three bot turns at most.
    double.post(
        &both,
        message(
            double.id(),
            AMBIENT,
            Some(GUILD),
            alice(),
            "does anyone know where the keys are?",
        ),
    );
    double.post(
        &both,
        message(double.id(), BANTER, Some(GUILD), bob(), "hello bots"),
    );
    heard += 2.0;
    settle(metrics, heard);
    assert_eq!(
        double.bot_messages(AMBIENT).len(),
        1,
        "one answer in the ambient channel"
    );
    assert_eq!(
        double.bot_messages(BANTER).len(),
        3,
        "max_bot_turns between the bots"
    );
    assert!(
        answers(&double, CHANNEL, everyone).is_empty(),
        "@everyone addresses nobody"
    );
    assert!(
        answers(&double, CHANNEL, chatter).is_empty(),
        "chatter stays unanswered"
    );
    // The bots' own messages, which Discord shows every bot, were not
    // heard again.
    assert_eq!(metric(metrics, "tactful_messages_in_total"), Some(heard));

    // The gateway drops both connections; a message said meanwhile
    // arrives with the resumed session, once.
    double.drop_connection(DOCS);
    double.drop_connection(CHEF);
    let mut m = message(
        double.id(),
        CHANNEL,
        Some(GUILD),
        alice(),
        "<@7001> while you were away",
    );
    m.mentions = vec![mention(&user(DOCS_BOT, "docs-bot", true))];
    let q = double.post(&both, m);
    heard += 1.0;
    answered(&double, CHANNEL, q, DOCS, &format!("docs answers {q}")).await;
    assert_eq!(double.handshakes(DOCS), (1, 1), "resumed, not identified again");

    // Opcode 7: reconnect and resume.
    double.reconnect(DOCS);
    double
        .wait_until("docs resumes after opcode 7", |_| double.handshakes(DOCS).1 >= 2)
        .await;
    let mut m = message(double.id(), CHANNEL, Some(GUILD), bob(), "<@7001> still there?");
    m.mentions = vec![mention(&user(DOCS_BOT, "docs-bot", true))];
    let q = double.post(&both, m);
    heard += 1.0;
    answered(&double, CHANNEL, q, DOCS, &format!("docs answers {q}")).await;
    settle(metrics, heard);
    assert_eq!(metric(metrics, "tactful_messages_in_total"), Some(heard));
    // `api_url` has a path (a reverse proxy under `/discord-proxy`): every
    // REST request went there.
    let (via_path, via_root) = double.requests_by_path();
    assert!(
        via_path > 0 && via_root == 0,
        "{via_path} under the path, {via_root} at the root"
    );
}

/// The double, with tactful running against it and both bots through the
/// gateway handshake (the temp dir and the process live as long as the
/// values returned).
async fn started() -> (Double, tempfile::TempDir, Reaper) {
    let double = Double::start(bots()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let tactful = start_tactful(dir.path(), &config(&double, free_port()));
    double
        .wait_until("both bots through the gateway handshake", |_| {
            double.connected(DOCS) && double.connected(CHEF)
        })
        .await;
    (double, dir, tactful)
}

/// A mention of docs, said to both bots.
fn ask_docs(double: &Double, text: &str) -> u64 {
    let mut m = message(double.id(), CHANNEL, Some(GUILD), alice(), text);
    m.mentions = vec![mention(&user(DOCS_BOT, "docs-bot", true))];
    double.post(&[DOCS, CHEF], m)
}

/// Discord answers every request of docs's bot with a global 429 for
/// 2 s: nothing more of that bot goes out until the limit lifts (twilight
/// alone retried about 50 times a second), the limit is logged once at
/// WARN with its length, and the answer comes after it. chef's bot is not
/// held back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_rate_limit_holds_every_request_of_the_bot_until_it_lifts() {
    let double = Double::start(bots()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let (_tactful, logs) = crate::common::run_tactful_logged(
        dir.path(),
        &config(&double, free_port()),
        &[("DOCS_TOKEN", DOCS), ("CHEF_TOKEN", CHEF)],
    );
    double
        .wait_until("both bots through the gateway handshake", |_| {
            double.connected(DOCS) && double.connected(CHEF)
        })
        .await;
    let limit = Duration::from_secs(2);
    double.global_limit(DOCS, limit);
    let limited_from = std::time::Instant::now();
    let q = ask_docs(&double, "<@7001> are you there?");
    answered(&double, CHANNEL, q, DOCS, &format!("docs answers {q}")).await;
    let refused: Vec<_> = double
        .calls()
        .into_iter()
        .filter(|c| c.token == DOCS && c.status == 429)
        .collect();
    // What was in flight when the first 429 came back may be refused too
    // (the placeholder, the typing status); nothing is tried again before
    // the limit lifts.
    assert!(
        !refused.is_empty() && refused.len() <= 4,
        "{} requests refused: {refused:#?}",
        refused.len()
    );
    let sent = double
        .calls()
        .into_iter()
        .find(|c| c.token == DOCS && c.at >= limited_from && c.status != 429)
        .expect("the answer");
    assert!(
        sent.at.duration_since(limited_from) >= limit - Duration::from_millis(100),
        "sent {:?} into a {limit:?} limit",
        sent.at.duration_since(limited_from)
    );
    let warned: Vec<String> = logs
        .lines()
        .into_iter()
        .filter(|l| l.contains("WARN") && l.contains("globally rate limited"))
        .collect();
    assert_eq!(warned.len(), 1, "{warned:#?}");
    assert!(
        warned[0].contains("for 2.0s") && warned[0].contains("docs"),
        "{}",
        warned[0]
    );
    // chef's bot was never held.
    let mut m = message(double.id(), CHANNEL, Some(GUILD), bob(), "<@7002> and you?");
    m.mentions = vec![mention(&user(CHEF_BOT, "chef-bot", true))];
    let c = double.post(&[DOCS, CHEF], m);
    answered(&double, CHANNEL, c, CHEF, &format!("chef answers {c}")).await;
}

/// One 401 (a token that comes back: a proxy restarting) does not make
/// the bot refuse everything after it until a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passing_401_does_not_silence_the_bot() {
    let (double, _dir, _tactful) = started().await;
    double.fail_auth_once(DOCS);
    let q = ask_docs(&double, "<@7001> first");
    double
        .wait_until("the 401", |v| {
            v.calls.iter().any(|c| c.token == DOCS && c.status == 401)
        })
        .await;
    // The turn whose request met the 401 may have lost its placeholder or
    // its answer; the next one is answered.
    let _ = q;
    let q = ask_docs(&double, "<@7001> second");
    answered(&double, CHANNEL, q, DOCS, &format!("docs answers {q}")).await;
}

/// `/healthz` until `ok` holds for its status and body (60 s at most).
fn healthz_until(port: u16, ok: impl Fn(u16, &str) -> bool) -> (u16, String) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((status, body)) = crate::common::http_get(port, "/healthz")
            && ok(status, &body)
        {
            return (status, body);
        }
        assert!(std::time::Instant::now() < deadline, "/healthz never said so");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `tactful_platform_connected` for one persona's Discord bot.
fn connected_metric(port: u16, persona: &str) -> Option<f64> {
    let (_, body) = crate::common::http_get(port, "/metrics")?;
    let key = format!("tactful_platform_connected{{platform=\"discord\",persona=\"{persona}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(key.as_str()))
        .and_then(|v| v.trim().parse().ok())
}

/// docs's application lacks the Message Content intent: Discord closes
/// its gateway with 4014. That is said at WARN naming the intent, docs is
/// degraded in `/healthz` and 0 in the metric, the banner does not call
/// it connected; chef, whose application is right, works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_intent_is_said_and_shown_not_hidden_behind_a_healthy_banner() {
    let double = Double::start(bots()).await;
    double.disallow_message_content(DOCS);
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let (_tactful, logs) = crate::common::run_tactful_logged(
        dir.path(),
        &config(&double, metrics),
        &[("DOCS_TOKEN", DOCS), ("CHEF_TOKEN", CHEF)],
    );
    let warned = logs.wait_for("the 4014", |l| l.contains("WARN") && l.contains("4014"));
    assert!(
        warned.contains("docs") && warned.contains("Message Content intent"),
        "{warned}"
    );
    let banner = logs.wait_for("the banner", |l| l.contains("on Discord as"));
    assert!(
        banner.contains("chef-bot (chef)") && banner.contains("docs (not connected"),
        "{banner}"
    );
    let (status, body) = healthz_until(metrics, |_, b| b.contains("degraded"));
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("Discord docs") && body.contains("4014") && !body.contains("chef"),
        "{body}"
    );
    assert_eq!(connected_metric(metrics, "docs"), Some(0.0));
    assert_eq!(connected_metric(metrics, "chef"), Some(1.0));
    for l in logs.lines() {
        assert!(!l.contains(DOCS) && !l.contains(CHEF), "a token in the log: {l}");
    }
    let mut m = message(double.id(), CHANNEL, Some(GUILD), bob(), "<@7002> still there?");
    m.mentions = vec![mention(&user(CHEF_BOT, "chef-bot", true))];
    let c = double.post(&[CHEF], m);
    answered(&double, CHANNEL, c, CHEF, &format!("chef answers {c}")).await;
}

/// The gateway cannot be reached (a firewall, a wrong address): said at
/// WARN with the address, both bots degraded in `/healthz`, and the
/// banner says "connecting…", not "on Discord as …" by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_gateway_is_said_and_shown() {
    let double = Double::start(bots()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let nowhere = format!("ws://127.0.0.1:{}", free_port());
    let cfg = config(&double, metrics).replace(&double.gateway(), &nowhere);
    let (_tactful, logs) =
        crate::common::run_tactful_logged(dir.path(), &cfg, &[("DOCS_TOKEN", DOCS), ("CHEF_TOKEN", CHEF)]);
    let warned = logs.wait_for("the unreachable gateway", |l| {
        l.contains("WARN") && l.contains("cannot reach the gateway")
    });
    assert!(warned.contains(&nowhere), "{warned}");
    let banner = logs.wait_for("the banner", |l| l.contains("on Discord as"));
    assert!(
        !banner.contains("docs-bot") && !banner.contains("chef-bot") && banner.contains("not connected"),
        "{banner}"
    );
    let (status, body) = healthz_until(metrics, |_, b| {
        b.contains("Discord docs") && b.contains("Discord chef")
    });
    assert_eq!(status, 503, "{body}");
    assert_eq!(connected_metric(metrics, "docs"), Some(0.0));
}

/// Asked directly, docs's agent answers NO_REPLY: its bot puts 👀 on the
/// message (`PUT …/reactions/%F0%9F%91%80/@me`) and posts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_answered_with_silence_gets_a_reaction() {
    let (double, _dir, _tactful) = started().await;
    let q = ask_docs(&double, "<@7001> never mind");
    double
        .wait_until("docs reacts to the message", |v| {
            v.messages
                .iter()
                .any(|m| m.id == q && m.reactions == [(DOCS.to_owned(), "👀".to_owned())])
        })
        .await;
    let put = double
        .calls()
        .into_iter()
        .find(|c| c.method == "PUT" && c.path.contains("/reactions/"))
        .expect("the reaction call");
    assert_eq!(
        put.path,
        format!("channels/{CHANNEL}/messages/{q}/reactions/👀/@me")
    );
    assert_eq!(put.status, 204);
    assert!(answers(&double, CHANNEL, q).is_empty(), "nothing posted");
}

/// A placeholder in a thread posted by another process (the room's owner
/// that died mid-turn) or before a restart: the process finishing the
/// turn has no record of where it went, only the thread the store kept
/// with it, and edits and deletes it there (a thread's messages are
/// addressed through the thread, not the room's channel: Discord answers
/// 10008 Unknown Message otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placeholder_another_process_posted_in_a_thread_is_edited_and_deleted_there() {
    use tactful_core::{MsgId, PersonaId, RoomId, ThreadId};
    use tactful_discord::{DiscordPersona, DiscordPlatform, DiscordSettings, Pings};
    use tactful_runtime::{OutMessage, Platform};

    let double = Double::start(bots()).await;
    let platform = || {
        DiscordPlatform::new(DiscordSettings {
            api_url: format!("{}/discord-proxy", double.url),
            gateway_url: double.gateway(),
            everyone_addresses: false,
            pings: Pings::default(),
            personas: vec![DiscordPersona {
                id: PersonaId::new("docs"),
                token: DOCS.into(),
            }],
            max_backoff: Duration::from_secs(1),
        })
        .expect("built")
    };
    let (docs, room, thread) = (
        PersonaId::new("docs"),
        RoomId::new(format!("discord:{CHANNEL}")),
        ThreadId::new(THREAD.to_string()),
    );
    let post = |text: &'static str| OutMessage {
        persona: &docs,
        room: &room,
        thread: Some(&thread),
        text,
        reply_to: None,
        key: None,
        placeholder: true,
        follows: None,
        first_replied_to: None,
    };
    let dead = platform();
    let first = dead.send(post("…")).await.expect("posted");
    let second = dead.send(post("…")).await.expect("posted");
    let taker = platform();
    taker
        .edit(At::new(&docs, &room, Some(&thread)), &first, "the answer")
        .await
        .expect("edited in the thread");
    taker
        .delete(At::new(&docs, &room, Some(&thread)), &second)
        .await
        .expect("deleted in the thread");
    let shown = double.bot_messages(THREAD);
    let find = |id: &MsgId| shown.iter().find(|m| m.id.to_string() == id.as_str()).cloned();
    assert_eq!(find(&first).map(|m| m.content), Some("the answer".to_owned()));
    assert!(find(&second).is_none(), "deleted: {shown:?}");
    // Without the thread, the room's channel is asked, which does not
    // hold it.
    assert!(
        taker
            .edit(At::new(&docs, &room, None), &first, "again")
            .await
            .is_err()
    );
}

/// An eight-part answer, the process killed with `kill -9` while Discord
/// has shown its third part but not yet answered the call (the worst
/// moment), then started again on the same store: the answer is
/// finished, nothing is lost, and only that part can be shown twice
/// (twilight's request carries no nonce tactful could enforce).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_answer_cut_by_a_kill_is_finished_without_doubling_its_parts() {
    use common::split;
    let double = Double::start(bots()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let cfg = split::told_by_docs(&config(&double, free_port()).replace(
        r#"path = ":memory:""#,
        &format!("path = {:?}", store.display().to_string()),
    ));
    let in_flight = split::marker(50);
    double.stall_create_with(&in_flight);
    let first = start_tactful(dir.path(), &cfg);
    double
        .wait_until("docs through the gateway handshake", |_| double.connected(DOCS))
        .await;
    let mut m = message(
        double.id(),
        CHANNEL,
        Some(GUILD),
        alice(),
        "<@7001> the story please",
    );
    m.mentions = vec![mention(&user(DOCS_BOT, "docs-bot", true))];
    let q = double.post(&[DOCS, CHEF], m);
    double
        .wait_until("the third part shown", |v| {
            v.messages.iter().any(|m| m.content.contains(&in_flight))
        })
        .await;
    drop(first); // SIGKILL
    let posts = || -> Vec<String> {
        double
            .bot_messages(CHANNEL)
            .into_iter()
            .filter(|m| m.token.as_deref() == Some(DOCS) && !m.deleted)
            .map(|m| m.content)
            .collect()
    };
    assert!(!split::finished(&posts(), split::LINES), "killed before the end");
    let _second = start_tactful(dir.path(), &cfg);
    let last = split::marker(split::LINES - 1);
    double
        .wait_until("the answer finished", |v| {
            v.messages.iter().any(|m| m.content.contains(&last))
        })
        .await;
    split::once_but_the_part_in_flight(&posts(), split::LINES);
    assert_eq!(
        answers(&double, CHANNEL, q).len(),
        1,
        "the first part answers the question"
    );
}
