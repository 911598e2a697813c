//! Live decides as replay does: every shipped example the web room can
//! play in real time, played through `tactful run` over real WebSockets
//! (one socket per person, the conversation's own timing) and through
//! `tactful replay` with the same config; each message's decisions
//! (persona, outcome, reason, from the console's API) and every reply's
//! text must be the same.
//!
//! The examples left out, and why, are in `NOT_LIVE` (and docs/replay.md,
//! "Live and replay"): their conversations last minutes to days of
//! timers, or have bots and threads the web room cannot send.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Socket, enter, event, get, say, spawn};
use serde_json::{Value, json};

/// Played live: each lasts under a minute and says only what a person in
/// the web room can say.
const LIVE: &[&str] = &[
    "addressed-silence",
    "command-agent",
    "directives",
    "floor",
    "hooks",
    "modes",
    "quickstart",
    "reasoning",
];

/// Not played live, and why.
const NOT_LIVE: &[(&str, &str)] = &[
    (
        "addressing",
        "direct messages by scenario room names (`dm:<from>:<to>`)",
    ),
    ("ambient", "five minutes of ambient timers"),
    ("bots", "messages by other bots"),
    ("budget", "an hour of budget windows"),
    ("busy-floor", "messages by other bots, forty minutes"),
    ("busy-room", "messages by other bots, forty minutes"),
    ("gate", "direct messages, twelve minutes"),
    ("guards", "four minutes of rate-limit windows"),
    ("schedule", "two days of schedules"),
    ("transcript", "messages by other bots, threads"),
];

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

#[test]
fn every_example_is_played_live_or_says_why_not() {
    let mut all: Vec<String> = std::fs::read_dir(examples_dir())
        .expect("examples/")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("conversation.jsonl").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    all.sort();
    let mut listed: Vec<String> = LIVE
        .iter()
        .copied()
        .chain(NOT_LIVE.iter().map(|(n, _)| *n))
        .map(str::to_owned)
        .collect();
    listed.sort();
    assert_eq!(all, listed, "each example is in LIVE or NOT_LIVE");
    let docs = std::fs::read_to_string(examples_dir().join("../docs/replay.md")).expect("docs/replay.md");
    for (name, _) in NOT_LIVE {
        assert!(docs.contains(&format!("`{name}`")), "docs/replay.md names {name}");
    }
}

/// One line of a conversation file, as the live player needs it.
struct Said {
    at: f64,
    id: String,
    from: String,
    /// The name the person shows (the web room's name), `from` unless
    /// the line gives one.
    name: String,
    room: String,
    text: String,
    mentions: Option<Value>,
    reply_to: Option<String>,
}

fn conversation(dir: &Path) -> Vec<Said> {
    let src = std::fs::read_to_string(dir.join("conversation.jsonl")).expect("conversation");
    src.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(i, l)| {
            let v: Value = serde_json::from_str(l).expect("a scenario line");
            Said {
                at: v["at"].as_f64().unwrap_or(0.0),
                id: v["id"].as_str().map_or(format!("m{}", i + 1), str::to_owned),
                from: v["from"].as_str().expect("from").to_owned(),
                name: v["name"]
                    .as_str()
                    .or(v["from"].as_str())
                    .expect("from")
                    .to_owned(),
                room: v["room"].as_str().unwrap_or("main").to_owned(),
                text: v["text"].as_str().expect("text").to_owned(),
                mentions: v.get("mentions").cloned(),
                reply_to: v["reply_to"].as_str().map(str::to_owned),
            }
        })
        .collect()
}

/// The example's files in a folder of their own, its config with a web
/// room, a console and a store added.
fn copy(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for entry in std::fs::read_dir(examples_dir().join(name)).expect("example") {
        let path = entry.expect("entry").path();
        if path.is_file() {
            std::fs::copy(&path, dir.path().join(path.file_name().expect("name"))).expect("copied");
        }
    }
    let cfg = dir.path().join("tactful.toml");
    let mut text = std::fs::read_to_string(&cfg).expect("config");
    text.push_str(
        "\n[store]\npath = \"state.db\"\n\n[platforms.web]\nlisten = \"127.0.0.1:0\"\n\n[server]\nlisten = \"127.0.0.1:0\"\n",
    );
    std::fs::write(&cfg, text).expect("config");
    dir
}

/// What one run decided and said: (room, message, persona) → (outcome,
/// reason), and each persona's replies in each room, in order.
#[derive(Debug, Default, PartialEq)]
struct Run {
    decisions: BTreeMap<(String, String, String), (String, String)>,
    replies: BTreeMap<(String, String), Vec<String>>,
}

fn seed(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("tactful.toml"))
        .expect("config")
        .lines()
        .filter(|l| l.starts_with('#') && l.contains("replay"))
        .find_map(|l| {
            let mut words = l.split_whitespace();
            words.find(|w| *w == "--seed")?;
            words.next().map(str::to_owned)
        })
        .unwrap_or_else(|| "0".to_owned())
}

fn replayed(dir: &Path, seed: &str) -> Run {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tactful"))
        .args([
            "replay",
            "-c",
            "tactful.toml",
            "conversation.jsonl",
            "--seed",
            seed,
        ])
        .current_dir(dir)
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("replay runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut run = Run::default();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        match v["type"].as_str() {
            Some("decision") => {
                run.decisions
                    .insert((s("room"), s("msg"), s("persona")), (s("outcome"), s("reason")));
            }
            Some("send") => run
                .replies
                .entry((s("room"), s("persona")))
                .or_default()
                .push(s("text")),
            _ => {}
        }
    }
    run
}

/// The next message echoed to `ws` with `text`: its live id.
async fn echoed(ws: &mut Socket, room: &str, text: &str) -> String {
    let v = event(ws, |v| {
        v["type"] == "message" && v["room"] == room && v["message"]["text"] == text
    })
    .await;
    v["message"]["id"].as_str().expect("an id").to_owned()
}

async fn lived(dir: &Path, said: &[Said], want: &Run) -> Run {
    let cfg = dir.join("tactful.toml");
    let mut svc = spawn(&["run", "-c", cfg.to_str().expect("utf-8")]);
    let mut banner = String::new();
    std::io::BufRead::read_line(&mut svc.out, &mut banner).expect("the console line");
    let server = banner
        .split_whitespace()
        .find_map(|w| {
            w.strip_prefix("http://")
                .and_then(|a| a.strip_suffix("/console,"))
        })
        .unwrap_or_else(|| panic!("a console URL in {banner:?}"))
        .to_owned();
    let rooms: Vec<String> = {
        let mut r: Vec<String> = said.iter().map(|s| s.room.clone()).collect();
        r.sort();
        r.dedup();
        r
    };
    let mut people: BTreeMap<String, Socket> = BTreeMap::new();
    for s in said {
        if !people.contains_key(&s.from) {
            let mut ws = enter(&svc.ws_url, &s.name).await;
            for room in &rooms {
                say(&mut ws, json!({ "type": "join", "room": room })).await;
                event(&mut ws, |v| v["type"] == "history" && v["room"] == room.as_str()).await;
            }
            people.insert(s.from.clone(), ws);
        }
    }
    // Scenario ids and live ids, both ways.
    let mut live_of: BTreeMap<String, String> = BTreeMap::new();
    let start = Instant::now();
    for s in said {
        let due = start + Duration::from_secs_f64(s.at);
        tokio::time::sleep_until(due.into()).await;
        let mut frame = json!({ "type": "say", "room": s.room, "text": s.text });
        if let Some(m) = &s.mentions {
            frame["mentions"] = m.clone();
        }
        if let Some(r) = &s.reply_to {
            frame["reply_to"] = json!(live_of.get(r).unwrap_or(r));
        }
        let ws = people.get_mut(&s.from).expect("a person");
        say(ws, frame).await;
        let id = echoed(ws, &s.room, &s.text).await;
        live_of.insert(s.id.clone(), id);
    }
    // Settled: as many decisions and replies as replay has (timers after
    // the last message included), within the conversation's length again
    // and half a minute.
    let first = people.values_mut().next().expect("someone spoke");
    let deadline = Instant::now() + Duration::from_secs_f64(said.last().map_or(0.0, |s| s.at) + 30.0);
    let run = loop {
        let run = live_run(&server, &rooms, first, &live_of).await;
        if (run.decisions.len() >= want.decisions.len()
            && run.replies.values().map(Vec::len).sum::<usize>() >= want.replies.values().map(Vec::len).sum())
            || Instant::now() > deadline
        {
            break run;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    svc.stop().await;
    run
}

/// What the live service decided (the console's API) and said (each
/// room's history), in the scenario's ids.
async fn live_run(
    server: &str,
    rooms: &[String],
    ws: &mut Socket,
    live_of: &BTreeMap<String, String>,
) -> Run {
    // Live ids back to the scenario's, longest first ("w12" before "w1").
    let mut back: Vec<(&String, &String)> = live_of.iter().map(|(s, l)| (l, s)).collect();
    back.sort_by_key(|(l, _)| std::cmp::Reverse(l.len()));
    let in_scenario = |text: &str| {
        back.iter().fold(text.to_owned(), |t, (live, scenario)| {
            t.replace(live.as_str(), scenario)
        })
    };
    let mut run = Run::default();
    for room in rooms {
        let body = get(server, &format!("/console/api/decisions?room={room}&limit=500")).await;
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        for d in v["decisions"].as_array().into_iter().flatten() {
            let s = |k: &str| d[k].as_str().unwrap_or_default().to_owned();
            run.decisions.insert(
                (room.clone(), in_scenario(&s("msg")), s("persona")),
                (s("outcome"), s("reason")),
            );
        }
        say(ws, json!({ "type": "join", "room": room })).await;
        let history = event(ws, |v| v["type"] == "history" && v["room"] == room.as_str()).await;
        for m in history["messages"].as_array().into_iter().flatten() {
            if m["sender"]["bot"] == true && m["text"] != "…" {
                let persona = m["sender"]["id"].as_str().unwrap_or_default().to_owned();
                let text = in_scenario(m["text"].as_str().unwrap_or_default());
                run.replies.entry((room.clone(), persona)).or_default().push(text);
            }
        }
    }
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn examples_decide_live_as_in_replay() {
    // All at once: each is mostly its conversation's pauses.
    let runs = LIVE.iter().map(|name| async move {
        let dir = copy(name);
        let said = conversation(dir.path());
        let replay = replayed(dir.path(), &seed(dir.path()));
        let live = lived(dir.path(), &said, &replay).await;
        (name, live, replay)
    });
    let mut differ = Vec::new();
    for (name, live, replay) in futures::future::join_all(runs).await {
        if live != replay {
            eprintln!("{name}: live {live:#?}\nreplay {replay:#?}");
            differ.push(name);
        }
    }
    assert!(differ.is_empty(), "live and replay differ in {differ:?} (above)");
}
