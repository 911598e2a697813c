//! A persona's own spend budget is one across the processes sharing a
//! database: two `tactful run` processes, each owning one of two Telegram
//! groups (played by the Bot API double); the call the persona makes in
//! one group's owner holds its estimate in the other too while it runs,
//! leaving too little for a call there, so a question there gets the
//! budget's notice instead of an answer; what the call cost is then
//! counted in both; when the
//! first one dies, the other takes its rooms and counts their spend once.

#![cfg(feature = "telegram")]

use crate::cluster_setup;
use crate::common;
use crate::telegram_double;

use cluster_setup::{DOCS_ACCOUNT, TOKEN, bot, config, holder, mention, shares, wait_db};
use common::{Reaper, free_port, metric, run_tactful};
use tactful_core::RoomId;
use tactful_store::partition_of;
use tactful_store::testing::Schema;
use telegram_double::Double;

/// The persona's budget: one call's estimate (about 1,200 tokens here)
/// fits, two do not.
const BUDGET: f64 = 2_000.0;
const NOTICE: &str = "Spent for this hour, in every group.";
/// How long the agent takes to answer: long enough that the other process
/// sees the call's hold while it runs.
const CALL_MS: u64 = 5_000;

struct Node {
    _dir: tempfile::TempDir,
    process: Reaper,
    metrics: u16,
}

fn start(url: &str, api_url: &str) -> Node {
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let with_budget = config(url, api_url, 2, CALL_MS).replace(
        "agent = \"docs\"\ntelegram",
        &format!(
            "agent = \"docs\"\nbudget = {{ tokens = {BUDGET}, per_seconds = 3600, notice = \"{NOTICE}\" }}\ntelegram"
        ),
    );
    assert_ne!(with_budget, config(url, api_url, 2, CALL_MS), "the budget is in");
    let text = format!("{with_budget}\n[server]\nlisten = \"127.0.0.1:{metrics}\"\n");
    let process = run_tactful(dir.path(), &text, &[("DOCS_TOKEN", TOKEN)]);
    Node {
        _dir: dir,
        process,
        metrics,
    }
}

fn said(double: &Double, chat: i64) -> Vec<String> {
    double
        .bot_messages(chat)
        .into_iter()
        .map(|m| m.text)
        .filter(|t| t != "…")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persona_budget_spent_on_one_process_is_counted_on_the_other() {
    let Some(schema) = Schema::new() else { return };
    let double = Double::start(vec![bot()]).await;
    let nodes: Vec<Node> = (0..2).map(|_| start(&schema.url, &double.url)).collect();
    wait_db("two processes sharing the partitions", || {
        let s = shares(&schema);
        s.len() == 2 && s.iter().sum::<usize>() == 256
    });
    wait_db("one of them polling the bot", || {
        holder(&schema, DOCS_ACCOUNT).is_some_and(|p| nodes.iter().any(|n| n.process.id() == p))
    });
    // Two groups whose rooms different processes own.
    let key = |chat: i64| format!("partition:{}", partition_of(&RoomId::new(format!("tg:{chat}"))));
    let owner = |chat: i64| holder(&schema, &key(chat)).expect("every partition is held");
    let first = -4001;
    let second = (4002..4100)
        .map(|n| -n)
        .find(|&c| owner(c) != owner(first))
        .expect("some group on the other process");
    let node = |pid: u32| nodes.iter().find(|n| n.process.id() == pid).expect("one of ours");
    let (here, there) = (owner(first), node(owner(second)).metrics);
    let remaining = |port: u16| metric(port, "tactful_budget_remaining");
    let here_port = node(here).metrics;
    wait_db("both processes saying the whole budget is left", || {
        remaining(here_port) == Some(BUDGET) && remaining(there) == Some(BUDGET)
    });

    let q1 = mention(&double, first, "which button resets the router?");
    // The other process sees the call's hold while it runs: a call it
    // would start meanwhile is checked against it.
    wait_db("the other process seeing the running call's hold", || {
        remaining(there).is_some_and(|r| r < BUDGET)
    });
    assert!(
        said(&double, first).is_empty(),
        "seen while the call runs, not only once it ended"
    );
    let q2 = mention(&double, second, "and the blue one?");
    wait_db("the second question given the notice", || {
        said(&double, second) == [NOTICE]
    });
    let decided = schema
        .column(&format!(
            "SELECT outcome || ' ' || reason FROM decisions WHERE room = 'tg:{second}' AND msg = '{q2}'"
        ))
        .expect("reads");
    assert_eq!(decided, [Some("skip budget_exhausted".to_owned())]);
    let calls = schema
        .column(&format!("SELECT count(*) FROM calls WHERE room = 'tg:{second}'"))
        .expect("reads");
    assert_eq!(calls, [Some("0".to_owned())], "no call over the budget");

    wait_db("the first question answered", || {
        said(&double, first) == [format!("docs answers {q1}")]
    });
    let left = remaining(here_port).expect("a budget");
    assert!(left < BUDGET / 2.0, "a call spent more than half: {left}");
    // The other process counts what the call cost.
    wait_db("the other process counting that spend", || {
        remaining(there) == Some(left)
    });

    // The first group's owner dies: the other takes its rooms, and with
    // them their spend (from the rooms' snapshots), counted once.
    let mut nodes = nodes;
    let at = nodes
        .iter()
        .position(|n| n.process.id() == here)
        .expect("one of ours");
    let mut dead = nodes.remove(at);
    dead.process.kill().expect("kill -9");
    let _ = dead.process.wait();
    wait_db("the first group's rooms moving to the other process", || {
        holder(&schema, &key(first)).is_some_and(|p| p != here)
    });
    let q3 = mention(&double, first, "so, the red one?");
    wait_db("the third question given the notice", || {
        said(&double, first) == [format!("docs answers {q1}"), NOTICE.to_owned()]
    });
    assert_eq!(
        remaining(there),
        Some(left),
        "the moved room's spend counted once (question {q3})"
    );
}
