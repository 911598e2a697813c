//! One Slack message event as a [`tactful_core::Message`]: pure functions
//! over slack-morphism's event models, no client, so every rule here is
//! unit-tested.
//!
//! - Addressing comes from the text's mention markup (`<@U…>`, exact
//!   user ids, never a name that happens to match), which is what Slack
//!   sends for a mention whichever event carries it (`message` or
//!   `app_mention`). `<!channel>`, `<!here>` and `<!everyone>` address
//!   nobody unless `everyone_addresses`.
//! - Mention markup becomes `@name` (`@<persona id>` for a persona), links
//!   their label and address, and `&lt;`/`&gt;`/`&amp;` their characters,
//!   so agents read text, not Slack's wire format.
//! - A message in a thread (`thread_ts` other than its own `ts`) is in
//!   tactful's thread `thread_ts`, and replies to what the caller says
//!   (the thread's parent, or the last persona message in it), so a reply
//!   in a persona's thread addresses that persona.
//! - `im` channels are DMs with the persona whose app got the event.
//! - People are `slack:<team>:<user>`; their bare user id is their handle,
//!   so `allowed_users` may list either.
//! - `bot_id` or subtype `bot_message` is a bot; the personas' own apps are
//!   left out (the engine heard their messages when they were sent).
//! - Edits, deletions, joins, leaves, topic changes and every other
//!   subtype are not new messages.

use std::collections::HashMap;
use std::sync::Arc;

use slack_morphism::events::{SlackAppMentionEvent, SlackMessageEvent, SlackMessageEventType};
use tactful_core::{Mentions, Message, MsgId, PersonaId, RoomId, Sender, ThreadId, Timestamp, UserId};
use tactful_runtime::RoomScheme;

/// A persona's Slack app, as the conversion needs it.
#[derive(Clone, Debug)]
pub struct KnownBot {
    /// The persona.
    pub persona: PersonaId,
    /// The bot user's id (`U…`), once `auth.test` said it.
    pub user: Option<String>,
    /// The bot's id (`B…`), which the app's own messages carry.
    pub bot_id: Option<String>,
}

/// What the conversion needs besides the event.
#[derive(Clone, Copy, Debug)]
pub struct Seen<'a> {
    /// The persona whose app received it.
    pub receiver: &'a PersonaId,
    /// The workspace (people are `slack:<team>:<user>`).
    pub team: &'a str,
    /// Every persona's app.
    pub bots: &'a [KnownBot],
    /// Display names of the people the message names or is from, as
    /// looked up (a missing one reads as its id).
    pub names: &'a HashMap<String, String>,
    /// For a message in a thread: the message it replies to.
    pub thread_reply_to: Option<&'a str>,
    /// Whether `<!channel>`/`<!here>`/`<!everyone>` address every persona.
    pub everyone_addresses: bool,
}

/// A message event's fields, whichever event type carried them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Raw {
    /// The channel (`C…`, `G…`, `D…`).
    pub channel: String,
    /// `im` for a DM, `channel`, `group` or `mpim` otherwise (absent on
    /// `app_mention`).
    pub channel_type: Option<String>,
    /// The message's timestamp, its id within the channel.
    pub ts: String,
    /// The parent's `ts` for a message in a thread (equal to `ts` on the
    /// parent itself).
    pub thread_ts: Option<String>,
    /// The author, for people and for bots with a user.
    pub user: Option<String>,
    /// The bot, for bot messages.
    pub bot_id: Option<String>,
    /// A bot message's display name.
    pub username: Option<String>,
    /// Whether the subtype is `bot_message`.
    pub bot_message: bool,
    /// The text, in Slack's markup.
    pub text: String,
    /// Names of attached files.
    pub files: Vec<String>,
}

impl Raw {
    /// The key a message is heard once by: `ts` is unique within its
    /// channel.
    pub fn key(&self) -> (String, String) {
        (self.channel.clone(), self.ts.clone())
    }

    /// The thread the message is in, if any.
    pub fn thread(&self) -> Option<&str> {
        self.thread_ts.as_deref().filter(|t| *t != self.ts)
    }
}

/// The fields of a `message` event, or `None` for a subtype that is not a
/// new message (an edit, a deletion, a join...).
pub fn from_message(ev: &SlackMessageEvent) -> Option<Raw> {
    let bot_message = match &ev.subtype {
        None => false,
        Some(SlackMessageEventType::BotMessage) => true,
        Some(
            SlackMessageEventType::ThreadBroadcast
            | SlackMessageEventType::FileShare
            | SlackMessageEventType::MeMessage,
        ) => false,
        Some(_) => return None,
    };
    if ev.hidden == Some(true) {
        return None;
    }
    let content = ev.content.as_ref();
    Some(Raw {
        channel: ev.origin.channel.as_ref()?.to_string(),
        channel_type: ev.origin.channel_type.as_ref().map(|t| t.to_string()),
        ts: ev.origin.ts.to_string(),
        thread_ts: ev.origin.thread_ts.as_ref().map(|t| t.to_string()),
        user: ev.sender.user.as_ref().map(|u| u.to_string()),
        bot_id: ev.sender.bot_id.as_ref().map(|b| b.to_string()),
        username: ev
            .sender
            .username
            .clone()
            .or_else(|| ev.sender.bot_profile.as_ref().map(|p| p.name.clone())),
        bot_message,
        text: content.and_then(|c| c.text.clone()).unwrap_or_default(),
        files: content
            .and_then(|c| c.files.as_ref())
            .map(|fs| fs.iter().filter_map(|f| f.name.clone()).collect())
            .unwrap_or_default(),
    })
}

/// The fields of an `app_mention` event (the same message also comes as a
/// `message` event when the app subscribes to those: heard once by
/// [`Raw::key`]), or `None` for the mention an edit added, which is not a
/// new message. The event does not say whether its author is a bot: the
/// caller asks the author's profile.
pub fn from_app_mention(ev: &SlackAppMentionEvent) -> Option<Raw> {
    if ev.edited.is_some() {
        return None;
    }
    Some(Raw {
        channel: ev.channel.to_string(),
        channel_type: None,
        ts: ev.origin.ts.to_string(),
        thread_ts: ev.origin.thread_ts.as_ref().map(|t| t.to_string()),
        user: Some(ev.user.to_string()),
        bot_id: None,
        username: None,
        bot_message: false,
        text: ev.content.text.clone().unwrap_or_default(),
        files: ev
            .content
            .files
            .as_ref()
            .map(|fs| fs.iter().filter_map(|f| f.name.clone()).collect())
            .unwrap_or_default(),
    })
}

/// How Slack's rooms are named: `slack:<channel id>`.
pub const ROOMS: RoomScheme = RoomScheme {
    prefix: "slack:",
    noun: "Slack channel",
};

/// The tactful room of a Slack channel.
pub fn room_id(channel: &str) -> RoomId {
    ROOMS.room(channel)
}

/// The Slack channel of a tactful room, if it is a Slack room.
pub fn channel_of(room: &RoomId) -> Option<&str> {
    ROOMS.parse(room, channel_id).ok()
}

/// `c` if it is shaped like a Slack channel id (`C0123ABCD`, `D…`).
pub(crate) fn channel_id(c: &str) -> Option<&str> {
    let ok = !c.is_empty() && c.len() <= 32 && c.chars().all(|c| c.is_ascii_alphanumeric());
    ok.then_some(c)
}

/// The user ids a message's text mentions (`<@U…>` or `<@U…|name>`), in
/// order, each once: for looking up their names.
pub fn mentioned_users(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for token in markup(text) {
        if let Piece::Markup(inner) = token
            && let Some(id) = inner.strip_prefix('@')
        {
            let id = id.split('|').next().unwrap_or_default();
            if is_id(id) && !out.iter().any(|o| o == id) {
                out.push(id.to_owned());
            }
        }
    }
    out
}

/// Slack ids are short upper-case alphanumerics (`U024BE7LH`, `W…`).
fn is_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

enum Piece<'a> {
    /// Plain text, still with Slack's three escapes.
    Text(&'a str),
    /// What was between `<` and `>`.
    Markup(&'a str),
}

/// Splits Slack text into plain runs and `<…>` markup (a literal `<` is
/// always sent as `&lt;`, so every `<` opens markup; one left open is
/// text).
fn markup(text: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        let Some(len) = rest[open + 1..].find('>') else {
            break;
        };
        if open > 0 {
            out.push(Piece::Text(&rest[..open]));
        }
        out.push(Piece::Markup(&rest[open + 1..open + 1 + len]));
        rest = &rest[open + 1 + len + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    out
}

/// Undoes Slack's three escapes.
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

/// The message `raw` carries, or `None` for what is not conversation.
pub fn to_message(raw: &Raw, seen: Seen<'_>) -> Option<Message> {
    let own = seen
        .bots
        .iter()
        .any(|b| (b.user.is_some() && b.user == raw.user) || (b.bot_id.is_some() && b.bot_id == raw.bot_id));
    if own {
        return None;
    }
    let persona_of = |user: &str| {
        seen.bots
            .iter()
            .find(|b| b.user.as_deref() == Some(user))
            .map(|b| &b.persona)
    };
    let mut mentions: Vec<UserId> = Vec::new();
    let mut add = |u: UserId| {
        if !mentions.contains(&u) {
            mentions.push(u);
        }
    };
    let mut text = String::with_capacity(raw.text.len());
    for piece in markup(&raw.text) {
        match piece {
            Piece::Text(t) => text.push_str(&unescape(t)),
            Piece::Markup(inner) => {
                let (target, label) = match inner.split_once('|') {
                    Some((t, l)) if !l.trim().is_empty() => (t, Some(unescape(l))),
                    Some((t, _)) => (t, None),
                    None => (inner, None),
                };
                if let Some(user) = target.strip_prefix('@') {
                    match persona_of(user) {
                        Some(p) => {
                            text.push_str(&format!("@{p}"));
                            add(UserId::new(p.as_str()));
                        }
                        None => {
                            let name = seen
                                .names
                                .get(user)
                                .cloned()
                                .or(label)
                                .unwrap_or_else(|| user.to_owned());
                            text.push_str(&format!("@{}", name.trim_start_matches('@')));
                            if is_id(user) {
                                add(UserId::new(format!("slack:{}:{user}", seen.team)));
                            }
                        }
                    }
                } else if let Some(channel) = target.strip_prefix('#') {
                    text.push('#');
                    text.push_str(label.as_deref().unwrap_or(channel));
                } else if let Some(special) = target.strip_prefix('!') {
                    let word = special.split('^').next().unwrap_or_default();
                    if matches!(word, "channel" | "here" | "everyone") {
                        text.push_str(&format!("@{word}"));
                        if seen.everyone_addresses {
                            seen.bots
                                .iter()
                                .for_each(|b| add(UserId::new(b.persona.as_str())));
                        }
                    } else {
                        // `<!subteam^S…|@team>`, `<!date^…|fallback>`.
                        text.push_str(label.as_deref().unwrap_or(word));
                    }
                } else {
                    let url = unescape(target);
                    match label {
                        Some(l) if l != url && l != url.trim_start_matches("mailto:") => {
                            text.push_str(&format!("{l} ({url})"))
                        }
                        _ => text.push_str(&url),
                    }
                }
            }
        }
    }
    if !raw.files.is_empty() {
        text = format!("{text}\n[attached: {}]", raw.files.join(", "))
            .trim()
            .to_owned();
    }
    if text.trim().is_empty() {
        return None;
    }
    let is_dm = raw.channel_type.as_deref() == Some("im")
        || (raw.channel_type.is_none() && raw.channel.starts_with('D'));
    let author = raw.user.as_deref().or(raw.bot_id.as_deref()).unwrap_or("unknown");
    let name = raw
        .user
        .as_ref()
        .and_then(|u| seen.names.get(u).cloned())
        .or_else(|| raw.username.clone())
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| author.to_owned());
    let thread = raw.thread();
    Some(Message {
        id: MsgId::new(raw.ts.as_str()),
        room: room_id(&raw.channel),
        thread: thread.map(ThreadId::new),
        sender: Sender {
            id: UserId::new(format!("slack:{}:{author}", seen.team)),
            name: Arc::from(name),
            is_bot: raw.bot_id.is_some() || raw.bot_message,
            // The bare user id, which Slack vouches for, so `allowed_users`
            // may name people as Slack shows them (`U…`).
            handle: raw.user.as_deref().map(Arc::from),
        },
        text: Arc::from(text.as_str()),
        mentions: Mentions::Explicit(mentions),
        reply_to: thread.and(seen.thread_reply_to.or(thread)).map(MsgId::new),
        is_dm,
        dm_to: is_dm.then(|| seen.receiver.clone()),
        time: Timestamp::from_millis(millis(&raw.ts)),
    })
}

/// A Slack `ts` (`<seconds>.<microseconds>`) in milliseconds, 0 if it is
/// not one.
pub fn millis(ts: &str) -> u64 {
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, ""));
    let secs: u64 = secs.parse().unwrap_or(0);
    let frac: String = frac.chars().chain(std::iter::repeat('0')).take(3).collect();
    secs.saturating_mul(1000)
        .saturating_add(frac.parse::<u64>().unwrap_or(0))
}
