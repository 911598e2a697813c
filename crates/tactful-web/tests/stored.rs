//! The web room on a store: what a persona posts is shown without waiting
//! for the store, and is stored all the same.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tactful_core::{PersonaId, RoomId};
use tactful_runtime::{OutMessage, Platform, Store};
use tokio_tungstenite::tungstenite::Message as Ws;

use crate::common::{join, start_on, web_config};

/// Delivery commits what it sends (the placeholder's record, the reply)
/// before it sends it, so the web room's own record of a persona's post
/// need not be waited for too: with the store's file held by another
/// writer, the post is shown at once, and stored once the file is free.
/// Before, every reply in the web room waited for one more commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_personas_post_is_shown_before_its_record_lands_and_the_record_lands() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("web.db");
    let room = start_on(web_config(None), Some(Store::open(&path).expect("store"))).await;
    let (mut ws, _) = join(room.addr, "alice").await;

    // Another writer holds the file: no commit can land meanwhile.
    let other = rusqlite::Connection::open(&path).expect("open");
    other.execute_batch("BEGIN IMMEDIATE").expect("the write lock");

    let (docs, lobby) = (PersonaId::new("docs"), RoomId::new("lobby"));
    let post = OutMessage {
        persona: &docs,
        room: &lobby,
        thread: None,
        text: "Here is the answer.",
        reply_to: None,
        key: Some("t1:0"),
        placeholder: false,
        follows: None,
        first_replied_to: None,
    };
    let sent = tokio::time::timeout(Duration::from_secs(2), room.web.send(post))
        .await
        .expect("sent without waiting for the store")
        .expect("sent");
    let shown = tokio::time::timeout(Duration::from_secs(2), async {
        while let Some(Ok(frame)) = ws.next().await {
            if let Ws::Text(t) = frame {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "message" && v["message"]["text"] == "Here is the answer." {
                    return v;
                }
            }
        }
        panic!("the socket closed");
    })
    .await
    .expect("shown while the store is held");
    assert_eq!(shown["message"]["id"], sent.as_str());

    other.execute_batch("COMMIT").expect("released");
    drop(other);
    let mut stored = false;
    for _ in 0..200 {
        let shown = Store::open(&path)
            .and_then(|mut s| s.shown(100))
            .expect("readable");
        if let Some(m) = shown.iter().find(|m| m.id == sent) {
            assert_eq!(m.text, "Here is the answer.");
            assert_eq!(m.key.as_deref(), Some("t1:0"));
            stored = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(stored, "the post's record lands once the store is free");
}
