//! Bot accounts are shared out over the processes sharing a database, one
//! process listening with each at a time: two `tactful run` processes and
//! two Telegram bots (played by the Bot API double) end up polling one bot
//! each; a mention of the bot the other process polls, heard only by this
//! one's bot, still reaches the persona mentioned; each process reports
//! only the account it listens with; `kill -9` of one moves its bot to the
//! survivor, which answers what was said to it meanwhile, once; a process
//! joining takes a bot off the survivor. A process whose share changes
//! starts or stops only the bots that moved: the others keep polling.

#![cfg(feature = "telegram")]

use crate::cluster_setup;
use crate::common;
use crate::telegram_double;

use cluster_setup::{DOCS_ACCOUNT, TOKEN, alice, bot, cluster_toml, group, holder, wait_db};
use common::{Logs, Reaper, free_port, run_tactful_logged};
use serde_json::json;
use tactful_store::testing::Schema;
use telegram_double::{Bot, Double};

const CHEF_TOKEN: &str = "7102:AAHchef-cluster-token-secret";
const CHEF_ACCOUNT: &str = "account:telegram:chef";
const CHAT: i64 = -5001;

fn chef() -> Bot {
    Bot {
        token: CHEF_TOKEN.into(),
        id: 7102,
        username: "chef_bot".into(),
        name: "Chef".into(),
    }
}

struct Node {
    dir: tempfile::TempDir,
    process: Reaper,
    logs: Logs,
    server: u16,
}

/// A process with both bots, each persona answering "<persona> answers
/// <msg id>" when mentioned.
fn start(url: &str, api_url: &str) -> Node {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = free_port();
    let persona = |id: &str, env: &str| {
        format!(
            "[[persona]]\nid = \"{id}\"\nagent = \"{id}\"\ntelegram = {{ token = \"${{{env}}}\" }}\n\n\
             [agents.{id}]\nkind = \"script\"\n\
             rules = [{{ when = \"\", reply = \"[[reply_to:{{msg_id}}]] {id} answers {{msg_id}}\", delay_ms = 50 }}]\n"
        )
    };
    let config = format!(
        "{cluster}\n[platforms.telegram]\napi_url = \"{api_url}\"\npoll_timeout_secs = 1\n\n\
         [server]\nlisten = \"127.0.0.1:{server}\"\n\n{docs}\n{chef}\n\
         [rooms.default]\nmode = \"mention\"\nrate_limit = \"off\"\n",
        cluster = cluster_toml(url, 2),
        docs = persona("docs", "DOCS_TOKEN"),
        chef = persona("chef", "CHEF_TOKEN"),
    );
    let (process, logs) = run_tactful_logged(
        dir.path(),
        &config,
        &[("DOCS_TOKEN", TOKEN), ("CHEF_TOKEN", CHEF_TOKEN)],
    );
    Node {
        dir,
        process,
        logs,
        server,
    }
}

/// Alice mentions `@<username>` in the group; the message reaches only
/// the bots of `tokens`. Returns its id.
fn mention(double: &Double, tokens: &[&str], username: &str, text: &str) -> i64 {
    let at = format!("@{username}");
    double.post(
        tokens,
        group(CHAT),
        alice(),
        json!({
            "text": format!("{at} {text}"),
            "entities": [{"type": "mention", "offset": 0, "length": at.chars().count()}]
        }),
    )
}

/// The bots' replies to message `id`, placeholders aside, once `want` of
/// them are there (60 s at most), and a little after, for a late double.
async fn replies(double: &Double, id: i64, want: usize) -> Vec<String> {
    let now = || -> Vec<String> {
        let mut r: Vec<String> = double
            .bot_messages(CHAT)
            .into_iter()
            .filter(|m| m.reply_to == Some(id) && m.text != "…" && !m.deleted)
            .map(|m| m.text)
            .collect();
        r.sort();
        r
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while now().len() < want && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    now()
}

/// How many times `token`'s bot was asked who it is (`getMe`, which each
/// connection of an account starts with) since call `from`.
fn get_me(double: &Double, from: usize, token: &str) -> usize {
    double
        .calls_from(from)
        .iter()
        .filter(|c| c.method == "getMe" && c.token == token)
        .count()
}

/// The accounts `/metrics` says this process listens with.
fn listening(node: &Node) -> Vec<String> {
    common::listening(node.server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bots_are_shared_out_over_two_processes_and_move_when_one_dies() {
    let Some(schema) = Schema::new() else { return };
    let double = Double::start(vec![bot(), chef()]).await;
    let mut nodes: Vec<Node> = (0..2).map(|_| start(&schema.url, &double.url)).collect();
    let pid = |n: &Node| n.process.id();
    // One bot each: the first process took both, then let one go when the
    // second joined.
    wait_db("each process polling one bot", || {
        let (d, c) = (holder(&schema, DOCS_ACCOUNT), holder(&schema, CHEF_ACCOUNT));
        d.is_some() && c.is_some() && d != c && nodes.iter().all(|n| [d, c].contains(&Some(pid(n))))
    });
    let chef_at = nodes
        .iter()
        .position(|n| holder(&schema, CHEF_ACCOUNT) == Some(pid(n)))
        .expect("one of ours polls chef");
    let docs_at = 1 - chef_at;

    // A mention of chef that only docs's bot hears (polled by the other
    // process): recognised there, so chef answers it; and the other way.
    let to_chef = mention(&double, &[TOKEN], "chef_bot", "what is for dinner?");
    let to_docs = mention(&double, &[CHEF_TOKEN], "docs_bot", "where are the docs?");
    // Both bots hear this one: one decision, one answer.
    let both = mention(&double, &[TOKEN, CHEF_TOKEN], "chef_bot", "and dessert?");
    assert_eq!(
        replies(&double, to_chef, 1).await,
        [format!("chef answers {to_chef}")]
    );
    assert_eq!(
        replies(&double, to_docs, 1).await,
        [format!("docs answers {to_docs}")]
    );
    assert_eq!(replies(&double, both, 1).await, [format!("chef answers {both}")]);

    // Each process reports only the account it listens with.
    wait_db("each process reporting its own bot", || {
        listening(&nodes[chef_at]) == ["chef"] && listening(&nodes[docs_at]) == ["docs"]
    });

    // chef's poller dies; what is said to chef meanwhile waits at Telegram.
    let before_kill = double.calls().len();
    let mut dead = nodes.remove(chef_at);
    dead.process.kill().expect("kill -9");
    let _ = dead.process.wait();
    let while_dead = mention(&double, &[CHEF_TOKEN], "chef_bot", "still there?");
    let survivor = pid(&nodes[0]);
    wait_db("the survivor polling both bots", || {
        holder(&schema, CHEF_ACCOUNT) == Some(survivor) && holder(&schema, DOCS_ACCOUNT) == Some(survivor)
    });
    assert_eq!(
        replies(&double, while_dead, 1).await,
        [format!("chef answers {while_dead}")]
    );
    wait_db("the survivor reporting both bots", || {
        listening(&nodes[0]) == ["chef", "docs"]
    });
    // The survivor took chef on beside docs: docs kept polling (its
    // connection was not started again, so it did not say who it is
    // again).
    assert_eq!(get_me(&double, before_kill, TOKEN), 0);

    // A new process joins: the survivor lets one bot go (above its share
    // now), the newcomer polls it, and what is said to it is answered.
    let before_join = double.calls().len();
    nodes.push(start(&schema.url, &double.url));
    let newcomer = pid(&nodes[1]);
    wait_db("the newcomer polling one bot", || {
        let held = [holder(&schema, DOCS_ACCOUNT), holder(&schema, CHEF_ACCOUNT)];
        held.contains(&Some(newcomer)) && held.contains(&Some(survivor))
    });
    let (token, username) = if holder(&schema, CHEF_ACCOUNT) == Some(newcomer) {
        (CHEF_TOKEN, "chef_bot")
    } else {
        (TOKEN, "docs_bot")
    };
    let moved = mention(&double, &[token], username, "who has me now?");
    let persona = username.trim_end_matches("_bot");
    assert_eq!(
        replies(&double, moved, 1).await,
        [format!("{persona} answers {moved}")]
    );
    wait_db("the survivor reporting the bot it kept", || {
        listening(&nodes[0]).len() == 1 && listening(&nodes[1]).len() == 1
    });
    // The bot the survivor kept was never disconnected there: only the
    // newcomer asked who it is.
    let kept = if token == TOKEN { CHEF_TOKEN } else { TOKEN };
    assert_eq!(get_me(&double, before_join, kept), 1);

    // A reload cannot move the bots (they are leased from the config read
    // at start): a change to the platform waits for a restart.
    let cfg = nodes[0].dir.path().join("tactful.toml");
    let text = std::fs::read_to_string(&cfg).expect("config");
    let changed = text.replace("poll_timeout_secs = 1", "poll_timeout_secs = 2");
    assert_ne!(changed, text);
    std::fs::write(&cfg, changed).expect("config");
    common::hup(nodes[0].process.id());
    let said = nodes[0]
        .logs
        .wait_for("the reload", |l| l.contains("config reloaded"));
    assert!(
        said.contains("apply only after a restart: platforms.telegram"),
        "{said}"
    );

    // Nothing answered twice, nothing else said.
    let said: Vec<String> = double
        .bot_messages(CHAT)
        .into_iter()
        .filter(|m| m.text != "…")
        .map(|m| m.text)
        .collect();
    assert_eq!(said.len(), 5, "{said:?}");
}
