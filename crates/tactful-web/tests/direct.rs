//! Direct rooms, the introduction and quotes, over the page's WebSocket.

use crate::common;

use common::*;
use serde_json::json;

/// Alice opens a direct room with Docs: Docs answers without being
/// mentioned (the engine hears a DM), nobody else can join the room by its
/// name, Bob's direct room with Docs is another one, and Alice, back after
/// a reload with the key her browser kept, is in the same room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_room_is_its_owners_alone_and_answered_without_a_mention() {
    let mut room = start().await;
    let (mut alice, _, key) = join_keyed(room.addr, "Alice", None).await;
    send(&mut alice, json!({ "type": "dm", "persona": "docs" })).await;
    let dm = until(&mut alice, |v| v["type"] == "history").await;
    let name = dm["room"].as_str().expect("room").to_owned();
    assert!(name.starts_with("@docs."), "{dm}");
    assert_eq!(dm["dm"]["name"], "Docs");
    assert!(
        dm.get("intro").is_none(),
        "a direct room has no room introduction"
    );
    let members: Vec<&str> = dm["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert_eq!(members, ["Docs", "Alice"], "only the two of them");

    send(
        &mut alice,
        json!({ "type": "say", "room": name, "text": "how do I reset it?" }),
    )
    .await;
    let (_, reason) = decided(&mut room.trace, "docs").await;
    assert_eq!(reason, "dm", "no mention needed in a direct room");
    let answer = until(&mut alice, |v| {
        v["type"] == "edit" && v["text"].as_str().is_some_and(|t| t.contains("Hold the button"))
    })
    .await;
    assert_eq!(answer["room"], name.as_str());

    // Bob cannot join it by name, and his own is another room.
    let (mut bob, _) = join(room.addr, "Bob").await;
    send(&mut bob, json!({ "type": "join", "room": name })).await;
    let refused = until(&mut bob, |v| v["type"] == "error").await;
    assert!(
        refused["message"]
            .as_str()
            .unwrap_or("")
            .contains("direct conversations"),
        "{refused}"
    );
    send(&mut bob, json!({ "type": "dm", "persona": "docs" })).await;
    let bobs = until(&mut bob, |v| v["type"] == "history").await;
    assert_ne!(bobs["room"], name.as_str());
    assert_eq!(bobs["messages"].as_array().map(Vec::len), Some(0), "{bobs}");
    send(
        &mut bob,
        json!({ "type": "say", "room": name, "text": "let me in" }),
    )
    .await;
    let not_in = until(&mut bob, |v| v["type"] == "error").await;
    assert!(
        not_in["message"].as_str().unwrap_or("").starts_with("join "),
        "{not_in}"
    );
    // A persona that is not there is named in the refusal.
    send(&mut bob, json!({ "type": "dm", "persona": "nobody" })).await;
    let unknown = until(&mut bob, |v| v["type"] == "error").await;
    assert!(
        unknown["message"].as_str().unwrap_or("").contains("\"nobody\""),
        "{unknown}"
    );

    // Alice reloads: every connection of hers closes (Bob sees her
    // leave, by then her name is free), then she is back with the key her
    // browser kept: the same room, with its history.
    drop(alice);
    until(&mut bob, |v| v["type"] == "member_left" && v["id"] == "web:Alice").await;
    let mut ws = connect(room.addr, "").await.expect("connect");
    send(&mut ws, json!({ "type": "hello", "name": "Alice", "key": key })).await;
    let hello = until(&mut ws, |v| v["type"] == "welcome" || v["type"] == "error").await;
    assert_eq!(hello["type"], "welcome", "Alice is let back in: {hello}");
    let mut again = ws;
    assert_eq!(hello["key"], key.as_str(), "the kept key stays hers");
    send(&mut again, json!({ "type": "dm", "persona": "docs" })).await;
    let same = until(&mut again, |v| v["type"] == "history").await;
    assert_eq!(same["room"], name.as_str());
    let texts: Vec<&str> = same["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["text"].as_str())
        .collect();
    assert_eq!(texts, ["how do I reset it?", "Hold the button for 5 s, Alice."]);
}

/// A key the room did not make (short, chosen by hand) is not taken: the
/// browser gets a new one, so nobody picks "aaaa…" and shares it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_chosen_by_hand_is_not_kept() {
    let room = start().await;
    // A name each: the room may not have noticed the last socket close
    // yet, and a second Mallory without her key would be refused.
    for (name, offered) in [
        ("Mallory", "aaaa"),
        ("Trudy", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
        ("Eve", "../../etc/passwd"),
    ] {
        let (_ws, _, key) = join_keyed(room.addr, name, Some(offered)).await;
        assert_ne!(key, offered);
        assert_eq!(key.len(), 32, "{key}");
    }
}

/// An empty room tells a newcomer who is there and how each persona
/// behaves, in plain words, with messages to try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_introduces_its_personas_in_plain_words() {
    let room = start().await;
    let (_alice, history) = join(room.addr, "Alice").await;
    let intro = &history["intro"];
    assert_eq!(intro["personas"][0]["name"], "Docs", "{intro}");
    assert_eq!(intro["personas"][0]["mode"], "mention");
    assert!(
        intro["personas"][0]["says"]
            .as_str()
            .unwrap_or("")
            .contains("mention it"),
        "{intro}"
    );
    assert_eq!(
        intro["examples"],
        json!(["@Docs hello"]),
        "one mention per persona by default"
    );

    // Set by the config (and the console), the policies change what it says.
    let mut table = tactful_core::PolicyTable::default();
    table.default.all.mode = Some(tactful_core::Mode::Observe);
    room.web.set_policies(&table);
    let (_bob, history) = join(room.addr, "Bob").await;
    assert_eq!(history["intro"]["personas"][0]["mode"], "observe");
    assert_eq!(
        history["intro"]["examples"],
        json!([]),
        "nobody to try talking to"
    );
}

/// A reply quotes its message as the page shows messages: Markdown
/// rendered and sanitised, not raw backticks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quote_is_rendered_like_its_message() {
    let room = start().await;
    let (mut alice, _) = join(room.addr, "Alice").await;
    send(
        &mut alice,
        json!({ "type": "say", "room": "lobby", "text": "try `tactful check` <b>now</b>" }),
    )
    .await;
    let first = until(&mut alice, |v| v["type"] == "message").await;
    let id = first["message"]["id"].clone();
    send(
        &mut alice,
        json!({ "type": "say", "room": "lobby", "text": "done", "reply_to": id }),
    )
    .await;
    let reply = until(&mut alice, |v| {
        v["type"] == "message" && v["message"]["text"] == "done"
    })
    .await;
    let html = reply["message"]["quote"]["html"].as_str().expect("quote html");
    assert!(html.contains("<code>tactful check</code>"), "{html}");
    assert!(
        html.contains("&lt;b&gt;now&lt;/b&gt;"),
        "typed HTML stays text: {html}"
    );
}
