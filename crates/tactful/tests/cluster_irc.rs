//! IRC across processes: three `tactful run` processes on one PostgreSQL
//! database and a real IRC server (Debian's ngircd). IRC posts only
//! through its connection, so every IRC room belongs to the partition whose
//! owner connects IRC: `kill -9` of that process, with a question waiting
//! for its answer, moves the rooms and the connection together; the new
//! owner connects, carries the turn on and answers it once.

#![cfg(feature = "irc")]

use crate::common;
use crate::irc_setup;
use crate::leases;

use common::{Reaper, run_tactful};
use irc_setup::{Person, join_with, start_ngircd};
use leases::{cluster_toml, holder, shares, wait_db};
use tactful_store::testing::Schema;

const CHANNEL: &str = "#tactful";

/// A process's config: `[cluster]` on `url` with two-second leases, IRC on
/// 127.0.0.1:`port`, and a persona that answers every question it is asked
/// after 400 ms (long enough to be killed with the turn under way).
fn config(url: &str, port: u16) -> String {
    format!(
        r##"
{cluster}

[[persona]]
id = "docs"
agent = "docs"

[agents.docs]
kind = "script"
rules = [{{ when = "", reply = "[[reply_to:{{msg_id}}]] answer to {{text}}", delay_ms = 400 }}]

[rooms.default]
mode = "mention"
rate_limit = "off"

[platforms.irc]
server = "127.0.0.1"
port = {port}
channels = ["{CHANNEL}"]
send_interval_ms = 20
nick_retry_seconds = 1
"##,
        cluster = cluster_toml(url, 2),
    )
}

struct Node {
    _dir: tempfile::TempDir,
    process: Reaper,
}

fn start(url: &str, port: u16) -> Node {
    let dir = tempfile::tempdir().expect("temp dir");
    let process = run_tactful(dir.path(), &config(url, port), &[]);
    Node { _dir: dir, process }
}

/// Waits until three processes share the partitions and one of `nodes`
/// holds IRC's, then until the persona is in the channel under its own
/// nick; the pid of the IRC rooms' owner.
async fn settled(schema: &Schema, nodes: &[Node], key: &str, alice: &mut Person) -> u32 {
    wait_db("three processes sharing the partitions", || {
        let s = shares(schema);
        s.len() == 3 && s.iter().sum::<usize>() == 256
    });
    let pids: Vec<u32> = nodes.iter().map(|n| n.process.id()).collect();
    wait_db("one of the processes owning the IRC rooms", || {
        holder(schema, key).is_some_and(|p| pids.contains(&p))
    });
    join_with(alice, CHANNEL, &["docs"]).await;
    holder(schema, key).expect("held")
}

/// Reads the channel until docs answers question `n`; every line docs
/// says meanwhile goes to `said`.
async fn answer_to(alice: &mut Person, n: usize, said: &mut Vec<String>) {
    let want = format!("question {n}");
    loop {
        let (text, _) = alice.said_by("docs", CHANNEL).await;
        let done = text.contains(&want);
        said.push(text);
        if done {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn irc_rooms_and_their_connection_move_together_and_answer_once() {
    let Some(schema) = Schema::new() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let Some((_server, port)) = start_ngircd(dir.path()) else {
        return;
    };
    let part = tactful_store::connection_partition("irc").expect("IRC is connection-bound");
    let key = tactful_store::partition_key(part);
    let mut nodes: Vec<Node> = (0..3).map(|_| start(&schema.url, port)).collect();
    let mut alice = Person::connect(port, "alice").await;
    let mut said = Vec::new();
    let mut asked = 0;

    let mut owner = settled(&schema, &nodes, &key, &mut alice).await;
    asked += 1;
    alice
        .send(&format!("PRIVMSG {CHANNEL} :docs: question {asked}"))
        .await;
    answer_to(&mut alice, asked, &mut said).await;

    for kill in 0..2 {
        // Asked, and in the store, when its owner dies: the turn is under
        // way (the answer takes 400 ms).
        asked += 1;
        alice
            .send(&format!("PRIVMSG {CHANNEL} :docs: question {asked}"))
            .await;
        let text = format!("docs: question {asked}");
        wait_db("the question in the inbox", || {
            schema
                .column(&format!(
                    "SELECT count(*) FROM inbox WHERE room = 'irc:{CHANNEL}' AND text = '{text}'"
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
        nodes.push(start(&schema.url, port));
        // The new owner connects and carries the turn on, addressed to
        // alice although another process heard her.
        answer_to(&mut alice, asked, &mut said).await;
        assert_eq!(
            said.last().map(String::as_str),
            Some(format!("alice: answer to docs: question {asked}").as_str())
        );
        let now = settled(&schema, &nodes, &key, &mut alice).await;
        assert_ne!(
            now, owner,
            "kill {kill}: the IRC rooms moved off the dead process"
        );
        owner = now;
        // And a question asked of the new owner is answered by name.
        asked += 1;
        alice
            .send(&format!("PRIVMSG {CHANNEL} :docs: question {asked}"))
            .await;
        answer_to(&mut alice, asked, &mut said).await;
        assert_eq!(
            said.last().map(String::as_str),
            Some(format!("alice: answer to docs: question {asked}").as_str())
        );
    }

    // Every question answered once, in order, and nothing else said.
    let expected: Vec<String> = (1..=asked).map(|n| format!("docs: question {n}")).collect();
    let answered: Vec<String> = said
        .iter()
        .map(|t| {
            t.split_once("answer to ")
                .map_or(t.clone(), |(_, q)| q.to_owned())
        })
        .collect();
    assert_eq!(answered, expected, "said: {said:?}");
    let decided = schema
        .column(&format!(
            "SELECT count(*) FROM decisions WHERE room = 'irc:{CHANNEL}' AND outcome = 'reply'"
        ))
        .expect("counts");
    assert_eq!(decided, [Some(asked.to_string())], "each question decided once");
}
