//! XMPP across processes: three `tactful run` processes on one PostgreSQL
//! database and a real XMPP server (Debian's Prosody). A post is a stanza
//! on the persona's own stream, so every XMPP room belongs to the
//! partition whose owner connects XMPP: `kill -9` of that process, with a
//! question waiting for its answer, moves the rooms and the connection
//! together; the new owner connects, catches up from the room's archive
//! what it had not heard, carries the turn on and answers every question
//! once.

#![cfg(feature = "xmpp")]

use crate::common;
use crate::leases;
use crate::xmpp_setup;

use std::time::{Duration, Instant};

use common::{Logs, Reaper, run_tactful_logged};
use leases::{cluster_toml, holder, shares, wait_db};
use tactful_store::testing::Schema;
use xmpp_setup::{People, Prosody, available, jid, password, room};

/// A process's config: `[cluster]` on `url` with two-second leases, XMPP
/// on 127.0.0.1:`port`, and a persona that answers every question after
/// 400 ms (long enough to be killed with the turn under way).
fn config(url: &str, port: u16, team: &str) -> String {
    format!(
        r##"
{cluster}

[[persona]]
id = "docs"
agent = "docs"
xmpp = {{ jid = "{jid}", password = "{pw}", nick = "docs" }}

[agents.docs]
kind = "script"
rules = [{{ when = "", reply = "[[reply_to:{{msg_id}}]] answer to {{text}}", delay_ms = 400 }}]

[rooms.default]
mode = "mention"
rate_limit = "off"

[platforms.xmpp]
rooms = ["{team}"]
server = "127.0.0.1"
port = {port}
tls = "none"
"##,
        cluster = cluster_toml(url, 2),
        jid = jid("docs"),
        pw = password("docs"),
    )
}

struct Node {
    _dir: tempfile::TempDir,
    process: Reaper,
    logs: Logs,
}

fn start(url: &str, port: u16, team: &str) -> Node {
    let dir = tempfile::tempdir().expect("temp dir");
    let (process, logs) = run_tactful_logged(dir.path(), &config(url, port, team), &[]);
    Node {
        _dir: dir,
        process,
        logs,
    }
}

/// Waits until three processes share the partitions and one of `nodes`
/// holds XMPP's; the pid of the XMPP rooms' owner.
fn settled(schema: &Schema, nodes: &[Node], key: &str) -> u32 {
    wait_db("three processes sharing the partitions", || {
        let s = shares(schema);
        s.len() == 3 && s.iter().sum::<usize>() == 256
    });
    let pids: Vec<u32> = nodes.iter().map(|n| n.process.id()).collect();
    wait_db("one of the processes owning the XMPP rooms", || {
        holder(schema, key).is_some_and(|p| pids.contains(&p))
    });
    holder(schema, key).expect("held")
}

/// docs' answers in the room, their texts (without the reply's quote).
fn answers(people: &mut People, team: &str) -> Vec<String> {
    people
        .messages("alice", team)
        .iter()
        .filter(|m| m["nick"] == "docs" && m["retracted"] == false)
        .filter_map(|m| m["body"].as_str())
        .filter_map(|b| b.split_once("answer to ").map(|(_, q)| q.to_owned()))
        .collect()
}

/// Waits until docs has answered question `n`.
fn answered(people: &mut People, team: &str, n: usize) {
    let want = format!("docs: question {n}");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if answers(people, team).contains(&want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "question {n} never answered: {:?}",
            answers(people, team)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn xmpp_rooms_and_their_connection_move_together_and_answer_once() {
    let Some(schema) = Schema::new() else { return };
    let Some(venv) = available() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let prosody = Prosody::start(dir.path(), &["alice", "docs"]);
    let team = room("team");
    let mut people = People::start(&venv, prosody.port);
    people.login("alice");
    people.join("alice", &team, "alice");
    let part = tactful_store::connection_partition("xmpp").expect("XMPP is connection-bound");
    let key = tactful_store::partition_key(part);
    let mut nodes: Vec<Node> = (0..3).map(|_| start(&schema.url, prosody.port, &team)).collect();
    let mut asked = 0;
    let mut gone: Vec<Logs> = Vec::new();

    let mut owner = settled(&schema, &nodes, &key);
    people.wait_occupants("alice", &team, &["docs"]);
    asked += 1;
    people.say("alice", &team, &format!("docs: question {asked}"));
    answered(&mut people, &team, asked);

    for kill in 0..2 {
        // Asked, and in the store, when its owner dies: the turn is under
        // way (the answer takes 400 ms).
        asked += 1;
        let text = format!("docs: question {asked}");
        people.say("alice", &team, &text);
        wait_db("the question in the inbox", || {
            schema
                .column(&format!(
                    "SELECT count(*) FROM inbox WHERE room = 'xmpp:{team}' AND text = '{text}'"
                ))
                .is_ok_and(|c| c == [Some("1".to_owned())])
        });
        let at = nodes
            .iter()
            .position(|n| n.process.id() == owner)
            .expect("one of ours");
        let mut dead = nodes.remove(at);
        dead.process.kill().expect("kill -9");
        let _ = dead.process.wait();
        gone.push(dead.logs);
        // Said while nobody holds the room: the new owner reads it from
        // the room's archive.
        asked += 1;
        people.say("alice", &team, &format!("docs: question {asked}"));
        nodes.push(start(&schema.url, prosody.port, &team));
        answered(&mut people, &team, asked - 1);
        answered(&mut people, &team, asked);
        let now = settled(&schema, &nodes, &key);
        assert_ne!(
            now, owner,
            "kill {kill}: the XMPP rooms moved off the dead process"
        );
        owner = now;
        asked += 1;
        people.say("alice", &team, &format!("docs: question {asked}"));
        answered(&mut people, &team, asked);
    }

    // Every question answered once, and nothing else said (the turn
    // carried over and the question caught up from the archive may come
    // in either order).
    let expected: Vec<String> = (1..=asked).map(|n| format!("docs: question {n}")).collect();
    let mut said = answers(&mut people, &team);
    said.sort_by_key(|q| q.rsplit(' ').next().and_then(|n| n.parse::<usize>().ok()));
    assert_eq!(said, expected);
    let decided = schema
        .column(&format!(
            "SELECT count(*) FROM decisions WHERE room = 'xmpp:{team}' AND outcome = 'reply'"
        ))
        .expect("counts");
    assert_eq!(decided, [Some(asked.to_string())], "each question decided once");
    // The process taking the rooms over carried the turn on through the
    // connection it took over, not through one it never connected (which
    // waited 30 s for a connection and gave the post up).
    for logs in nodes.iter().map(|n| &n.logs).chain(&gone) {
        let lines = logs.lines();
        assert!(
            !lines.iter().any(|l| l.contains("is not connected to XMPP")),
            "{}",
            lines.join("\n")
        );
    }
}
