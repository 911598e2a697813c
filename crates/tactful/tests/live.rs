//! `tactful run` as a user runs it: the web room answers, and SIGTERM
//! stops it cleanly.

use crate::common;

use std::io::BufRead;
use std::time::Duration;

use common::{Service, bot_messages, enter, get, id_of, say, spawn, spawn_with};
use serde_json::json;

const CONFIG: &str = r#"
[[persona]]
id = "docs"
name = "Docs"
agent = "main"

[agents.main]
kind = "script"
rules = [{ when = "(?i)reset", reply = "[[reply_to:{msg_id}]]\nHold the button for 5 s." }]

[platforms.web]
listen = "127.0.0.1:0"

[runtime]
edit_interval_ms = 100
shutdown_grace_seconds = 5

[server]
listen = "127.0.0.1:0"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_answers_in_the_web_room_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = dir.path().join("tactful.toml");
    std::fs::write(&cfg, CONFIG).expect("config");
    let mut svc = spawn(&["run", "-c", cfg.to_str().expect("utf-8")]);
    let mut line = String::new();
    svc.out.read_line(&mut line).expect("the metrics line");
    let server = line
        .split_whitespace()
        .find_map(|w| {
            w.strip_prefix("http://")
                .and_then(|a| a.strip_suffix("/healthz,"))
        })
        .unwrap_or_else(|| panic!("no health URL in {line:?}"))
        .to_owned();
    assert_eq!(get(&server, "/healthz").await, "ok\n");

    let mut ws = enter(&svc.ws_url, "Alice").await;
    // Typed, not picked from the autocomplete: the page's list is empty
    // and the room finds `@Docs` in the text.
    let ask = json!({ "type": "say", "room": "lobby", "text": "@Docs how do I reset?", "mentions": [] });
    say(&mut ws, ask).await;
    let replies = bot_messages(&mut ws, |got| got.iter().any(|m| m["reply_to"].is_string())).await;
    let reply = replies
        .iter()
        .find(|m| m["reply_to"].is_string())
        .expect("a reply");
    assert_eq!(reply["text"], "Hold the button for 5 s.");

    // The metrics count the turn (they are fed asynchronously: poll).
    let wanted = [
        "tactful_messages_in_total 1",
        "tactful_decisions_total{persona=\"docs\",outcome=\"reply\",reason=\"mention\",room=\"lobby\"} 1",
        "tactful_agent_calls_total{persona=\"docs\",agent=\"main\",kind=\"reply\",room=\"lobby\"} 1",
        "tactful_sends_total{persona=\"docs\",notice=\"false\",room=\"lobby\"} 1",
        "tactful_agent_call_seconds_count{kind=\"reply\"} 1",
    ];
    let mut metrics = String::new();
    for _ in 0..100 {
        metrics = get(&server, "/metrics").await;
        if wanted.iter().all(|w| metrics.contains(w)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for w in wanted {
        assert!(metrics.contains(w), "missing {w} in:\n{metrics}");
    }
    // The store's commits: at least the question (stored before it was
    // shown) and the reply (before it was sent), and the time they took.
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{metrics}"))
    };
    assert!(value("tactful_store_commits_total") >= 2.0, "{metrics}");
    assert!(value("tactful_store_commit_seconds_total") > 0.0, "{metrics}");
    svc.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_guide_answers_documentation_questions_and_ignores_chatter() {
    // A key exported for other tools (here one no server accepts) does not
    // switch an `--offline` demo to a model.
    let mut svc = spawn_with(
        &[
            "demo",
            "--listen",
            "127.0.0.1:0",
            "--store",
            ":memory:",
            "--offline",
        ],
        &[
            ("OPENAI_API_KEY", "sk-not-a-key"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
        ],
    );
    let mut banner = String::new();
    for _ in 0..3 {
        svc.out.read_line(&mut banner).expect("the banner");
    }
    assert!(
        banner.contains("Guide uses the built-in documentation (offline), Host a built-in offline agent"),
        "{banner}"
    );
    let mut ws = enter(&svc.ws_url, "Alice").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "lunch at noon anyone" }),
    )
    .await;
    let chatter = id_of(&mut ws, "lunch at noon anyone").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "what does ambient mode do?" }),
    )
    .await;
    let question = id_of(&mut ws, "what does ambient mode do?").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Host hello there", "mentions": [] }),
    )
    .await;
    let greeting = id_of(&mut ws, "@Host hello there").await;
    let replies = bot_messages(&mut ws, |got| {
        got.iter().any(|m| m["reply_to"] == question.as_str())
            && got.iter().any(|m| m["reply_to"] == greeting.as_str())
    })
    .await;
    let guide = replies
        .iter()
        .find(|m| m["reply_to"] == question.as_str())
        .expect("guide answered");
    assert_eq!(guide["sender"]["name"], "Guide");
    assert!(
        guide["text"]
            .as_str()
            .unwrap_or("")
            .contains("(from docs/faq.md, \"What is ambient mode?\")"),
        "{guide}"
    );
    let host = replies
        .iter()
        .find(|m| m["reply_to"] == greeting.as_str())
        .expect("host answered");
    assert_eq!(host["sender"]["name"], "Host");
    assert!(
        replies.iter().all(|m| m["reply_to"] != chatter.as_str()),
        "chatter got no reply: {replies:#?}"
    );

    // Two questions a moment apart land in one batch: each gets an answer.
    let mut ids = Vec::new();
    for q in ["what is floor control?", "how does the rate limit work?"] {
        say(&mut ws, json!({ "type": "say", "room": "lobby", "text": q })).await;
        ids.push(id_of(&mut ws, q).await);
    }
    let replies = bot_messages(&mut ws, |got| {
        ids.iter()
            .all(|id| got.iter().any(|m| m["reply_to"] == id.as_str()))
    })
    .await;
    for id in &ids {
        let r = replies
            .iter()
            .find(|m| m["reply_to"] == id.as_str())
            .expect("answered");
        assert_eq!(r["sender"]["name"], "Guide", "{r}");
    }
    svc.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_shuts_down_cleanly_when_nobody_reads_its_output() {
    let Service { child, out, ws_url } = spawn(&["demo", "--listen", "127.0.0.1:0", "--store", ":memory:"]);
    // Whoever started it stops reading: what it prints later goes nowhere.
    drop(out);
    let mut ws = enter(&ws_url, "Alice").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Host hi", "mentions": ["host"] }),
    )
    .await;
    let replies = bot_messages(&mut ws, |got| !got.is_empty()).await;
    assert_eq!(replies[0]["sender"]["name"], "Host");
    // Its last words hit a closed pipe: still a clean exit, not a panic.
    let status = child.terminate().await;
    assert!(status.success(), "clean exit with stdout closed: {status}");
}

/// Two services on one store would hand out the same message ids: the
/// second stops at once and says where the first one is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_service_on_the_same_store_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("demo.db");
    let store = store.to_str().expect("utf-8");
    let first = spawn(&["demo", "--listen", "127.0.0.1:0", "--store", store]);
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_tactful"))
        .args(["demo", "--listen", "127.0.0.1:0", "--store", store])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{err}");
    assert!(
        err.contains("another tactful is already using the store"),
        "{err}"
    );
    assert!(err.contains(&format!("pid {}", first.child.id())), "{err}");
    first.stop().await;
}

/// Everyone sees why each persona answered a message or not: as it is
/// decided, in the history a later joiner gets, and after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_room_shows_why_each_persona_answered_or_not() {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message as Ws;
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = dir.path().join("tactful.toml");
    std::fs::write(
        &cfg,
        CONFIG.replace(
            r#"rules = [{ when = "(?i)reset""#,
            r#"rules = [{ when = "(?i)break", reply = "python3: can't open file 'agent.py'", fail = true }, { when = "(?i)reset""#,
        ),
    )
    .expect("config");
    let svc = spawn(&["run", "-c", cfg.to_str().expect("utf-8")]);
    let mut ws = enter(&svc.ws_url, "Alice").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "hello all" }),
    )
    .await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Docs break it" }),
    )
    .await;
    let mut why = std::collections::HashMap::new();
    let mut ids = std::collections::HashMap::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        while !(why.values().any(|t: &String| t.starts_with("failed:"))
            && why.values().any(|t: &String| t.contains("not addressed"))
            && why.keys().all(|id| ids.contains_key(id)))
        {
            let Some(Ok(Ws::Text(t))) = ws.next().await else {
                continue;
            };
            let v: serde_json::Value = serde_json::from_str(&t).expect("json");
            if v["type"] == "message" {
                let id = v["message"]["id"].as_str().unwrap_or_default().to_owned();
                ids.insert(id.clone(), v["message"]["text"].clone());
                // A line noted before the message was shown comes with it.
                for w in v["message"]["why"].as_array().into_iter().flatten() {
                    if w["persona"] == "docs" {
                        why.insert(id.clone(), w["text"].as_str().unwrap_or_default().to_owned());
                    }
                }
            }
            if v["type"] == "why" && v["why"]["persona"] == "docs" {
                why.insert(
                    v["msg"].as_str().unwrap_or_default().to_owned(),
                    v["why"]["text"].as_str().unwrap_or_default().to_owned(),
                );
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the reasons arrive: {why:?}"));
    let text_of = |id: &str| {
        ids.get(id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} not seen in {ids:?}; {why:?}"))
    };
    for (id, line) in &why {
        if line.starts_with("failed:") {
            assert_eq!(text_of(id), "@Docs break it");
            assert!(line.contains("can't open file 'agent.py'"), "{line}");
        }
        if line.contains("not addressed") {
            assert_eq!(text_of(id), "hello all");
        }
    }
    // Someone joining later sees the same lines on the messages; so does
    // someone joining after a restart (read back from the store).
    let history = |url: String, name: &'static str| async move {
        let mut ws = enter(&url, name).await;
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let Some(Ok(Ws::Text(t))) = ws.next().await else {
                    continue;
                };
                let v: serde_json::Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "history" {
                    return v;
                }
            }
        })
        .await
        .expect("history")
    };
    let docs_line = |history: &serde_json::Value, text: &str| {
        let m = history["messages"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["text"] == text))
            .unwrap_or_else(|| panic!("{text} in the history: {history}"));
        assert_eq!(m["why"][0]["persona"], "docs", "{m}");
        m["why"][0]["text"].as_str().unwrap_or("").to_owned()
    };
    let before = history(svc.ws_url.clone(), "Bob").await;
    assert!(
        docs_line(&before, "hello all").contains("not addressed"),
        "{before}"
    );
    svc.stop().await;

    let svc = spawn(&["run", "-c", cfg.to_str().expect("utf-8")]);
    let after = history(svc.ws_url.clone(), "Carol").await;
    assert!(
        docs_line(&after, "hello all").contains("not addressed"),
        "{after}"
    );
    let failed = docs_line(&after, "@Docs break it");
    assert!(
        failed.starts_with("failed:") && failed.contains("can't open file 'agent.py'"),
        "{failed}"
    );
    svc.stop().await;
}

/// `tactful demo` serves the operator console beside its room, on the same
/// listener, and the room's page links to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_serves_the_console_beside_the_room() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("demo.db");
    let svc = spawn(&[
        "demo",
        "--listen",
        "127.0.0.1:0",
        "--store",
        store.to_str().expect("utf-8"),
    ]);
    let port: u16 = svc
        .ws_url
        .trim_start_matches("ws://127.0.0.1:")
        .trim_end_matches("/ws")
        .parse()
        .expect("port");
    let (status, page) = common::http_get(port, "/").expect("the room");
    assert_eq!(status, 200);
    assert!(
        page.contains("href=\"/console\""),
        "the room links to the console"
    );
    let (status, console) = common::http_get(port, "/console").expect("the console");
    assert_eq!(status, 200);
    assert!(console.contains("tactful console"));
    let (status, rooms) = common::http_get(port, "/console/api/rooms").expect("the API");
    assert_eq!(status, 200, "{rooms}");
    assert!(rooms.contains("\"rooms\""), "{rooms}");
    svc.stop().await;
}

/// Says `questions` in `room` of the demo, each after the first replying
/// to the Guide's answer before it (by the id the web room shows); the
/// Guide's answers.
async fn follow_ups(ws: &mut common::Socket, room: &str, questions: &[&str]) -> Vec<String> {
    let mut answers = Vec::new();
    let mut previous: Option<String> = None;
    for q in questions {
        let mut frame = json!({ "type": "say", "room": room, "text": q });
        if let Some(id) = &previous {
            frame["reply_to"] = json!(id);
        } else if room == "lobby" {
            frame["mentions"] = json!(["guide"]);
        }
        say(ws, frame).await;
        let asked = id_of(ws, q).await;
        let answers_it = |m: &serde_json::Value| m["reply_to"] == asked.as_str();
        let got = bot_messages(ws, |got| got.iter().any(answers_it)).await;
        let answer = got.into_iter().find(answers_it).expect("answered");
        assert_eq!(answer["sender"]["name"], "Guide", "{answer}");
        previous = answer["id"].as_str().map(str::to_owned);
        answers.push(answer["text"].as_str().unwrap_or_default().to_owned());
    }
    answers
}

/// The same conversation through `tactful replay` with the demo's printed
/// config, beside the documents the demo has built in: the Guide's
/// answers.
fn replayed(questions: &[&str], dm: bool) -> Vec<String> {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::create_dir(dir.path().join("docs")).expect("docs/");
    for file in [
        "README.md",
        "docs/faq.md",
        "docs/config.md",
        "docs/replay.md",
        "docs/questions.toml",
    ] {
        std::fs::copy(root.join(file), dir.path().join(file)).expect("a document");
    }
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tactful"))
            .args(args)
            .current_dir(dir.path())
            .env_remove("OPENAI_API_KEY")
            .output()
            .expect("tactful runs");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    };
    std::fs::write(dir.path().join("tactful.toml"), run(&["demo", "--print-config"])).expect("config");
    let scenario: String = questions
        .iter()
        .enumerate()
        .map(|(n, q)| {
            let mut line = json!({ "at": n * 10, "id": format!("q{n}"), "from": "alice", "text": q });
            if dm {
                line["dm"] = json!(true);
                line["to"] = json!("guide");
            } else if n == 0 {
                line["mentions"] = json!(["guide"]);
            }
            if n > 0 {
                line["reply_to"] = json!(format!("guide:{n}"));
            }
            format!("{line}\n")
        })
        .collect();
    std::fs::write(dir.path().join("talk.jsonl"), scenario).expect("scenario");
    run(&["replay", "-c", "tactful.toml", "talk.jsonl"])
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "send" && v["persona"] == "guide")
        .map(|v| v["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// "can you say more?" and "more?" to the Guide's answer, in the lobby
/// and in a direct room: live, the continuation `tactful replay` gives for
/// the same conversation with the demo's config. (The person replies to
/// the id the web room gave the answer; the Guide was shown that id and
/// not its own, so it searched the docs for "more?" instead.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saying_more_to_the_guide_continues_live_as_in_replay() {
    let questions = ["what does ambient mode do?", "can you say more?", "more?"];
    let svc = spawn(&[
        "demo",
        "--listen",
        "127.0.0.1:0",
        "--store",
        ":memory:",
        "--offline",
    ]);
    let mut ws = enter(&svc.ws_url, "Alice").await;
    let lobby = follow_ups(&mut ws, "lobby", &questions).await;
    say(&mut ws, json!({ "type": "dm", "persona": "guide" })).await;
    let dm = common::event(&mut ws, |v| v["type"] == "history" && v["room"] != "lobby").await;
    let dm = dm["room"].as_str().expect("a direct room").to_owned();
    let direct = follow_ups(&mut ws, &dm, &questions).await;
    for (live, replay) in [
        (&lobby, replayed(&questions, false)),
        (&direct, replayed(&questions, true)),
    ] {
        assert_eq!(live, &replay, "live answers as replay does");
        assert!(
            !live.iter().any(|a| a.contains("couldn't find")),
            "every follow-up answered: {live:#?}"
        );
        assert_ne!(live[1], live[2], "each \"more\" goes on: {live:#?}");
    }
    svc.stop().await;
}
