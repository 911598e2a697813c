//! The operator console's API against a running `tactful run`: the token
//! and the origin check, the rooms and their decisions read back from the
//! store (with the text they were about, and after a restart too), and a
//! clear 4xx for every kind of bad request, always as `{"error": …}` JSON;
//! a policy set only for a room tactful has heard of, and in the audit
//! when its answer comes; the console's address in `tactful run`'s banner.

use crate::common;

use common::{enter, free_port, http_request as request, json_of, run_tactful_logged, say};
use serde_json::{Value, json};

const TOKEN: &str = "console-s3cret-token-4711";

fn config(web: u16, server: u16, store: &std::path::Path) -> String {
    format!(
        r#"
[[persona]]
id = "docs"
name = "Docs"
agent = "main"

[agents.main]
kind = "script"
rules = [{{ when = "", reply = "hi there" }}]

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
    request(
        port,
        "GET",
        path,
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        b"",
    )
}

/// `method` on `path` with the token and `body`.
fn call(port: u16, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    request(
        port,
        method,
        path,
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        body,
    )
}

/// Waits (30 s at most) until the console lists `room`: a message of it
/// is in the store.
fn wait_heard(server: u16, room: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (status, body) = get(server, "/console/api/rooms");
        if status == 200
            && json_of(&body)["rooms"]
                .as_array()
                .is_some_and(|rooms| rooms.iter().any(|r| r["room"] == room))
        {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{room} heard: {body}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The audit's entries, newest first.
fn audit(server: u16) -> Vec<Value> {
    let (status, body) = get(server, "/console/api/audit");
    assert_eq!(status, 200, "{body}");
    json_of(&body)["entries"].as_array().cloned().unwrap_or_default()
}

/// The `error` of an answer, which must be `{"error": …}` JSON.
fn error_of(answer: &str) -> String {
    json_of(answer)["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error in {answer}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_api_shows_decisions_and_refuses_what_it_should() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let (web, server) = (free_port(), free_port());
    let (tactful, logs) = run_tactful_logged(dir.path(), &config(web, server, &store), &[]);
    // The last banner line: the web room and the server both listen.
    logs.wait_for("the banner", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let mut ws = enter(&format!("ws://127.0.0.1:{web}/ws"), "Alice").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "the build is red again" }),
    )
    .await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Docs are you there?" }),
    )
    .await;
    common::bot_messages(&mut ws, |m| m.iter().any(|m| m["text"] == "hi there")).await;

    // The page is served to anyone who reaches the listener; it holds
    // nothing secret.
    let (status, page) = request(server, "GET", "/console", &[], b"");
    assert_eq!(status, 200);
    assert!(page.contains("tactful console") && !page.contains(TOKEN));

    // The API wants the token, and no other site's page.
    assert_eq!(request(server, "GET", "/console/api/rooms", &[], b"").0, 401);
    let wrong = [("Authorization", "Bearer console-s3cret-token-4712")];
    assert_eq!(request(server, "GET", "/console/api/rooms", &wrong, b"").0, 401);
    let evil = [
        ("Authorization", &*format!("Bearer {TOKEN}")),
        ("Origin", "http://evil.example"),
    ];
    assert_eq!(request(server, "GET", "/console/api/rooms", &evil, b"").0, 403);
    let own = [
        ("Authorization", &*format!("Bearer {TOKEN}")),
        ("Origin", &*format!("http://localhost:{server}")),
    ];
    assert_eq!(request(server, "GET", "/console/api/rooms", &own, b"").0, 200);

    // Rooms, then the lobby's decisions with their text, newest first, once
    // the decisions are stored.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let decisions = loop {
        let (status, body) = get(server, "/console/api/decisions?room=lobby&limit=50");
        if status == 200 {
            let v = json_of(&body);
            if v["decisions"].as_array().is_some_and(|d| d.len() >= 3) {
                break v;
            }
        }
        assert!(std::time::Instant::now() < deadline, "decisions stored: {body}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let rooms = json_of(&get(server, "/console/api/rooms").1);
    assert_eq!(rooms["rooms"][0]["room"], "lobby", "{rooms}");
    let rows = decisions["decisions"].as_array().expect("rows");
    let of = |text: &str| {
        rows.iter()
            .find(|d| d["text"] == text)
            .unwrap_or_else(|| panic!("{text:?} in {rows:?}"))
            .clone()
    };
    let quiet = of("the build is red again");
    assert_eq!(
        (quiet["outcome"].as_str(), quiet["reason"].as_str()),
        (Some("record"), Some("not_addressed"))
    );
    assert_eq!(quiet["sender"], "Alice");
    let asked = of("@Docs are you there?");
    assert_eq!(
        (asked["outcome"].as_str(), asked["reason"].as_str()),
        (Some("reply"), Some("mention"))
    );
    assert!(
        rows.windows(2)
            .all(|w| w[0]["seq"].as_i64() > w[1]["seq"].as_i64()),
        "newest first"
    );
    // Paging: one at a time, backwards.
    let first = json_of(&get(server, "/console/api/decisions?room=lobby&limit=1").1);
    let next = first["next_before"].as_i64().expect("a next page");
    let second = json_of(
        &get(
            server,
            &format!("/console/api/decisions?room=lobby&limit=1&before={next}"),
        )
        .1,
    );
    assert!(second["decisions"][0]["seq"].as_i64() < Some(next), "{second}");

    // Try before applying: all mode would answer "the build is red again" too, at one
    // more model call; nothing is applied.
    let (status, body) = request(
        server,
        "POST",
        "/console/api/dry-run?room=lobby&messages=50",
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        b"mode = \"all\"\n",
    );
    assert_eq!(status, 200, "{body}");
    let run = json_of(&body)["dry_run"].clone();
    assert!(
        run["calls_proposed"].as_u64() > run["calls_now"].as_u64(),
        "{run}"
    );
    let changed = run["changed"].as_array().expect("changed");
    assert!(
        changed.iter().any(|c| c["text"] == "the build is red again"
            && c["now"]["reason"] == "not_addressed"
            && c["proposed"]["reason"] == "all"),
        "{run}"
    );
    assert!(
        changed.iter().all(|c| c["text"] != "@Docs are you there?"),
        "{run}"
    );
    let policy = json_of(&get(server, "/console/api/policy?room=lobby").1);
    assert_eq!(
        policy["console"],
        Value::Null,
        "a dry run applies nothing: {policy}"
    );
    for (path, body, status) in [
        ("/console/api/dry-run?room=lobby", &b"mode = \"shout\""[..], 400),
        ("/console/api/dry-run?room=lobby&messages=0", &b""[..], 400),
        ("/console/api/dry-run?room=nowhere", &b""[..], 404),
    ] {
        let got = request(
            server,
            "POST",
            path,
            &[("Authorization", &format!("Bearer {TOKEN}"))],
            body,
        );
        assert_eq!(got.0, status, "{path}: {}", got.1);
    }

    // Bad requests: a clear 4xx with the reason, and nothing changes.
    for (path, status, says) in [
        ("/console/api/decisions", 400, "`room` is required"),
        (
            "/console/api/decisions?room=lobby&limit=ten",
            400,
            "`limit` must be a positive whole number",
        ),
        (
            "/console/api/decisions?room=lobby&limit=100000",
            400,
            "`limit` is at most 500",
        ),
        (
            "/console/api/decisions?room=lobby&before=-3",
            400,
            "`before` must be",
        ),
        (
            "/console/api/decisions?room=nowhere",
            404,
            "no room \\\"nowhere\\\"",
        ),
    ] {
        let (got, body) = get(server, path);
        assert_eq!(got, status, "{path}: {body}");
        assert!(body.contains(says), "{path}: {body}");
    }
    let big = vec![b'x'; 1 << 20];
    let (got, _) = request(
        server,
        "POST",
        "/console/api/rooms",
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        &big,
    );
    assert!((400..500).contains(&got), "a 1 MB POST is a 4xx, got {got}");

    // The token never shows in the log.
    assert!(
        logs.lines().iter().all(|l| !l.contains(TOKEN)),
        "the token was logged"
    );
    drop(tactful);

    // After a restart, the decisions are still there.
    let (_tactful, logs) = run_tactful_logged(dir.path(), &config(web, server, &store), &[]);
    logs.wait_for("the banner again", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let again = json_of(&get(server, "/console/api/decisions?room=lobby&limit=50").1);
    assert!(
        again["decisions"]
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d["text"] == "the build is red again")),
        "{again}"
    );
}

/// Off loopback the console needs a token: `check` says so at the line.
#[test]
fn a_console_reachable_from_other_machines_needs_a_token() {
    let base = "[[persona]]\nid = \"docs\"\nagent = \"main\"\n\n[agents.main]\nkind = \"script\"\nrules = []\n\n[server]\n";
    let parse = |server: &str| {
        tactful::config::Config::parse(
            &format!("{base}{server}"),
            std::path::Path::new("t.toml"),
            &|_| None,
        )
    };
    let e = parse("listen = \"0.0.0.0:9090\"\n")
        .expect_err("no token")
        .to_string();
    assert!(
        e.contains("t.toml:10:10") && e.contains("server.console_token"),
        "{e}"
    );
    assert!(parse("listen = \"0.0.0.0:9090\"\nconsole_token = \"a-long-random-value\"\n").is_ok());
    assert!(
        parse("listen = \"127.0.0.1:9090\"\n").is_ok(),
        "loopback needs none"
    );
    let e = parse("listen = \"127.0.0.1:9090\"\nconsole_token = \" \"\n")
        .expect_err("empty")
        .to_string();
    assert!(e.contains("is empty"), "{e}");
}

/// A room's policy changed in the console takes effect on the next
/// message, is refused with `check`'s words when wrong (changing nothing),
/// survives a restart, is audited, and reverts to the file's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_set_in_the_console_applies_at_once_and_survives_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let (web, server) = (free_port(), free_port());
    let auth = format!("Bearer {TOKEN}");
    let h = [("Authorization", auth.as_str())];
    let (tactful, logs) = run_tactful_logged(dir.path(), &config(web, server, &store), &[]);
    // The last banner line: the web room and the server both listen.
    logs.wait_for("the banner", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let mut ws = enter(&format!("ws://127.0.0.1:{web}/ws"), "Alice").await;
    // A policy is set for a room tactful has heard of.
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "good morning" }),
    )
    .await;
    wait_heard(server, "lobby");

    // mention → all, for the lobby only.
    let (status, body) = request(
        server,
        "PUT",
        "/console/api/policy?room=lobby",
        &h,
        b"mode = \"all\"\n",
    );
    assert_eq!(status, 200, "{body}");
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "anyone around?" }),
    )
    .await;
    common::bot_messages(&mut ws, |m| m.iter().any(|m| m["text"] == "hi there")).await;
    let shown = json_of(&get(server, "/console/api/policy?room=lobby").1);
    assert_eq!(shown["console"], "mode = \"all\"\n");
    assert_eq!(shown["effective"]["docs"]["mode"], "all");

    // Refused like the file would be, and nothing changes.
    for (body, says) in [
        (&b"mode = \"shout\"\n"[..], "console:1:8: unknown variant `shout`"),
        (
            &b"mode = \"ambient\"\nallow_silence = false\n"[..],
            "needs allow_silence = true",
        ),
        (&b"\xff\xfe"[..], "UTF-8"),
    ] {
        let (status, answer) = request(server, "PUT", "/console/api/policy?room=lobby", &h, body);
        assert_eq!(status, 400, "{answer}");
        assert!(answer.contains(says), "{answer}");
    }
    let (status, _) = request(server, "PUT", "/console/api/policy", &h, b"mode = \"all\"\n");
    assert_eq!(status, 400, "no room");
    let (status, answer) = request(
        server,
        "PUT",
        "/console/api/policy?room=lobby",
        &h,
        &vec![b'#'; 1 << 20],
    );
    assert_eq!(status, 413, "a 1 MB body is refused before it is read");
    assert!(error_of(&answer).contains("64 KiB"), "{answer}");
    assert_eq!(
        json_of(&get(server, "/console/api/policy?room=lobby").1)["console"],
        "mode = \"all\"\n"
    );
    assert_eq!(
        request(
            server,
            "PUT",
            "/console/api/policy?room=lobby",
            &[],
            b"mode = \"all\""
        )
        .0,
        401
    );

    // After a restart (kill -9), still set.
    drop(tactful);
    let (tactful, logs) = run_tactful_logged(dir.path(), &config(web, server, &store), &[]);
    logs.wait_for("the banner again", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let mut ws = enter(&format!("ws://127.0.0.1:{web}/ws"), "Bob").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "still open to all?" }),
    )
    .await;
    // (Live frames only: the history sent on entering is not counted.)
    common::bot_messages(&mut ws, |m| m.iter().any(|m| m["text"] == "hi there")).await;

    // Revert: back to the file (mention mode); the audit says who, when,
    // old → new, newest first.
    let (status, body) = request(server, "DELETE", "/console/api/policy?room=lobby", &h, b"");
    assert_eq!(status, 200, "{body}");
    assert_eq!(json_of(&body)["reverted"], true);
    assert_eq!(
        json_of(&get(server, "/console/api/policy?room=lobby").1)["effective"]["docs"]["mode"],
        "mention"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let entries = loop {
        let v = json_of(&get(server, "/console/api/audit").1);
        let n = v["entries"].as_array().map_or(0, Vec::len);
        if n >= 2 {
            break v["entries"].clone();
        }
        assert!(std::time::Instant::now() < deadline, "audited: {v}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(
        entries[0]["new"],
        Value::Null,
        "the revert, newest first: {entries}"
    );
    assert_eq!(entries[0]["old"], "mode = \"all\"\n");
    assert_eq!(entries[1]["new"], "mode = \"all\"\n");
    assert_eq!(entries[1]["who"], "console");
    drop(tactful);
}

/// The console's default layer changes every room without a layer of its
/// own, can be tried on one room first, and reverts like a room's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_layer_set_in_the_console_reaches_every_room() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let (web, server) = (free_port(), free_port());
    let auth = format!("Bearer {TOKEN}");
    let h = [("Authorization", auth.as_str())];
    let (_tactful, logs) = run_tactful_logged(dir.path(), &config(web, server, &store), &[]);
    // The last banner line: the web room and the server both listen.
    logs.wait_for("the banner", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let mut ws = enter(&format!("ws://127.0.0.1:{web}/ws"), "Alice").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "just chatting" }),
    )
    .await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Docs hello" }),
    )
    .await;
    common::bot_messages(&mut ws, |m| m.iter().any(|m| m["text"] == "hi there")).await;

    // Tried first: on the lobby, the chatter would now be answered.
    let all = b"mode = \"all\"\n";
    let (status, body) = request(server, "POST", "/console/api/dry-run?room=default", &h, all);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("on=<room id>"), "{body}");
    let (status, body) = request(
        server,
        "POST",
        "/console/api/dry-run?room=default&on=lobby",
        &h,
        all,
    );
    assert_eq!(status, 200, "{body}");
    let tried = json_of(&body);
    assert_eq!(tried["tried_on"], "lobby");
    let changed = tried["dry_run"]["changed"].as_array().expect("changed").clone();
    assert!(
        changed
            .iter()
            .any(|c| c["text"] == "just chatting" && c["proposed"]["outcome"] == "reply"),
        "{tried}"
    );

    // Applied: a room never configured anywhere answers chatter.
    let (status, body) = request(server, "PUT", "/console/api/policy?room=default", &h, all);
    assert_eq!(status, 200, "{body}");
    let shown = json_of(&get(server, "/console/api/policy?room=default").1);
    assert_eq!(shown["console"], "mode = \"all\"\n");
    assert_eq!(shown["in_file"], true);
    assert_eq!(shown["effective"]["docs"]["mode"], "all");
    say(&mut ws, json!({ "type": "join", "room": "garden" })).await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "garden", "text": "the weather is lovely" }),
    )
    .await;
    // (Only the garden's chatter can be answered now.)
    common::bot_messages(&mut ws, |m| m.iter().any(|m| m["text"] == "hi there")).await;

    let (status, body) = request(server, "DELETE", "/console/api/policy?room=default", &h, b"");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        json_of(&get(server, "/console/api/policy?room=default").1)["effective"]["docs"]["mode"],
        "mention"
    );
}

/// A change names a room tactful has heard of, as a platform names it: an
/// id no platform can have (a control character, 300 characters,
/// `@alice`, a space at its end, an unknown prefix) is 400, a room never
/// heard of 404, an empty layer 400 (Revert is the way back); for none of
/// them is anything stored or audited, whether set, reverted or tried. A
/// room the file names is known before anyone speaks there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_is_set_only_for_a_room_tactful_has_heard_of() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let (web, server) = (free_port(), free_port());
    let text = format!(
        "{}\n[rooms.\"ops\"]\nmode = \"mention\"\n",
        config(web, server, &store)
    );
    let (_tactful, logs) = run_tactful_logged(dir.path(), &text, &[]);
    logs.wait_for("the banner", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let mut ws = enter(&format!("ws://127.0.0.1:{web}/ws"), "Alice").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "good morning" }),
    )
    .await;
    wait_heard(server, "lobby");
    // One process on SQLite: nothing to say about owners.
    let rooms = json_of(&get(server, "/console/api/rooms").1);
    assert!(rooms["rooms"][0].get("owner").is_none(), "{rooms}");

    let all = b"mode = \"all\"\n";
    let long = "x".repeat(300);
    for (room, status, says) in [
        ("lob%07by", 400, "control"),
        (long.as_str(), 400, "256 bytes"),
        ("%40alice", 400, "a person is not a room"),
        ("lobby%20", 400, "space"),
        ("web%3Alobby", 400, "no platform's room"),
        ("looby", 404, "has not heard of"),
        ("tg%3A-100123", 404, "has not heard of"),
    ] {
        for (method, path, body) in [
            ("PUT", format!("/console/api/policy?room={room}"), &all[..]),
            ("DELETE", format!("/console/api/policy?room={room}"), &b""[..]),
            ("POST", format!("/console/api/dry-run?room={room}"), &all[..]),
        ] {
            let (got, answer) = call(server, method, &path, body);
            assert_eq!(got, status, "{method} {path}: {answer}");
            assert!(error_of(&answer).contains(says), "{method} {path}: {answer}");
        }
    }
    // An empty layer (blank, or only comments) is refused: Revert is the
    // way back to the file.
    for body in [&b""[..], &b"  \n# nothing here\n"[..]] {
        let (got, answer) = call(server, "PUT", "/console/api/policy?room=lobby", body);
        assert_eq!(got, 400, "{answer}");
        assert!(error_of(&answer).contains("use Revert"), "{answer}");
    }
    // Nothing was stored or audited.
    assert_eq!(audit(server), Vec::<Value>::new(), "nothing audited");
    for room in ["looby", "%40alice", "lobby", "tg%3A-100123"] {
        let shown = json_of(&get(server, &format!("/console/api/policy?room={room}")).1);
        assert_eq!(shown["console"], Value::Null, "{room}: {shown}");
    }

    // Rooms tactful knows: one heard, one the file names.
    for room in ["lobby", "ops"] {
        let (got, answer) = call(server, "PUT", &format!("/console/api/policy?room={room}"), all);
        assert_eq!(got, 200, "{room}: {answer}");
        let (got, answer) = call(server, "POST", &format!("/console/api/dry-run?room={room}"), all);
        assert_eq!(got, 200, "{room}: {answer}");
    }
    let rooms: Vec<Value> = audit(server).iter().map(|e| e["room"].clone()).collect();
    assert_eq!(rooms, [json!("ops"), json!("lobby")], "newest first");
}

/// Every error the API gives is `{"error": …}` JSON with its status, axum's
/// own included: a body over the limit, a method a path does not take, a
/// path the API does not have, a missing parameter, a missing token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_the_console_api_gives_is_json() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let (web, server) = (free_port(), free_port());
    let (_tactful, logs) = run_tactful_logged(dir.path(), &config(web, server, &store), &[]);
    logs.wait_for("the banner", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let big = vec![b'#'; 1 << 20];
    for (method, path, body, status, says) in [
        ("PUT", "/console/api/policy?room=lobby", &big[..], 413, "64 KiB"),
        ("POST", "/console/api/dry-run?room=lobby", &big[..], 413, "64 KiB"),
        ("PATCH", "/console/api/policy?room=lobby", &b""[..], 405, "PUT"),
        ("POST", "/console/api/rooms", &b"x"[..], 405, "GET"),
        ("GET", "/console/api/no-such-thing", &b""[..], 404, "no such path"),
        (
            "GET",
            "/console/api/decisions",
            &b""[..],
            400,
            "`room` is required",
        ),
        (
            "PUT",
            "/console/api/policy",
            &b"mode = \"all\""[..],
            400,
            "`room` is required",
        ),
    ] {
        let (got, answer) = call(server, method, path, body);
        assert_eq!(got, status, "{method} {path}: {answer}");
        assert!(error_of(&answer).contains(says), "{method} {path}: {answer}");
    }
    let (got, answer) = request(server, "GET", "/console/api/rooms", &[], b"");
    assert_eq!(got, 401, "{answer}");
    assert!(error_of(&answer).contains("console token"), "{answer}");
}

/// A change is in the audit when its answer comes back: the answer waits
/// for the store to keep it (it once came first, and an audit read at once
/// missed the change one time in eight).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_is_in_the_audit_when_its_answer_comes_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let (web, server) = (free_port(), free_port());
    let (_tactful, logs) = run_tactful_logged(dir.path(), &config(web, server, &store), &[]);
    logs.wait_for("the banner", |l| {
        l.contains(&format!("127.0.0.1:{server}/healthz"))
    });
    let mut ws = enter(&format!("ws://127.0.0.1:{web}/ws"), "Alice").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "good morning" }),
    )
    .await;
    wait_heard(server, "lobby");
    for i in 0..16 {
        let layer = format!("mode = \"all\"\n# change {i}\n");
        let (status, answer) = call(server, "PUT", "/console/api/policy?room=lobby", layer.as_bytes());
        assert_eq!(status, 200, "{answer}");
        let entries = audit(server);
        assert_eq!(
            entries.first().map(|e| e["new"].clone()),
            Some(json!(layer)),
            "change {i} is in the audit at once: {entries:?}"
        );
        if i % 4 == 3 {
            let (status, answer) = call(server, "DELETE", "/console/api/policy?room=lobby", b"");
            assert_eq!(status, 200, "{answer}");
            let entries = audit(server);
            assert_eq!(entries[0]["new"], Value::Null, "the revert at once: {entries:?}");
            assert_eq!(entries[0]["old"], json!(layer), "{entries:?}");
        }
    }
}

/// `tactful run` says where its console is, as `demo` does; the web room
/// links to a console only where its own listener serves one: `run`'s is
/// on `[server] listen` (the welcome says none), `demo`'s beside the room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_banner_names_the_console_and_the_room_links_only_to_one_it_serves() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tactful.db");
    let (web, server) = (free_port(), free_port());
    let (_tactful, logs) = run_tactful_logged(dir.path(), &config(web, server, &store), &[]);
    logs.wait_for("the console's address in the banner", |l| {
        l.contains(&format!("http://127.0.0.1:{server}/console"))
    });
    let welcome = |url: String, name: &'static str| async move {
        let mut ws = common::open(&url).await;
        say(&mut ws, json!({ "type": "hello", "name": name })).await;
        common::event(&mut ws, |v| v["type"] == "welcome").await
    };
    let here = welcome(format!("ws://127.0.0.1:{web}/ws"), "Alice").await;
    assert!(
        here.get("console").is_some_and(Value::is_null),
        "no console on the room's listener: {here}"
    );

    let demo_store = dir.path().join("demo.db");
    let demo = common::spawn(&[
        "demo",
        "--listen",
        "127.0.0.1:0",
        "--store",
        demo_store.to_str().expect("utf-8"),
    ]);
    let there = welcome(demo.ws_url.clone(), "Bob").await;
    assert_eq!(
        there["console"], "/console",
        "the demo's room links to it: {there}"
    );
    demo.stop().await;
}
