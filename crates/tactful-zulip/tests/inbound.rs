//! A Zulip message as tactful reads it: who it addresses, where it is, who
//! wrote it.

use proptest::prelude::*;
use tactful_core::{Mentions, PersonaId, UserId};
use tactful_zulip::inbound::{
    KnownBot, Seen, Target, addressed, direct_room, readable, target_of, to_message,
};
use tactful_zulip::model::{DisplayRecipient, Recipient, ZMessage};

fn bots() -> Vec<KnownBot> {
    vec![
        KnownBot {
            persona: PersonaId::from("docs"),
            user_id: 10,
            full_name: "Docs Bot".into(),
        },
        KnownBot {
            persona: PersonaId::from("chef"),
            user_id: 11,
            full_name: "Chef".into(),
        },
    ]
}

fn stream_message(text: &str) -> ZMessage {
    ZMessage {
        id: 500,
        sender_id: 1,
        sender_full_name: "Alice".into(),
        sender_email: "alice@example.org".into(),
        content: text.into(),
        kind: "stream".into(),
        stream_id: Some(7),
        display_recipient: DisplayRecipient::Stream("general".into()),
        subject: "Setup".into(),
        timestamp: 1_700_000_000,
    }
}

fn person(id: u64) -> Recipient {
    Recipient {
        id,
        email: format!("{id}@example.org"),
        full_name: format!("user {id}"),
    }
}

fn seen(bots: &[KnownBot]) -> Seen<'_> {
    Seen {
        bots,
        topic_reply_to: None,
        everyone_addresses: false,
    }
}

fn ids(v: &[&str]) -> Vec<UserId> {
    v.iter().map(|s| UserId::new(*s)).collect()
}

#[test]
fn mentions_address_as_zulip_notifies() {
    let b = bots();
    assert_eq!(addressed("@**Docs Bot** how?", &b, false), ids(&["docs"]));
    // By id, whatever the name says; case aside by name.
    assert_eq!(
        addressed("@**Someone|11** and @**docs bot**", &b, false),
        ids(&["chef", "docs"])
    );
    // A silent mention names without addressing.
    assert!(addressed("as @_**Docs Bot** said", &b, false).is_empty());
    // Someone else.
    assert_eq!(
        addressed("@**Bob|3** @**Carol**", &b, false),
        ids(&["zulip:3", "zulip:@Carol"])
    );
    // Code mentions nobody.
    assert!(addressed("`@**Docs Bot**`", &b, false).is_empty());
    assert!(addressed("```\n@**Docs Bot**\n```", &b, false).is_empty());
    // Broken markup is text.
    assert!(addressed("@**Docs Bot", &b, false).is_empty());
}

#[test]
fn wildcards_address_nobody_unless_configured() {
    let b = bots();
    for w in [
        "@**all**",
        "@**everyone**",
        "@**channel**",
        "@**stream**",
        "@**topic**",
        "@**ALL**",
    ] {
        assert!(addressed(w, &b, false).is_empty(), "{w}");
        assert_eq!(addressed(w, &b, true), ids(&["docs", "chef"]), "{w}");
    }
}

#[test]
fn agents_read_mentions_as_names() {
    assert_eq!(
        readable("hi @**Docs Bot|10**, as @_**Chef** said"),
        "hi @Docs Bot, as Chef said"
    );
    assert_eq!(readable("no mention here"), "no mention here");
}

#[test]
fn a_stream_message_is_in_its_topic_and_replies_to_the_last_persona_message() {
    let b = bots();
    let m = to_message(&stream_message("@**Docs Bot** how?"), seen(&b)).expect("a message");
    assert_eq!(m.room.as_str(), "zulip:7");
    assert_eq!(m.thread.as_ref().map(|t| t.as_str()), Some("Setup"));
    assert_eq!(m.reply_to, None);
    assert_eq!(m.mentions, Mentions::Explicit(ids(&["docs"])));
    assert_eq!(m.sender.id.as_str(), "zulip:1");
    assert_eq!(m.sender.handle.as_deref(), Some("alice@example.org"));
    assert!(!m.sender.is_bot && !m.is_dm);
    assert_eq!(m.time.as_millis(), 1_700_000_000_000);
    let m = to_message(
        &stream_message("and then?"),
        Seen {
            topic_reply_to: Some(480),
            ..seen(&b)
        },
    )
    .expect("a message");
    assert_eq!(m.reply_to.as_ref().map(|r| r.as_str()), Some("480"));
}

#[test]
fn direct_messages_are_dms_one_to_one_with_their_bot() {
    let b = bots();
    let mut dm = stream_message("hello");
    dm.kind = "private".into();
    dm.stream_id = None;
    dm.subject = String::new();
    dm.display_recipient = DisplayRecipient::People(vec![person(1), person(11)]);
    let m = to_message(&dm, seen(&b)).expect("a message");
    assert!(m.is_dm && m.thread.is_none());
    assert_eq!(m.dm_to, Some(PersonaId::from("chef")));
    assert_eq!(m.room, direct_room(&[11, 1]));
    assert_eq!(target_of(&m.room), Some(Target::Direct(vec![1, 11])));
    // A group with two people: every persona in it.
    dm.display_recipient = DisplayRecipient::People(vec![person(1), person(2), person(11)]);
    let m = to_message(&dm, seen(&b)).expect("a message");
    assert!(m.is_dm);
    assert_eq!(m.dm_to, None);
}

#[test]
fn own_bot_and_empty_messages() {
    let b = bots();
    let mut own = stream_message("an answer");
    own.sender_id = 10;
    assert!(to_message(&own, seen(&b)).is_none(), "a persona's own message");
    assert!(to_message(&stream_message("  "), seen(&b)).is_none());
    let mut bot = stream_message("deployed");
    bot.sender_email = "ci-bot@example.org".into();
    assert!(to_message(&bot, seen(&b)).expect("a message").sender.is_bot);
}

#[test]
fn rooms_that_are_not_zulips_are_refused() {
    for bad in [
        "zulip:",
        "zulip:abc",
        "zulip:dm:",
        "zulip:dm:1,x",
        "slack:C1",
        "7",
    ] {
        assert_eq!(target_of(&tactful_core::RoomId::new(bad)), None, "{bad}");
    }
    assert_eq!(
        target_of(&tactful_core::RoomId::new("zulip:42")),
        Some(Target::Stream(42))
    );
}

proptest! {
    #[test]
    fn any_text_is_read_without_panicking(text in "\\PC{0,200}") {
        let b = bots();
        let _ = to_message(&stream_message(&text), seen(&b));
        let _ = readable(&text);
        let _ = tactful_zulip::send::without_wildcards(&text);
        prop_assert_eq!(
            tactful_zulip::send::without_wildcards(&text).chars().count(),
            text.chars().count()
        );
    }
}
