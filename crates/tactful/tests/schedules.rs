//! Scheduled turns in the live service: a schedule posts in the web room
//! on its own (no placeholder first), its last run is stored, and a
//! restart makes up for a missed run within its catch-up once, while a
//! schedule whose missed run is older than its catch-up lets it go.

use crate::common;

use std::time::Duration;

use common::{enter, spawn};
use futures::StreamExt;
use tokio_tungstenite::tungstenite::Message as Ws;

fn config(store: &std::path::Path, schedules: &str) -> String {
    format!(
        r#"
[[persona]]
id = "docs"
name = "Docs"
agent = "main"

[agents.main]
kind = "script"
rules = [
  {{ when = "tick", reply = "tick" }},
  {{ when = "anniversary", reply = "a year passed" }},
  {{ when = "new year", reply = "happy new year" }},
]

[platforms.web]
listen = "127.0.0.1:0"

[runtime]
shutdown_grace_seconds = 5

[store]
path = "{}"

{schedules}
"#,
        store.display()
    )
}

/// The bot messages shown in the lobby (first posts, not edits), until
/// one has the text `until`.
async fn posts_until(ws: &mut common::Socket, until: &str) -> Vec<String> {
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while !seen.iter().any(|t: &String| t == until) {
            let Some(Ok(Ws::Text(t))) = ws.next().await else {
                continue;
            };
            let v: serde_json::Value = serde_json::from_str(&t).expect("json");
            if v["type"] == "message" && v["message"]["sender"]["bot"] == true {
                seen.extend(v["message"]["text"].as_str().map(str::to_owned));
            }
            if v["type"] == "history" {
                for m in v["messages"].as_array().into_iter().flatten() {
                    if m["sender"]["bot"] == true {
                        seen.extend(m["text"].as_str().map(str::to_owned));
                    }
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{until:?} was posted; saw {seen:?}"));
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_posts_in_the_web_room_and_a_restart_makes_up_one_missed_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let cfg = dir.path().join("tactful.toml");

    // Every second (a six-field expression, seconds first).
    std::fs::write(
        &cfg,
        config(
            &store,
            "[[schedule]]\nname = \"tick\"\ncron = \"* * * * * *\"\npersona = \"docs\"\nroom = \"lobby\"\nprompt = \"Post the tick.\"\n",
        ),
    )
    .expect("config");
    let svc = spawn(&["run", "-c", cfg.to_str().expect("utf-8")]);
    let mut ws = enter(&svc.ws_url, "Alice").await;
    let seen = posts_until(&mut ws, "tick").await;
    assert!(
        !seen.iter().any(|t| t == "…"),
        "a scheduled post has no placeholder: {seen:?}"
    );
    svc.stop().await;
    let stored = tactful_store::Store::open(&store)
        .expect("store")
        .platform_state()
        .expect("state");
    let last: u64 = stored
        .get("schedule:tick")
        .unwrap_or_else(|| panic!("the last run is stored: {stored:?}"))
        .parse()
        .expect("milliseconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    assert!(
        now.abs_diff(last) < 60_000,
        "the last run is recent: {last} vs {now}"
    );

    // Both yearly, last run on 1 January 2025, so the 2026 run was missed:
    // one may make up a run that old (a year of catch-up) and does, once;
    // the other (ten minutes of catch-up, the default) lets it go.
    let conn = rusqlite::Connection::open(&store).expect("sqlite");
    for name in ["new-year", "anniversary"] {
        conn.execute(
            "INSERT OR REPLACE INTO platform_state (key, value) VALUES (?1, ?2)",
            rusqlite::params![format!("schedule:{name}"), "1735689600000"],
        )
        .expect("seed the last run");
    }
    drop(conn);
    std::fs::write(
        &cfg,
        config(
            &store,
            "[[schedule]]\nname = \"new-year\"\ncron = \"0 0 1 1 *\"\npersona = \"docs\"\nroom = \"lobby\"\nprompt = \"Wish a happy new year.\"\n\n\
             [[schedule]]\nname = \"anniversary\"\ncron = \"@yearly\"\npersona = \"docs\"\nroom = \"lobby\"\nprompt = \"Mark the anniversary.\"\ncatch_up_seconds = 31622400\n",
        ),
    )
    .expect("config");
    let svc = spawn(&["run", "-c", cfg.to_str().expect("utf-8")]);
    let mut ws = enter(&svc.ws_url, "Alice").await;
    // Both are decided at start, in this order, and one room's posts go
    // out in order: the new-year one, had it been made up, came first.
    let seen = posts_until(&mut ws, "a year passed").await;
    assert!(!seen.iter().any(|t| t == "happy new year"), "{seen:?}");
    assert_eq!(
        seen.iter().filter(|t| *t == "a year passed").count(),
        1,
        "made up once: {seen:?}"
    );
    svc.stop().await;
}
