//! A post as tactful reads it: who it addresses, where it is, who wrote it.

use proptest::prelude::*;
use tactful_core::{Mentions, PersonaId, UserId};
use tactful_mattermost::inbound::{KnownBot, Seen, at_words, mentions, to_message};
use tactful_mattermost::model::Post;

fn bots() -> Vec<KnownBot> {
    vec![
        KnownBot {
            persona: PersonaId::from("docs"),
            user_id: "docsbotuserid0000000000000".into(),
            username: "docs-bot".into(),
        },
        KnownBot {
            persona: PersonaId::from("chef"),
            user_id: "chefbotuserid0000000000000".into(),
            username: "chef".into(),
        },
    ]
}

fn post(text: &str) -> Post {
    Post {
        id: "post1".into(),
        create_at: 1_700_000_000_123,
        user_id: "aliceuserid000000000000000".into(),
        channel_id: "townsquare0000000000000000".into(),
        message: text.into(),
        ..Post::default()
    }
}

fn seen<'a>(bots: &'a [KnownBot], receiver: &'a PersonaId, channel_type: &'a str) -> Seen<'a> {
    Seen {
        receiver,
        bots,
        channel_type,
        author: Some(("@alice", "alice")),
        thread_reply_to: None,
        everyone_addresses: false,
    }
}

fn ids(v: &[&str]) -> Vec<UserId> {
    v.iter().map(|s| UserId::new(*s)).collect()
}

#[test]
fn a_bots_username_addresses_its_persona_as_mattermost_reads_it() {
    let b = bots();
    assert_eq!(mentions("@docs-bot how?", &b, false), ids(&["docs"]));
    // Trailing punctuation is no part of the name; case does not matter.
    assert_eq!(
        mentions("thanks @Docs-Bot. and @chef_", &b, false),
        ids(&["docs", "chef"])
    );
    // Someone else, once however often.
    assert_eq!(mentions("@bob @bob, @chef", &b, false), ids(&["mm:@bob", "chef"]));
    // An address, code and a fenced block mention nobody.
    assert!(mentions("mail me@docs-bot.org", &b, false).is_empty());
    assert!(mentions("run `@docs-bot` then", &b, false).is_empty());
    assert!(mentions("```\n@docs-bot\n```\nok", &b, false).is_empty());
    // A longer name that is nobody's persona is someone else.
    assert_eq!(mentions("@docs-bottle", &b, false), ids(&["mm:@docs-bottle"]));
}

#[test]
fn channel_wide_words_address_nobody_unless_configured() {
    let b = bots();
    for word in ["@channel", "@all", "@here", "@here."] {
        assert!(mentions(word, &b, false).is_empty(), "{word}");
        assert_eq!(mentions(word, &b, true), ids(&["docs", "chef"]), "{word}");
    }
    assert_eq!(at_words("@All hands, @ALL"), vec!["all".to_owned()]);
}

#[test]
fn a_channel_post_becomes_a_message_with_its_author_and_time() {
    let b = bots();
    let docs = PersonaId::from("docs");
    let m = to_message(&post("@docs-bot how do I reset?"), seen(&b, &docs, "O")).expect("a message");
    assert_eq!(m.room.as_str(), "mm:townsquare0000000000000000");
    assert_eq!(m.id.as_str(), "post1");
    assert_eq!(m.sender.id.as_str(), "mm:aliceuserid000000000000000");
    assert_eq!(&*m.sender.name, "alice");
    assert_eq!(m.sender.handle.as_deref(), Some("alice"));
    assert!(!m.sender.is_bot && !m.is_dm && m.thread.is_none() && m.reply_to.is_none());
    assert_eq!(m.mentions, Mentions::Explicit(ids(&["docs"])));
    assert_eq!(m.time.as_millis(), 1_700_000_000_123);
}

#[test]
fn a_thread_reply_replies_to_the_last_persona_post_else_the_root() {
    let b = bots();
    let docs = PersonaId::from("docs");
    let mut p = post("and then?");
    p.root_id = "root1".into();
    let m = to_message(&p, seen(&b, &docs, "O")).expect("a message");
    assert_eq!(m.thread.as_ref().map(|t| t.as_str()), Some("root1"));
    assert_eq!(m.reply_to.as_ref().map(|t| t.as_str()), Some("root1"));
    let m = to_message(
        &p,
        Seen {
            thread_reply_to: Some("docsanswer"),
            ..seen(&b, &docs, "O")
        },
    )
    .expect("a message");
    assert_eq!(m.reply_to.as_ref().map(|t| t.as_str()), Some("docsanswer"));
}

#[test]
fn direct_and_group_messages_are_dms() {
    let b = bots();
    let chef = PersonaId::from("chef");
    let m = to_message(&post("hi"), seen(&b, &chef, "D")).expect("a message");
    assert!(m.is_dm);
    assert_eq!(m.dm_to, Some(chef.clone()));
    let m = to_message(&post("hi all"), seen(&b, &chef, "G")).expect("a message");
    assert!(m.is_dm);
    assert_eq!(m.dm_to, None, "every persona in the group");
}

#[test]
fn own_system_deleted_and_empty_posts_are_not_conversation() {
    let b = bots();
    let docs = PersonaId::from("docs");
    let mut own = post("an answer");
    own.user_id = "chefbotuserid0000000000000".into();
    assert!(
        to_message(&own, seen(&b, &docs, "O")).is_none(),
        "a persona's own post"
    );
    let mut joined = post("alice joined the channel");
    joined.kind = "system_join_channel".into();
    assert!(to_message(&joined, seen(&b, &docs, "O")).is_none());
    let mut gone = post("oops");
    gone.delete_at = 5;
    assert!(to_message(&gone, seen(&b, &docs, "O")).is_none());
    assert!(to_message(&post("  \n"), seen(&b, &docs, "O")).is_none());
    // A file alone is something said.
    let mut file = post("");
    file.file_ids = Some(vec!["f1".into(), "f2".into()]);
    let m = to_message(&file, seen(&b, &docs, "O")).expect("a message");
    assert_eq!(&*m.text, "[attached: 2 files]");
}

#[test]
fn bots_and_webhooks_are_bots_under_the_name_they_post_as() {
    let b = bots();
    let docs = PersonaId::from("docs");
    let mut hook = post("build failed");
    hook.props.insert("from_webhook".into(), "true".into());
    hook.props.insert("override_username".into(), "CI".into());
    let m = to_message(&hook, seen(&b, &docs, "O")).expect("a message");
    assert!(m.sender.is_bot);
    assert_eq!(&*m.sender.name, "CI");
    assert_eq!(m.sender.handle, None, "a name anyone can set vouches for nobody");
    let mut bot = post("beep");
    bot.props.insert("from_bot".into(), "true".into());
    assert!(
        to_message(&bot, seen(&b, &docs, "O"))
            .expect("a message")
            .sender
            .is_bot
    );
}

proptest! {
    #[test]
    fn any_text_is_read_without_panicking(text in "\\PC{0,200}", ty in "[ODGP]?") {
        let b = bots();
        let docs = PersonaId::from("docs");
        let _ = to_message(&post(&text), seen(&b, &docs, &ty));
        for m in mentions(&text, &b, true) {
            prop_assert!(!m.as_str().is_empty());
        }
    }
}
