//! The web room's reactions in a running `tactful run` with a store: a
//! persona asked directly that chooses silence puts 👀 on the message, and
//! after a `kill -9` a newcomer still sees it there.

use crate::common;

use common::{enter, event, free_port, run_tactful_logged, say, settle};
use serde_json::json;

fn config(web: u16, server: u16, store: &std::path::Path) -> String {
    format!(
        r#"
[[persona]]
id = "docs"
name = "Docs"
agent = "docs"

[agents.docs]
kind = "script"
rules = [{{ when = "(?i)thanks", reply = "NO_REPLY" }}, {{ when = "", reply = "ok" }}]

[platforms.web]
listen = "127.0.0.1:{web}"

[store]
path = "{}"

[server]
listen = "127.0.0.1:{server}"
"#,
        store.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reaction_survives_a_kill() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let (web, server) = (free_port(), free_port());
    let text = config(web, server, &store);
    let (tactful, logs) = run_tactful_logged(dir.path(), &text, &[]);
    // The last banner line: the web room and the server both listen.
    logs.wait_for("the banner", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let url = format!("ws://127.0.0.1:{web}/ws");
    let mut alice = enter(&url, "Alice").await;
    say(
        &mut alice,
        json!({ "type": "say", "room": "lobby", "text": "@Docs thanks, that fixed it" }),
    )
    .await;
    let asked = event(&mut alice, |v| {
        v["type"] == "message" && v["message"]["text"] == "@Docs thanks, that fixed it"
    })
    .await;
    let id = asked["message"]["id"].clone();
    let react = event(&mut alice, |v| v["type"] == "react").await;
    assert_eq!(
        (&react["id"], &react["emoji"], &react["by"]),
        (&id, &json!("👀"), &json!("Docs"))
    );
    // Delivered (and so stored): nothing is in progress any more.
    settle(server, 1.0);

    drop(tactful);
    let (tactful, logs) = run_tactful_logged(dir.path(), &text, &[]);
    logs.wait_for("the banner again", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let mut carol = enter(&url, "Carol").await;
    let history = event(&mut carol, |v| v["type"] == "history").await;
    let shown = history["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["id"] == id))
        .expect("Alice's message is in the history")
        .clone();
    assert_eq!(
        shown["reactions"],
        json!([{ "emoji": "👀", "by": ["Docs"] }]),
        "{shown}"
    );
    drop(tactful);
}
