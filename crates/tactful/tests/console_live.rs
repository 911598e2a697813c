//! The console's live transcript, agent calls and costs against a running
//! `tactful run`: a model server that reports tokens (cached ones too), an
//! agent that fails, the lines arriving over Server-Sent Events as they
//! happen, the call log and the costs read back from the store after a
//! restart, and a clear 4xx for bad requests.

use crate::common;

use std::time::{Duration, Instant};

use common::model::model_server;
use common::sse::{live, read_until};
use common::{enter, free_port, http_request, json_of, run_tactful_logged, say};
use serde_json::{Value, json};

const TOKEN: &str = "console-live-token-0815";

fn config(web: u16, server: u16, model: u16, store: &std::path::Path) -> String {
    format!(
        r#"
[[persona]]
id = "docs"
name = "Docs"
agent = "llm"

[[persona]]
id = "broken"
name = "Broken"
agent = "bad"

[agents.llm]
kind = "openai"
base_url = "http://127.0.0.1:{model}/v1"
model = "m"

[agents.bad]
kind = "command"
command = "sh"
args = ["-c", "echo 'the tool crashed' >&2; exit 3"]

[platforms.web]
listen = "127.0.0.1:{web}"

[store]
path = "{}"

[server]
listen = "127.0.0.1:{server}"
console_token = "{TOKEN}"
"#,
        store.display()
    )
}

fn get(port: u16, path: &str) -> (u16, String) {
    http_request(
        port,
        "GET",
        path,
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        b"",
    )
}

/// Polls `path` until `ok` holds (30 s at most): what the store shows once
/// the writer committed.
fn poll(port: u16, path: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = get(port, path);
        if status == 200 {
            let v = json_of(&body);
            if ok(&v) {
                return v;
            }
        }
        assert!(Instant::now() < deadline, "{path}: {status} {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_calls_tokens_errors_and_costs_live_and_after_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let (web, server, model) = (free_port(), free_port(), model_server());
    let text = config(web, server, model, &store);
    let (tactful, logs) = run_tactful_logged(dir.path(), &text, &[]);
    // The last banner line: the web room and the server both listen.
    logs.wait_for("the banner", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let feed = live(server, TOKEN, "room=lobby");
    let mut ws = enter(&format!("ws://127.0.0.1:{web}/ws"), "Alice").await;

    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Docs which button resets it?" }),
    )
    .await;
    let seen = read_until(&feed, "the reply", |v| v["type"] == "send");
    let at = |want: &dyn Fn(&Value) -> bool| seen.iter().position(want).unwrap_or(usize::MAX);
    let message = at(&|v| v["type"] == "message");
    let decision = at(&|v| v["type"] == "decision" && v["persona"] == "docs");
    let call = at(&|v| v["type"] == "agent_call");
    let answered = at(&|v| v["type"] == "answered");
    let sent = at(&|v| v["type"] == "send");
    assert!(
        message < decision && decision < call && call < answered && answered < sent,
        "heard, decided, called, answered, sent: {seen:#?}"
    );
    assert_eq!(seen[message]["sender"], "Alice");
    assert_eq!(seen[message]["text"], "@Docs which button resets it?");
    assert_eq!(seen[decision]["outcome"], "reply");
    assert!(
        seen.iter()
            .any(|v| v["type"] == "decision" && v["persona"] == "broken" && v["outcome"] != "reply"),
        "every persona's decision is shown: {seen:#?}"
    );
    let answered = &seen[answered];
    assert_eq!(answered["usage"]["prompt_tokens"], 120);
    assert_eq!(answered["usage"]["cached_tokens"], 100);
    assert_eq!(answered["usage"]["completion_tokens"], 7);
    assert_eq!(seen[sent]["text"], "Use the red button.");

    // A failing agent: its error, in its own words, live and in the log of
    // calls.
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Broken are you ok?" }),
    )
    .await;
    let seen = read_until(&feed, "the failure", |v| v["type"] == "error");
    let failed = seen
        .iter()
        .find(|v| v["type"] == "answered")
        .expect("an answered line");
    assert_eq!(failed["persona"], "broken");
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains("the tool crashed")),
        "{failed}"
    );

    let calls = poll(server, "/console/api/calls?room=lobby", |v| {
        v["calls"].as_array().is_some_and(|c| {
            c.len() == 2
                && c.iter()
                    .all(|c| c["outcome"] == "reply" || c["outcome"] == "error")
        })
    });
    let calls = calls["calls"].as_array().expect("calls").clone();
    assert_eq!(calls[0]["persona"], "broken", "newest first");
    assert_eq!(calls[0]["outcome"], "error");
    assert!(
        calls[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("the tool crashed"))
    );
    assert_eq!(calls[1]["persona"], "docs");
    assert_eq!(calls[1]["kind"], "reply");
    assert_eq!(calls[1]["outcome"], "reply");
    assert_eq!(calls[1]["prompt_tokens"], 120);
    assert_eq!(calls[1]["cached_tokens"], 100);
    assert!(calls[1]["latency_ms"].is_u64(), "{calls:?}");

    let costs = json_of(&get(server, "/console/api/costs").1);
    assert_eq!(costs["days"], 7);
    let room = &costs["rooms"][0];
    assert_eq!(room["room"], "lobby");
    assert_eq!(room["calls"], 2);
    assert_eq!(room["errors"], 1);
    assert_eq!(room["prompt_tokens"], 120);
    assert_eq!(room["cached_tokens"], 100);
    assert_eq!(room["messages"], 2);

    // Bad requests: a clear 4xx each.
    for (path, status, says) in [
        ("/console/api/calls", 400, "`room` is required"),
        ("/console/api/calls?room=nowhere", 404, "no room"),
        (
            "/console/api/calls?room=lobby&limit=-3",
            400,
            "positive whole number",
        ),
        ("/console/api/calls?room=lobby&limit=501", 400, "at most 500"),
        ("/console/api/costs?days=0", 400, "positive whole number"),
        ("/console/api/costs?days=400", 400, "at most 366"),
        ("/console/api/costs?days=seven", 400, "positive whole number"),
        ("/console/api/live?room=", 400, "`room` is required"),
    ] {
        let (got, body) = get(server, path);
        assert_eq!(got, status, "{path}: {body}");
        assert!(body.contains(says), "{path}: {body}");
    }
    for path in [
        "/console/api/calls?room=lobby",
        "/console/api/costs",
        "/console/api/live?room=lobby",
    ] {
        assert_eq!(http_request(server, "GET", path, &[], b"").0, 401, "{path}");
        let wrong = [("Authorization", "Bearer not-the-token")];
        assert_eq!(http_request(server, "GET", path, &wrong, b"").0, 401, "{path}");
        let other_site = [
            ("Authorization", &*format!("Bearer {TOKEN}")),
            ("Origin", "https://evil.example"),
        ];
        assert_eq!(
            http_request(server, "GET", path, &other_site, b"").0,
            403,
            "{path}"
        );
    }

    // After a kill -9 and a start, the calls are read back from the store.
    drop(tactful);
    let (tactful, logs) = run_tactful_logged(dir.path(), &text, &[]);
    logs.wait_for("the banner again", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let calls = json_of(&get(server, "/console/api/calls?room=lobby").1);
    assert_eq!(calls["calls"].as_array().map(Vec::len), Some(2), "{calls}");
    assert_eq!(calls["calls"][1]["cached_tokens"], 100);
    drop(tactful);
}
