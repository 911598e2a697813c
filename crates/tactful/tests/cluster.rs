//! Three `tactful run` processes on one PostgreSQL database, with Telegram
//! played by an in-process Bot API double (`telegram_double`): the rooms
//! are spread over the three, one of them polls the bots, and `kill -9`
//! of the poller or of a busy room's owner, again and again while people
//! write, loses nothing and answers nothing twice: the poller's lease and
//! the dead process's rooms move to the others. A process stopped past its
//! lease (SIGSTOP: a network cut or a long pause, as the others see it) is
//! fenced out when it wakes and posts nothing late.

#![cfg(feature = "telegram")]

use crate::cluster_setup;
use crate::common;
use crate::telegram_double;

use std::time::{Duration, Instant};

use cluster_setup::{
    DOCS_ACCOUNT, TOKEN, alice, bot, config, config_with_web, group, holder, shares, wait_db,
};
use common::{
    Logs, Reaper, Socket, enter, free_port, run_tactful, run_tactful_logged, say, signal, spawn_with,
};
use serde_json::{Value, json};
use tactful_core::RoomId;
use tactful_store::partition_of;
use tactful_store::testing::Schema;
use telegram_double::Double;

/// The groups people write in.
const GROUPS: [i64; 6] = [-3001, -3002, -3003, -3004, -3005, -3006];
/// Kills, alternating between the poller and a busy room's owner.
const KILLS: usize = 4;

struct Node {
    _dir: tempfile::TempDir,
    process: Reaper,
}

fn start(url: &str, api_url: &str) -> Node {
    let dir = tempfile::tempdir().expect("temp dir");
    let process = run_tactful(dir.path(), &config(url, api_url, 2, 50), &[("DOCS_TOKEN", TOKEN)]);
    Node { _dir: dir, process }
}

/// The bot's replies to message `id` of `chat`, but for bare placeholders
/// ("…") whose id no process learnt: Telegram sends are not idempotent,
/// so a `kill -9` between a placeholder's post and its record leaves it
/// behind (see RELIABILITY.md). Placeholders on record are deleted by the
/// room's next owner and count here until they are.
fn answers(double: &Double, chat: i64, id: i64) -> Vec<String> {
    double
        .bot_messages(chat)
        .into_iter()
        .filter(|m| m.reply_to == Some(id) && !(m.text == "…" && orphan(double, chat, m.id)))
        .map(|m| m.text)
        .collect()
}

/// Whether the bot message `id` of `chat` is a placeholder no process
/// learnt the id of: never edited nor deleted, posted by a process that
/// was killed (the double saw no later call of its from that moment).
fn orphan(double: &Double, chat: i64, id: i64) -> bool {
    !double.calls().iter().any(|c| {
        matches!(c.method.as_str(), "editMessageText" | "deleteMessage")
            && c.body["chat_id"].as_i64() == Some(chat)
            && c.body["message_id"].as_i64() == Some(id)
    })
}

/// Waits (60 s at most) until every question of `asked` has its answer
/// and nothing else; names those that never do.
async fn answered_all(schema: &Schema, double: &Double, asked: &[(i64, i64)], when: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let missing: Vec<&(i64, i64)> = asked
            .iter()
            .filter(|(chat, id)| answers(double, *chat, *id) != [format!("docs answers {id}")])
            .collect();
        if missing.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for c in double
                .calls()
                .iter()
                .filter(|c| c.method == "getUpdates")
                .rev()
                .take(8)
            {
                eprintln!("getUpdates {} -> {}", c.body, c.status);
            }
            for (chat, id) in &missing {
                let row = |sql: String| schema.column(&sql).unwrap_or_default();
                let replies: Vec<String> = double
                    .bot_messages(*chat)
                    .into_iter()
                    .filter(|m| m.reply_to == Some(*id))
                    .map(|m| m.text)
                    .collect();
                eprintln!(
                    "{chat}/{id}: replies {replies:?}, inbox decided {:?}, decisions {:?}, in messages {:?}",
                    row(format!(
                        "SELECT decided::text FROM inbox WHERE room = 'tg:{chat}' AND id = '{id}'"
                    )),
                    row(format!(
                        "SELECT outcome || ' ' || reason FROM decisions WHERE room = 'tg:{chat}' AND msg = '{id}'"
                    )),
                    row(format!(
                        "SELECT count(*) FROM messages WHERE room = 'tg:{chat}' AND id = '{id}'"
                    )),
                );
            }
            panic!("unanswered {when}: {missing:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_killed_in_turn_lose_nothing_and_answer_once() {
    let Some(schema) = Schema::new() else { return };
    let double = Double::start(vec![bot()]).await;
    let mut nodes: Vec<Node> = (0..3).map(|_| start(&schema.url, &double.url)).collect();
    let pids = |nodes: &[Node]| -> Vec<u32> { nodes.iter().map(|n| n.process.id()).collect() };
    wait_db("three processes sharing the partitions", || {
        let s = shares(&schema);
        s.len() == 3 && s.iter().sum::<usize>() == 256
    });
    wait_db("one process polling the bot", || {
        holder(&schema, DOCS_ACCOUNT).is_some_and(|p| pids(&nodes).contains(&p))
            && double.calls().iter().any(|c| c.method == "getUpdates")
    });

    // A busy room: the one people write in most.
    let busy = GROUPS[0];
    let busy_key = format!("partition:{}", partition_of(&RoomId::new(format!("tg:{busy}"))));
    let mut asked: Vec<(i64, i64)> = Vec::new();
    let mut n = 0;
    let mut ask = |double: &Double, asked: &mut Vec<(i64, i64)>| {
        for &chat in GROUPS.iter().chain([busy, busy].iter()) {
            n += 1;
            let text = format!("@docs_bot question {n}");
            let id = double.post(
                &[TOKEN],
                group(chat),
                alice(),
                json!({"text": text, "entities": [{"type": "mention", "offset": 0, "length": 9}]}),
            );
            asked.push((chat, id));
        }
    };
    // Answered before any kill: the poller has saved where it is (a bot's
    // very first poll would take what came before it as history).
    ask(&double, &mut asked);
    let first: Vec<(i64, i64)> = asked.clone();
    answered_all(&schema, &double, &first, "before any kill").await;
    for kill in 0..KILLS {
        ask(&double, &mut asked);
        // The victim: the poller, then the busy room's owner, in turn.
        let key = if kill % 2 == 0 {
            DOCS_ACCOUNT
        } else {
            busy_key.as_str()
        };
        let victim = holder(&schema, key).expect("held");
        let at = nodes
            .iter()
            .position(|n| n.process.id() == victim)
            .expect("one of ours");
        let mut dead = nodes.remove(at);
        dead.process.kill().expect("kill -9");
        let _ = dead.process.wait();
        // People keep writing while it is dead; a new process comes up.
        ask(&double, &mut asked);
        nodes.push(start(&schema.url, &double.url));
        let expected: Vec<(i64, i64)> = asked.clone();
        answered_all(&schema, &double, &expected, &format!("after kill {kill}")).await;
        let now_held = holder(&schema, key);
        assert_ne!(now_held, Some(victim), "the lease moved off the dead process");
    }
    // Everything answered exactly once, and nothing else said.
    for (chat, id) in &asked {
        assert_eq!(
            answers(&double, *chat, *id),
            [format!("docs answers {id}")],
            "question {id} in {chat}"
        );
    }
    let said: Vec<telegram_double::Shown> = GROUPS.iter().flat_map(|c| double.bot_messages(*c)).collect();
    let orphans = said
        .iter()
        .filter(|m| m.text == "…" && orphan(&double, m.chat, m.id))
        .count();
    eprintln!("placeholders left by a kill during their post: {orphans}");
    assert_eq!(said.len() - orphans, asked.len(), "no reply posted twice");
    let decisions = schema
        .column("SELECT count(*) FROM decisions WHERE outcome = 'reply'")
        .expect("counts");
    assert_eq!(
        decisions,
        [Some(asked.len().to_string())],
        "each message decided once"
    );
}

/// The leases `pid` holds, as (key, epoch).
fn leases_of(schema: &Schema, pid: u32) -> Vec<(String, i64)> {
    schema
        .column(&format!(
            "SELECT l.key || ' ' || l.epoch FROM leases l JOIN members m ON m.id = l.holder
             WHERE m.about LIKE '% pid {pid}' AND l.expires_at > now()"
        ))
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .filter_map(|row| {
            let (key, epoch) = row.rsplit_once(' ')?;
            Some((key.to_owned(), epoch.parse().ok()?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_stopped_past_its_lease_is_fenced_out_when_it_wakes() {
    let Some(schema) = Schema::new() else { return };
    let double = Double::start(vec![bot()]).await;
    // Slow answers: the owner is stopped while its agent is still thinking.
    let start = || -> (tempfile::TempDir, Reaper, Logs) {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = config(&schema.url, &double.url, 2, 2_500);
        let (process, logs) = run_tactful_logged(dir.path(), &config, &[("DOCS_TOKEN", TOKEN)]);
        (dir, process, logs)
    };
    let nodes = [start(), start()];
    wait_db("two processes sharing the partitions", || {
        let s = shares(&schema);
        s.len() == 2 && s.iter().sum::<usize>() == 256
    });
    // Polling, not only leased: a first poll takes a question dated before
    // the poller started as history, unanswered (seen in CI).
    wait_db("the bot polled", || {
        double.calls().iter().any(|c| c.method == "getUpdates")
    });
    let ask = |chat: i64, n: u32| -> (i64, i64) {
        let id = double.post(
            &[TOKEN],
            group(chat),
            alice(),
            json!({"text": format!("@docs_bot question {n}"), "entities": [{"type": "mention", "offset": 0, "length": 9}]}),
        );
        (chat, id)
    };
    // Answered before the stop: the poller has saved where it is.
    let room = GROUPS[0];
    let warm = ask(room, 0);
    answered_all(&schema, &double, &[warm], "before the stop").await;

    let key = format!("partition:{}", partition_of(&RoomId::new(format!("tg:{room}"))));
    let victim = holder(&schema, &key).expect("the room has an owner");
    let (_, _, victim_logs) = nodes
        .iter()
        .find(|(_, p, _)| p.id() == victim)
        .expect("one of ours");
    let question = ask(room, 1);
    wait_db("the owner decided and asked its agent", || {
        schema
            .column(&format!(
                "SELECT count(*) FROM calls WHERE room = 'tg:{room}' AND msg = '{}' AND ended IS NULL",
                question.1
            ))
            .is_ok_and(|c| c == [Some("1".to_owned())])
    });
    let held_at_stop = leases_of(&schema, victim);
    signal(victim, "STOP");
    wait_db("the room moved to the other process", || {
        holder(&schema, &key).is_some_and(|p| p != victim)
    });
    // Asked while the old owner sleeps: the new one answers.
    let while_stopped = ask(room, 2);
    answered_all(
        &schema,
        &double,
        &[question, while_stopped],
        "while the owner is stopped",
    )
    .await;

    signal(victim, "CONT");
    // Once it has seen its leases gone, it has dropped the room's turns: a
    // reply it was about to post is not posted now or later.
    victim_logs.wait_for("the woken process handing its rooms over", |l| {
        l.contains("rooms handed over") && l.contains("lost=true")
    });
    wait_db("the woken process sharing the partitions again", || {
        let s = shares(&schema);
        s.len() == 2 && s.iter().sum::<usize>() == 256
    });
    for (key, epoch) in leases_of(&schema, victim) {
        if let Some((_, old)) = held_at_stop.iter().find(|(k, _)| *k == key) {
            assert!(epoch > *old, "{key} held again under a new epoch, not {old}");
        }
    }
    let after = ask(room, 3);
    answered_all(&schema, &double, &[after], "after the wake").await;
    for (chat, id) in [warm, question, while_stopped, after] {
        let answers: Vec<String> = double
            .bot_messages(chat)
            .into_iter()
            .filter(|m| m.reply_to == Some(id))
            .map(|m| m.text)
            .collect();
        assert_eq!(
            answers,
            [format!("docs answers {id}")],
            "question {id} answered once"
        );
    }
    assert_eq!(double.bot_messages(room).len(), 4, "nothing posted late");
}

/// The lobby's lease key, the pid of its owner, and which of `services`
/// that is.
fn lobby_owner(schema: &Schema, services: &[common::Service]) -> (String, u32, usize) {
    let key = format!("partition:{}", partition_of(&RoomId::new("lobby")));
    let owner = holder(schema, &key).expect("the lobby has an owner");
    let at = services
        .iter()
        .position(|s| s.child.id() == owner)
        .expect("one of ours");
    (key, owner, at)
}

/// What one person's page has seen of the lobby: each message by id with
/// its latest text, and the notes on them.
#[derive(Default)]
struct Page {
    messages: Vec<Value>,
    notes: Vec<Value>,
    shown_twice: Vec<String>,
}

impl Page {
    /// Reads `ws` until `done` holds (30 s at most).
    async fn until(&mut self, ws: &mut Socket, what: &str, done: impl Fn(&Page) -> bool) {
        use futures::StreamExt;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !done(self) {
            let next = tokio::time::timeout_at(deadline, ws.next()).await;
            let Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Text(t)))) = next else {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "never {what}: {}",
                    self.summary()
                );
                continue;
            };
            let v: Value = serde_json::from_str(&t).expect("json");
            match v["type"].as_str() {
                Some("message") => {
                    let m = v["message"].clone();
                    if self.messages.iter().any(|k| k["id"] == m["id"]) {
                        self.shown_twice.push(m["id"].to_string());
                    }
                    self.messages.push(m);
                }
                Some("edit") => {
                    if let Some(m) = self.messages.iter_mut().find(|m| m["id"] == v["id"]) {
                        m["text"] = v["text"].clone();
                    }
                }
                Some("why") => self.notes.push(v),
                // A placeholder the room's new owner cleaned up.
                Some("delete") => self.messages.retain(|m| m["id"] != v["id"]),
                Some("history") => {
                    for m in v["messages"].as_array().into_iter().flatten() {
                        self.messages.push(m.clone());
                    }
                }
                _ => {}
            }
        }
    }

    /// Each message and note seen, a line each.
    fn summary(&self) -> String {
        let messages = self.messages.iter().map(|m| {
            format!(
                "{} {} {}: {} (reply to {})",
                m["time"], m["id"], m["sender"]["name"], m["text"], m["reply_to"]
            )
        });
        let notes = self.notes.iter().map(|n| {
            format!(
                "note on {}: {} {}",
                n["msg"], n["why"]["persona"], n["why"]["state"]
            )
        });
        messages.chain(notes).collect::<Vec<_>>().join("\n")
    }

    fn id_of(&self, text: &str) -> Option<String> {
        self.messages
            .iter()
            .find(|m| m["text"] == text)
            .and_then(|m| m["id"].as_str().map(str::to_owned))
    }

    /// The answers to `id` (placeholders grown into them count once).
    fn answers(&self, id: &str) -> Vec<String> {
        self.messages
            .iter()
            .filter(|m| m["reply_to"] == id && m["sender"]["bot"] == true)
            .filter_map(|m| m["text"].as_str().map(str::to_owned))
            .collect()
    }

    fn answered_note(&self, id: &str) -> bool {
        self.notes
            .iter()
            .any(|n| n["msg"] == id && n["why"]["persona"] == "docs" && n["why"]["state"] == "answered")
    }
}

/// A person in the lobby of one process's web room.
struct Person {
    ws: Socket,
    page: Page,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_on_any_process_sees_the_web_room_as_decided_on_another() {
    let Some(schema) = Schema::new() else { return };
    let double = Double::start(vec![bot()]).await;
    let start = |dir: &std::path::Path| {
        let cfg = dir.join("tactful.toml");
        let body = config_with_web(&schema.url, &double.url, 2, 50, free_port());
        std::fs::write(&cfg, body).expect("config");
        spawn_with(
            &["run", "-c", cfg.to_str().expect("utf-8")],
            &[("DOCS_TOKEN", TOKEN)],
        )
    };
    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().expect("dir")).collect();
    let mut services: Vec<common::Service> = dirs[..3].iter().map(|d| start(d.path())).collect();
    wait_db("three processes sharing the partitions", || {
        let s = shares(&schema);
        s.len() == 3 && s.iter().sum::<usize>() == 256
    });
    let mut people = Vec::new();
    for (svc, name) in services.iter().zip(["Alice", "Bob", "Carol"]) {
        people.push(Person {
            ws: enter(&svc.ws_url, name).await,
            page: Page::default(),
        });
    }
    let ask = |text: &str| json!({ "type": "say", "room": "lobby", "text": text, "mentions": ["docs"] });

    // Each person asks on their own process; whichever owns the lobby
    // answers; everyone sees every question and answer once, with the
    // owner's note that it answered.
    let texts = [
        "@Docs question from Alice",
        "@Docs question from Bob",
        "@Docs question from Carol",
    ];
    for (p, text) in people.iter_mut().zip(texts) {
        say(&mut p.ws, ask(text)).await;
    }
    for p in &mut people {
        p.page
            .until(&mut p.ws, "every question answered", |page| {
                texts.iter().all(|t| {
                    page.id_of(t).is_some_and(|id| {
                        page.answers(&id) == [format!("docs answers {id}")] && page.answered_note(&id)
                    })
                })
            })
            .await;
    }
    let ids: Vec<String> = texts
        .iter()
        .map(|t| people[0].page.id_of(t).expect("shown"))
        .collect();
    let mut distinct = ids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        3,
        "messages made on different processes have different ids: {ids:?}"
    );
    for p in &people {
        assert!(
            p.page.shown_twice.is_empty(),
            "shown twice: {:?}",
            p.page.shown_twice
        );
        for (text, id) in texts.iter().zip(&ids) {
            assert_eq!(p.page.id_of(text).as_ref(), Some(id), "one id everywhere");
            assert_eq!(
                p.page.answers(id),
                [format!("docs answers {id}")],
                "answered once"
            );
        }
    }

    // The lobby's owner dies; a new process comes up, its person joins
    // and sees the room as it was; a question asked now is answered by
    // the lobby's new owner, seen by everyone still here.
    let (key, owner, at) = lobby_owner(&schema, &services);
    let mut dead = services.remove(at);
    people.remove(at);
    dead.child.kill().expect("kill -9");
    let _ = dead.child.wait();
    services.push(start(dirs[3].path()));
    let mut dave = Person {
        ws: enter(&services[2].ws_url, "Dave").await,
        page: Page::default(),
    };
    dave.page
        .until(&mut dave.ws, "the history", |page| {
            ids.iter()
                .all(|id| page.answers(id) == [format!("docs answers {id}")])
        })
        .await;
    let after = "@Docs question after the owner died";
    say(&mut people[0].ws, ask(after)).await;
    people.push(dave);
    for p in &mut people {
        p.page
            .until(&mut p.ws, "the question after the kill answered", |page| {
                page.id_of(after)
                    .is_some_and(|id| page.answers(&id) == [format!("docs answers {id}")])
            })
            .await;
        let id = p.page.id_of(after).expect("shown");
        assert_eq!(
            p.page.answers(&id),
            [format!("docs answers {id}")],
            "answered once"
        );
        assert!(
            p.page.shown_twice.is_empty(),
            "shown twice: {:?}",
            p.page.shown_twice
        );
    }
    wait_db("the lobby owned again", || {
        holder(&schema, &key).is_some_and(|p| p != owner)
    });
}

/// Two processes with the web room, an ambient persona (scribe: batches
/// of the lobby every 8 s) and a schedule (crier: every 3 s in the lobby).
fn ambient_config(url: &str, port: u16) -> String {
    format!(
        r##"
{cluster}

[platforms.web]
listen = "127.0.0.1:{port}"

[[persona]]
id = "scribe"
agent = "scribe"

[[persona]]
id = "crier"
agent = "crier"

[agents.scribe]
kind = "script"
rules = [{{ when = "", reply = "scribe read the batch" }}]

[agents.crier]
kind = "script"
rules = [{{ when = "", reply = "crier: {{msg_id}}" }}]

[rooms.default]
mode = "mention"
rate_limit = "off"

[rooms.default.personas.scribe]
mode = "ambient"

[rooms.default.personas.scribe.ambient]
flush_seconds = 8
jitter = 0
flush_messages = 10
cooldown_seconds = 0

[[schedule]]
name = "tick"
cron = "*/3 * * * * *"
persona = "crier"
room = "lobby"
prompt = "tick"
"##,
        cluster = cluster_setup::cluster_toml(url, 2),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambient_batches_and_schedules_carry_on_when_their_owner_dies() {
    let Some(schema) = Schema::new() else { return };
    let start = |dir: &std::path::Path| {
        let cfg = dir.join("tactful.toml");
        std::fs::write(&cfg, ambient_config(&schema.url, free_port())).expect("config");
        spawn_with(&["run", "-c", cfg.to_str().expect("utf-8")], &[])
    };
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().expect("dir")).collect();
    let mut services: Vec<common::Service> = dirs.iter().map(|d| start(d.path())).collect();
    wait_db("two processes sharing the partitions", || {
        let s = shares(&schema);
        s.len() == 2 && s.iter().sum::<usize>() == 256
    });
    let (key, owner, at) = lobby_owner(&schema, &services);
    let survivor = services[1 - at].ws_url.clone();
    let mut alice = Person {
        ws: enter(&survivor, "Alice").await,
        page: Page::default(),
    };
    // The schedule runs on the lobby's owner.
    alice
        .page
        .until(&mut alice.ws, "a tick", |page| {
            page.messages.iter().any(|m| m["sender"]["id"] == "crier")
        })
        .await;

    // Two messages for the scribe's batch, due 8 s after the first.
    for text in ["the build is green again", "lunch at noon?"] {
        say(
            &mut alice.ws,
            json!({ "type": "say", "room": "lobby", "text": text }),
        )
        .await;
    }
    alice
        .page
        .until(&mut alice.ws, "both messages shown", |page| {
            page.id_of("lunch at noon?").is_some()
        })
        .await;
    let batch: Vec<String> = ["the build is green again", "lunch at noon?"]
        .iter()
        .map(|t| alice.page.id_of(t).expect("shown"))
        .collect();
    wait_db("the owner saved the scribe's buffer", || {
        schema
            .column("SELECT json FROM snapshots WHERE room = 'lobby'")
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .any(|json| batch.iter().all(|id| json.contains(id.as_str())))
    });
    let mut dead = services.remove(at);
    dead.child.kill().expect("kill -9");
    let _ = dead.child.wait();
    let killed_at = std::time::SystemTime::now();

    // The batch flushes on the new owner, once; the ticks go on.
    let ticks_after = |page: &Page| -> usize {
        page.messages
            .iter()
            .filter(|m| m["sender"]["id"] == "crier")
            .filter_map(|m| m["time"].as_str())
            .filter_map(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .filter(|t| std::time::SystemTime::from(*t) > killed_at)
            .count()
    };
    alice
        .page
        .until(
            &mut alice.ws,
            "the batch read and two ticks by the new owner",
            |page| {
                page.messages.iter().any(|m| m["text"] == "scribe read the batch") && ticks_after(page) >= 2
            },
        )
        .await;
    assert!(
        holder(&schema, &key).is_some_and(|p| p != owner),
        "the lobby moved"
    );
    let scribe: Vec<&Value> = alice
        .page
        .messages
        .iter()
        .filter(|m| m["sender"]["id"] == "scribe")
        .collect();
    assert_eq!(scribe.len(), 1, "the batch read once: {}", alice.page.summary());
    let batch_calls = schema
        .column("SELECT count(*) FROM calls WHERE room = 'lobby' AND persona = 'scribe' AND kind = 'ambient'")
        .expect("counts");
    assert_eq!(
        batch_calls,
        [Some("1".to_owned())],
        "one batch call, on the new owner"
    );
    let mut runs: Vec<&str> = alice
        .page
        .messages
        .iter()
        .filter(|m| m["sender"]["id"] == "crier")
        .filter_map(|m| m["text"].as_str())
        .collect();
    let all = runs.len();
    runs.sort_unstable();
    runs.dedup();
    assert_eq!(
        runs.len(),
        all,
        "each run of the schedule posted once: {}",
        alice.page.summary()
    );
    assert!(alice.page.shown_twice.is_empty(), "{:?}", alice.page.shown_twice);
}
