//! The console with several processes on one PostgreSQL database (two
//! `tactful run` processes, Telegram played by the Bot API double): a
//! room policy set in the console of a process that does not own the room
//! decides in its owner, a console shows live what happens in rooms
//! another process owns, and the rooms listing says which process owns
//! each room and since when.

#![cfg(feature = "telegram")]

use crate::cluster_setup;
use crate::common;
use crate::telegram_double;

use cluster_setup::{TOKEN, alice, bot, config, group, holder, mention, shares, wait_db};
use common::sse::{live, read_until};
use common::{Reaper, free_port, run_tactful};
use serde_json::{Value, json};
use tactful_core::RoomId;
use tactful_store::partition_of;
use tactful_store::testing::Schema;
use telegram_double::Double;

/// The groups people write in.
const GROUPS: [i64; 2] = [-5001, -5002];
const CONSOLE_TOKEN: &str = "cluster-console-token";

/// Two processes, each with its console.
struct Two {
    /// Each process, with its console's port.
    nodes: Vec<(tempfile::TempDir, Reaper, u16)>,
}

impl Two {
    fn start(schema: &Schema, double: &Double) -> Two {
        let nodes: Vec<(tempfile::TempDir, Reaper, u16)> = (0..2)
            .map(|_| {
                let port = free_port();
                let dir = tempfile::tempdir().expect("temp dir");
                let config = format!(
                    "{}\n[server]\nlisten = \"127.0.0.1:{port}\"\nconsole_token = \"${{CONSOLE_TOKEN}}\"\n",
                    config(&schema.url, &double.url, 2, 0)
                );
                let process = run_tactful(
                    dir.path(),
                    &config,
                    &[("DOCS_TOKEN", TOKEN), ("CONSOLE_TOKEN", CONSOLE_TOKEN)],
                );
                (dir, process, port)
            })
            .collect();
        wait_db("two processes sharing the partitions", || {
            let s = shares(schema);
            s.len() == 2 && s.iter().sum::<usize>() == 256
        });
        Two { nodes }
    }

    /// The consoles of `room`'s owner and of the other process.
    fn consoles_of(&self, schema: &Schema, room: &str) -> (u16, u16) {
        let key = format!("partition:{}", partition_of(&RoomId::new(room)));
        wait_db("the room's owner is one of ours", || {
            holder(schema, &key).is_some_and(|p| self.nodes.iter().any(|n| n.1.id() == p))
        });
        let owner = holder(schema, &key).expect("owned");
        let at = self
            .nodes
            .iter()
            .position(|n| n.1.id() == owner)
            .expect("one of ours");
        (self.nodes[at].2, self.nodes[1 - at].2)
    }

    /// The pid of the process whose console is on `port`.
    fn pid_at(&self, port: u16) -> u32 {
        self.nodes
            .iter()
            .find(|n| n.2 == port)
            .map(|n| n.1.id())
            .expect("one of ours")
    }
}

/// The bot's replies to message `id` of `chat`.
fn answers(double: &Double, chat: i64, id: i64) -> Vec<String> {
    double
        .bot_messages(chat)
        .into_iter()
        .filter(|m| m.reply_to == Some(id) && m.text != "…")
        .map(|m| m.text)
        .collect()
}

/// A console shows live what happens in a room another process owns: its
/// live transcript opened on the process that does not own the group
/// first names the owner (a `feed` line), then shows the question, the
/// owner's decision, its reply and its delivery, as they happen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_shows_live_the_rooms_another_process_owns() {
    let Some(schema) = Schema::new() else { return };
    let double = Double::start(vec![bot()]).await;
    let two = Two::start(&schema, &double);
    let chat = GROUPS[1];
    let room = format!("tg:{chat}");
    let (at_owner, elsewhere) = two.consoles_of(&schema, &room);
    let owner = two.pid_at(at_owner);
    let feed = live(elsewhere, CONSOLE_TOKEN, &format!("room={room}"));
    read_until(&feed, "the owner naming itself", |v| {
        v["type"] == "feed"
            && v["process"]
                .as_str()
                .is_some_and(|p| p.contains(&format!("pid {owner}")))
    });
    let id = mention(&double, chat, "where is the spare key?");
    let msg = id.to_string();
    let seen = read_until(&feed, "the reply delivered", |v| v["type"] == "delivered");
    let kinds: Vec<&str> = seen.iter().filter_map(|v| v["type"].as_str()).collect();
    assert!(
        seen.iter()
            .any(|v| v["type"] == "message" && v["msg"] == msg.as_str()),
        "the question: {kinds:?}"
    );
    assert!(
        seen.iter()
            .any(|v| v["type"] == "decision" && v["msg"] == msg.as_str() && v["outcome"] == "reply"),
        "the owner's decision: {seen:#?}"
    );
    assert!(
        seen.iter()
            .any(|v| v["type"] == "send" && v["text"] == format!("docs answers {id}")),
        "the reply: {kinds:?}"
    );
    assert!(
        seen.iter().all(|v| v["room"] == room.as_str()),
        "only this room: {seen:#?}"
    );
    assert_eq!(answers(&double, chat, id), [format!("docs answers {id}")]);
}

/// A room policy set in one process's console decides in the room's
/// owner, another process: `mode = "all"` set through the console of the
/// process that does not own the group makes its owner answer a question
/// nobody addressed; reverted there, it stops again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_set_in_one_consoles_applies_in_the_rooms_owner() {
    let Some(schema) = Schema::new() else { return };
    let double = Double::start(vec![bot()]).await;
    let two = Two::start(&schema, &double);
    let chat = GROUPS[0];
    let room = format!("tg:{chat}");
    let (at_owner, elsewhere) = two.consoles_of(&schema, &room);
    let auth = format!("Bearer {CONSOLE_TOKEN}");
    // What the owner's console says the room's console layer is.
    let policy = |port: u16, method: &str, body: &[u8]| {
        let (status, answer) = common::http_request(
            port,
            method,
            &format!("/console/api/policy?room={room}"),
            &[("Authorization", auth.as_str())],
            body,
        );
        assert_eq!(status, 200, "{method}: {answer}");
        answer
    };
    let layer_at_owner = || {
        let body = policy(at_owner, "GET", b"");
        serde_json::from_str::<Value>(&body).expect("json")["console"].clone()
    };
    let plain =
        |double: &Double, text: &str| double.post(&[TOKEN], group(chat), alice(), json!({ "text": text }));
    let decided = |id: i64| {
        let rows = schema
            .column(&format!(
                "SELECT outcome || ' ' || reason FROM decisions WHERE room = '{room}' AND msg = '{id}'"
            ))
            .unwrap_or_default();
        rows.into_iter().flatten().next()
    };

    // Mention mode, from the file: a question nobody addressed is left.
    let first = plain(&double, "does anyone know the wifi password?");
    wait_db("the first question decided", || decided(first).is_some());
    assert!(
        decided(first).is_some_and(|d| d.ends_with(" not_addressed")),
        "{:?}",
        decided(first)
    );

    // Set in the other process's console: its owner answers.
    policy(elsewhere, "PUT", b"mode = \"all\"\n");
    wait_db("the owner applying the layer", || {
        layer_at_owner() == json!("mode = \"all\"\n")
    });
    let second = plain(&double, "does anyone know the printer's address?");
    wait_db("the second question decided", || decided(second).is_some());
    assert_eq!(decided(second).as_deref(), Some("reply all"));
    wait_db("the second question answered", || {
        answers(&double, chat, second) == [format!("docs answers {second}")]
    });

    // Reverted there: left again.
    policy(elsewhere, "DELETE", b"");
    wait_db("the owner reverting the layer", || layer_at_owner().is_null());
    let third = plain(&double, "does anyone know where the keys are?");
    wait_db("the third question decided", || decided(third).is_some());
    assert!(
        decided(third).is_some_and(|d| d.ends_with(" not_addressed")),
        "{:?}",
        decided(third)
    );
    assert!(answers(&double, chat, third).is_empty());
}

/// The console says which process owns each room, and since when: the
/// rooms listing of either process names the owner of the group's
/// partition (`<host> pid N`), with the time it took the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_says_which_process_owns_each_room_and_since_when() {
    let Some(schema) = Schema::new() else { return };
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis() as u64
    };
    let started = now_ms();
    let double = Double::start(vec![bot()]).await;
    let two = Two::start(&schema, &double);
    let chat = GROUPS[1];
    let room = format!("tg:{chat}");
    let (at_owner, elsewhere) = two.consoles_of(&schema, &room);
    let owner = two.pid_at(at_owner);
    let id = mention(&double, chat, "who owns this room?");
    wait_db("the question answered", || {
        answers(&double, chat, id) == [format!("docs answers {id}")]
    });
    let auth = format!("Bearer {CONSOLE_TOKEN}");
    for port in [at_owner, elsewhere] {
        let (status, body) = common::http_request(
            port,
            "GET",
            "/console/api/rooms",
            &[("Authorization", auth.as_str())],
            b"",
        );
        assert_eq!(status, 200, "{body}");
        let listed: Value = serde_json::from_str(&body).expect("json");
        let row = listed["rooms"]
            .as_array()
            .and_then(|rooms| rooms.iter().find(|r| r["room"] == room.as_str()))
            .unwrap_or_else(|| panic!("{room} listed: {listed}"))
            .clone();
        assert!(
            row["owner"]["process"]
                .as_str()
                .is_some_and(|p| p.ends_with(&format!("pid {owner}"))),
            "the owner named on the console at {port}: {row}"
        );
        let since = row["owner"]["since"].as_u64().unwrap_or_default();
        assert!(
            since + 2_000 >= started && since <= now_ms() + 2_000,
            "since when, by the database's clock: {row}"
        );
    }
}

/// Marks on decisions are one set for every process: a mark made in the
/// console of the process that does not own the group is listed, with who
/// and when, by the owner's console and scored by its Try; cleared there,
/// it is gone from both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marks_made_in_one_console_are_the_same_in_every_process() {
    let Some(schema) = Schema::new() else { return };
    let double = Double::start(vec![bot()]).await;
    let two = Two::start(&schema, &double);
    let chat = GROUPS[1];
    let room = format!("tg:{chat}");
    let (at_owner, elsewhere) = two.consoles_of(&schema, &room);
    let auth = format!("Bearer {CONSOLE_TOKEN}");
    let call = |port: u16, method: &str, path: &str, body: &[u8]| {
        let (status, answer) =
            common::http_request(port, method, path, &[("Authorization", auth.as_str())], body);
        assert_eq!(status, 200, "{method} {path}: {answer}");
        serde_json::from_str::<Value>(&answer).expect("json")
    };
    let id = double.post(
        &[TOKEN],
        group(chat),
        alice(),
        json!({ "text": "does anyone know the wifi password?" }),
    );
    wait_db("the question decided", || {
        schema
            .column(&format!(
                "SELECT reason FROM decisions WHERE room = '{room}' AND msg = '{id}'"
            ))
            .is_ok_and(|rows| !rows.is_empty())
    });
    let marked = call(
        elsewhere,
        "PUT",
        &format!("/console/api/labels?room={room}&msg={id}&persona=docs&want=reply"),
        b"",
    );
    assert_eq!(marked["label"]["who"], "console", "{marked}");
    let listed = call(
        at_owner,
        "GET",
        &format!("/console/api/labels?room={room}&as=list"),
        b"",
    );
    assert_eq!(listed["labels"], json!([marked["label"]]), "{listed}");
    // The owner's Try scores on it: missed now, answered with mode "all".
    let tried = call(
        at_owner,
        "POST",
        &format!("/console/api/dry-run?room={room}"),
        b"mode = \"all\"\n",
    );
    let score = &tried["score"];
    assert_eq!(
        (
            score["now"]["recall"].as_f64(),
            score["proposed"]["recall"].as_f64()
        ),
        (Some(0.0), Some(1.0)),
        "{score}"
    );
    let cleared = call(
        at_owner,
        "DELETE",
        &format!("/console/api/labels?room={room}&msg={id}&persona=docs"),
        b"",
    );
    assert_eq!(cleared["cleared"], true);
    let listed = call(
        elsewhere,
        "GET",
        &format!("/console/api/labels?room={room}&as=list"),
        b"",
    );
    assert_eq!(listed["labels"], json!([]), "{listed}");
}
