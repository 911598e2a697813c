//! tactful on Telegram, against an in-process Bot API double that follows
//! the documented JSON (`telegram_double`): two personas (two bots) and
//! two people in a forum supergroup, a DM, an ambient group and a group
//! where the bots may talk to each other; then a restart on the saved
//! update offset.

#![cfg(feature = "telegram")]

use crate::common;
use crate::telegram_double;
use crate::telegram_setup;

use std::time::Duration;

use common::{free_port, metric, settle};
use serde_json::{Value, json};
use telegram_double::{Bot, Double, Shown};
use telegram_setup::{AMBIENT, BANTER, CHEF, DOCS, TEAM, config, start_tactful};

fn bots() -> Vec<Bot> {
    vec![
        Bot {
            token: DOCS.into(),
            id: 7001,
            username: "docs_bot".into(),
            name: "Docs".into(),
        },
        Bot {
            token: CHEF.into(),
            id: 7002,
            username: "ChefBot".into(),
            name: "Chef".into(),
        },
    ]
}

fn alice() -> Value {
    json!({"id": 111, "is_bot": false, "first_name": "Alice", "username": "alice"})
}

fn bob() -> Value {
    json!({"id": 222, "is_bot": false, "first_name": "Bob"})
}

fn mallory() -> Value {
    json!({"id": 333, "is_bot": false, "first_name": "Mallory", "username": "mallory"})
}

fn group(id: i64) -> Value {
    json!({"id": id, "type": "supergroup", "title": format!("group {id}"), "is_forum": id == TEAM})
}

fn mention(offset: usize, length: usize) -> Value {
    json!([{"type": "mention", "offset": offset, "length": length}])
}

/// The bot messages of `chat` answering message `id`.
fn answers(double: &Double, chat: i64, id: i64) -> Vec<Shown> {
    double
        .bot_messages(chat)
        .into_iter()
        .filter(|m| m.reply_to == Some(id))
        .collect()
}

/// Waits until `token`'s bot answers message `id` in `chat` with `text`.
async fn answered(double: &Double, chat: i64, id: i64, token: &str, text: &str) -> Shown {
    let what = format!("{text:?} in reply to {id} in {chat}");
    double
        .wait_until(&what, |_, messages| {
            messages.iter().any(|m| {
                m.chat == chat
                    && m.reply_to == Some(id)
                    && m.token.as_deref() == Some(token)
                    && m.text == text
                    && !m.deleted
            })
        })
        .await;
    let found = answers(double, chat, id);
    assert_eq!(found.len(), 1, "answered once: {found:?}");
    found.into_iter().next().expect("the answer")
}

/// Waits until every bot is long-polling (so they know each other).
async fn polling(double: &Double) {
    double
        .wait_until("both bots polling", |calls, _| {
            [DOCS, CHEF]
                .iter()
                .all(|t| calls.iter().any(|c| c.token == *t && c.method == "getUpdates"))
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_groups_topics_dms_and_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let double = Double::start(bots()).await;
    double.reject_html_with("REJECT_HTML");
    let metrics = free_port();
    let cfg = config(&double.url, &store, metrics);
    let tactful = start_tactful(dir.path(), &cfg);
    polling(&double).await;
    let both = [DOCS, CHEF];
    let mut heard = 0.0;

    // A mention after emoji (offsets in UTF-16 units), heard by both bots
    // and handed in once.
    let q = double.post(
        &both,
        group(TEAM),
        alice(),
        json!({"text": "🎉🎉 @docs_bot how do I reset?", "entities": mention(5, 9)}),
    );
    heard += 1.0;
    let first = answered(&double, TEAM, q, DOCS, &format!("docs answers {q}")).await;
    // "typing…" showed while the turn ran.
    assert!(
        double.calls().iter().any(|c| c.method == "sendChatAction"
            && c.body["chat_id"] == TEAM
            && c.body["action"] == "typing"),
        "typing status"
    );

    // A text_mention (a user without a username, by id).
    let q = double.post(
        &both,
        group(TEAM),
        bob(),
        json!({"text": "Chef, taste this", "entities": [{"type": "text_mention", "offset": 0, "length": 4,
            "user": {"id": 7002, "is_bot": true, "first_name": "Chef"}}]}),
    );
    heard += 1.0;
    answered(&double, TEAM, q, CHEF, &format!("chef answers {q}")).await;

    // /command@bot.
    let q = double.post(
        &both,
        group(TEAM),
        alice(),
        json!({"text": "/reset@docs_bot", "entities": [{"type": "bot_command", "offset": 0, "length": 15}]}),
    );
    heard += 1.0;
    answered(&double, TEAM, q, DOCS, &format!("docs answers {q}")).await;

    // A mention in a photo's caption.
    let q = double.post(
        &both,
        group(TEAM),
        bob(),
        json!({"photo": [{"file_id": "p1", "file_unique_id": "u1", "width": 64, "height": 64}],
            "caption": "@ChefBot plating ok?", "caption_entities": mention(0, 8)}),
    );
    heard += 1.0;
    answered(&double, TEAM, q, CHEF, &format!("chef answers {q}")).await;

    // A reply to a persona's message, naming no one.
    let q = double.post(
        &both,
        group(TEAM),
        bob(),
        json!({"text": "thanks, and then?", "reply_to_message": {"message_id": first.id, "date": 0,
            "chat": group(TEAM), "from": {"id": 7001, "is_bot": true, "first_name": "Docs", "username": "docs_bot"},
            "text": first.text}}),
    );
    heard += 1.0;
    answered(&double, TEAM, q, DOCS, &format!("docs answers {q}")).await;

    // In a forum topic: the answer stays in the topic.
    let root = json!({"message_id": 7, "date": 0, "chat": group(TEAM), "from": alice(),
        "message_thread_id": 7, "forum_topic_created": {"name": "Deploys", "icon_color": 7322096}});
    let q = double.post(
        &both,
        group(TEAM),
        alice(),
        json!({"text": "@docs_bot in the topic?", "entities": mention(0, 9),
            "message_thread_id": 7, "is_topic_message": true, "reply_to_message": root}),
    );
    heard += 1.0;
    let in_topic = answered(&double, TEAM, q, DOCS, &format!("docs answers {q}")).await;
    assert_eq!(in_topic.thread, Some(7));

    // Someone not on the room's allowlist; chatter; a silent answer.
    let not_allowed = double.post(
        &both,
        group(TEAM),
        mallory(),
        json!({"text": "@docs_bot let me in", "entities": mention(0, 9)}),
    );
    let chatter = double.post(&both, group(TEAM), alice(), json!({"text": "lunch anyone?"}));
    let silent = double.post(
        &both,
        group(TEAM),
        alice(),
        json!({"text": "@docs_bot never mind", "entities": mention(0, 9)}),
    );
    heard += 3.0;
    // An edit is not a new message: the chatter edited into a question
    // is not heard again.
    double.edit(&both, group(TEAM), alice(), chatter, "@docs_bot lunch?");
    // The silent turn's placeholder was posted, then deleted, and Alice,
    // who asked, sees 👀 on her message (`setMessageReaction`).
    double
        .wait_until("the silent turn's placeholder deleted", |_, messages| {
            messages
                .iter()
                .any(|m| m.chat == TEAM && m.reply_to == Some(silent) && m.deleted)
        })
        .await;
    double
        .wait_until(
            "docs reacts to the message it chose not to answer",
            |_, messages| {
                messages.iter().any(|m| {
                    m.chat == TEAM && m.id == silent && m.reactions == [(DOCS.to_owned(), "👀".to_owned())]
                })
            },
        )
        .await;

    // Formatting Telegram refuses: sent again as plain text, not dropped.
    let q = double.post(
        &both,
        group(TEAM),
        alice(),
        json!({"text": "@docs_bot format please", "entities": mention(0, 9)}),
    );
    heard += 1.0;
    let plain = answered(&double, TEAM, q, DOCS, "Use **REJECT_HTML** carefully.").await;
    assert_eq!(plain.parse_mode, None);
    assert!(
        double.calls().iter().any(|c| c.status == 400
            && c.body["text"]
                .as_str()
                .is_some_and(|t| t.contains("<b>REJECT_HTML</b>"))),
        "the HTML was tried first"
    );

    // Flood control: the 429's retry_after is waited out, the answer
    // arrives once.
    double.flood_next_send(CHEF);
    let q = double.post(
        &both,
        group(TEAM),
        bob(),
        json!({"text": "@ChefBot one more", "entities": mention(0, 8)}),
    );
    heard += 1.0;
    answered(&double, TEAM, q, CHEF, &format!("chef answers {q}")).await;
    assert!(double.calls().iter().any(|c| c.token == CHEF && c.status == 429));

    // A DM: Alice's private chat with docs's bot.
    let dm_chat = json!({"id": 111, "type": "private", "first_name": "Alice", "username": "alice"});
    let q = double.post(&[DOCS], dm_chat, alice(), json!({"text": "psst, a question"}));
    heard += 1.0;
    double
        .wait_until("docs answers the DM", |_, messages| {
            messages.iter().any(|m| {
                m.chat == 111 && m.token.as_deref() == Some(DOCS) && m.text == format!("docs answers {q}")
            })
        })
        .await;

    // Ambient: both personas listen; a question is answered once (floor).
    double.post(
        &both,
        group(AMBIENT),
        alice(),
        json!({"text": "does anyone know where the keys are?"}),
    );
    // Banter: the bots may answer each other, three turns at most.
    double.post(&both, group(BANTER), bob(), json!({"text": "hello bots"}));
    heard += 2.0;
    settle(metrics, heard);
    let ambient = double.bot_messages(AMBIENT);
    assert_eq!(ambient.len(), 1, "one answer in the ambient group: {ambient:?}");
    let banter = double.bot_messages(BANTER);
    assert_eq!(banter.len(), 3, "max_bot_turns between the bots: {banter:?}");
    assert!(
        answers(&double, TEAM, not_allowed).is_empty(),
        "not on the allowlist"
    );
    assert!(
        answers(&double, TEAM, chatter).is_empty(),
        "chatter stays unanswered"
    );
    assert!(answers(&double, TEAM, silent).is_empty(), "silence");
    assert_eq!(metric(metrics, "tactful_messages_in_total"), Some(heard));

    // A restart (killed, not stopped): what was said meanwhile is answered,
    // nothing before it again.
    drop(tactful);
    let before = double.bot_messages(TEAM).len();
    let polls_before = double.calls().len();
    let q = double.post(
        &both,
        group(TEAM),
        alice(),
        json!({"text": "@docs_bot after the restart", "entities": mention(0, 9)}),
    );
    // Everything before it was confirmed by the next poll's offset.
    let waiting: Vec<Vec<i64>> = both.iter().map(|t| double.queued(t)).collect();
    assert!(waiting.iter().all(|w| w.len() == 1), "{waiting:?}");
    let _tactful = start_tactful(dir.path(), &cfg);
    answered(&double, TEAM, q, DOCS, &format!("docs answers {q}")).await;
    settle(metrics, 1.0);
    assert_eq!(double.bot_messages(TEAM).len(), before + 1, "nothing re-answered");
    // Each bot asked for updates after the ones it had: a saved offset.
    for (token, waiting) in both.iter().zip(&waiting) {
        let first_poll = double.calls()[polls_before..]
            .iter()
            .find(|c| c.token == *token && c.method == "getUpdates")
            .map(|c| c.body.clone())
            .expect("a poll after the restart");
        assert_eq!(
            first_poll["offset"].as_i64(),
            Some(waiting[0]),
            "{token}'s first poll after the restart: {first_poll}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_start_keeps_old_updates_as_history_whatever_their_number() {
    // More than one getUpdates brings (100): all of them from before the
    // first start are history, never answered.
    let dir = tempfile::tempdir().expect("temp dir");
    let double = Double::start(bots()).await;
    let old = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
        - 600;
    for n in 0..150 {
        double.post(
            &[DOCS],
            group(TEAM),
            alice(),
            json!({"text": format!("@docs_bot old question {n}"), "entities": mention(0, 9), "date": old}),
        );
    }
    let metrics = free_port();
    let _tactful = start_tactful(
        dir.path(),
        &config(&double.url, &dir.path().join("t.db"), metrics),
    );
    // Once everything was fetched, a new question is answered: by then
    // every old one was decided.
    double
        .wait_until("all 150 old updates fetched", |_, _| {
            double.queued(DOCS).is_empty()
        })
        .await;
    let q = double.post(
        &[DOCS],
        group(TEAM),
        alice(),
        json!({"text": "@docs_bot a new one", "entities": mention(0, 9)}),
    );
    answered(&double, TEAM, q, DOCS, &format!("docs answers {q}")).await;
    assert_eq!(
        double.bot_messages(TEAM).len(),
        1,
        "only the new question is answered"
    );
    assert_eq!(metric(metrics, "tactful_messages_in_total"), Some(1.0));
}

/// A restart before any update came (no offset saved yet) is not a first
/// start: a question asked while tactful was down is answered, since it
/// is newer than the bot's first poll (saved as `telegram:since:<bot>`).
/// It was taken for history, older than the new poller's start. Across
/// processes the same holds for a bot taken over, or reconnected after a
/// stall past its lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_asked_while_tactful_restarts_before_any_update_is_answered() {
    let dir = tempfile::tempdir().expect("temp dir");
    let double = Double::start(bots()).await;
    let cfg = config(&double.url, &dir.path().join("t.db"), free_port());
    let first = start_tactful(dir.path(), &cfg);
    double
        .wait_until("docs polling", |calls, _| {
            calls.iter().any(|c| c.token == DOCS && c.method == "getUpdates")
        })
        .await;
    drop(first);
    let q = double.post(
        &[DOCS],
        group(TEAM),
        alice(),
        json!({"text": "@docs_bot asked while you were away", "entities": mention(0, 9)}),
    );
    // Dated (in whole seconds) before the next start.
    let asked = unix_secs();
    while unix_secs() <= asked {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _second = start_tactful(dir.path(), &cfg);
    answered(&double, TEAM, q, DOCS, &format!("docs answers {q}")).await;
}

fn unix_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// docs's token was revoked (the double knows only chef's bot): the
/// refusal is said at WARN each time it is tried, `/healthz` is 503
/// `degraded` naming Telegram docs, `tactful_platform_connected` is 0 for
/// docs, and no token shows anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_is_said_and_shown_degraded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let double = Double::start(bots().into_iter().filter(|b| b.token == CHEF).collect()).await;
    let metrics = free_port();
    let cfg = config(&double.url, &dir.path().join("t.db"), metrics);
    let (_tactful, logs) =
        common::run_tactful_logged(dir.path(), &cfg, &[("DOCS_TOKEN", DOCS), ("CHEF_TOKEN", CHEF)]);
    let warned = logs.wait_for("docs's refusal", |l| {
        l.contains("WARN") && l.contains("Telegram:")
    });
    assert!(warned.contains("docs") && warned.contains("retrying"), "{warned}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let body = loop {
        let metric_of = |p: &str| {
            let (_, body) = common::http_get(metrics, "/metrics").unwrap_or_default();
            let key = format!("tactful_platform_connected{{platform=\"telegram\",persona=\"{p}\"}} ");
            body.lines()
                .find_map(|l| l.strip_prefix(key.as_str()).map(str::to_owned))
        };
        // (chef waits up to 30 s for docs to say who it is before it
        // polls: not waited for here.)
        if let Some((status, body)) = common::http_get(metrics, "/healthz")
            && status == 503
        {
            assert_eq!(metric_of("docs").as_deref(), Some("0"));
            break body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never degraded: {:?}",
            common::http_get(metrics, "/healthz")
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(
        body.starts_with("degraded") && body.contains("Telegram docs") && !body.contains("chef"),
        "{body}"
    );
    for l in logs.lines().iter().chain([&body]) {
        assert!(!l.contains(DOCS) && !l.contains(CHEF), "a token shown: {l}");
    }
}

/// A schedule posts into a Telegram group on its own: a plain
/// `sendMessage` from its persona's bot (no placeholder, no reply), and
/// the metric counts the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_posts_in_a_telegram_group() {
    let dir = tempfile::tempdir().expect("temp dir");
    let double = Double::start(bots()).await;
    let metrics = free_port();
    let cfg = format!(
        "{}\n[[schedule]]\nname = \"tick\"\ncron = \"* * * * * *\"\npersona = \"docs\"\nroom = \"tg:{TEAM}\"\nprompt = \"Post the tick.\"\n",
        config(&double.url, &dir.path().join("t.db"), metrics)
    );
    let _tactful = start_tactful(dir.path(), &cfg);
    double
        .wait_until("a scheduled post from docs", |_, messages| {
            messages.iter().any(|m| {
                m.chat == TEAM
                    && m.token.as_deref() == Some(DOCS)
                    && m.text.starts_with("docs answers schedule:tick@")
            })
        })
        .await;
    let post = double
        .bot_messages(TEAM)
        .into_iter()
        .find(|m| m.text.starts_with("docs answers schedule:tick@"))
        .expect("the post");
    assert_eq!(post.reply_to, None, "{post:?}");
    assert!(
        !double
            .calls()
            .iter()
            .any(|c| c.method == "sendMessage" && c.body["text"] == "…"),
        "no placeholder for a scheduled post"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while metric(metrics, "tactful_schedule_runs_total").unwrap_or(0.0) < 1.0 {
        assert!(std::time::Instant::now() < deadline, "the run is counted");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A reload that adds a persona with a Telegram token connects its bot
/// without a restart: the new bot polls and answers, the bot that was
/// already there goes on answering, once per message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_a_bot_without_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let double = Double::start(bots()).await;
    let full = config(&double.url, &dir.path().join("t.db"), free_port());
    let chef_block =
        "[[persona]]\nid = \"chef\"\nagent = \"chef\"\ntelegram = { token = \"${CHEF_TOKEN}\" }\n";
    assert!(full.contains(chef_block));
    let (tactful, logs) = common::run_tactful_logged(
        dir.path(),
        &full.replace(chef_block, ""),
        &[("DOCS_TOKEN", DOCS), ("CHEF_TOKEN", CHEF)],
    );
    double
        .wait_until("docs polling", |calls, _| {
            calls.iter().any(|c| c.token == DOCS && c.method == "getUpdates")
        })
        .await;
    let q = double.post(
        &[DOCS],
        group(TEAM),
        alice(),
        json!({"text": "@docs_bot one", "entities": mention(0, 9)}),
    );
    answered(&double, TEAM, q, DOCS, &format!("docs answers {q}")).await;
    assert!(
        !double.calls().iter().any(|c| c.token == CHEF),
        "chef is not there yet"
    );

    std::fs::write(dir.path().join("tactful.toml"), &full).expect("config");
    common::hup(tactful.id());
    let line = logs.wait_for("the reload", |l| l.contains("config reloaded"));
    assert!(line.contains(r#"personas_added=["chef"]"#), "{line}");
    assert!(line.contains(r#"platforms_reconnected=["telegram"]"#), "{line}");
    assert!(
        !line.contains(CHEF) && !line.contains(DOCS),
        "no token in the log: {line}"
    );
    polling(&double).await;

    let both = [DOCS, CHEF];
    let q = double.post(
        &both,
        group(TEAM),
        alice(),
        json!({"text": "@ChefBot soup?", "entities": mention(0, 8)}),
    );
    answered(&double, TEAM, q, CHEF, &format!("chef answers {q}")).await;
    let q = double.post(
        &both,
        group(TEAM),
        alice(),
        json!({"text": "@docs_bot two", "entities": mention(0, 9)}),
    );
    answered(&double, TEAM, q, DOCS, &format!("docs answers {q}")).await;
    // Nothing heard before the reload was answered again by the new
    // connection.
    let first = double
        .bot_messages(TEAM)
        .into_iter()
        .filter(|m| m.text.starts_with("docs answers"))
        .count();
    assert_eq!(first, 2, "{:?}", double.bot_messages(TEAM));
    assert!(
        logs.lines()
            .iter()
            .all(|l| !l.contains(CHEF) && !l.contains(DOCS))
    );
}

/// A store that cannot write for a while (another process holds the
/// SQLite file's write lock) holds Telegram back without losing a message
/// or stopping the poller: a question that arrives meanwhile is refused,
/// not confirmed to Telegram, handed in again once the store writes, and
/// answered once; later questions are answered, and the saved offset
/// moves on. (The poller used to stop for good: a refused message froze
/// every later save of its offset, and the message was never handed in
/// again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_write_holds_telegram_back_and_loses_nothing() {
    const GROUP: i64 = -1077;
    let double = Double::start(bots()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("state.db");
    let port = free_port();
    let _tactful = start_tactful(dir.path(), &config(&double.url, &db, port));
    polling(&double).await;
    let ask = |text: &str| {
        double.post(
            &[DOCS],
            group(GROUP),
            alice(),
            json!({"text": format!("@docs_bot {text}"), "entities": mention(0, 9)}),
        )
    };
    let first = ask("first");
    answered(&double, GROUP, first, DOCS, &format!("docs answers {first}")).await;

    let lock = rusqlite::Connection::open(&db).expect("opens");
    lock.execute_batch("BEGIN IMMEDIATE").expect("locks");
    // Chef's poller hands a message in first: its batch cannot be written
    // (taken, kept, retried), and the store is reported down.
    let to_chef = double.post(
        &[CHEF],
        group(GROUP),
        bob(),
        json!({"text": "@ChefBot dinner?", "entities": mention(0, 8)}),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while common::http_get(port, "/healthz").is_none_or(|(status, _)| status == 200) {
        assert!(
            std::time::Instant::now() < deadline,
            "the store never said it cannot write"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Then Docs's poller brings a question: refused, not confirmed.
    let meanwhile = ask("while the store is locked");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while metric(port, "tactful_refused_total").unwrap_or(0.0) < 1.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the question was never refused"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    lock.execute_batch("ROLLBACK").expect("unlocks");
    drop(lock);

    answered(
        &double,
        GROUP,
        meanwhile,
        DOCS,
        &format!("docs answers {meanwhile}"),
    )
    .await;
    answered(&double, GROUP, to_chef, CHEF, &format!("chef answers {to_chef}")).await;
    let after = ask("after");
    answered(&double, GROUP, after, DOCS, &format!("docs answers {after}")).await;
    // The offset saved covers the last question: the poller moved on.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let offset: Option<i64> = tactful_store::Reader::open(&tactful_store::Location::File(db.clone()))
            .ok()
            .and_then(|r| r.state_with_prefix("telegram:offset:7001", 1).ok())
            .and_then(|rows| rows.into_iter().next())
            .and_then(|(_, v)| v.parse().ok());
        let confirmed = double.calls().iter().any(|c| {
            c.token == DOCS
                && c.method == "getUpdates"
                && c.body["offset"].as_i64() == offset
                && offset.is_some()
        });
        if offset.is_some_and(|o| o >= 3) && confirmed {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the offset stayed at {offset:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A four-part answer, the process killed with `kill -9` while Telegram
/// has shown its third part but not yet answered the call (the worst
/// moment), then started again on the same store: the answer is finished,
/// nothing is lost, and only that part can be shown twice (the Bot API
/// has no idempotency key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_answer_cut_by_a_kill_is_finished_without_doubling_its_parts() {
    use common::split;
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let double = Double::start(bots()).await;
    let cfg = split::told_by_docs(&config(&double.url, &store, free_port()));
    let in_flight = split::marker(100);
    double.stall_send_with(&in_flight);
    let first = start_tactful(dir.path(), &cfg);
    polling(&double).await;
    let q = double.post(
        &[DOCS, CHEF],
        group(TEAM),
        alice(),
        json!({"text": "@docs_bot the story please", "entities": mention(0, 9)}),
    );
    double
        .wait_until("the third part shown", |_, messages| {
            messages.iter().any(|m| m.text.contains(&in_flight))
        })
        .await;
    drop(first); // SIGKILL
    let posts = || -> Vec<String> {
        double
            .bot_messages(TEAM)
            .into_iter()
            .filter(|m| m.token.as_deref() == Some(DOCS))
            .map(|m| m.text)
            .collect()
    };
    assert!(!split::finished(&posts(), split::LINES), "killed before the end");
    let _second = start_tactful(dir.path(), &cfg);
    double
        .wait_until("the answer finished", |_, messages| {
            messages
                .iter()
                .any(|m| m.text.contains(&split::marker(split::LINES - 1)))
        })
        .await;
    let posts = posts();
    split::once_but_the_part_in_flight(&posts, split::LINES);
    assert_eq!(
        answers(&double, TEAM, q).len(),
        1,
        "the first part answers the question"
    );
}
