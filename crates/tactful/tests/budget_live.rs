//! A spend budget in a running `tactful run`: each call is settled with the
//! tokens the model server reports (not the estimate held before it), the
//! persona's remaining budget is a metric, an addressed message over the
//! budget gets the notice, and the spend survives a `kill -9`.

use crate::common;

use common::model::{TOKENS_PER_CALL, model_server};
use common::{bot_messages, enter, free_port, metric, run_tactful_logged, say, settle};
use serde_json::json;

/// About what one call here is held for before it is made: the hour's
/// 1,400 tokens pay for a second call only because the first was settled
/// at the 127 tokens the server reported.
const BUDGET: u64 = 1_400;
const NOTICE: &str = "Out of budget for this hour, sorry.";

fn config(web: u16, server: u16, model: u16, store: &std::path::Path) -> String {
    format!(
        r#"
[[persona]]
id = "docs"
name = "Docs"
agent = "llm"
budget = {{ tokens = {BUDGET}, per_seconds = 3600, notice = "{NOTICE}" }}

[agents.llm]
kind = "openai"
base_url = "http://127.0.0.1:{model}/v1"
model = "m"

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

fn remaining(server: u16) -> Option<f64> {
    metric(server, "tactful_budget_remaining")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_settled_with_reported_usage_and_the_spend_survives_a_kill() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let (web, server, model) = (free_port(), free_port(), model_server());
    let text = config(web, server, model, &store);
    let (tactful, logs) = run_tactful_logged(dir.path(), &text, &[]);
    // The last banner line: the web room and the server both listen.
    logs.wait_for("the banner", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let mut ws = enter(&format!("ws://127.0.0.1:{web}/ws"), "Alice").await;

    for (i, question) in ["@Docs which button resets it?", "@Docs and the blue one?"]
        .into_iter()
        .enumerate()
    {
        say(
            &mut ws,
            json!({ "type": "say", "room": "lobby", "text": question }),
        )
        .await;
        // The answer streams into its placeholder: wait for all of it.
        bot_messages(&mut ws, |m| m.iter().any(|m| m["text"] == "Use the red button.")).await;
        settle(server, (i + 1) as f64);
        let spent = TOKENS_PER_CALL * (i as u64 + 1);
        assert_eq!(
            remaining(server),
            Some((BUDGET - spent) as f64),
            "settled at what the server reported"
        );
    }

    // The third would not fit: the notice, as a reply, and no model call.
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Docs one more?" }),
    )
    .await;
    let got = bot_messages(&mut ws, |m| m.iter().any(|m| m["text"] == NOTICE)).await;
    let notice = got.iter().find(|m| m["text"] == NOTICE).expect("the notice");
    assert!(
        !notice["reply_to"].is_null(),
        "a reply to the question: {notice:?}"
    );
    assert!(
        got.iter().all(|m| m["text"] != "…"),
        "no placeholder: nothing was called: {got:#?}"
    );
    settle(server, 3.0);
    assert_eq!(remaining(server), Some((BUDGET - 2 * TOKENS_PER_CALL) as f64));

    // kill -9 and start again: the spend is read back.
    drop(tactful);
    let (tactful, logs) = run_tactful_logged(dir.path(), &text, &[]);
    logs.wait_for("the banner again", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let mut ws = enter(&format!("ws://127.0.0.1:{web}/ws"), "Alice").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Docs still there?" }),
    )
    .await;
    let got = bot_messages(&mut ws, |m| m.iter().any(|m| m["text"] == NOTICE)).await;
    assert!(
        got.iter().all(|m| m["text"] != "Use the red button."),
        "no call after the restart: {got:#?}"
    );
    settle(server, 1.0);
    assert_eq!(remaining(server), Some((BUDGET - 2 * TOKENS_PER_CALL) as f64));
    drop(tactful);
}
