//! Telegram messages, in the JSON shape the Bot API sends, as the engine
//! sees them: who is addressed (from entities, in UTF-16 offsets), which
//! room and thread, who spoke.

use proptest::prelude::*;
use serde_json::{Value, json};
use tactful_core::{Mentions, Message, UserId};
use tactful_telegram::inbound::{KnownBot, Receiver, to_message, utf16_range};

fn bots() -> Vec<KnownBot> {
    vec![
        KnownBot {
            persona: "docs".into(),
            bot_id: 7001,
            username: Some("docs_bot".into()),
        },
        KnownBot {
            persona: "chef".into(),
            bot_id: 7002,
            username: Some("ChefBot".into()),
        },
    ]
}

fn alice() -> Value {
    json!({"id": 111, "is_bot": false, "first_name": "Alice", "last_name": "Liddell", "username": "alice"})
}

fn group() -> Value {
    json!({"id": -1001234, "type": "supergroup", "title": "Team", "is_forum": true})
}

/// A message as docs's bot receives it.
fn heard(mut msg: Value) -> Option<Message> {
    let obj = msg.as_object_mut().expect("object");
    obj.entry("message_id").or_insert(json!(42));
    obj.entry("date").or_insert(json!(1_700_000_000));
    obj.entry("chat").or_insert(group());
    obj.entry("from").or_insert(alice());
    let parsed: teloxide_core::types::Message = serde_json::from_value(msg).expect("a Bot API message");
    let bots = bots();
    to_message(
        &parsed,
        Receiver {
            bot: &bots[0],
            bots: &bots,
        },
    )
}

fn mentions(m: &Message) -> Vec<&str> {
    match &m.mentions {
        Mentions::Explicit(ids) => ids.iter().map(UserId::as_str).collect(),
        Mentions::FromText => panic!("Telegram mentions are explicit"),
    }
}

#[test]
fn an_emoji_before_a_mention_does_not_shift_it() {
    // 🎉 is one char, two UTF-16 units, four bytes.
    let m = heard(json!({
        "text": "🎉🎉 @docs_bot and @ChefBot, hi",
        "entities": [
            {"type": "mention", "offset": 5, "length": 9},
            {"type": "mention", "offset": 19, "length": 8}
        ]
    }))
    .expect("a message");
    assert_eq!(mentions(&m), ["docs", "chef"]);
    assert_eq!(&*m.text, "🎉🎉 @docs_bot and @ChefBot, hi");
    assert_eq!(m.sender.id.as_str(), "tg:111");
    assert_eq!(&*m.sender.name, "Alice Liddell");
    assert_eq!(m.sender.handle.as_deref(), Some("@alice"));
    assert_eq!(m.room.as_str(), "tg:-1001234");
    assert!(!m.is_dm);
    assert_eq!(m.time.as_millis(), 1_700_000_000_000);
}

#[test]
fn a_mention_of_someone_else_names_them_not_a_persona() {
    let m = heard(json!({
        "text": "@bob can you?",
        "entities": [{"type": "mention", "offset": 0, "length": 4}]
    }))
    .expect("a message");
    assert_eq!(mentions(&m), ["tg:@bob"]);
    // No entity, no mention: the text is not guessed at.
    let m = heard(json!({"text": "ask @docs_bot later"})).expect("a message");
    assert!(mentions(&m).is_empty());
}

#[test]
fn a_text_mention_addresses_by_user_id() {
    let m = heard(json!({
        "text": "Chef, what now? and Bob?",
        "entities": [
            {"type": "text_mention", "offset": 0, "length": 4,
             "user": {"id": 7002, "is_bot": true, "first_name": "Chef"}},
            {"type": "text_mention", "offset": 20, "length": 3,
             "user": {"id": 222, "is_bot": false, "first_name": "Bob"}}
        ]
    }))
    .expect("a message");
    assert_eq!(mentions(&m), ["chef", "tg:222"]);
}

#[test]
fn a_command_aimed_at_a_bot_names_its_persona() {
    let m = heard(json!({
        "text": "/reset@ChefBot now",
        "entities": [{"type": "bot_command", "offset": 0, "length": 14}]
    }))
    .expect("a message");
    assert_eq!(&*m.text, "/reset@chef now");
    // Aimed elsewhere, or at no one: left for the engine as it is.
    let m = heard(json!({
        "text": "/reset@other_bot",
        "entities": [{"type": "bot_command", "offset": 0, "length": 16}]
    }))
    .expect("a message");
    assert_eq!(&*m.text, "/reset@other_bot");
    let m = heard(json!({
        "text": "/reset",
        "entities": [{"type": "bot_command", "offset": 0, "length": 6}]
    }))
    .expect("a message");
    assert_eq!(&*m.text, "/reset");
    // A command later in the text is not the message's command.
    let m = heard(json!({
        "text": "try /reset@docs_bot",
        "entities": [{"type": "bot_command", "offset": 4, "length": 15}]
    }))
    .expect("a message");
    assert_eq!(&*m.text, "try /reset@docs_bot");
}

#[test]
fn a_caption_speaks_for_its_photo() {
    let m = heard(json!({
        "photo": [{"file_id": "f", "file_unique_id": "u", "width": 90, "height": 90}],
        "caption": "👀 @ChefBot is this done?",
        "caption_entities": [{"type": "mention", "offset": 3, "length": 8}]
    }))
    .expect("a message");
    assert_eq!(&*m.text, "[photo] 👀 @ChefBot is this done?");
    assert_eq!(mentions(&m), ["chef"]);
    let m = heard(json!({
        "document": {"file_id": "f", "file_unique_id": "u"}
    }))
    .expect("a message");
    assert_eq!(&*m.text, "[document]");
}

#[test]
fn topics_are_threads_and_their_implicit_reply_is_not_a_reply() {
    let root = json!({"message_id": 7, "date": 1_700_000_000, "chat": group(),
        "from": alice(), "forum_topic_created": {"name": "Deploys", "icon_color": 7322096}});
    let m = heard(json!({
        "message_thread_id": 7, "is_topic_message": true,
        "reply_to_message": root, "text": "in the topic"
    }))
    .expect("a message");
    assert_eq!(m.thread.as_ref().map(|t| t.as_str()), Some("7"));
    assert_eq!(m.reply_to, None);
    // A real reply inside the topic.
    let target = json!({"message_id": 9, "date": 1_700_000_000, "chat": group(),
        "from": {"id": 7001, "is_bot": true, "first_name": "Docs", "username": "docs_bot"},
        "message_thread_id": 7, "is_topic_message": true, "text": "an answer"});
    let m = heard(json!({
        "message_thread_id": 7, "is_topic_message": true,
        "reply_to_message": target, "text": "thanks"
    }))
    .expect("a message");
    assert_eq!(m.reply_to.as_ref().map(|r| r.as_str()), Some("9"));
    // Outside a forum, message_thread_id names a reply chain, not a thread.
    let m = heard(json!({"message_thread_id": 5, "text": "plain group"})).expect("a message");
    assert_eq!(m.thread, None);
}

#[test]
fn a_private_chat_is_a_dm_with_the_bots_persona() {
    let m = heard(json!({
        "chat": {"id": 111, "type": "private", "first_name": "Alice"},
        "text": "hello"
    }))
    .expect("a message");
    assert!(m.is_dm);
    assert_eq!(m.dm_to.as_ref().map(|p| p.as_str()), Some("docs"));
    // Each bot's private chat with Alice has her id: the room names the bot.
    assert_eq!(m.room.as_str(), "tg:111:7001");
}

#[test]
fn what_is_not_conversation_is_left_out() {
    // A persona's own message.
    assert!(
        heard(json!({"from": {"id": 7002, "is_bot": true, "first_name": "Chef"}, "text": "mine"})).is_none()
    );
    // Service messages and stickers.
    assert!(heard(json!({"new_chat_members": [alice()]})).is_none());
    assert!(
        heard(
            json!({"sticker": {"file_id": "s", "file_unique_id": "u", "type": "regular",
        "width": 1, "height": 1, "is_animated": false, "is_video": false}})
        )
        .is_none()
    );
    // Another bot is a bot; an anonymous admin speaks as the group.
    let m = heard(json!({"from": {"id": 999, "is_bot": true, "first_name": "Other"}, "text": "beep"}))
        .expect("a message");
    assert!(m.sender.is_bot);
    let m = heard(json!({"from": {"id": 1_087_968_824_u64, "is_bot": true, "first_name": "Group", "username": "GroupAnonymousBot"},
        "sender_chat": group(), "text": "from the admins"}))
    .expect("a message");
    assert_eq!(m.sender.id.as_str(), "tg:-1001234");
    assert!(!m.sender.is_bot);
}

#[test]
fn entities_off_character_boundaries_are_skipped() {
    // Offset 1 falls inside the surrogate pair of 🎉.
    let m = heard(json!({
        "text": "🎉@docs_bot",
        "entities": [{"type": "mention", "offset": 1, "length": 9}, {"type": "mention", "offset": 2, "length": 400}]
    }))
    .expect("a message");
    assert!(mentions(&m).is_empty());
}

#[test]
fn utf16_ranges_map_to_byte_ranges() {
    assert_eq!(utf16_range("a🎉b", 0, 1), Some(0..1));
    assert_eq!(utf16_range("a🎉b", 1, 2), Some(1..5));
    assert_eq!(utf16_range("a🎉b", 3, 1), Some(5..6));
    assert_eq!(utf16_range("a🎉b", 4, 0), Some(6..6));
    assert_eq!(utf16_range("a🎉b", 2, 1), None);
    assert_eq!(utf16_range("a🎉b", 0, 9), None);
    assert_eq!(utf16_range("", 0, 0), Some(0..0));
    assert_eq!(utf16_range("x", usize::MAX, 2), None);
}

proptest! {
    /// Any offsets a server sends: never a panic, and a range found is
    /// the text's own UTF-16 slice.
    #[test]
    fn utf16_ranges_are_total_and_exact(text in "\\PC{0,12}", offset in 0usize..40, len in 0usize..40) {
        if let Some(r) = utf16_range(&text, offset, len) {
            let units: Vec<u16> = text.encode_utf16().collect();
            let want = String::from_utf16(&units[offset..offset + len]).expect("whole characters");
            prop_assert_eq!(&text[r], want.as_str());
        }
    }
}

proptest! {
    /// Whatever text and entities a server sends (offsets past the end,
    /// inside surrogate pairs, overlapping), conversion never panics, and
    /// the text reaches the engine unchanged unless a leading command
    /// named a persona's bot.
    #[test]
    fn conversion_is_total(
        text in "(\\PC|@docs_bot|/reset@ChefBot|🎉){0,8}",
        entities in proptest::collection::vec((0usize..30, 0usize..30, 0u8..4), 0..5),
    ) {
        let entities: Vec<Value> = entities
            .into_iter()
            .map(|(offset, length, kind)| match kind {
                0 => json!({"type": "mention", "offset": offset, "length": length}),
                1 => json!({"type": "bot_command", "offset": offset, "length": length}),
                2 => json!({"type": "text_mention", "offset": offset, "length": length,
                    "user": {"id": 7002, "is_bot": true, "first_name": "Chef"}}),
                _ => json!({"type": "bold", "offset": offset, "length": length}),
            })
            .collect();
        let m = heard(json!({"text": text, "entities": entities})).expect("a message");
        if !m.text.starts_with("/reset@chef") {
            prop_assert_eq!(&*m.text, text.as_str());
        }
    }
}

#[test]
fn a_command_entity_over_something_else_is_not_a_command() {
    // Found by the property above: an entity at 0 covering "🎉/reset@ChefBot".
    let m = heard(json!({
        "text": "🎉/reset@ChefBot",
        "entities": [{"type": "bot_command", "offset": 0, "length": 16}]
    }))
    .expect("a message");
    assert_eq!(&*m.text, "🎉/reset@ChefBot");
}
