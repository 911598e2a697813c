//! Labels from the console against a running `tactful run`: decisions
//! marked "should have answered" / "should have stayed quiet" with who and
//! when, refused clearly when they cannot be kept, cleared, kept across a
//! restart; the room's marks exported as a file `tactful eval` scores as
//! it is; and the policy panel's Try scoring the policy in force and the
//! proposed one on them.

use crate::common;

use common::{enter, free_port, http_request as request, json_of, run_tactful_logged, say};
use serde_json::{Value, json};

const TOKEN: &str = "labels-console-token-2718";

/// Docs answers when addressed; Guide (a `kb` agent, run for real by the
/// score) hears everything and answers what its page says.
fn config(web: u16, server: u16, store: &std::path::Path) -> String {
    format!(
        r#"
[[persona]]
id = "docs"
name = "Docs"
agent = "main"

[[persona]]
id = "guide"
name = "Guide"
agent = "wiki"

[agents.main]
kind = "script"
rules = [{{ when = "", reply = "hi there" }}]

[agents.wiki]
kind = "kb"
paths = ["wiki.md"]

[rooms.default.personas.guide]
mode = "all"

# Counts its runs: a Try must start no program.
[[hook]]
name = "count"
on = "before_send"
kind = "command"
command = "sh"
args = ["-c", "cat > /dev/null; echo run >> '{runs}'; echo '{{\"action\":\"send\"}}'"]

[platforms.web]
listen = "127.0.0.1:{web}"

[store]
path = "{}"

[server]
listen = "127.0.0.1:{server}"
console_token = "{TOKEN}"
"#,
        store.display(),
        runs = store.with_file_name("hook-runs").display()
    )
}

fn call(port: u16, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
    let (status, body) = request(
        port,
        method,
        path,
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        body,
    );
    let v = serde_json::from_str(&body).unwrap_or(Value::String(body));
    (status, v)
}

/// The lobby's decisions once `n` are stored, newest first.
fn decisions(server: u16, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (status, body) = call(server, "GET", "/console/api/decisions?room=lobby&limit=50", b"");
        if status == 200 && body["decisions"].as_array().is_some_and(|d| d.len() >= n) {
            return body["decisions"].as_array().cloned().unwrap_or_default();
        }
        assert!(std::time::Instant::now() < deadline, "decisions stored: {body}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn rows_now(server: u16) -> Vec<Value> {
    call(server, "GET", "/console/api/decisions?room=lobby&limit=50", b"").1["decisions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn mark(server: u16, msg: &str, persona: &str, want: &str) -> (u16, Value) {
    call(
        server,
        "PUT",
        &format!("/console/api/labels?room=lobby&msg={msg}&persona={persona}&want={want}"),
        b"",
    )
}

fn marks(server: u16) -> Vec<Value> {
    let (status, body) = call(server, "GET", "/console/api/labels?room=lobby&as=list", b"");
    assert_eq!(status, 200, "{body}");
    body["labels"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_marked_in_the_console_are_kept_exported_and_scored() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("wiki.md"),
        "# The wiki\n\nThe team wiki lives at wiki.example.org; log in with your work account.\n",
    )
    .expect("wiki");
    let store = dir.path().join("tactful.db");
    let (web, server) = (free_port(), free_port());
    let text = config(web, server, &store);
    let (tactful, logs) = run_tactful_logged(dir.path(), &text, &[]);
    let _shown = common::ShownOnPanic(logs.clone());
    logs.wait_for("the banner", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let mut ws = enter(&format!("ws://127.0.0.1:{web}/ws"), "Alice").await;
    for line in [
        "@Docs are you there?",
        "where does the team wiki live?",
        "lunch at noon?",
    ] {
        say(&mut ws, json!({ "type": "say", "room": "lobby", "text": line })).await;
    }
    common::bot_messages(&mut ws, |m| m.iter().any(|m| m["text"] == "hi there")).await;
    // Three messages, two personas: six decisions.
    let rows = decisions(server, 6);
    let id = |text: &str| {
        rows.iter()
            .find(|d| d["text"] == text)
            .and_then(|d| d["msg"].as_str())
            .unwrap_or_else(|| panic!("{text:?} in {rows:?}"))
            .to_owned()
    };
    let (asked, wiki, lunch) = (
        id("@Docs are you there?"),
        id("where does the team wiki live?"),
        id("lunch at noon?"),
    );

    // Docs should have answered the wiki question too; nobody the lunch.
    let (status, body) = mark(server, &asked, "docs", "reply");
    assert_eq!(status, 200, "{body}");
    let label = &body["label"];
    assert_eq!(
        (label["who"].as_str(), label["want"].as_str()),
        (Some("console"), Some("reply"))
    );
    assert!(
        label["at"].as_u64().is_some_and(|t| t > 1_700_000_000_000),
        "{label}"
    );
    for (msg, persona, want) in [
        (&wiki, "docs", "reply"),
        (&lunch, "docs", "silent"),
        (&wiki, "guide", "reply"),
        (&lunch, "guide", "silent"),
    ] {
        assert_eq!(mark(server, msg, persona, want).0, 200);
    }
    // Marking again changes the mark; it is not a second one.
    assert_eq!(mark(server, &lunch, "docs", "reply").0, 200);
    assert_eq!(mark(server, &lunch, "docs", "silent").0, 200);
    assert_eq!(marks(server).len(), 5);

    // What cannot be a mark is refused, as JSON, and nothing is kept.
    let refused = [
        (
            format!("/console/api/labels?room=lobby&msg={wiki}&persona=docs&want=maybe"),
            400,
            "`want` is `reply`",
        ),
        (
            format!("/console/api/labels?room=lobby&msg={wiki}&persona=nobody&want=reply"),
            400,
            "\"nobody\" is not a persona (personas: docs, guide)",
        ),
        (
            "/console/api/labels?room=lobby&msg=no-such-message&persona=docs&want=reply".to_owned(),
            404,
            "only those can be marked",
        ),
        (
            format!("/console/api/labels?msg={wiki}&persona=docs&want=reply"),
            400,
            "`room` is required",
        ),
        (
            "/console/api/labels?room=lobby&persona=docs&want=reply".to_owned(),
            400,
            "`msg` is required",
        ),
    ];
    for (path, want_status, says) in refused {
        let (status, body) = call(server, "PUT", &path, b"");
        assert_eq!(status, want_status, "{path}: {body}");
        assert!(
            body["error"].as_str().is_some_and(|e| e.contains(says)),
            "{path}: {body}"
        );
    }
    // Docs's own reply cannot be marked: marks are on what it heard.
    let reply = rows_now(server)
        .into_iter()
        .find(|d| d["sender"] == "Docs")
        .and_then(|d| d["msg"].as_str().map(str::to_owned));
    if let Some(reply) = reply {
        let (status, body) = mark(server, &reply, "guide", "reply");
        assert_eq!(status, 400, "{body}");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.contains("a persona's own message")),
            "{body}"
        );
    }
    let (status, body) = call(server, "POST", "/console/api/labels?room=lobby", b"");
    assert_eq!(status, 405, "{body}");
    let anyone = request(server, "GET", "/console/api/labels?room=lobby", &[], b"");
    assert_eq!(anyone.0, 401, "marks need the token");
    assert_eq!(marks(server).len(), 5);

    // The export is a labelled file `tactful eval` takes as it is: the
    // room's messages (not Docs's own reply: replayed, Docs speaks for
    // itself), each mark an `expect`.
    let (status, file) = request(
        server,
        "GET",
        "/console/api/labels?room=lobby",
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        b"",
    );
    assert_eq!(status, 200, "{file}");
    assert!(!file.contains("hi there"), "{file}");
    let labelled = dir.path().join("lobby.labelled.jsonl");
    std::fs::write(&labelled, &file).expect("write");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tactful"))
        .current_dir(dir.path())
        .args([
            "eval",
            "-c",
            "tactful.toml",
            "lobby.labelled.jsonl",
            "--format",
            "json",
        ])
        .env_remove("TACTFUL_LOG")
        .output()
        .expect("tactful eval runs");
    assert!(o.status.success(), "{}", common::said(&o));
    let r = json_of(&String::from_utf8_lossy(&o.stdout));
    // Docs in mention mode: the mention answered, the wiki question missed,
    // quiet at lunch. Guide answers the wiki question from its page, and
    // says nothing at lunch.
    let of = |p: &str, k: &str| r["personas"][p][k].as_u64();
    assert_eq!(
        (of("docs", "hits"), of("docs", "misses"), of("docs", "quiet")),
        (Some(1), Some(1), Some(1)),
        "{r}"
    );
    assert_eq!(
        (of("guide", "hits"), of("guide", "false_alarms")),
        (Some(1), Some(0)),
        "{r}"
    );

    // Try mode = "all" for Docs: the score on the marks, now → proposed.
    let hook_runs = || {
        std::fs::read_to_string(dir.path().join("hook-runs"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let runs_before = hook_runs();
    assert!(runs_before >= 1, "the hook runs on live replies");
    let (status, body) = call(
        server,
        "POST",
        "/console/api/dry-run?room=lobby",
        b"[personas.docs]\nmode = \"all\"\n",
    );
    assert_eq!(status, 200, "{body}");
    let score = &body["score"];
    assert_eq!(score["labels"], 5, "{score}");
    // Now: 2 of 3 wanted answers, no false alarm. With the change, Docs
    // hears everything but the floor still gives the wiki question to
    // Guide, who answers first; and at lunch, with Guide silent, Docs
    // speaks: a false alarm. The score says the change is worse.
    let pct = |v: &Value| v.as_f64().map(|x| (x * 100.0).round());
    assert_eq!(
        (pct(&score["now"]["precision"]), pct(&score["now"]["recall"])),
        (Some(100.0), Some(67.0)),
        "{score}"
    );
    assert_eq!(
        (
            pct(&score["proposed"]["precision"]),
            pct(&score["proposed"]["recall"])
        ),
        (Some(67.0), Some(67.0)),
        "{score}"
    );
    assert_eq!(score["proposed"]["false_alarms"], 1, "{score}");
    assert_eq!(
        score["stood_in"],
        json!([]),
        "script and kb agents run as they are"
    );
    assert_eq!(hook_runs(), runs_before, "a Try starts no hook");

    // Cleared, a mark is gone; clearing it again says there was none.
    let clear = format!("/console/api/labels?room=lobby&msg={lunch}&persona=guide");
    assert_eq!(call(server, "DELETE", &clear, b"").1["cleared"], true);
    assert_eq!(call(server, "DELETE", &clear, b"").1["cleared"], false);
    assert_eq!(marks(server).len(), 4);

    // After a restart (kill -9), the marks are there, with who and when.
    drop(tactful);
    let (_tactful, logs) = run_tactful_logged(dir.path(), &text, &[]);
    logs.wait_for("the banner", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let kept = marks(server);
    assert_eq!(kept.len(), 4, "{kept:?}");
    assert!(
        kept.iter()
            .all(|l| l["who"] == "console" && l["at"].as_u64().is_some()),
        "{kept:?}"
    );
    assert!(
        !kept
            .iter()
            .any(|l| l["msg"] == lunch.as_str() && l["persona"] == "guide"),
        "the cleared mark stays cleared: {kept:?}"
    );
    assert!(
        !logs.lines().iter().any(|l| l.contains(TOKEN)),
        "the token is never logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_without_marks_exports_nothing_to_score_and_try_says_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("wiki.md"), "# Wiki\n\nwiki.example.org\n").expect("wiki");
    let (web, server) = (free_port(), free_port());
    let (_tactful, logs) =
        run_tactful_logged(dir.path(), &config(web, server, &dir.path().join("t.db")), &[]);
    logs.wait_for("the banner", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let mut ws = enter(&format!("ws://127.0.0.1:{web}/ws"), "Bob").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Docs hello" }),
    )
    .await;
    decisions(server, 2);
    let (status, body) = call(
        server,
        "POST",
        "/console/api/dry-run?room=lobby",
        b"mode = \"all\"\n",
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["score"], Value::Null, "{body}");
    let (status, file) = request(
        server,
        "GET",
        "/console/api/labels?room=lobby",
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        b"",
    );
    assert_eq!(status, 200);
    // Only comments: `tactful eval` says there is nothing to score.
    assert!(file.lines().all(|l| l.starts_with('#')), "{file}");
    let (status, body) = call(server, "GET", "/console/api/labels?room=lobby&as=csv", b"");
    assert_eq!(status, 400, "{body}");
}
