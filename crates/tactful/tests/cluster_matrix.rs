//! Matrix across processes: two `tactful run` processes on one PostgreSQL
//! database and a real Synapse. A Matrix reply goes through the account's
//! logged-in, syncing client, which only the process holding the Matrix
//! connection has, so every Matrix room belongs to the partition whose
//! owner connects Matrix: a question is answered by it, and after a
//! `kill -9` of that process the rooms and the connection move together
//! and the next question is answered by the survivor, each once.

#![cfg(feature = "matrix")]

use crate::common;
use crate::leases;
use crate::matrix_setup;

use common::{Reaper, run_tactful};
use leases::{cluster_toml, holder, shares, wait_db};
use matrix_setup::{Humans, SERVER, Synapse, mxid, password, venv};
use serde_json::{Value, json};
use tactful_store::testing::Schema;

fn config(url: &str, homeserver: &str) -> String {
    format!(
        r##"
{cluster}

[platforms.matrix]
homeserver = "{homeserver}"
invites_from = ["{SERVER}"]

[[persona]]
id = "helper"
agent = "helper"
matrix = {{ user_id = "{id}", password = "{pw}" }}

[agents.helper]
kind = "script"
rules = [{{ when = "", reply = "[[reply_to:{{msg_id}}]] helper answers {{msg_id}}" }}]

[rooms.default]
mode = "mention"
rate_limit = "off"
"##,
        cluster = cluster_toml(url, 2),
        id = mxid("helper"),
        pw = password("helper"),
    )
}

/// helper's replies to `event` in the room, as people see them.
fn replies_to(messages: &[Value], event: &str) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["sender"] == mxid("helper").as_str() && m["reply_to"] == event)
        .filter_map(|m| m["body"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn matrix_rooms_and_their_connection_move_together() {
    let Some(venv) = venv() else { return };
    let Some(schema) = Schema::new() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let synapse = Synapse::start(venv.clone(), dir.path());
    let mut people = Humans::start(&venv, &synapse.url());
    for user in ["alice", "helper"] {
        people.register(user);
    }
    people.login("alice");
    let room =
        people.call(json!({"op": "create", "as": "alice", "invite": [mxid("helper")], "name": "team"}));
    let room = room.as_str().expect("room id").to_owned();

    let text = config(&schema.url, &synapse.url());
    let mut nodes: Vec<(tempfile::TempDir, Reaper)> = (0..2)
        .map(|_| {
            let d = tempfile::tempdir().expect("temp dir");
            let p = run_tactful(d.path(), &text, &[]);
            (d, p)
        })
        .collect();
    wait_db("two processes sharing the partitions", || {
        let s = shares(&schema);
        s.len() == 2 && s.iter().sum::<usize>() == 256
    });
    let part = tactful_store::connection_partition("matrix").expect("Matrix is connection-bound");
    let key = tactful_store::partition_key(part);
    assert_eq!(
        tactful_store::partition_of(&tactful_core::RoomId::new(format!("matrix:{room}"))),
        part,
        "the room is in the connection's partition"
    );
    wait_db("the Matrix rooms' owner is one of ours", || {
        holder(&schema, &key).is_some_and(|p| nodes.iter().any(|n| n.1.id() == p))
    });
    people.wait_members("alice", &room, &["helper"]);

    let q1 = people.send("alice", &room, "helper, how do I reset the router?", &["helper"]);
    let first = format!("helper answers {q1}");
    people.wait_messages("alice", &room, "the first answer", |m| {
        replies_to(m, &q1) == [first.clone()]
    });

    let owner = holder(&schema, &key).expect("held");
    let at = nodes.iter().position(|n| n.1.id() == owner).expect("one of ours");
    let (_dir, mut dead) = nodes.remove(at);
    dead.kill().expect("kill -9");
    let _ = dead.wait();
    let survivor = nodes[0].1.id();
    wait_db("the survivor owning the Matrix rooms", || {
        holder(&schema, &key) == Some(survivor)
    });
    let q2 = people.send("alice", &room, "helper, and the modem?", &["helper"]);
    let second = format!("helper answers {q2}");
    let m = people.wait_messages("alice", &room, "the second answer", |m| {
        replies_to(m, &q2) == [second.clone()]
    });

    assert_eq!(replies_to(&m, &q1), [format!("helper answers {q1}")], "once");
    assert_eq!(
        replies_to(&m, &q2),
        [format!("helper answers {q2}")],
        "once, by the survivor"
    );
    let decided = schema
        .column("SELECT count(*) FROM decisions WHERE outcome = 'reply'")
        .expect("counts");
    assert_eq!(decided, [Some("2".to_owned())], "each question decided once");
}
