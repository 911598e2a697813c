//! The web room end to end: WebSocket clients playing people, the real
//! runtime and engine, a script agent speaking for a persona.

use crate::common;

use common::*;
use futures::SinkExt;
use serde_json::json;
use tactful_web::{WebConfig, WebError, WebPlatform};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as Ws;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_gets_a_reply_and_chatter_gets_none() {
    let mut room = start().await;
    let (mut alice, history) = join(room.addr, "Alice").await;
    let members: Vec<(String, bool)> = history["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap_or("").to_owned(),
                m["bot"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert!(
        members.contains(&("Docs".to_owned(), true)),
        "personas are members with a bot badge: {members:?}"
    );
    let (mut bob, _) = join(room.addr, "Bob").await;

    // Chit-chat: decided, recorded, not answered.
    send(
        &mut alice,
        json!({ "type": "say", "room": "lobby", "text": "morning all" }),
    )
    .await;
    let (chat_id, reason) = decided(&mut room.trace, "docs").await;
    assert_eq!(reason, "not_addressed");

    // A mention with a real mention entity from the autocomplete.
    send(
        &mut alice,
        json!({ "type": "say", "room": "lobby", "text": "@Docs how do I reset it?", "mentions": ["docs"] }),
    )
    .await;
    let (q_id, reason) = decided(&mut room.trace, "docs").await;
    assert_eq!(reason, "mention");
    // The persona's "…" is a reply to the question from the start, and the
    // answer is written into it: it grows where it stays, under its quote.
    let placeholder = until(&mut bob, |v| {
        v["type"] == "message"
            && v["message"]["sender"]["bot"] == true
            && v["message"]["reply_to"].is_string()
    })
    .await;
    let m = &placeholder["message"];
    assert_eq!(m["text"], "…");
    assert_eq!(
        m["reply_to"].as_str(),
        Some(q_id.as_str()),
        "a real reply to the question"
    );
    assert_eq!(m["quote"]["sender_name"], "Alice");
    assert_eq!(m["quote"]["text"], "@Docs how do I reset it?");
    let id = m["id"].clone();
    let answer = until(&mut bob, |v| {
        v["type"] == "edit" && v["id"] == id && v["text"] != "…"
    })
    .await;
    assert_eq!(answer["text"], "Hold the button for 5 s, Alice.");

    // A late joiner sees the history: the chat, the question, one reply.
    room.runtime.shutdown().await;
    let (_carol, history) = join(room.addr, "Carol").await;
    let msgs = history["messages"].as_array().expect("messages");
    let texts: Vec<&str> = msgs.iter().map(|m| m["text"].as_str().unwrap_or("")).collect();
    assert_eq!(
        texts,
        [
            "morning all",
            "@Docs how do I reset it?",
            "Hold the button for 5 s, Alice."
        ]
    );
    assert_eq!(msgs[0]["id"].as_str(), Some(chat_id.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bot_names_and_malformed_frames_are_refused_without_dropping_the_session() {
    let room = start().await;
    let mut ws = connect(room.addr, "").await.expect("connect");
    send(&mut ws, json!({ "type": "hello", "name": "docs" })).await;
    let e = until(&mut ws, |v| v["type"] == "error").await;
    assert!(e["message"].as_str().unwrap_or("").contains("bots"), "{e}");
    ws.send(Ws::Text("{not json".into())).await.expect("send");
    let e = until(&mut ws, |v| v["type"] == "error").await;
    assert!(
        e["message"].as_str().unwrap_or("").contains("not understood"),
        "{e}"
    );
    send(&mut ws, json!({ "type": "say", "room": "lobby", "text": "hi" })).await;
    let e = until(&mut ws, |v| v["type"] == "error").await;
    assert!(e["message"].as_str().unwrap_or("").contains("hello first"), "{e}");
    // Still connected and usable.
    send(&mut ws, json!({ "type": "hello", "name": "Dana" })).await;
    until(&mut ws, |v| v["type"] == "welcome").await;
    room.runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_required_when_set_and_off_loopback() {
    let web = WebPlatform::new(web_config(Some("s3cret")), &[]).expect("loopback with token");
    let (addr, _server) = web.serve().await.expect("serve");
    assert_eq!(refused_with(connect(addr, "").await), 401, "no token, no room");
    assert_eq!(refused_with(connect(addr, "?token=wrong").await), 401);
    assert!(connect(addr, "?token=s3cret").await.is_ok());
    // A program (no Origin) with the token is welcome.
    assert!(connect_from(addr, "?token=s3cret", None).await.is_ok());
    assert_eq!(refused_with(connect_from(addr, "", None).await), 401);
    let open = WebConfig {
        listen: "0.0.0.0:0".parse().expect("addr"),
        ..web_config(None)
    };
    assert_eq!(
        WebPlatform::new(open.clone(), &[]).err(),
        Some(WebError::OpenWithoutToken(open.listen))
    );
    assert_eq!(
        WebPlatform::new(web_config(Some(" \t ")), &[]).err(),
        Some(WebError::BlankToken),
        "a token of spaces is no token"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sites_page_cannot_open_the_room() {
    let room = start().await;
    for evil in ["https://evil.example", "http://localhost:1", "null"] {
        assert_eq!(
            refused_with(connect_from(room.addr, "", Some(evil)).await),
            403,
            "{evil}"
        );
    }
    // Without a token, a handshake with no Origin at all is refused too: a
    // page could not send one, but nothing vouches for the program.
    assert_eq!(refused_with(connect_from(room.addr, "", None).await), 403);
    let port = room.addr.port();
    for own in [
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
    ] {
        assert!(connect_from(room.addr, "", Some(&own)).await.is_ok(), "{own}");
    }
    // Configured origins replace the defaults.
    let other = start_with(WebConfig {
        allowed_origins: Some(vec!["https://chat.example.com".to_owned()]),
        ..web_config(None)
    })
    .await;
    assert!(
        connect_from(other.addr, "", Some("https://chat.example.com"))
            .await
            .is_ok()
    );
    assert_eq!(refused_with(connect(other.addr, "").await), 403);
    room.runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_served_from_the_binary() {
    let room = start().await;
    let body = reqwest_free_get(room.addr).await;
    assert!(body.contains("<title>tactful</title>"));
    assert!(body.contains("new WebSocket"), "the script is inline: no CDN");
    // (The favicon is an inline SVG; its XML namespace is a name, not a fetch.)
    let body = body.replace("http://www.w3.org/2000/svg", "");
    assert!(
        !body.contains("http://") && !body.contains("https://"),
        "nothing is fetched from elsewhere"
    );
    // A room's own address serves the same page.
    let at_room = get_path(room.addr, "/r/team%20room").await;
    assert!(at_room.starts_with("HTTP/1.1 200"), "{at_room}");
    assert!(at_room.contains("new WebSocket"));
    room.runtime.shutdown().await;
}

/// A plain HTTP GET / over a socket.
async fn reqwest_free_get(addr: std::net::SocketAddr) -> String {
    get_path(addr, "/").await
}

/// A plain HTTP GET of `path` over a socket: the whole response.
async fn get_path(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persona_asked_directly_that_stays_quiet_reacts_and_late_joiners_see_it() {
    let mut room = start().await;
    let (mut alice, _) = join(room.addr, "Alice").await;
    let (mut bob, _) = join(room.addr, "Bob").await;
    send(
        &mut alice,
        json!({ "type": "say", "room": "lobby", "text": "@Docs thanks, it works", "mentions": ["docs"] }),
    )
    .await;
    let (id, reason) = decided(&mut room.trace, "docs").await;
    assert_eq!(reason, "mention");
    let react = until(&mut bob, |v| v["type"] == "react").await;
    assert_eq!(react["id"].as_str(), Some(id.as_str()), "on Alice's message");
    assert_eq!(react["emoji"], "👀");
    assert_eq!(react["by"], "Docs");
    // Nobody asked Docs: no call, no reaction.
    send(
        &mut alice,
        json!({ "type": "say", "room": "lobby", "text": "thanks all" }),
    )
    .await;
    let (_, reason) = decided(&mut room.trace, "docs").await;
    assert_eq!(reason, "not_addressed");
    let (_carol, history) = join(room.addr, "Carol").await;
    let msgs = history["messages"].as_array().expect("messages");
    let reacted: Vec<_> = msgs.iter().filter(|m| m.get("reactions").is_some()).collect();
    assert_eq!(reacted.len(), 1, "{msgs:#?}");
    assert_eq!(reacted[0]["id"].as_str(), Some(id.as_str()));
    assert_eq!(
        reacted[0]["reactions"],
        json!([{ "emoji": "👀", "by": ["Docs"] }])
    );
    room.runtime.shutdown().await;
}
