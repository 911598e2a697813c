//! Slack events as tactful messages: addressing, threads, DMs, bots, the
//! subtypes that are not new messages, and Slack's markup read as text.
//! Events are parsed from JSON in the shape Slack documents, through
//! slack-morphism's models, as they arrive.

use std::collections::HashMap;

use proptest::prelude::*;
use serde_json::{Value, json};
use slack_morphism::prelude::*;
use tactful_core::{Mentions, PersonaId, UserId};
use tactful_slack::inbound::{
    KnownBot, Raw, Seen, from_app_mention, from_message, mentioned_users, millis, to_message,
};

fn bots() -> Vec<KnownBot> {
    vec![
        KnownBot {
            persona: PersonaId::new("docs"),
            user: Some("U0DOCSBOT".into()),
            bot_id: Some("B0DOCS".into()),
        },
        KnownBot {
            persona: PersonaId::new("chef"),
            user: Some("U0CHEFBOT".into()),
            bot_id: Some("B0CHEF".into()),
        },
    ]
}

fn event(v: Value) -> SlackEventCallbackBody {
    serde_json::from_value(v).expect("a Slack event")
}

fn raw(v: Value) -> Option<Raw> {
    match event(v) {
        SlackEventCallbackBody::Message(m) => from_message(&m),
        SlackEventCallbackBody::AppMention(m) => from_app_mention(&m),
        other => panic!("not a message: {other:?}"),
    }
}

fn msg(text: &str) -> Value {
    json!({"type": "message", "channel": "C1", "channel_type": "channel", "user": "U0ALICE",
           "text": text, "ts": "1700000000.000100", "event_ts": "1700000000.000100"})
}

struct Ctx {
    bots: Vec<KnownBot>,
    names: HashMap<String, String>,
    receiver: PersonaId,
}

impl Ctx {
    fn new() -> Ctx {
        Ctx {
            bots: bots(),
            names: [("U0ALICE", "Alice"), ("U0BOB", "Bob")]
                .into_iter()
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .collect(),
            receiver: PersonaId::new("docs"),
        }
    }

    fn seen(&self) -> Seen<'_> {
        Seen {
            receiver: &self.receiver,
            team: "T1",
            bots: &self.bots,
            names: &self.names,
            thread_reply_to: None,
            everyone_addresses: false,
        }
    }
}

fn explicit(m: &tactful_core::Message) -> Vec<&str> {
    match &m.mentions {
        Mentions::Explicit(ids) => ids.iter().map(UserId::as_str).collect(),
        other => panic!("explicit mentions expected: {other:?}"),
    }
}

#[test]
fn mentions_are_exact_user_ids_and_read_as_names() {
    let cx = Ctx::new();
    let r = raw(msg(
        "<@U0DOCSBOT> ask <@U0BOB> or <@U0CHEFBOT|chef-bot>, not @docs",
    ))
    .expect("a message");
    let m = to_message(&r, cx.seen()).expect("conversation");
    assert_eq!(explicit(&m), ["docs", "slack:T1:U0BOB", "chef"]);
    assert_eq!(&*m.text, "@docs ask @Bob or @chef, not @docs");
    assert_eq!(m.sender.id.as_str(), "slack:T1:U0ALICE");
    assert_eq!(&*m.sender.name, "Alice");
    assert_eq!(m.sender.handle.as_deref(), Some("U0ALICE"), "for allowed_users");
    assert!(!m.sender.is_bot && !m.is_dm);
    assert_eq!(m.room.as_str(), "slack:C1");
    assert_eq!((m.thread.as_ref(), m.reply_to.as_ref()), (None, None));
    assert_eq!(m.id.as_str(), "1700000000.000100");
    assert_eq!(m.time.as_millis(), 1_700_000_000_000);
    assert_eq!(
        mentioned_users("<@U0DOCSBOT> <@U0BOB> <@U0BOB|bob> <@nonsense!>"),
        ["U0DOCSBOT", "U0BOB"]
    );
}

#[test]
fn markup_becomes_text_and_escapes_their_characters() {
    let cx = Ctx::new();
    let m =
        to_message(&raw(msg("in <#C2|> and <#C3>")).expect("a message"), cx.seen()).expect("conversation");
    assert_eq!(&*m.text, "in #C2 and #C3", "an empty label is no label");
    let text = "see <#C2|ops>, <https://e.org/a?b=1&amp;c=2|the docs>, <mailto:a@b.c|a@b.c>, <https://x.org> &lt;b&gt; &amp;lt; <!subteam^S1|@oncall>";
    let m = to_message(&raw(msg(text)).expect("a message"), cx.seen()).expect("conversation");
    assert_eq!(
        &*m.text,
        "see #ops, the docs (https://e.org/a?b=1&c=2), mailto:a@b.c, https://x.org <b> &lt; @oncall"
    );
    // A person typing `<!channel>` sends `&lt;!channel&gt;`: text, no mention.
    let m =
        to_message(&raw(msg("&lt;@U0DOCSBOT&gt; hi")).expect("a message"), cx.seen()).expect("conversation");
    assert_eq!(explicit(&m), Vec::<&str>::new());
    assert_eq!(&*m.text, "<@U0DOCSBOT> hi");
}

#[test]
fn channel_wide_mentions_address_nobody_unless_configured() {
    let mut cx = Ctx::new();
    let r = raw(msg("<!channel> standup, <!here> too")).expect("a message");
    let m = to_message(&r, cx.seen()).expect("conversation");
    assert_eq!(explicit(&m), Vec::<&str>::new());
    assert_eq!(&*m.text, "@channel standup, @here too");
    cx.bots.truncate(2);
    let seen = Seen {
        everyone_addresses: true,
        ..cx.seen()
    };
    assert_eq!(
        explicit(&to_message(&r, seen).expect("conversation")),
        ["docs", "chef"]
    );
}

#[test]
fn a_thread_reply_is_in_its_thread_and_replies_to_what_the_caller_says() {
    let cx = Ctx::new();
    let mut v = msg("and then?");
    v["thread_ts"] = json!("1700000000.000001");
    let r = raw(v).expect("a message");
    assert_eq!(r.thread(), Some("1700000000.000001"));
    let m = to_message(&r, cx.seen()).expect("conversation");
    assert_eq!(m.thread.as_ref().map(|t| t.as_str()), Some("1700000000.000001"));
    assert_eq!(
        m.reply_to.as_ref().map(|t| t.as_str()),
        Some("1700000000.000001"),
        "the parent, by default"
    );
    let seen = Seen {
        thread_reply_to: Some("1700000000.000050"),
        ..cx.seen()
    };
    assert_eq!(
        to_message(&r, seen)
            .expect("conversation")
            .reply_to
            .map(|t| t.to_string()),
        Some("1700000000.000050".into()),
        "the persona's last message in the thread"
    );
    // A thread's parent carries its own ts as thread_ts: not in a thread.
    let mut v = msg("the parent");
    v["thread_ts"] = json!("1700000000.000100");
    let m = to_message(&raw(v).expect("a message"), cx.seen()).expect("conversation");
    assert_eq!((m.thread, m.reply_to), (None, None));
}

#[test]
fn ims_are_dms_with_the_receiving_persona() {
    let cx = Ctx::new();
    let mut v = msg("psst");
    v["channel"] = json!("D1");
    v["channel_type"] = json!("im");
    let m = to_message(&raw(v).expect("a message"), cx.seen()).expect("conversation");
    assert!(m.is_dm);
    assert_eq!(m.dm_to.as_ref().map(|p| p.as_str()), Some("docs"));
    assert_eq!(m.room.as_str(), "slack:D1");
}

#[test]
fn bots_are_bots_and_the_personas_own_messages_are_left_out() {
    let cx = Ctx::new();
    let v = json!({"type": "message", "subtype": "bot_message", "channel": "C1", "bot_id": "B0DEPLOY",
                   "username": "deploy-bot", "text": "deployed", "ts": "1700000000.000200"});
    let m = to_message(&raw(v).expect("a message"), cx.seen()).expect("conversation");
    assert!(m.sender.is_bot);
    assert_eq!(m.sender.id.as_str(), "slack:T1:B0DEPLOY");
    assert_eq!(&*m.sender.name, "deploy-bot");
    // An app's bot user posting (with a bot_id) is a bot too.
    let mut v = msg("from an app");
    v["user"] = json!("U0OTHERBOT");
    v["bot_id"] = json!("B0OTHER");
    assert!(
        to_message(&raw(v).expect("a message"), cx.seen())
            .expect("conversation")
            .sender
            .is_bot
    );
    // The personas' own: by user or by bot id.
    for (user, bot) in [("U0CHEFBOT", None), ("U0X", Some("B0DOCS"))] {
        let mut v = msg("chef's answer");
        v["user"] = json!(user);
        if let Some(b) = bot {
            v["bot_id"] = json!(b);
        }
        assert!(
            to_message(&raw(v).expect("a message"), cx.seen()).is_none(),
            "{user}"
        );
    }
}

#[test]
fn edits_deletions_joins_and_other_subtypes_are_not_new_messages() {
    let changed = json!({"type": "message", "subtype": "message_changed", "channel": "C1", "hidden": true,
        "ts": "1700000000.000300",
        "message": {"type": "message", "user": "U0ALICE", "text": "<@U0DOCSBOT> edited", "ts": "1700000000.000100",
                    "edited": {"user": "U0ALICE", "ts": "1700000000.000300"}},
        "previous_message": {"type": "message", "user": "U0ALICE", "text": "before", "ts": "1700000000.000100"}});
    let deleted = json!({"type": "message", "subtype": "message_deleted", "channel": "C1", "hidden": true,
        "ts": "1700000000.000301", "deleted_ts": "1700000000.000100"});
    let joined = json!({"type": "message", "subtype": "channel_join", "channel": "C1", "user": "U0BOB",
        "text": "<@U0BOB> has joined the channel", "ts": "1700000000.000302"});
    let left = json!({"type": "message", "subtype": "channel_leave", "channel": "C1", "user": "U0BOB",
        "text": "<@U0BOB> has left the channel", "ts": "1700000000.000303"});
    let future = json!({"type": "message", "subtype": "something_new", "channel": "C1", "user": "U0BOB",
        "text": "<@U0DOCSBOT>", "ts": "1700000000.000304"});
    for v in [changed, deleted, joined, left, future] {
        let SlackEventCallbackBody::Message(m) = event(v.clone()) else {
            panic!("a message event: {v}");
        };
        assert!(m.subtype.is_some(), "{v}");
        assert_eq!(from_message(&m), None, "{v}");
    }
    // A thread reply also sent to the channel, a file share and /me are.
    for sub in ["thread_broadcast", "file_share", "me_message"] {
        let mut v = msg("<@U0DOCSBOT> look");
        v["subtype"] = json!(sub);
        assert!(raw(v).is_some(), "{sub}");
    }
}

#[test]
fn an_app_mention_is_the_same_message_as_its_message_event() {
    let from_mention = raw(json!({"type": "app_mention", "user": "U0ALICE", "channel": "C1",
        "text": "<@U0DOCSBOT> hi", "ts": "1700000000.000100", "event_ts": "1700000000.000100"}))
    .expect("a mention");
    let from_message = raw(msg("<@U0DOCSBOT> hi")).expect("a message");
    assert_eq!(from_mention.key(), from_message.key());
    let cx = Ctx::new();
    let a = to_message(&from_mention, cx.seen()).expect("conversation");
    let b = to_message(&from_message, cx.seen()).expect("conversation");
    assert_eq!(
        (a.id, a.text, a.mentions, a.sender),
        (b.id, b.text, b.mentions, b.sender)
    );
    // The mention an edit added is not a new message.
    let edited = raw(json!({"type": "app_mention", "user": "U0ALICE", "channel": "C1",
        "text": "<@U0DOCSBOT> hi", "ts": "1700000000.000100", "event_ts": "1700000000.000900",
        "edited": {"user": "U0ALICE", "ts": "1700000000.000900"}}));
    assert_eq!(edited, None);
}

#[test]
fn files_are_named_and_empty_messages_skipped() {
    let cx = Ctx::new();
    let mut v = msg("");
    v["subtype"] = json!("file_share");
    v["files"] = json!([{"id": "F1", "name": "trace.log"}]);
    let m = to_message(&raw(v).expect("a message"), cx.seen()).expect("conversation");
    assert_eq!(&*m.text, "[attached: trace.log]");
    assert!(to_message(&raw(msg("  ")).expect("a message"), cx.seen()).is_none());
}

#[test]
fn timestamps_read_as_milliseconds() {
    assert_eq!(millis("1700000000.123456"), 1_700_000_000_123);
    assert_eq!(millis("1700000000.5"), 1_700_000_000_500);
    assert_eq!(millis("1700000000"), 1_700_000_000_000);
    assert_eq!(millis("nonsense"), 0);
}

proptest! {
    /// Whatever a message's text, reading it never panics, and a mention
    /// only comes from a well-formed `<@U…>` of a persona or a person.
    #[test]
    fn any_text_reads_without_panicking(text in "(<|>|&|@|!|#|\\||U0DOCSBOT|[a-z ]|lt;|gt;|amp;|é|🎉){0,40}") {
        let cx = Ctx::new();
        let r = raw(msg(&text)).expect("a message");
        if let Some(m) = to_message(&r, cx.seen()) {
            for id in explicit(&m) {
                prop_assert!(id == "docs" || id.starts_with("slack:T1:U"), "{id}");
            }
            if explicit(&m).contains(&"docs") {
                prop_assert!(text.contains("<@U0DOCSBOT"));
            }
        }
    }
}
