//! The web room against clients that do not play nice: people naming
//! themselves like a persona, oversized and malformed fields, a client
//! opening room after room, one that stops reading, hundreds joining.

use crate::common;

use std::time::Duration;

use common::*;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tactful_core::{Outcome, Output, PersonaId, RoomId};
use tactful_runtime::{OutMessage, Platform, TraceEvent};
use tactful_web::WebConfig;
use tokio_tungstenite::tungstenite::Message as Ws;

/// The answer to a hello: `welcome` or `error`.
async fn hello(ws: &mut Socket, name: &str) -> Value {
    send(ws, json!({ "type": "hello", "name": name })).await;
    until(ws, |v| v["type"] == "welcome" || v["type"] == "error").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_pass_for_a_persona_are_refused() {
    let room = start().await;
    let mut ws = connect(room.addr, "").await.expect("connect");
    // `helper` is an alias of docs: a person typing it must not become it.
    for name in [
        "Helper",
        "helper",
        "Docs",
        "D\u{043E}cs",
        "Do\u{200B}cs",
        "\u{FF24}\u{FF4F}\u{FF43}\u{FF53}",
        "\u{202E}scoD",
        "D.o.c.s",
    ] {
        let v = hello(&mut ws, name).await;
        assert_eq!(v["type"], "error", "{name:?} was let in: {v}");
    }
    let v = hello(&mut ws, "Alice").await;
    assert_eq!(v["you"]["id"], "web:Alice");
    let v = hello(&mut ws, "Mallory").await;
    assert!(
        v["message"].as_str().unwrap_or("").contains("already"),
        "one name per connection: {v}"
    );
    room.runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_names_are_different_people_and_none_is_a_persona() {
    let mut room = start().await;
    let mut a = connect(room.addr, "").await.expect("connect");
    let welcome = hello(&mut a, "Alice").await;
    assert_eq!(welcome["you"]["id"], "web:Alice");
    let alice_key = welcome["key"].clone();
    // Names that read the same as someone who is here are refused...
    for lookalike in ["alice!", "\u{0410}lice", "ALICE"] {
        let mut c = connect(room.addr, "").await.expect("connect");
        let v = hello(&mut c, lookalike).await;
        assert_eq!(v["type"], "error", "{lookalike:?} passing for Alice: {v}");
    }
    // ...and never share an id with them (an allowlist trusts exactly one).
    let elsewhere = start().await;
    let mut b = connect(elsewhere.addr, "").await.expect("connect");
    assert_eq!(hello(&mut b, "alice!").await["you"]["id"], "web:alice!");
    // The same name while Alice is here: only with the key her first
    // connection was given (her second tab, her reconnect).
    let mut d = connect(room.addr, "").await.expect("connect");
    let v = hello(&mut d, "Alice").await;
    assert_eq!(v["type"], "error", "a stranger taking Alice's name: {v}");
    send(
        &mut d,
        json!({ "type": "hello", "name": "Alice", "key": "0".repeat(32) }),
    )
    .await;
    let v = until(&mut d, |v| v["type"] == "welcome" || v["type"] == "error").await;
    assert_eq!(v["type"], "error", "a guessed key: {v}");
    let key = alice_key.as_str().expect("a key").to_owned();
    let mut e = connect(room.addr, "").await.expect("connect");
    send(&mut e, json!({ "type": "hello", "name": "Alice", "key": key })).await;
    let v = until(&mut e, |v| v["type"] == "welcome" || v["type"] == "error").await;
    assert_eq!(v["you"]["id"], "web:Alice", "her own second tab: {v}");
    assert_eq!(v["key"], alice_key);

    // What a person says is a person's message to the engine, never a
    // persona's own.
    send(&mut a, json!({ "type": "join", "room": "lobby" })).await;
    until(&mut a, |v| v["type"] == "history").await;
    send(&mut a, json!({ "type": "say", "room": "lobby", "text": "hello" })).await;
    let decision = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(TraceEvent::Engine(Output::Decision(d))) = room.trace.recv().await {
                return d;
            }
        }
    })
    .await
    .expect("a decision");
    assert_ne!(decision.reason.as_str(), "own_message", "{decision:?}");
    assert_eq!(decision.outcome, Outcome::Record);
    room.runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_malformed_fields_are_refused_and_kept_out_of_the_history() {
    let room = start().await;
    let (mut ws, _) = join(room.addr, "Alice").await;
    // Each is answered with an error that gives the text back.
    for bad in [
        json!({ "type": "say", "room": "lobby", "text": "x", "reply_to": "w".repeat(300) }),
        json!({ "type": "say", "room": "lobby", "text": "x", "reply_to": "has space" }),
        json!({ "type": "say", "room": "lobby", "text": "x", "thread": "t\u{202E}1" }),
        json!({ "type": "say", "room": "lobby", "text": "x", "mentions": vec!["docs"; 40] }),
        json!({ "type": "say", "room": "lobby", "text": "x", "mentions": ["m".repeat(200)] }),
        json!({ "type": "say", "room": "lobby", "text": "y".repeat(2001) }),
    ] {
        send(&mut ws, bad.clone()).await;
        let e = until(&mut ws, |v| v["type"] == "error").await;
        assert_eq!(e["text"], bad["text"], "the text comes back: {e}");
    }
    for room_name in ["a\u{202E}b", "line\nbreak", "", &"r".repeat(65)] {
        send(&mut ws, json!({ "type": "join", "room": room_name })).await;
        until(&mut ws, |v| v["type"] == "error").await;
    }
    // An 8 MB frame is not read at all: that connection is closed.
    let mut big = connect(room.addr, "").await.expect("connect");
    let huge =
        json!({ "type": "say", "room": "lobby", "text": "x", "reply_to": "w".repeat(8 * 1024 * 1024) });
    let _ = big.send(Ws::Text(huge.to_string().into())).await;
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match big.next().await {
                None | Some(Err(_)) | Some(Ok(Ws::Close(_))) => return true,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert_eq!(closed, Ok(true), "the oversized frame ends its connection");
    // Nothing of it reached the history.
    let (_, history) = join(room.addr, "Bob").await;
    assert_eq!(history["messages"].as_array().map(Vec::len), Some(0), "{history}");
    room.runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_cannot_open_room_after_room() {
    let room = start_with(WebConfig {
        max_rooms_per_connection: 5,
        ..web_config(None)
    })
    .await;
    let mut ws = connect(room.addr, "").await.expect("connect");
    hello(&mut ws, "Alice").await;
    for i in 0..5 {
        send(&mut ws, json!({ "type": "join", "room": format!("r{i}") })).await;
        until(&mut ws, |v| v["type"] == "history").await;
    }
    send(&mut ws, json!({ "type": "join", "room": "r5" })).await;
    let e = until(&mut ws, |v| v["type"] == "error" || v["type"] == "history").await;
    assert_eq!(e["type"], "error", "{e}");
    assert!(
        e["message"].as_str().unwrap_or("").contains("at most 5 rooms"),
        "{e}"
    );
    // Joining one it is in already is fine.
    send(&mut ws, json!({ "type": "join", "room": "r0" })).await;
    until(&mut ws, |v| v["type"] == "history").await;
    room.runtime.shutdown().await;
}

/// The id number of a `w<n>` message id.
fn number(id: &Value) -> u64 {
    id.as_str()
        .and_then(|s| s.strip_prefix('w'))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_resynced_or_told_never_silently_skipped() {
    let room = start().await;
    let (mut slow, _) = join(room.addr, "Slow").await;
    // A chatty bot posts far more than the socket buffers and the event
    // backlog hold, while the slow client reads nothing.
    let body = "z".repeat(1900);
    const N: usize = 12_000;
    let (docs, lobby) = (PersonaId::new("docs"), RoomId::new("lobby"));
    for i in 0..N {
        let text = format!("#{i} {body}");
        let out = OutMessage {
            persona: &docs,
            room: &lobby,
            thread: None,
            text: &text,
            reply_to: None,
            key: None,
            placeholder: false,
            follows: None,
            first_replied_to: None,
        };
        room.web.send(out).await.expect("posted");
    }
    // Now the slow client reads: every gap is announced by a resync whose
    // history ends at (or after) what it missed, or it is closed with a reason.
    let outcome = tokio::time::timeout(Duration::from_secs(60), async {
        let mut last_seen = 0u64;
        let mut resyncs = 0;
        loop {
            match slow.next().await {
                Some(Ok(Ws::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).expect("json");
                    match v["type"].as_str() {
                        Some("message") => {
                            let n = number(&v["message"]["id"]);
                            assert!(
                                last_seen == 0 || n == last_seen + 1,
                                "skipped from w{last_seen} to w{n} without a resync"
                            );
                            last_seen = n;
                            if v["message"]["text"]
                                .as_str()
                                .unwrap_or("")
                                .starts_with(&format!("#{} ", N - 1))
                            {
                                return format!("caught up after {resyncs} resyncs");
                            }
                        }
                        Some("history") => {
                            assert_eq!(v["resync"], true, "{}", &t[..t.len().min(200)]);
                            resyncs += 1;
                            let msgs = v["messages"].as_array().cloned().unwrap_or_default();
                            last_seen = msgs.last().map_or(last_seen, |m| number(&m["id"]));
                            if msgs.iter().any(|m| {
                                m["text"]
                                    .as_str()
                                    .unwrap_or("")
                                    .starts_with(&format!("#{} ", N - 1))
                            }) {
                                return format!("caught up after {resyncs} resyncs");
                            }
                        }
                        _ => {}
                    }
                }
                Some(Ok(Ws::Close(frame))) => {
                    let reason = frame.map(|f| f.reason.to_string()).unwrap_or_default();
                    assert!(!reason.is_empty(), "closed without a reason");
                    return format!("closed: {reason}");
                }
                other => panic!("the connection ended without a word: {other:?}"),
            }
        }
    })
    .await
    .expect("the slow client catches up or is told");
    eprintln!("slow client: {outcome}");
    assert!(
        outcome.starts_with("caught up after") || outcome.starts_with("closed"),
        "{outcome}"
    );
    room.runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_and_leaves_are_sent_as_changes_not_whole_member_lists() {
    let room = start().await;
    let (mut first, history) = join(room.addr, "First").await;
    assert_eq!(
        history["members"].as_array().map(Vec::len),
        Some(2),
        "Docs and First"
    );
    // Count what `first` receives while 150 people come and go.
    let counter = tokio::spawn(async move {
        let mut bytes = 0usize;
        let mut joined = 0;
        let mut left = 0;
        while joined < 150 || left < 150 {
            match first.next().await {
                Some(Ok(Ws::Text(t))) => {
                    bytes += t.len();
                    let v: Value = serde_json::from_str(&t).expect("json");
                    match v["type"].as_str() {
                        Some("member_joined") if v["member"]["name"] != "First" => joined += 1,
                        Some("member_left") => left += 1,
                        _ => {}
                    }
                }
                _ => break,
            }
        }
        (bytes, joined, left, first)
    });
    let mut people = Vec::new();
    for i in 0..150 {
        let (ws, _) = join(room.addr, &format!("Person {i}")).await;
        people.push(ws);
    }
    drop(people);
    let (bytes, joined, left, mut first) = tokio::time::timeout(Duration::from_secs(60), counter)
        .await
        .expect("all changes arrive")
        .expect("join");
    assert_eq!((joined, left), (150, 150));
    // Whole lists would be ~150 lists of ~75 members each: over a megabyte.
    assert!(bytes < 150 * 2 * 200, "{bytes} bytes for 300 changes");

    // Two tabs of one person are one member (the count per connection is
    // unit-tested in `room`): one join, and one leave when both are gone.
    let (tab1, _, key) = join_keyed(room.addr, "Twin", None).await;
    let (tab2, _, _) = join_keyed(room.addr, "Twin", Some(&key)).await;
    until(&mut first, |v| {
        v["type"] == "member_joined" && v["member"]["name"] == "Twin"
    })
    .await;
    drop(tab1);
    drop(tab2);
    let left = until(&mut first, |v| v["type"] == "member_left").await;
    assert_eq!(left["id"], "web:Twin");
    room.runtime.shutdown().await;
}
