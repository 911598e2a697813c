//! Discord messages, in the JSON shape the gateway sends, as the engine
//! sees them.

use serde_json::{Value, json};
use tactful_core::{Mentions, Message, UserId};
use tactful_discord::inbound::{KnownBot, Seen, channel_of, room_id, to_message};
use twilight_model::id::Id;

fn bots() -> Vec<KnownBot> {
    vec![
        KnownBot {
            persona: "docs".into(),
            user: Some(Id::new(7001)),
            roles: vec![Id::new(500)],
        },
        KnownBot {
            persona: "chef".into(),
            user: Some(Id::new(7002)),
            roles: vec![],
        },
    ]
}

fn user(id: u64, name: &str, bot: bool) -> Value {
    json!({"id": id.to_string(), "username": name, "discriminator": "0", "avatar": null, "bot": bot, "global_name": null, "public_flags": 0})
}

/// A message as docs's bot receives it (`fields` override the defaults).
fn heard_with(fields: Value, parent: Option<u64>, everyone_addresses: bool) -> Option<Message> {
    let mut msg = json!({
        "id": "42", "channel_id": "100", "guild_id": "900", "author": user(11, "alice", false),
        "content": "hello", "timestamp": "2025-01-01T00:00:00.000000+00:00", "edited_timestamp": null,
        "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [], "attachments": [],
        "embeds": [], "pinned": false, "type": 0
    });
    for (k, v) in fields.as_object().expect("object") {
        msg[k] = v.clone();
    }
    let parsed: twilight_model::channel::Message = serde_json::from_value(msg).expect("a gateway message");
    let bots = bots();
    let receiver = "docs".into();
    to_message(
        &parsed,
        Seen {
            receiver: &receiver,
            bots: &bots,
            parent: parent.map(Id::new),
            everyone_addresses,
        },
    )
}

fn heard(fields: Value) -> Option<Message> {
    heard_with(fields, None, false)
}

fn mentions(m: &Message) -> Vec<&str> {
    match &m.mentions {
        Mentions::Explicit(ids) => ids.iter().map(UserId::as_str).collect(),
        Mentions::FromText => panic!("Discord mentions are explicit"),
    }
}

#[test]
fn mentions_come_from_the_array_and_read_as_names() {
    let m = heard(json!({
        "content": "<@7001> and <@!12>, look",
        "mentions": [user(7001, "docs-bot", true), user(12, "bob", false)]
    }))
    .expect("a message");
    assert_eq!(mentions(&m), ["docs", "discord:12"]);
    assert_eq!(&*m.text, "@docs and @bob, look");
    assert_eq!(m.sender.id.as_str(), "discord:11");
    assert_eq!(m.room.as_str(), "discord:100");
    // `<@7001>` typed without Discord resolving it is no mention.
    let m = heard(json!({"content": "<@7001> typed"})).expect("a message");
    assert!(mentions(&m).is_empty());
}

#[test]
fn a_role_addresses_the_personas_whose_bot_holds_it() {
    let m = heard(json!({"content": "<@&500> help", "mention_roles": ["500"]})).expect("a message");
    assert_eq!(mentions(&m), ["docs"]);
    let m = heard(json!({"content": "<@&501> help", "mention_roles": ["501"]})).expect("a message");
    assert!(mentions(&m).is_empty());
}

#[test]
fn everyone_addresses_nobody_unless_configured() {
    let m = heard(json!({"content": "@everyone hi", "mention_everyone": true})).expect("a message");
    assert!(mentions(&m).is_empty());
    let m = heard_with(
        json!({"content": "@here hi", "mention_everyone": true}),
        None,
        true,
    )
    .expect("a message");
    assert_eq!(mentions(&m), ["docs", "chef"]);
}

#[test]
fn replies_threads_and_dms() {
    let m = heard(json!({"type": 19, "message_reference": {"message_id": "41", "channel_id": "100"}}))
        .expect("a message");
    assert_eq!(m.reply_to.as_ref().map(|r| r.as_str()), Some("41"));
    let m = heard_with(json!({"channel_id": "101"}), Some(100), false).expect("a message");
    assert_eq!(
        (m.room.as_str(), m.thread.as_ref().map(|t| t.as_str())),
        ("discord:100", Some("101"))
    );
    let m = heard(json!({"guild_id": null, "channel_id": "300"})).expect("a message");
    assert!(m.is_dm);
    assert_eq!(m.dm_to.as_ref().map(|p| p.as_str()), Some("docs"));
}

#[test]
fn who_is_a_bot_and_what_is_not_conversation() {
    assert!(
        heard(json!({"author": user(7002, "chef-bot", true)})).is_none(),
        "a persona's own"
    );
    assert!(
        heard(json!({"author": user(99, "ci", true)}))
            .expect("a message")
            .sender
            .is_bot
    );
    assert!(
        heard(json!({"author": user(98, "hook", false), "webhook_id": "5"}))
            .expect("a message")
            .sender
            .is_bot
    );
    assert!(heard(json!({"type": 7, "content": ""})).is_none(), "a join");
    assert!(
        heard(json!({"type": 6, "content": "pinned"})).is_none(),
        "a pin notice"
    );
    assert!(heard(json!({"content": ""})).is_none(), "a sticker only");
}

#[test]
fn rooms_name_their_channel() {
    let room = room_id(Id::new(100));
    assert_eq!(channel_of(&room), Some(Id::new(100)));
    assert_eq!(channel_of(&"discord:0".into()), None);
    assert_eq!(channel_of(&"tg:100".into()), None);
}
