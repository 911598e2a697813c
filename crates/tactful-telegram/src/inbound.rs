//! One Telegram message as a [`tactful_core::Message`]: pure functions, no
//! bot, so every rule here is unit-tested on recorded-shape updates.
//!
//! - Addressing comes from Telegram's entities, never from guessing in the
//!   text: `mention` (`@username`), `text_mention` (a user without a
//!   username, by id), and a leading `bot_command` aimed at a bot
//!   (`/reset@docs_bot`). Entity offsets count UTF-16 code units, so an
//!   emoji before a mention (two units, one `char`, four bytes) must not
//!   shift it; an entity that does not fall on character boundaries is
//!   skipped rather than sliced wrongly.
//! - A command aimed at a persona's bot reaches the engine as
//!   `/reset@<persona id>`: the engine (and replay, and the transcript)
//!   speak of personas, not of their bot accounts. A bare `/reset` is left
//!   as it is: the engine gives it to every persona in command mode.
//! - Photos and documents speak through their caption, whose entities are
//!   `caption_entities`.
//! - In a forum, `message_thread_id` is the thread, but only on topic
//!   messages (elsewhere it names a reply chain); Telegram marks every
//!   message in a topic as a reply to the topic's first message, which is
//!   not a reply anyone wrote.
//! - A private chat is a DM with the bot's persona. Each bot has its own
//!   private chat with a person, all under the person's id, so a DM's
//!   room names the bot too: `tg:<chat id>:<bot id>`. Groups are
//!   `tg:<chat id>`.
//! - People are `tg:<user id>` (usernames change); the `@username` rides
//!   along as the handle `allowed_users` may name.

use std::ops::Range;
use std::sync::Arc;

use tactful_core::{Mentions, Message, MsgId, PersonaId, RoomId, Sender, ThreadId, Timestamp, UserId};
use tactful_runtime::RoomScheme;
use teloxide_core::types::{self as tg, MessageEntity, MessageEntityKind};

/// Telegram's own id for the "General" topic of a forum: messages there
/// carry no `message_thread_id`, and sends to it must omit it.
pub const GENERAL_TOPIC: i32 = 1;

/// A persona's bot, as the conversion needs it.
#[derive(Clone, Debug)]
pub struct KnownBot {
    /// The persona.
    pub persona: PersonaId,
    /// The bot's user id (the number before the token's colon).
    pub bot_id: u64,
    /// Its `@username` without the `@`, once `getMe` told it.
    pub username: Option<String>,
}

/// Who received an update.
#[derive(Clone, Copy, Debug)]
pub struct Receiver<'a> {
    /// The bot whose `getUpdates` brought it.
    pub bot: &'a KnownBot,
    /// Every persona's bot.
    pub bots: &'a [KnownBot],
}

/// The tactful room of a chat: groups by chat id, a private chat by the
/// chat and the bot in it.
pub fn room_of(chat: &tg::Chat, bot_id: u64) -> RoomId {
    if chat.is_private() {
        ROOMS.room(format_args!("{}:{bot_id}", chat.id.0))
    } else {
        ROOMS.room(chat.id.0)
    }
}

/// How Telegram's rooms are named: `tg:<chat id>`, and `tg:<chat
/// id>:<bot id>` for a private chat (each bot's is its own room).
pub const ROOMS: RoomScheme = RoomScheme {
    prefix: "tg:",
    noun: "Telegram chat",
};

/// The Telegram chat id of a tactful room, if it is a Telegram room.
pub fn chat_of(room: &RoomId) -> Option<i64> {
    ROOMS.parse(room, chat_id).ok()
}

/// The chat id a room id's Telegram part starts with.
pub(crate) fn chat_id(native: &str) -> Option<i64> {
    native.split(':').next()?.parse().ok()
}

/// The byte range of the UTF-16 range `offset..offset + len` of `text`, if
/// both ends fall between characters.
pub fn utf16_range(text: &str, offset: usize, len: usize) -> Option<Range<usize>> {
    let end_units = offset.checked_add(len)?;
    let (mut units, mut start, mut end) = (0usize, None, None);
    for (byte, c) in text.char_indices() {
        if units == offset {
            start = Some(byte);
        }
        if units == end_units {
            end = Some(byte);
            break;
        }
        if units > end_units {
            return None;
        }
        units += c.len_utf16();
    }
    if units == offset && start.is_none() {
        start = Some(text.len());
    }
    if units == end_units && end.is_none() {
        end = Some(text.len());
    }
    let (start, end) = (start?, end?);
    (start <= end).then_some(start..end)
}

/// What one message says, with the entities that go with it (their
/// offsets count in that text), and what kind of media it captions.
fn body(msg: &tg::Message) -> Option<(Option<&'static str>, &str, &[MessageEntity])> {
    if let Some(text) = msg.text() {
        return Some((None, text, msg.entities().unwrap_or_default()));
    }
    let kind = if msg.photo().is_some() {
        "photo"
    } else if msg.document().is_some() {
        "document"
    } else if msg.video().is_some() {
        "video"
    } else if msg.voice().is_some() {
        "voice message"
    } else if msg.audio().is_some() {
        "audio"
    } else if msg.animation().is_some() {
        "animation"
    } else {
        // Stickers, polls, service messages (joins, pins, topic changes):
        // nothing an agent could read.
        return None;
    };
    Some((
        Some(kind),
        msg.caption().unwrap_or_default(),
        msg.caption_entities().unwrap_or_default(),
    ))
}

/// Who the entities of `text` address, and the text as the engine gets it
/// (a command aimed at a persona's bot names the persona).
fn addressing(text: &str, entities: &[MessageEntity], r: Receiver<'_>) -> (String, Vec<UserId>) {
    let mut mentions: Vec<UserId> = Vec::new();
    let mut add = |u: UserId| {
        if !mentions.contains(&u) {
            mentions.push(u);
        }
    };
    let by_username = |name: &str| {
        r.bots.iter().find(|b| {
            b.username
                .as_deref()
                .is_some_and(|u| u.eq_ignore_ascii_case(name))
        })
    };
    let mut command: Option<(Range<usize>, PersonaId)> = None;
    for e in entities {
        let Some(range) = utf16_range(text, e.offset, e.length) else {
            tracing::debug!(
                offset = e.offset,
                length = e.length,
                "Telegram: skipped an entity off character boundaries"
            );
            continue;
        };
        let slice = &text[range.clone()];
        match &e.kind {
            MessageEntityKind::Mention => {
                let name = slice.trim_start_matches('@');
                match by_username(name) {
                    Some(b) => add(UserId::new(b.persona.as_str())),
                    // Someone else, in a form no persona id or alias can
                    // match: only Telegram's own account of the bots counts.
                    None => add(UserId::new(format!("tg:@{name}"))),
                }
            }
            MessageEntityKind::TextMention { user } => match r.bots.iter().find(|b| b.bot_id == user.id.0) {
                Some(b) => add(UserId::new(b.persona.as_str())),
                None => add(UserId::new(format!("tg:{}", user.id.0))),
            },
            MessageEntityKind::BotCommand if text[..range.start].trim().is_empty() => {
                // Only what really is `/name@bot` (a server's entity may
                // cover anything).
                if let Some((name, target)) = slice.split_once('@')
                    && name.len() > 1
                    && name.starts_with('/')
                    && name[1..].chars().all(|c| c.is_alphanumeric() || c == '_')
                    && let Some(b) = by_username(target)
                {
                    command = Some((range, b.persona.clone()));
                }
            }
            _ => {}
        }
    }
    let text = match command {
        Some((range, persona)) => {
            let slice = &text[range.clone()];
            let name = slice.split_once('@').map_or(slice, |(n, _)| n);
            format!("{}{name}@{persona}{}", &text[..range.start], &text[range.end..])
        }
        None => text.to_owned(),
    };
    (text, mentions)
}

/// The display name of a user: first and last name, else the username.
fn display_name(user: &tg::User) -> String {
    let full = match &user.last_name {
        Some(last) if !last.trim().is_empty() => format!("{} {last}", user.first_name),
        _ => user.first_name.clone(),
    };
    if full.trim().is_empty() {
        user.username
            .clone()
            .unwrap_or_else(|| format!("user {}", user.id.0))
    } else {
        full
    }
}

/// The message `msg` carries, or `None` for what is not conversation
/// (service messages, stickers, the personas' own messages).
pub fn to_message(msg: &tg::Message, r: Receiver<'_>) -> Option<Message> {
    let (media, raw, entities) = body(msg)?;
    let (text, mentions) = addressing(raw, entities, r);
    let text = match media {
        Some(kind) if text.trim().is_empty() => format!("[{kind}]"),
        Some(kind) => format!("[{kind}] {text}"),
        None => text,
    };
    let sender = match (&msg.sender_chat, &msg.from) {
        // Anonymous admins and channels speak as the chat.
        (Some(chat), _) => Sender {
            id: UserId::new(format!("tg:{}", chat.id.0)),
            name: Arc::from(chat.title().unwrap_or("channel")),
            is_bot: false,
            handle: chat.username().map(|u| Arc::from(format!("@{u}"))),
        },
        (None, Some(user)) => {
            if r.bots.iter().any(|b| b.bot_id == user.id.0) {
                // A persona's own message: the engine heard it when sent.
                return None;
            }
            Sender {
                id: UserId::new(format!("tg:{}", user.id.0)),
                name: Arc::from(display_name(user)),
                is_bot: user.is_bot,
                handle: user.username.as_ref().map(|u| Arc::from(format!("@{u}"))),
            }
        }
        (None, None) => return None,
    };
    let thread = msg
        .thread_id
        .filter(|_| msg.is_topic_message)
        .map(|t| t.0.0)
        .filter(|t| *t != GENERAL_TOPIC);
    let reply_to = msg
        .reply_to_message()
        .map(|m| m.id.0)
        // In a topic, the implicit reply to the topic's first message.
        .filter(|id| thread != Some(*id));
    let is_dm = msg.chat.is_private();
    Some(Message {
        id: MsgId::new(msg.id.0.to_string()),
        room: room_of(&msg.chat, r.bot.bot_id),
        thread: thread.map(|t| ThreadId::new(t.to_string())),
        sender,
        text: Arc::from(text.as_str()),
        mentions: Mentions::Explicit(mentions),
        reply_to: reply_to.map(|id| MsgId::new(id.to_string())),
        is_dm,
        dm_to: is_dm.then(|| r.bot.persona.clone()),
        time: Timestamp::from_millis(
            u64::try_from(msg.date.timestamp())
                .unwrap_or(0)
                .saturating_mul(1000),
        ),
    })
}
