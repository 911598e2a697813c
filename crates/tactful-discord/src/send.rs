//! Everything that goes out to Discord: the [`Platform`] calls.

use std::future::IntoFuture;

use futures::future::BoxFuture;
use tactful_core::{MsgId, PersonaId, RoomId, ThreadId};
use tactful_runtime::{
    At, Capabilities, Done, OutMessage, Platform, PlatformError, Sent, account_index, within_deadline,
};
use twilight_http::Client;
use twilight_http::request::channel::reaction::RequestReactionType;
use twilight_model::channel::message::{AllowedMentions, MentionType};
use twilight_model::id::Id;
use twilight_model::id::marker::{ChannelMarker, MessageMarker};

use crate::inbound::{ROOMS, snowflake};
use crate::{DiscordPlatform, Pings};

/// Runs a twilight request under the runtime's call deadline (twilight
/// retries a 429 by itself, without end if the server keeps refusing).
pub(crate) async fn deadline<R, T>(req: R) -> Result<twilight_http::Response<T>, PlatformError>
where
    R: IntoFuture<Output = Result<twilight_http::Response<T>, twilight_http::Error>>,
{
    use futures::TryFutureExt as _;
    within_deadline("Discord", req.into_future().map_err(Readable)).await
}

/// A twilight error as people read it: when the gate could not reach
/// Discord, what it said ("Discord did not answer: connection refused:
/// http://…"), not twilight's "response error: status code 502, …".
struct Readable(twilight_http::Error);

impl std::fmt::Display for Readable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let twilight_http::error::ErrorType::Response {
            error: twilight_http::api_error::ApiError::General(g),
            ..
        } = self.0.kind()
            && let Some(why) = g.message.strip_prefix(crate::gate::UNREACHED)
        {
            return write!(f, "did not answer: {why}");
        }
        self.0.fmt(f)
    }
}

/// `allowed_mentions` for every message: what `pings` allows, nothing
/// else; a reply never pings its author.
fn allowed(pings: Pings) -> AllowedMentions {
    let mut parse = Vec::new();
    if pings.users {
        parse.push(MentionType::Users);
    }
    if pings.roles {
        parse.push(MentionType::Roles);
    }
    if pings.everyone {
        parse.push(MentionType::Everyone);
    }
    AllowedMentions {
        parse,
        ..AllowedMentions::default()
    }
}

/// A message id of Discord's, or the error that says it is not one.
fn message<T>(id: &MsgId) -> Result<Id<T>, PlatformError> {
    snowflake(id.as_str()).ok_or_else(|| PlatformError(format!("{id} is not a Discord message id")))
}

impl DiscordPlatform {
    fn client(&self, persona: &PersonaId) -> Result<&Client, PlatformError> {
        let ids = self.shared.settings.personas.iter().map(|p| &p.id);
        Ok(&self.shared.clients[account_index(ids, persona, "Discord bot")?])
    }

    /// Where a message goes: the thread, or the room's channel.
    fn channel(room: &RoomId, thread: Option<&ThreadId>) -> Result<Id<ChannelMarker>, PlatformError> {
        thread
            .and_then(|t| snowflake(t.as_str()))
            .map_or_else(|| ROOMS.parse(room, snowflake), Ok)
    }

    /// The channel a message of `room` lives in: messages are addressed by
    /// id within their channel, and a thread's messages are in the
    /// thread, which the room id does not name. Where this process posted
    /// it, as it remembers; else the `thread` the caller knows it is in (a
    /// placeholder another process posted, or one from before a restart);
    /// else the room's channel.
    fn channel_of_message(
        &self,
        room: &RoomId,
        thread: Option<&ThreadId>,
        id: &MsgId,
    ) -> Result<Id<ChannelMarker>, PlatformError> {
        let known = self
            .shared
            .posted
            .lock()
            .ok()
            .and_then(|p| p.get(&id.to_string()).copied());
        match known {
            Some(c) => Ok(c),
            None => Self::channel(room, thread),
        }
    }

    fn remember(&self, id: Id<MessageMarker>, channel: Id<ChannelMarker>) {
        if let Ok(mut p) = self.shared.posted.lock() {
            p.insert(id.to_string(), channel);
        }
    }
}

impl Platform for DiscordPlatform {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            can_edit: true,
            can_delete: true,
            native_replies: true,
            // Discord's limit for a message's content.
            max_message_chars: 2000,
            reactions: true,
            silence_notices: true,
            // Discord has no idempotency key tactful can use.
            deduplicates_sends: false,
            rooms: Some(ROOMS),
        }
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async move {
            let client = self.client(msg.persona)?;
            let channel = Self::channel(msg.room, msg.thread)?;
            let mentions = allowed(self.shared.settings.pings);
            let mut req = client
                .create_message(channel)
                .content(msg.text)
                .allowed_mentions(Some(&mentions));
            if let Some(target) = msg.reply_to.and_then(|r| snowflake(r.as_str())) {
                // The message may be gone by the time the answer is ready.
                req = req.reply(target).fail_if_not_exists(false);
            }
            let sent = deadline(req)
                .await?
                .model()
                .await
                .map_err(|e| PlatformError(format!("Discord: an answer that is not a message: {e}")))?;
            self.remember(sent.id, channel);
            Ok(MsgId::new(sent.id.to_string()))
        })
    }

    fn edit<'a>(&'a self, at: At<'a>, id: &'a MsgId, text: &'a str) -> Done<'a> {
        let (persona, room, thread) = (at.persona, at.room, at.thread);
        Box::pin(async move {
            let client = self.client(persona)?;
            let target = message(id)?;
            let mentions = allowed(self.shared.settings.pings);
            let req = client
                .update_message(self.channel_of_message(room, thread, id)?, target)
                .content(Some(text))
                .allowed_mentions(Some(&mentions));
            deadline(req).await.map(|_| ())
        })
    }

    fn react<'a>(&'a self, at: At<'a>, msg: &'a MsgId, emoji: &'a str) -> Done<'a> {
        let (persona, room, thread) = (at.persona, at.room, at.thread);
        Box::pin(async move {
            let client = self.client(persona)?;
            let target = message(msg)?;
            let reaction = RequestReactionType::Unicode { name: emoji };
            deadline(client.create_reaction(Self::channel(room, thread)?, target, &reaction))
                .await
                .map(|_| ())
        })
    }

    fn delete<'a>(&'a self, at: At<'a>, id: &'a MsgId) -> Done<'a> {
        let (persona, room, thread) = (at.persona, at.room, at.thread);
        Box::pin(async move {
            let client = self.client(persona)?;
            let target = message(id)?;
            deadline(client.delete_message(self.channel_of_message(room, thread, id)?, target))
                .await
                .map(|_| ())
        })
    }

    fn typing<'a>(&'a self, at: At<'a>) -> BoxFuture<'a, ()> {
        let (persona, room, thread) = (at.persona, at.room, at.thread);
        Box::pin(async move {
            let (Ok(client), Ok(channel)) = (self.client(persona), Self::channel(room, thread)) else {
                return;
            };
            if let Err(e) = deadline(client.create_typing_trigger(channel)).await {
                tracing::debug!(%room, "Discord: no typing status: {}", e.0);
            }
        })
    }
}
