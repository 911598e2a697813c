//! One Mattermost post as a [`tactful_core::Message`]: pure functions over
//! the post and what the listener knows, no client, so every rule here is
//! unit-tested.
//!
//! - Addressing is read from the text, as Mattermost reads it: `@username`
//!   after a space, punctuation or the start, its trailing `.`, `-` and
//!   `_` dropped when no user has the longer name; never inside code
//!   (`` `@docs` `` and fenced blocks ping nobody on Mattermost either).
//!   A persona's bot username names the persona. `@channel`, `@all` and
//!   `@here` address nobody unless `everyone_addresses`.
//! - A post in a thread (`root_id` set) is in tactful's thread `root_id`
//!   and replies to what the caller says (the last persona post in the
//!   thread, else its first post), so a reply in a thread a persona
//!   answered in addresses that persona.
//! - Direct channels (`D`) are DMs with the persona whose bot got the
//!   post; group messages (`G`) are DMs with every persona in them.
//! - People are `mm:<user id>`, with their username as handle, so
//!   `allowed_users` may list either; a bot's or webhook's posts
//!   (`from_bot`, `from_webhook`) are a bot's. The personas' own posts are
//!   left out (the engine heard them when they were sent), whichever
//!   session posted them.
//! - System posts (joins, header changes: a `type`) and deleted posts are
//!   not conversation.

use std::sync::Arc;

use tactful_core::{Mentions, Message, MsgId, PersonaId, RoomId, Sender, ThreadId, Timestamp, UserId};
use tactful_runtime::RoomScheme;

use crate::model::Post;

/// How Mattermost's rooms are named: `mm:<channel id>`.
pub const ROOMS: RoomScheme = RoomScheme {
    prefix: "mm:",
    noun: "Mattermost channel",
};

/// The tactful room of a Mattermost channel.
pub fn room_id(channel: &str) -> RoomId {
    ROOMS.room(channel)
}

/// A persona's bot, as the conversion needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownBot {
    /// The persona.
    pub persona: PersonaId,
    /// The bot's user id, once `users/me` said it.
    pub user_id: String,
    /// Its username (what `@` mentions), lower case.
    pub username: String,
}

/// What the conversion needs besides the post.
#[derive(Clone, Copy, Debug)]
pub struct Seen<'a> {
    /// The persona whose bot received it.
    pub receiver: &'a PersonaId,
    /// Every persona's bot known so far.
    pub bots: &'a [KnownBot],
    /// The channel's type: `O`, `P`, `D` or `G`.
    pub channel_type: &'a str,
    /// The author's name as the server shows it, and their username, when
    /// known.
    pub author: Option<(&'a str, &'a str)>,
    /// For a post in a thread: the post it replies to.
    pub thread_reply_to: Option<&'a str>,
    /// Whether `@channel`/`@all`/`@here` address every persona.
    pub everyone_addresses: bool,
}

/// The characters of a username (Mattermost's own set).
fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')
}

/// The words that mention a whole channel.
pub const EVERYONE: [&str; 3] = ["channel", "all", "here"];

/// Whether the `@` at `i` opens a mention as Mattermost reads words: a
/// word is a run of letters, digits, `:`, `.`, `-`, `_` and `@` with its
/// leading `:.-_` dropped, so `_@here_` (italics) mentions and
/// `me@docs-bot.org` does not.
pub fn opens_mention(chars: &[char], i: usize) -> bool {
    let mut j = i;
    while j > 0 && matches!(chars[j - 1], ':' | '.' | '-' | '_') {
        j -= 1;
    }
    j == 0 || !(chars[j - 1].is_alphanumeric() || chars[j - 1] == '@')
}

/// The text's characters with code (as CommonMark reads it:
/// [`tactful_runtime::markup::code_ranges`]) blanked to spaces, so
/// positions in it are positions in `text`.
pub fn outside_code(text: &str) -> Vec<char> {
    let code = tactful_runtime::markup::code_ranges(text);
    text.char_indices()
        .map(|(at, c)| {
            if c != '\n' && code.iter().any(|r| r.contains(&at)) {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// The name after the `@` at `i` of `chars`, lower case, as written.
pub fn name_after(chars: &[char], i: usize) -> String {
    chars[i + 1..]
        .iter()
        .take_while(|c| name_char(**c))
        .collect::<String>()
        .to_ascii_lowercase()
}

/// The `@` words of `text` outside code, lower case, each as written and
/// once: candidates for mentions.
pub fn at_words(text: &str) -> Vec<String> {
    let chars = outside_code(text);
    let mut out: Vec<String> = Vec::new();
    for (i, c) in chars.iter().enumerate() {
        if *c != '@' || !opens_mention(&chars, i) {
            continue;
        }
        let word = name_after(&chars, i);
        if !word.is_empty() && !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

/// Who `text` addresses: the personas named by their bots' usernames,
/// every persona for a channel-wide word when `everyone` allows, and
/// other people as `mm:@<username>`.
pub fn mentions(text: &str, bots: &[KnownBot], everyone: bool) -> Vec<UserId> {
    let mut out: Vec<UserId> = Vec::new();
    let mut add = |u: UserId| {
        if !out.contains(&u) {
            out.push(u);
        }
    };
    for word in at_words(text) {
        // The longest name that is someone's: `@docs-bot.` is docs-bot.
        let mut name = word.as_str();
        let persona = loop {
            if let Some(b) = bots.iter().find(|b| b.username == name) {
                break Some(b);
            }
            match name.strip_suffix(['.', '-', '_']) {
                Some(shorter) if !shorter.is_empty() => name = shorter,
                _ => break None,
            }
        };
        if let Some(b) = persona {
            add(UserId::new(b.persona.as_str()));
            continue;
        }
        let name = word.trim_end_matches(['.', '-', '_']);
        if EVERYONE.contains(&name) {
            if everyone {
                bots.iter().for_each(|b| add(UserId::new(b.persona.as_str())));
            }
        } else if !name.is_empty() {
            add(UserId::new(format!("mm:@{name}")));
        }
    }
    out
}

/// The post as a message, or `None` for what is not conversation (a
/// system post, a deleted one, a persona's own, an empty one).
pub fn to_message(post: &Post, seen: Seen<'_>) -> Option<Message> {
    if !post.kind.is_empty() || post.delete_at != 0 || post.id.is_empty() || post.channel_id.is_empty() {
        return None;
    }
    if seen.bots.iter().any(|b| b.user_id == post.user_id) {
        return None;
    }
    let mut text = post.message.clone();
    let files = post.file_ids.as_ref().map_or(0, Vec::len);
    if files > 0 {
        let what = if files == 1 {
            "a file".to_owned()
        } else {
            format!("{files} files")
        };
        text = format!("{text}\n[attached: {what}]").trim().to_owned();
    }
    if text.trim().is_empty() {
        return None;
    }
    let is_dm = matches!(seen.channel_type, "D" | "G");
    let (name, username) = match (post.override_username(), seen.author) {
        (Some(o), _) => (o.to_owned(), None),
        (None, Some((name, username))) => (name.trim_start_matches('@').to_owned(), Some(username)),
        (None, None) => (post.user_id.clone(), None),
    };
    let name = if name.trim().is_empty() {
        post.user_id.clone()
    } else {
        name
    };
    let thread = (!post.root_id.is_empty()).then_some(post.root_id.as_str());
    Some(Message {
        id: MsgId::new(post.id.as_str()),
        room: room_id(&post.channel_id),
        thread: thread.map(ThreadId::new),
        sender: Sender {
            id: UserId::new(format!("mm:{}", post.user_id)),
            name: Arc::from(name),
            is_bot: post.from_bot(),
            handle: username.filter(|u| !u.is_empty()).map(Arc::from),
        },
        mentions: Mentions::Explicit(mentions(&text, seen.bots, seen.everyone_addresses)),
        text: Arc::from(text.as_str()),
        reply_to: thread.map(|root| MsgId::new(seen.thread_reply_to.unwrap_or(root))),
        is_dm,
        dm_to: (seen.channel_type == "D").then(|| seen.receiver.clone()),
        time: Timestamp::from_millis(post.create_at),
    })
}
