//! SIGHUP reloads the config: a file that does not pass its check changes
//! nothing (and says why, with the line); a good one changes a room's
//! policy for the next message, while a turn in flight goes on; SIGHUP
//! never stops the process.

use crate::common;

use common::{bot_messages, enter, free_port, http_request, json_of, run_tactful_logged, say};
use serde_json::json;

fn config(port: u16, rooms: &str) -> String {
    format!(
        r#"
[[persona]]
id = "docs"
name = "Docs"
agent = "main"

[agents.main]
kind = "script"
rules = [
  {{ when = "slow", reply = "the slow answer", delay_ms = 1500 }},
  {{ when = "", reply = "answer to {{text}}" }},
]

[platforms.web]
listen = "127.0.0.1:{port}"

[store]
path = ":memory:"

{rooms}
"#
    )
}

/// A second persona with its own agent, and room settings.
const CHEF: &str = r#"
[[persona]]
id = "chef"
name = "Chef"
agent = "cook"

[agents.cook]
kind = "script"
rules = [
  { when = "slow", reply = "chef's slow answer", delay_ms = 60000 },
  { when = "", reply = "chef: {text}" },
]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_rooms_personas_and_agents_and_a_broken_file_changes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = dir.path().join("tactful.toml");
    let port = free_port();
    let (tactful, logs) = run_tactful_logged(dir.path(), &config(port, ""), &[]);
    logs.wait_for("the banner", |l| l.contains(&format!("127.0.0.1:{port}")));
    let mut ws = enter(&format!("ws://127.0.0.1:{port}/ws"), "Alice").await;

    // A turn in flight across the reload.
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Docs slow please" }),
    )
    .await;
    logs.wait_for("the slow turn to start", |l| l.contains("a new room: lobby"));

    // mention → all for docs in the lobby; a persona added with its agent;
    // docs's agent changed (rebuilt); a [runtime] change waits for a
    // restart.
    let rooms = "[rooms.lobby.personas.docs]\nmode = \"all\"\n[runtime]\nshutdown_grace_seconds = 7\n";
    let good = config(port, &format!("{rooms}{CHEF}")).replace("answer to", "reply to");
    std::fs::write(&cfg, good).expect("config");
    common::hup(tactful.id());
    let applied = logs.wait_for("the reload", |l| l.contains("config reloaded"));
    for part in [
        "rooms_changed=true",
        r#"personas_added=["chef"]"#,
        r#"agents_rebuilt=["cook", "main"]"#,
        "apply only after a restart: runtime",
    ] {
        assert!(applied.contains(part), "{part} in {applied}");
    }

    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "hello everyone" }),
    )
    .await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Chef hi" }),
    )
    .await;
    let got = bot_messages(&mut ws, |m| {
        m.iter().any(|m| m["text"] == "reply to hello everyone")
            && m.iter().any(|m| m["text"] == "chef: @Chef hi")
            && m.iter().any(|m| m["text"] == "the slow answer")
    })
    .await;
    assert_eq!(
        got.iter().filter(|m| m["text"] == "the slow answer").count(),
        1,
        "the turn in flight answered once, with the agent it started with: {got:?}"
    );

    // Chef removed while it is writing: its turn ends, nothing of it posts.
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Chef slow soup" }),
    )
    .await;
    logs.wait_for("chef's slow turn", |l| {
        l.contains("decision persona=chef") && l.contains(r#"outcome="reply""#)
    });
    std::fs::write(&cfg, config(port, rooms).replace("answer to", "reply to")).expect("config");
    common::hup(tactful.id());
    let removed = logs.wait_for("the second reload", |l| l.contains("personas_removed=[\"chef\"]"));
    assert!(removed.contains("config reloaded"), "{removed}");
    assert!(
        removed.contains("agents_rebuilt=[]"),
        "docs's agent did not change: {removed}"
    );
    logs.wait_for("chef's turn cancelled", |l| {
        l.contains("turn cancelled: a reload removed its persona") && l.contains("persona=chef")
    });
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Chef are you there?" }),
    )
    .await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "anyone there?" }),
    )
    .await;
    let got = bot_messages(&mut ws, |m| {
        m.iter().any(|m| m["text"] == "reply to anyone there?")
    })
    .await;
    assert!(
        got.iter().all(|m| m["sender"]["id"] != "chef"),
        "chef says nothing more: {got:?}"
    );

    // A broken file: refused with its line, the running config stays.
    std::fs::write(&cfg, config(port, "[rooms.lobby]\nmode = \"shout\"\n")).expect("config");
    common::hup(tactful.id());
    let refused = logs.wait_for("the refusal", |l| l.contains("was not reloaded"));
    assert!(
        refused.contains("tactful.toml:21:8: unknown variant `shout`"),
        "{refused}"
    );
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "still all?" }),
    )
    .await;
    bot_messages(&mut ws, |m| m.iter().any(|m| m["text"] == "reply to still all?")).await;

    let mut tactful = tactful;
    assert!(
        tactful.0.try_wait().expect("status").is_none(),
        "SIGHUP never stops tactful"
    );
}

/// The console's reload button does what SIGHUP does, and answers with
/// it: a broken file is refused with its line (422) and changes nothing; a
/// good one applies its room policies; only the token may ask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_reloads_the_file_like_sighup_and_says_what_happened() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = dir.path().join("tactful.toml");
    let (port, server) = (free_port(), free_port());
    let with_server = |rooms: &str| {
        config(port, rooms)
            + &*format!("\n[server]\nlisten = \"127.0.0.1:{server}\"\nconsole_token = \"reload-tok-123\"\n")
    };
    let (_tactful, logs) = run_tactful_logged(dir.path(), &with_server(""), &[]);
    logs.wait_for("the banner", |l| l.contains(&format!("127.0.0.1:{port}")));
    let auth = [("Authorization", "Bearer reload-tok-123")];
    let reload = |headers: &[(&str, &str)]| http_request(server, "POST", "/console/api/reload", headers, b"");

    std::fs::write(&cfg, with_server("[rooms.lobby]\nmode = \"shout\"\n")).expect("config");
    let (status, body) = reload(&auth);
    assert_eq!(status, 422, "{body}");
    let v = json_of(&body);
    assert_eq!(v["result"], "refused");
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|e| e.contains("tactful.toml:21:8: unknown variant `shout`")),
        "{v}"
    );

    assert_eq!(reload(&[]).0, 401, "no token, no reload");
    std::fs::write(&cfg, with_server("[rooms.lobby]\nmode = \"all\"\n")).expect("config");
    assert_eq!(
        reload(&[
            ("Authorization", "Bearer reload-tok-123"),
            ("Origin", "https://evil.example")
        ])
        .0,
        403
    );
    let mut ws = enter(&format!("ws://127.0.0.1:{port}/ws"), "Alice").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "before the reload" }),
    )
    .await;
    // Shown back once stored, so decided under the old policy: the reload
    // below cannot overtake it.
    common::id_of(&mut ws, "before the reload").await;
    let (status, body) = reload(&auth);
    assert_eq!(status, 200, "{body}");
    let v = json_of(&body);
    assert_eq!(v["result"], "applied");
    assert_eq!(v["rooms_changed"], true);
    assert_eq!(v["restart_needed"], json!([]));
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "after the reload" }),
    )
    .await;
    let got = bot_messages(&mut ws, |m| {
        m.iter().any(|m| m["text"] == "answer to after the reload")
    })
    .await;
    assert!(
        !got.iter().any(|m| m["text"] == "answer to before the reload"),
        "mention mode until the reload: {got:?}"
    );
}

/// A kb agent's files are part of its config: a reload after only its
/// example questions changed (its table did not) rebuilds it, and the next
/// question is answered through the new examples.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_picks_up_a_kb_agents_changed_questions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    std::fs::write(
        dir.path().join("guide.md"),
        "# Guide\n\n## Stopping loops\n\nSet `max_bot_turns` to bound consecutive persona messages.\n\n## Costs\n\nA daily budget caps tokens spent per persona.\n",
    )
    .expect("doc");
    let questions = dir.path().join("questions.toml");
    std::fs::write(
        &questions,
        "\"guide.md#Costs\" = [\"how much money will this burn\"]\n",
    )
    .expect("questions");
    let cfg = format!(
        r#"
[[persona]]
id = "guide"
name = "Guide"
agent = "docs"

[agents.docs]
kind = "kb"
paths = ["guide.md"]
min_score = 1.0
questions = "questions.toml"

[platforms.web]
listen = "127.0.0.1:{port}"

[store]
path = ":memory:"
"#
    );
    let (tactful, logs) = run_tactful_logged(dir.path(), &cfg, &[]);
    logs.wait_for("the banner", |l| l.contains(&format!("127.0.0.1:{port}")));
    let mut ws = enter(&format!("ws://127.0.0.1:{port}/ws"), "Alice").await;
    let ask = "@Guide why do the assistants keep chatting with one another?";
    say(&mut ws, json!({ "type": "say", "room": "lobby", "text": ask })).await;
    let got = bot_messages(&mut ws, |m| !m.is_empty()).await;
    assert!(
        got[0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("couldn't find")),
        "no example leads there yet: {got:?}"
    );

    std::fs::write(
        &questions,
        "\"guide.md#Costs\" = [\"how much money will this burn\"]\n\"guide.md#Stopping loops\" = [\"the assistants keep chatting with one another all night\"]\n",
    )
    .expect("questions");
    common::hup(tactful.id());
    let applied = logs.wait_for("the reload", |l| l.contains("config reloaded"));
    assert!(applied.contains(r#"agents_rebuilt=["docs"]"#), "{applied}");
    say(&mut ws, json!({ "type": "say", "room": "lobby", "text": ask })).await;
    // The example leads to the section: answered from it, or, when the
    // sureness model (trained on tactful's own docs) doubts a kb this
    // small, listed first among the places to look.
    let leads = |t: &str| {
        t.ends_with("(from guide.md, \"Stopping loops\")")
            || t.contains("may answer this here:\n- Stopping loops — guide.md#stopping-loops")
    };
    let got = bot_messages(&mut ws, |m| {
        m.iter().any(|m| m["text"].as_str().is_some_and(leads))
    })
    .await;
    assert!(
        got.iter().any(|m| m["text"].as_str().is_some_and(leads)),
        "{got:?}"
    );
}
