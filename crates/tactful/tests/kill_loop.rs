//! `tactful run` SIGKILLed at random moments under steady traffic and
//! started again on the same store, eight times; then once more to let it
//! finish. Every message a person saw accepted must be there once, and every
//! one must have its whole reply (three parts long) exactly once: 0 lost,
//! 0 doubled.
//!
//! The kill moments come from a seed (printed; `TACTFUL_KILL_SEED` replays
//! one), so a failure can be reproduced.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::time::{Duration, Instant};

use common::{Socket, enter, event, get, say, spawn, split};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as Ws;

/// Lines per reply; about 100 characters each, so a reply is three parts
/// of the web room's 4,000.
const LINES: usize = 100;
const KILLS: usize = 8;

fn config() -> String {
    let reply: String = (0..LINES)
        .map(|n| format!("{{msg_id}} line {n:03} {}\\n", "-".repeat(80)))
        .collect();
    format!(
        r#"
[store]
path = "state.db"

[[persona]]
id = "docs"
name = "Docs"
agent = "main"

[agents.main]
kind = "script"
rules = [{{ when = "", reply = "[[reply_to:{{msg_id}}]]\n{reply}", delay_ms = 40 }}]

[rooms.default]
rate_limit = "off"

[context]
history = 50
max_turns = 10

[platforms.web]
listen = "127.0.0.1:0"
history = 5000

[runtime]
edit_interval_ms = 50

[server]
listen = "127.0.0.1:0"
"#
    )
}

/// A small deterministic generator for the kill moments.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }
}

/// What one person saw while the service ran.
#[derive(Default)]
struct Seen {
    /// Texts of their own messages echoed back (accepted).
    accepted: BTreeSet<String>,
}

/// Sends a numbered message every 25 ms and notes the echoes, until the
/// socket dies (the kill).
async fn chat(mut ws: Socket, from: usize, seen: &mut Seen) -> usize {
    let mut n = from;
    let mut tick = tokio::time::interval(Duration::from_millis(25));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let text = format!("@Docs question {n}");
                n += 1;
                let frame = json!({ "type": "say", "room": "lobby", "text": text, "mentions": ["docs"] });
                if futures::SinkExt::send(&mut ws, Ws::Text(frame.to_string().into())).await.is_err() {
                    return n;
                }
            }
            frame = ws.next() => match frame {
                Some(Ok(Ws::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).expect("json");
                    if v["type"] == "message" && v["message"]["sender"]["bot"] == false {
                        seen.accepted.insert(v["message"]["text"].as_str().unwrap_or_default().to_owned());
                    }
                }
                Some(Ok(_)) => {}
                _ => return n,
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_eight_times_under_traffic_nothing_is_lost_or_doubled() {
    let seed = std::env::var("TACTFUL_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(7, |d| d.as_nanos() as u64)
        });
    eprintln!("kill loop seed {seed} (TACTFUL_KILL_SEED={seed} replays it)");
    let mut rng = Lcg(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    eprintln!(
        "the store is {} (TACTFUL_KILL_KEEP=1 keeps it after a failure)",
        dir.path().display()
    );
    let cfg = dir.path().join("tactful.toml");
    std::fs::write(&cfg, config()).expect("config");
    let cfg = cfg.to_str().expect("utf-8").to_owned();
    let mut seen = Seen::default();
    let mut next = 0;
    for round in 0..KILLS {
        let svc = spawn(&["run", "-c", &cfg]);
        let ws = enter(&svc.ws_url, &format!("Person{round}")).await;
        let mut child = svc.child;
        let kill_after = Duration::from_millis(150 + rng.next(900));
        let started = Instant::now();
        {
            let chatting = chat(ws, next, &mut seen);
            tokio::pin!(chatting);
            tokio::select! {
                n = &mut chatting => next = n,
                () = tokio::time::sleep(kill_after) => {
                    child.kill().expect("SIGKILL");
                    let _ = child.wait();
                    next = chatting.await;
                }
            }
        }
        eprintln!(
            "round {round}: killed after {:?}; {} accepted so far",
            started.elapsed(),
            seen.accepted.len()
        );
    }
    // The last start: let it finish what it owes.
    let mut svc = spawn(&["run", "-c", &cfg]);
    let mut line = String::new();
    svc.out.read_line(&mut line).expect("the health line");
    let server = line
        .split_whitespace()
        .find_map(|w| {
            w.strip_prefix("http://")
                .and_then(|a| a.strip_suffix("/healthz,"))
        })
        .expect("a health URL")
        .to_owned();
    // Quiet: nothing in progress, twice in a row a little apart.
    let mut quiet_in_a_row = 0;
    for _ in 0..600 {
        let metrics = get(&server, "/metrics").await;
        if metrics.contains("tactful_busy 0") {
            quiet_in_a_row += 1;
            if quiet_in_a_row == 3 {
                break;
            }
        } else {
            quiet_in_a_row = 0;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(quiet_in_a_row, 3, "the service never went quiet");
    let mut reader = enter(&svc.ws_url, "Reader").await;
    let history = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Some(Ok(Ws::Text(t))) = reader.next().await {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "history" {
                    return v;
                }
            }
        }
    })
    .await
    .expect("a history");
    let messages = history["messages"].as_array().cloned().unwrap_or_default();

    // People's messages: each accepted one exactly once.
    let mut people: BTreeMap<String, usize> = BTreeMap::new();
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    let mut lines: BTreeMap<String, usize> = BTreeMap::new();
    let mut placeholders = 0;
    for m in &messages {
        let text = m["text"].as_str().unwrap_or_default();
        if m["sender"]["bot"] == false {
            *people.entry(text.to_owned()).or_default() += 1;
            ids.insert(m["id"].as_str().unwrap_or_default().to_owned(), text.to_owned());
        } else if text == "…" {
            placeholders += 1;
        } else {
            for l in text.lines() {
                *lines.entry(l.to_owned()).or_default() += 1;
            }
        }
    }
    let lost: Vec<&String> = seen
        .accepted
        .iter()
        .filter(|t| !people.contains_key(*t))
        .collect();
    let doubled_people: Vec<(&String, &usize)> = people.iter().filter(|(_, n)| **n > 1).collect();
    // Replies: every line of every person's message's reply exactly once.
    let mut missing_lines = 0;
    let mut unanswered = BTreeSet::new();
    for id in ids.keys() {
        for n in 0..LINES {
            let l = format!("{id} line {n:03} {}", "-".repeat(80));
            if !lines.contains_key(&l) {
                missing_lines += 1;
                unanswered.insert(id.clone());
            }
        }
    }
    let doubled_lines = lines.values().filter(|n| **n > 1).count();
    eprintln!(
        "{} accepted, {} people's messages stored, {} reply lines; lost {}, doubled {} + {} lines, missing {} lines, {} leftover placeholders",
        seen.accepted.len(),
        people.len(),
        lines.len(),
        lost.len(),
        doubled_people.len(),
        doubled_lines,
        missing_lines,
        placeholders
    );
    if doubled_lines > 0 || missing_lines > 0 {
        // Every reply part: which message, which lines, to see what broke.
        for m in &messages {
            if m["sender"]["bot"] == true {
                let t = m["text"].as_str().unwrap_or_default();
                let first = t.lines().next().unwrap_or_default();
                let last = t.lines().last().unwrap_or_default();
                eprintln!(
                    "{} reply_to={} {:?} .. {:?} ({} lines)",
                    m["id"],
                    m["reply_to"],
                    &first[..first.len().min(20)],
                    &last[..last.len().min(20)],
                    t.lines().count()
                );
            }
        }
    }
    let failed = !lost.is_empty() || !doubled_people.is_empty() || doubled_lines > 0 || missing_lines > 0;
    if failed && std::env::var_os("TACTFUL_KILL_KEEP").is_some() {
        eprintln!("kept {}", dir.keep().display());
        panic!("lost or doubled: see above");
    }
    assert!(seen.accepted.len() >= 20, "too little traffic to mean anything");
    assert!(lost.is_empty(), "accepted but lost: {lost:?}");
    assert!(doubled_people.is_empty(), "doubled: {doubled_people:?}");
    assert_eq!(doubled_lines, 0, "reply lines shown twice");
    assert!(unanswered.is_empty(), "replies missing for {unanswered:?}");
    assert_eq!(placeholders, 0, "placeholders left on screen");
    svc.stop().await;
}

/// A four-part answer in the web room, the process killed with `kill -9`
/// as soon as a person sees its third part, then started again on the
/// same store: the answer is finished and no part is shown twice (the web
/// room keys each part, so even the one in flight is posted once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_answer_cut_by_a_kill_is_finished_without_doubling_its_parts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = dir.path().join("tactful.toml");
    let config = config().replace(
        r#"rules = [{ when = "", reply"#,
        &format!(
            "rules = [{{ when = \"story\", reply = \"{}\" }}, {{ when = \"\", reply",
            split::story(split::LINES)
        ),
    );
    std::fs::write(&cfg, config).expect("config");
    let cfg = cfg.to_str().expect("utf-8").to_owned();
    let svc = spawn(&["run", "-c", &cfg]);
    let mut ws = enter(&svc.ws_url, "Alice").await;
    say(
        &mut ws,
        json!({ "type": "say", "room": "lobby", "text": "@Docs the story please", "mentions": ["docs"] }),
    )
    .await;
    let second = split::marker(100);
    event(&mut ws, |v| v.to_string().contains(&second)).await;
    let mut child = svc.child;
    child.kill().expect("SIGKILL");
    let _ = child.wait();

    let svc = spawn(&["run", "-c", &cfg]);
    let mut reader = enter(&svc.ws_url, "Reader").await;
    let last = split::marker(split::LINES - 1);
    // The room's history once it holds the end: read at once, or again
    // when the end is posted live.
    let posts: Vec<String> = loop {
        let v = event(&mut reader, |v| {
            v["type"] == "history" || v.to_string().contains(&last)
        })
        .await;
        if v["type"] != "history" {
            say(&mut reader, json!({ "type": "join", "room": "lobby" })).await;
            continue;
        }
        let posts: Vec<String> = v["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["sender"]["bot"] == true)
            .filter_map(|m| m["text"].as_str().map(str::to_owned))
            .collect();
        if split::finished(&posts, split::LINES) {
            break posts;
        }
    };
    assert!(posts.iter().any(|p| p.contains(&last)), "finished: {posts:#?}");
    split::once_but_the_part_in_flight(&posts, split::LINES);
    let shown: BTreeSet<&String> = posts.iter().collect();
    assert_eq!(shown.len(), posts.len(), "the web room shows no part twice");
    assert!(!posts.iter().any(|p| p == "…"), "no placeholder left");
    svc.stop().await;
}
