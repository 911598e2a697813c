//! One Matrix `m.room.message` event as a [`tactful_core::Message`]: pure
//! functions, no client, so every rule here is unit-tested.
//!
//! - Mentions come from `m.mentions.user_ids` when the event has it (every
//!   current client sends it); else from pills (`matrix.to` links) in the
//!   HTML body; else from the personas' names found in the plain text on
//!   word boundaries, for old or minimal clients.
//! - `m.in_reply_to` becomes `reply_to` (the engine knows which persona
//!   wrote the target, so a reply to a persona addresses it); the quoted
//!   reply fallback some clients still put in `body` is dropped.
//! - An `m.thread` relation puts the message in the thread named by its
//!   root event.
//! - Edits (`m.replace`) are not new messages and are skipped.

use std::sync::Arc;

use matrix_sdk::ruma::events::room::message::{
    MessageType, OriginalSyncRoomMessageEvent, Relation, RoomMessageEventContent,
};
use tactful_core::{Mentions, Message, MsgId, PersonaId, RoomId, Sender, ThreadId, Timestamp, UserId};
use tactful_runtime::RoomScheme;

/// What the conversion needs to know about a persona.
#[derive(Clone, Debug)]
pub struct KnownPersona {
    /// The persona.
    pub id: PersonaId,
    /// Its Matrix user id (`@chef:example.org`).
    pub user_id: String,
    /// Names that mention it in plain text: its display name and the user
    /// id's localpart.
    pub names: Vec<String>,
}

/// Where an event was seen, as far as the conversion cares.
#[derive(Clone, Debug)]
pub struct Seen<'a> {
    /// The tactful room (`matrix:!room`).
    pub room: RoomId,
    /// Whether the room is a direct conversation.
    pub is_dm: bool,
    /// For a DM, the persona on the other side.
    pub dm_to: Option<PersonaId>,
    /// The sender's display name, when the room knows one.
    pub sender_name: Option<&'a str>,
    /// The personas, in config order.
    pub personas: &'a [KnownPersona],
}

/// How Matrix's rooms are named: `matrix:<room id>`.
pub const ROOMS: RoomScheme = RoomScheme {
    prefix: "matrix:",
    noun: "Matrix room",
};

/// The tactful room id of a Matrix room.
pub fn room_id(matrix_room: &str) -> RoomId {
    ROOMS.room(matrix_room)
}

/// The Matrix room id of a tactful room, if it is one.
pub fn matrix_room(room: &RoomId) -> Option<&str> {
    ROOMS.native(room)
}

/// The message an event carries, or `None` for events that are not new
/// messages (edits).
pub fn to_message(ev: &OriginalSyncRoomMessageEvent, seen: &Seen<'_>) -> Option<Message> {
    let content = &ev.content;
    let (thread, reply_to) = match &content.relates_to {
        Some(Relation::Replacement(_)) => return None,
        Some(Relation::Reply(r)) => (None, Some(r.in_reply_to.event_id.to_string())),
        Some(Relation::Thread(t)) => {
            // In a thread, `in_reply_to` is a real reply only when it is not
            // the fallback that points at the thread's latest event.
            let reply = t
                .in_reply_to
                .as_ref()
                .filter(|_| !t.is_falling_back)
                .map(|r| r.event_id.to_string());
            (Some(ThreadId::new(t.event_id.as_str())), reply)
        }
        _ => (None, None),
    };
    let sender = ev.sender.as_str();
    let name = seen
        .sender_name
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| localpart(sender));
    let text = match &content.msgtype {
        MessageType::Emote(e) => format!("* {name} {}", strip_reply_fallback(&e.body)),
        MessageType::Text(_) | MessageType::Notice(_) => strip_reply_fallback(content.body()).to_owned(),
        other => format!("[{}: {}]", kind_of(other.msgtype()), other.body()),
    };
    Some(Message {
        id: MsgId::new(ev.event_id.as_str()),
        room: seen.room.clone(),
        thread,
        sender: Sender {
            id: UserId::new(sender),
            name: Arc::from(name),
            // By Matrix convention, notices come from bots.
            is_bot: matches!(content.msgtype, MessageType::Notice(_)),
            handle: None,
        },
        mentions: Mentions::Explicit(mentions(content, &text, seen.personas)),
        text: Arc::from(text.as_str()),
        reply_to: reply_to.map(MsgId::new),
        is_dm: seen.is_dm,
        dm_to: seen.dm_to.clone(),
        time: Timestamp::from_millis(u64::from(ev.origin_server_ts.0)),
    })
}

/// `m.image` → `image`.
fn kind_of(msgtype: &str) -> &str {
    msgtype.strip_prefix("m.").unwrap_or(msgtype)
}

/// `@chef:example.org` → `chef`.
pub fn localpart(user_id: &str) -> &str {
    let s = user_id.strip_prefix('@').unwrap_or(user_id);
    s.split_once(':').map_or(s, |(l, _)| l)
}

/// Who an event mentions, persona ids for personas and Matrix ids for
/// everyone else.
fn mentions(content: &RoomMessageEventContent, text: &str, personas: &[KnownPersona]) -> Vec<UserId> {
    let as_tactful = |matrix_id: &str| {
        personas
            .iter()
            .find(|p| p.user_id == matrix_id)
            .map_or_else(|| UserId::new(matrix_id), |p| UserId::new(p.id.as_str()))
    };
    let mut out: Vec<UserId> = Vec::new();
    let mut add = |u: UserId| {
        if !out.contains(&u) {
            out.push(u);
        }
    };
    if let Some(m) = &content.mentions {
        m.user_ids.iter().for_each(|u| add(as_tactful(u.as_str())));
        return out;
    }
    let html = match &content.msgtype {
        MessageType::Text(t) => t.formatted.as_ref().map(|f| f.body.as_str()),
        MessageType::Notice(n) => n.formatted.as_ref().map(|f| f.body.as_str()),
        MessageType::Emote(e) => e.formatted.as_ref().map(|f| f.body.as_str()),
        _ => None,
    };
    let pills = html.map(pills).unwrap_or_default();
    if !pills.is_empty() {
        pills.iter().for_each(|u| add(as_tactful(u)));
        return out;
    }
    for p in personas {
        if p.names.iter().any(|n| names_in(text, n)) || names_in(text, &p.user_id) {
            add(UserId::new(p.id.as_str()));
        }
    }
    out
}

/// The user ids of the pills (`<a href="https://matrix.to/#/@u:server">`)
/// in an HTML body.
pub fn pills(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in html.match_indices("matrix.to/#/") {
        let rest = &html[at + "matrix.to/#/".len()..];
        let end = rest.find(['"', '\'', '?', '>', ' ']).unwrap_or(rest.len());
        let id = percent_decode(&rest[..end]);
        if id.starts_with('@') && id.contains(':') && !out.contains(&id) {
            out.push(id);
        }
    }
    out
}

/// Decodes the `%40`/`%3A` escapes pills often use.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(v) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `name` occurs in `text` as a whole word (case-insensitive; an
/// `@` before it is fine).
pub fn names_in(text: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let hay = text.to_lowercase();
    let needle = name.to_lowercase();
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    hay.match_indices(&needle)
        .any(|(at, m)| !word(hay[..at].chars().next_back()) && !word(hay[at + m.len()..].chars().next()))
}

/// Drops the `> <@someone> quoted` lines a reply fallback puts before the
/// answer (clients stopped sending them, but old ones still do).
pub fn strip_reply_fallback(body: &str) -> &str {
    if !body.starts_with("> ") {
        return body;
    }
    let mut rest = body;
    while let Some(line_end) = rest.find('\n') {
        if !rest.starts_with('>') {
            break;
        }
        rest = &rest[line_end + 1..];
    }
    if rest.starts_with('>') {
        return body;
    }
    rest.trim_start_matches('\n')
}

#[cfg(test)]
mod tests {
    use super::*;
    use matrix_sdk::ruma::serde::Raw;

    fn personas() -> Vec<KnownPersona> {
        vec![
            KnownPersona {
                id: "chef".into(),
                user_id: "@chef:hs.test".into(),
                names: vec!["Chef".into(), "chef".into()],
            },
            KnownPersona {
                id: "docs".into(),
                user_id: "@docs-bot:hs.test".into(),
                names: vec!["Docs".into(), "docs-bot".into()],
            },
        ]
    }

    fn event(content: serde_json::Value) -> OriginalSyncRoomMessageEvent {
        let raw = serde_json::json!({
            "type": "m.room.message",
            "event_id": "$ev1",
            "sender": "@alice:hs.test",
            "origin_server_ts": 1_700_000_000_000u64,
            "content": content,
        });
        Raw::<OriginalSyncRoomMessageEvent>::from_json_string(raw.to_string())
            .expect("raw")
            .deserialize()
            .expect("an event")
    }

    fn convert(content: serde_json::Value) -> Option<Message> {
        let personas = personas();
        let seen = Seen {
            room: room_id("!r"),
            is_dm: false,
            dm_to: None,
            sender_name: Some("Alice"),
            personas: &personas,
        };
        to_message(&event(content), &seen)
    }

    fn ids(m: &Message) -> Vec<&str> {
        match &m.mentions {
            Mentions::Explicit(v) => v.iter().map(|u| u.as_str()).collect(),
            Mentions::FromText => vec!["<from text>"],
        }
    }

    #[test]
    fn m_mentions_is_the_whole_truth_when_present() {
        let m = convert(serde_json::json!({
            "msgtype": "m.text", "body": "Chef, or docs? ask @bob",
            "m.mentions": { "user_ids": ["@docs-bot:hs.test", "@bob:hs.test"] }
        }))
        .expect("a message");
        // (m.mentions is a set: sorted by Matrix id.)
        assert_eq!(ids(&m), ["@bob:hs.test", "docs"]);
        assert_eq!(&*m.sender.name, "Alice");
        assert_eq!(m.room.as_str(), "matrix:!r");
        assert_eq!(m.id.as_str(), "$ev1");
        // An empty m.mentions means nobody, whatever the text says.
        let m = convert(serde_json::json!({
            "msgtype": "m.text", "body": "chef is great", "m.mentions": {}
        }))
        .expect("a message");
        assert!(ids(&m).is_empty());
    }

    #[test]
    fn pills_count_when_m_mentions_is_absent() {
        let m = convert(serde_json::json!({
            "msgtype": "m.text", "body": "Docs: hi",
            "format": "org.matrix.custom.html",
            "formatted_body": "<a href=\"https://matrix.to/#/%40docs-bot%3Ahs.test\">Docs</a>: hi"
        }))
        .expect("a message");
        assert_eq!(ids(&m), ["docs"]);
    }

    #[test]
    fn plain_text_names_on_word_boundaries_are_the_fallback() {
        let m = convert(serde_json::json!({ "msgtype": "m.text", "body": "hey @chef, soup?" }))
            .expect("a message");
        assert_eq!(ids(&m), ["chef"]);
        let m = convert(serde_json::json!({ "msgtype": "m.text", "body": "the chefs are out" }))
            .expect("a message");
        assert!(ids(&m).is_empty(), "chefs is not chef");
    }

    #[test]
    fn replies_threads_and_edits() {
        let m = convert(serde_json::json!({
            "msgtype": "m.text", "body": "> <@chef:hs.test> soup\n\nthanks!",
            "m.relates_to": { "m.in_reply_to": { "event_id": "$soup" } }, "m.mentions": {}
        }))
        .expect("a message");
        assert_eq!(m.reply_to.as_ref().map(|r| r.as_str()), Some("$soup"));
        assert_eq!(&*m.text, "thanks!", "the quoted fallback is dropped");

        let m = convert(serde_json::json!({
            "msgtype": "m.text", "body": "in the thread",
            "m.relates_to": { "rel_type": "m.thread", "event_id": "$root",
                "is_falling_back": true, "m.in_reply_to": { "event_id": "$latest" } }
        }))
        .expect("a message");
        assert_eq!(m.thread.as_ref().map(|t| t.as_str()), Some("$root"));
        assert_eq!(m.reply_to, None, "a thread's fallback reply is not a reply");

        let m = convert(serde_json::json!({
            "msgtype": "m.text", "body": "a real reply in the thread",
            "m.relates_to": { "rel_type": "m.thread", "event_id": "$root",
                "m.in_reply_to": { "event_id": "$x" } }
        }))
        .expect("a message");
        assert_eq!(m.reply_to.as_ref().map(|r| r.as_str()), Some("$x"));

        let edit = convert(serde_json::json!({
            "msgtype": "m.text", "body": "* fixed",
            "m.new_content": { "msgtype": "m.text", "body": "fixed" },
            "m.relates_to": { "rel_type": "m.replace", "event_id": "$ev0" }
        }));
        assert!(edit.is_none(), "an edit is not a new message");
    }

    #[test]
    fn notices_are_bots_and_media_is_described() {
        let m =
            convert(serde_json::json!({ "msgtype": "m.notice", "body": "build passed" })).expect("a message");
        assert!(m.sender.is_bot);
        let m = convert(serde_json::json!({
            "msgtype": "m.image", "body": "cat.png", "url": "mxc://hs.test/abc"
        }))
        .expect("a message");
        assert_eq!(&*m.text, "[image: cat.png]");
        let m = convert(serde_json::json!({ "msgtype": "m.emote", "body": "waves" })).expect("a message");
        assert_eq!(&*m.text, "* Alice waves");
    }

    #[test]
    fn helpers() {
        assert_eq!(localpart("@chef:hs.test"), "chef");
        assert_eq!(strip_reply_fallback("plain"), "plain");
        assert_eq!(strip_reply_fallback("> only a quote"), "> only a quote");
        assert_eq!(
            pills("<a href='https://matrix.to/#/@a:b'>a</a> <a href=\"https://matrix.to/#/!room:b\">r</a>"),
            ["@a:b"]
        );
        assert!(names_in("Docs-bot: hi", "docs-bot"));
        assert!(!names_in("undocs-bot", "docs-bot"));
    }
}
