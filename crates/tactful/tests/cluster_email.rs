//! Mailboxes are shared out over the processes sharing a database like
//! any bot account: two `tactful run` processes on one PostgreSQL store,
//! real Postfix, Dovecot and mlmmj, two personas' mailboxes. Each process
//! watches one mailbox; a list post reaching both mailboxes is answered
//! once; `kill -9` of the process watching docs's mailbox moves it to the
//! survivor, which answers what arrived meanwhile, once, going on from
//! the mark the dead process saved.

#![cfg(feature = "email")]

use crate::cluster_setup::{cluster_toml, holder, wait_db};
use crate::common::{self, Logs, Reaper, free_port, run_tactful_logged};
use crate::mail_setup::{self, MailServers, People, address, list, password};

use serde_json::{Value, json};
use tactful_store::testing::Schema;

const DOCS: &str = "account:email:docs";
const CHEF: &str = "account:email:chef";

struct Node {
    _dir: tempfile::TempDir,
    process: Reaper,
    _logs: Logs,
    server: u16,
}

fn start(url: &str, m: &MailServers) -> Node {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = free_port();
    let persona = |id: &str| {
        format!(
            "[[persona]]\nid = \"{id}\"\nagent = \"{id}\"\nemail = {{ address = \"{a}\", password = \"{pw}\" }}\n\n\
             [agents.{id}]\nkind = \"script\"\nrules = [{{ when = \"\", reply = \"[[reply_to:{{msg_id}}]]\\n{id} answers\" }}]\n",
            a = address(id),
            pw = password(id)
        )
    };
    let config = format!(
        "{cluster}\n[server]\nlisten = \"127.0.0.1:{server}\"\n\n\
         [platforms.email]\nimap = {{ host = \"127.0.0.1\", port = {imap}, tls = \"none\" }}\n\
         smtp = {{ host = \"127.0.0.1\", port = {smtp}, tls = \"none\" }}\nlists = [\"{talk}\"]\n\n\
         {docs}\n{chef}\n[rooms.default]\nmode = \"mention\"\nrate_limit = \"off\"\n",
        cluster = cluster_toml(url, 2),
        imap = m.imap,
        smtp = m.submission,
        talk = list("talk"),
        docs = persona("docs"),
        chef = persona("chef"),
    );
    let (process, logs) = run_tactful_logged(dir.path(), &config, &[]);
    Node {
        _dir: dir,
        process,
        _logs: logs,
        server,
    }
}

/// The answers in `inbox` to mail `id`.
fn answers<'a>(inbox: &'a [Value], id: &str) -> Vec<&'a Value> {
    inbox.iter().filter(|m| m["in_reply_to"] == id).collect()
}

#[test]
fn mailboxes_are_shared_out_and_move_when_a_process_dies() {
    let Some(schema) = Schema::new() else { return };
    if !mail_setup::available() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let members: &[&str] = &["alice", "docs", "chef"];
    let m = MailServers::start(dir.path(), &["alice", "docs", "chef"], &[("talk", members)], &[]);
    let mut people = People::start(&m);
    let mut nodes: Vec<Node> = (0..2).map(|_| start(&schema.url, &m)).collect();
    let pid = |n: &Node| n.process.id();
    wait_db("each process watching one mailbox", || {
        let (d, c) = (holder(&schema, DOCS), holder(&schema, CHEF));
        d.is_some() && c.is_some() && d != c && nodes.iter().all(|n| [d, c].contains(&Some(pid(n))))
    });

    // A list post reaches both mailboxes, watched by two processes: one
    // answer.
    let q1 = people.send(json!({
        "from": "alice", "to": [list("talk")], "subject": "one", "body": "Docs: are you there?"
    }));
    let inbox = people.wait_inbox("alice", "docs's answer on the list", |i| {
        !answers(i, &q1).is_empty()
    });
    assert!(
        answers(&inbox, &q1)[0]["body"]
            .as_str()
            .is_some_and(|b| b.contains("docs answers"))
    );

    // The process watching docs's mailbox dies; a direct mail to docs
    // arrives meanwhile.
    let docs_at = nodes
        .iter()
        .position(|n| holder(&schema, DOCS) == Some(pid(n)))
        .expect("one of ours watches docs");
    let mut dead = nodes.remove(docs_at);
    dead.process.kill().expect("kill -9");
    let _ = dead.process.wait();
    let q2 = people.send(json!({
        "from": "alice", "to": [address("docs")], "subject": "two", "body": "Still there?"
    }));
    let survivor = pid(&nodes[0]);
    wait_db("the survivor watching both mailboxes", || {
        holder(&schema, DOCS) == Some(survivor) && holder(&schema, CHEF) == Some(survivor)
    });
    people.wait_inbox(
        "alice",
        "the answer to the mail sent while docs's watcher was dead",
        |i| !answers(i, &q2).is_empty(),
    );

    // Nothing answered twice (the list post was read by the dead process
    // before it died: the survivor goes on from its saved mark).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !m.queue_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "Postfix's queue never emptied"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    common::settle(nodes[0].server, 1.0);
    let inbox = people.inbox("alice");
    assert_eq!(answers(&inbox, &q1).len(), 1, "{inbox:#?}");
    assert_eq!(answers(&inbox, &q2).len(), 1, "{inbox:#?}");
}
