//! One Zulip message as a [`tactful_core::Message`]: pure functions over
//! the message and what the listener knows, so every rule here is
//! unit-tested.
//!
//! - Addressing is read from the text as Zulip writes it: `@**Full Name**`
//!   or `@**Full Name|42**` naming a persona's bot (by name, case aside,
//!   or by user id). A silent mention, `@_**Name**`, names without
//!   addressing, as it notifies nobody in Zulip. `@**all**`,
//!   `@**everyone**`, `@**channel**`, `@**stream**` and `@**topic**`
//!   address nobody unless `everyone_addresses`. Mentions inside code
//!   are not read.
//! - Agents read `@**Name|42**` as `@Name` and a silent mention as the
//!   name alone.
//! - A stream message's topic is its thread (named in lower case, as
//!   Zulip compares topics), and it replies to what the
//!   caller says (the last persona message in the topic), so a message in
//!   a topic a persona answered in addresses that persona.
//! - Direct messages (one-to-one or a group) are DMs; a one-to-one with a
//!   persona's bot is that persona's.
//! - People are `zulip:<user id>`, with their email as handle; a sender
//!   whose email is a bot's (`…-bot@…`, as Zulip names bots) is a bot. The
//!   personas' own messages are left out, whichever session sent them.

use std::sync::Arc;

use tactful_core::{Mentions, Message, MsgId, PersonaId, RoomId, Sender, ThreadId, Timestamp, UserId};
use tactful_runtime::RoomScheme;

use crate::model::{DisplayRecipient, ZMessage};

/// How Zulip's rooms are named: `zulip:<stream id>`, and
/// `zulip:dm:<user ids>` for a direct message (everyone in it, sorted).
pub const ROOMS: RoomScheme = RoomScheme {
    prefix: "zulip:",
    noun: "Zulip stream or direct message",
};

/// The room of a stream.
pub fn stream_room(stream_id: u64) -> RoomId {
    ROOMS.room(stream_id)
}

/// The room of a direct message among `people` (their user ids, the bot's
/// included).
pub fn direct_room(people: &[u64]) -> RoomId {
    let mut ids = people.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
    ROOMS.room(format!("dm:{}", ids.join(",")))
}

/// Where a room's messages go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A stream, by id.
    Stream(u64),
    /// A direct message among these user ids.
    Direct(Vec<u64>),
}

/// What `room` names, if it is a Zulip room.
pub fn target_of(room: &RoomId) -> Option<Target> {
    let rest = ROOMS.native(room)?;
    match rest.strip_prefix("dm:") {
        Some(ids) => {
            let ids: Option<Vec<u64>> = ids.split(',').map(|i| i.parse().ok()).collect();
            ids.filter(|v| !v.is_empty() && v.len() <= 100)
                .map(Target::Direct)
        }
        None => rest.parse().ok().map(Target::Stream),
    }
}

/// A persona's bot, as the conversion needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownBot {
    /// The persona.
    pub persona: PersonaId,
    /// The bot's user id.
    pub user_id: u64,
    /// Its name, which mentions use.
    pub full_name: String,
}

/// What the conversion needs besides the message.
#[derive(Clone, Copy, Debug)]
pub struct Seen<'a> {
    /// Every persona's bot known so far.
    pub bots: &'a [KnownBot],
    /// For a stream message: the last persona message in its topic.
    pub topic_reply_to: Option<u64>,
    /// Whether wildcard mentions address every persona.
    pub everyone_addresses: bool,
}

/// The words that mention everyone.
const WILDCARDS: [&str; 5] = ["all", "everyone", "channel", "stream", "topic"];

/// A mention in the text: who it names, whether it is silent, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mention {
    /// The name as written (before any `|id`).
    pub name: String,
    /// The user id after `|`, if given.
    pub id: Option<u64>,
    /// `@_**…**`: names without notifying.
    pub silent: bool,
    /// Byte range of the whole mention in the text.
    pub span: std::ops::Range<usize>,
}

/// The mentions in `text`, outside code, in order.
pub fn mentions_in(text: &str) -> Vec<Mention> {
    scan(text, &tactful_runtime::markup::code_ranges(text))
}

/// The mentions in `text`, code or not: what could notify if Zulip read
/// the code's edges otherwise than [`tactful_runtime::markup::code_ranges`] does.
pub fn mentions_anywhere(text: &str) -> Vec<Mention> {
    scan(text, &[])
}

/// The mentions in `text` outside the `code` ranges.
fn scan(text: &str, code: &[std::ops::Range<usize>]) -> Vec<Mention> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find('@').map(|i| from + i) {
        from = at + 1;
        if code.iter().any(|c| c.contains(&at)) {
            continue;
        }
        let rest = &text[at + 1..];
        let (silent, rest) = match rest.strip_prefix('_') {
            Some(r) => (true, r),
            None => (false, rest),
        };
        let Some(inner) = rest.strip_prefix("**") else {
            continue;
        };
        let Some(end) = inner.find("**") else {
            continue;
        };
        let body = &inner[..end];
        if body.is_empty() || body.contains('\n') || body.len() > 200 {
            continue;
        }
        let (name, id) = match body.rsplit_once('|') {
            Some((n, id)) => (n, id.trim().parse::<u64>().ok()),
            None => (body, None),
        };
        let len = 1 + usize::from(silent) + 2 + end + 2;
        out.push(Mention {
            name: name.trim().to_owned(),
            id,
            silent,
            span: at..at + len,
        });
        from = at + len;
    }
    out
}

/// The text as agents read it: `@**Name|42**` as `@Name`, a silent
/// mention as the name alone.
pub fn readable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for m in mentions_in(text) {
        out.push_str(&text[last..m.span.start]);
        if !m.silent {
            out.push('@');
        }
        out.push_str(&m.name);
        last = m.span.end;
    }
    out.push_str(&text[last..]);
    out
}

/// Who `text` addresses: the personas its (not silent) mentions name,
/// every persona for a wildcard when `everyone` allows, and other people
/// as `zulip:<id>` (or `zulip:@<name>` without an id).
pub fn addressed(text: &str, bots: &[KnownBot], everyone: bool) -> Vec<UserId> {
    let mut out: Vec<UserId> = Vec::new();
    let mut add = |u: UserId| {
        if !out.contains(&u) {
            out.push(u);
        }
    };
    for m in mentions_in(text).into_iter().filter(|m| !m.silent) {
        let bot = bots.iter().find(|b| match m.id {
            Some(id) => b.user_id == id,
            None => b.full_name.eq_ignore_ascii_case(&m.name),
        });
        if let Some(b) = bot {
            add(UserId::new(b.persona.as_str()));
        } else if m.id.is_none() && WILDCARDS.iter().any(|w| w.eq_ignore_ascii_case(&m.name)) {
            if everyone {
                bots.iter().for_each(|b| add(UserId::new(b.persona.as_str())));
            }
        } else {
            match m.id {
                Some(id) => add(UserId::new(format!("zulip:{id}"))),
                None => add(UserId::new(format!("zulip:@{}", m.name))),
            }
        }
    }
    out
}

/// Whether an email is a bot's, as Zulip names bots (`name-bot@realm`).
fn bot_email(email: &str) -> bool {
    email
        .split('@')
        .next()
        .is_some_and(|local| local.ends_with("-bot"))
}

/// The message as tactful's, or `None` for what is not conversation (a
/// persona's own, an empty one, a stream message without its stream).
pub fn to_message(msg: &ZMessage, seen: Seen<'_>) -> Option<Message> {
    if seen.bots.iter().any(|b| b.user_id == msg.sender_id) || msg.id == 0 {
        return None;
    }
    if msg.content.trim().is_empty() {
        return None;
    }
    let (room, thread, is_dm, dm_to) = if msg.is_direct() {
        let DisplayRecipient::People(people) = &msg.display_recipient else {
            return None;
        };
        let ids: Vec<u64> = people.iter().map(|p| p.id).collect();
        let bots_in: Vec<&KnownBot> = seen.bots.iter().filter(|b| ids.contains(&b.user_id)).collect();
        let one_to_one = ids.len() <= 2 && bots_in.len() == 1;
        let dm_to = one_to_one.then(|| bots_in[0].persona.clone());
        (direct_room(&ids), None, true, dm_to)
    } else {
        let stream = msg.stream_id?;
        (
            stream_room(stream),
            Some(ThreadId::new(msg.subject.as_str())),
            false,
            None,
        )
    };
    let name = if msg.sender_full_name.trim().is_empty() {
        msg.sender_id.to_string()
    } else {
        msg.sender_full_name.clone()
    };
    Some(Message {
        id: MsgId::new(msg.id.to_string()),
        room,
        reply_to: thread
            .as_ref()
            .and(seen.topic_reply_to)
            .map(|id| MsgId::new(id.to_string())),
        thread,
        sender: Sender {
            id: UserId::new(format!("zulip:{}", msg.sender_id)),
            name: Arc::from(name),
            is_bot: bot_email(&msg.sender_email),
            handle: (!msg.sender_email.is_empty()).then(|| Arc::from(msg.sender_email.as_str())),
        },
        mentions: Mentions::Explicit(addressed(&msg.content, seen.bots, seen.everyone_addresses)),
        text: Arc::from(readable(&msg.content).as_str()),
        is_dm,
        dm_to,
        time: Timestamp::from_millis(msg.timestamp.saturating_mul(1000)),
    })
}
