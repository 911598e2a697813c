//! One Discord message as a [`tactful_core::Message`]: pure functions over
//! twilight's model, no client, so every rule here is unit-tested.
//!
//! - Addressing comes from the message's `mentions` array (users, as
//!   Discord resolved them) and `mention_roles` (a role one of the
//!   personas' bots holds addresses that persona), never from the text.
//!   `@everyone` and `@here` address nobody unless `everyone_addresses`.
//! - `<@id>` in the text becomes `@name` (`@<persona id>` for a persona),
//!   so agents read names, not numbers.
//! - A reply (`message_reference`) becomes `reply_to`; the engine knows
//!   which persona wrote the target.
//! - A thread is tactful's thread inside its parent channel's room.
//! - A message without a guild is a DM with the persona whose bot got it.
//! - Bots (`author.bot`) and webhooks are bots; the personas' own bots are
//!   left out (the engine heard their messages when they were sent).
//! - Joins, pins, thread notices and other system messages are not
//!   conversation.

use std::sync::Arc;

use tactful_core::{Mentions, Message, MsgId, PersonaId, RoomId, Sender, ThreadId, Timestamp, UserId};
use tactful_runtime::RoomScheme;
use twilight_model::channel::message::MessageType;
use twilight_model::id::Id;
use twilight_model::id::marker::{ChannelMarker, RoleMarker, UserMarker};

/// A persona's bot, as the conversion needs it.
#[derive(Clone, Debug)]
pub struct KnownBot {
    /// The persona.
    pub persona: PersonaId,
    /// The bot's user id, once known.
    pub user: Option<Id<UserMarker>>,
    /// The roles the bot holds in the message's guild.
    pub roles: Vec<Id<RoleMarker>>,
}

/// What the conversion needs besides the message.
#[derive(Clone, Copy, Debug)]
pub struct Seen<'a> {
    /// The persona whose bot received it.
    pub receiver: &'a PersonaId,
    /// Every persona's bot.
    pub bots: &'a [KnownBot],
    /// For a message in a thread: the thread's parent channel.
    pub parent: Option<Id<ChannelMarker>>,
    /// Whether `@everyone`/`@here` address every persona.
    pub everyone_addresses: bool,
}

/// How Discord's rooms are named: `discord:<channel id>`.
pub const ROOMS: RoomScheme = RoomScheme {
    prefix: "discord:",
    noun: "Discord channel",
};

/// The tactful room of a Discord channel.
pub fn room_id(channel: Id<ChannelMarker>) -> RoomId {
    ROOMS.room(channel)
}

/// The Discord channel of a tactful room, if it is a Discord room.
pub fn channel_of(room: &RoomId) -> Option<Id<ChannelMarker>> {
    ROOMS.parse(room, snowflake).ok()
}

/// A Discord id written as text, if it is one.
pub fn snowflake<T>(s: &str) -> Option<Id<T>> {
    s.parse::<u64>().ok().and_then(Id::new_checked)
}

/// The message `msg` carries, or `None` for what is not conversation.
pub fn to_message(msg: &twilight_model::channel::Message, seen: Seen<'_>) -> Option<Message> {
    if !matches!(msg.kind, MessageType::Regular | MessageType::Reply) {
        return None;
    }
    let persona_of = |user: Id<UserMarker>| seen.bots.iter().find(|b| b.user == Some(user));
    if persona_of(msg.author.id).is_some() {
        return None;
    }
    let mut mentions: Vec<UserId> = Vec::new();
    let mut add = |u: UserId| {
        if !mentions.contains(&u) {
            mentions.push(u);
        }
    };
    let mut text = msg.content.clone();
    for m in &msg.mentions {
        let (id, name) = match persona_of(m.id) {
            Some(b) => (UserId::new(b.persona.as_str()), b.persona.to_string()),
            None => (UserId::new(format!("discord:{}", m.id)), m.name.clone()),
        };
        for form in [format!("<@{}>", m.id), format!("<@!{}>", m.id)] {
            text = text.replace(&form, &format!("@{name}"));
        }
        add(id);
    }
    for b in seen.bots {
        if msg.mention_roles.iter().any(|r| b.roles.contains(r)) {
            add(UserId::new(b.persona.as_str()));
        }
    }
    if msg.mention_everyone && seen.everyone_addresses {
        seen.bots
            .iter()
            .for_each(|b| add(UserId::new(b.persona.as_str())));
    }
    if !msg.attachments.is_empty() {
        let names: Vec<&str> = msg.attachments.iter().map(|a| a.filename.as_str()).collect();
        text = format!("{text}\n[attached: {}]", names.join(", "))
            .trim()
            .to_owned();
    }
    if text.trim().is_empty() {
        // Stickers, embeds only: nothing an agent could read.
        return None;
    }
    let is_dm = msg.guild_id.is_none();
    let (room, thread) = match seen.parent {
        Some(parent) => (room_id(parent), Some(ThreadId::new(msg.channel_id.to_string()))),
        None => (room_id(msg.channel_id), None),
    };
    let name = msg
        .member
        .as_ref()
        .and_then(|m| m.nick.clone())
        .or_else(|| msg.author.global_name.clone())
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| msg.author.name.clone());
    Some(Message {
        id: MsgId::new(msg.id.to_string()),
        room,
        thread,
        sender: Sender {
            id: UserId::new(format!("discord:{}", msg.author.id)),
            name: Arc::from(name),
            is_bot: msg.author.bot || msg.webhook_id.is_some(),
            handle: None,
        },
        text: Arc::from(text.as_str()),
        mentions: Mentions::Explicit(mentions),
        reply_to: msg
            .reference
            .as_ref()
            .filter(|_| msg.kind == MessageType::Reply)
            .and_then(|r| r.message_id)
            .map(|id| MsgId::new(id.to_string())),
        is_dm,
        dm_to: is_dm.then(|| seen.receiver.clone()),
        time: Timestamp::from_millis(u64::try_from(msg.timestamp.as_micros() / 1000).unwrap_or(0)),
    })
}
