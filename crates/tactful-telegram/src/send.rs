//! Everything that goes out to Telegram: the [`Platform`] calls, with
//! Telegram's own ways of failing handled once here.
//!
//! - 429 (flood control): waited out for `retry_after` seconds, then the
//!   call is made again, within a total budget.
//! - Network errors: a call that changes nothing twice (edit, delete,
//!   typing) is retried; a `sendMessage` is retried only when the
//!   connection was refused, since Telegram has no idempotency key and a
//!   request that did reach it would post the message twice.
//! - "can't parse entities": the text goes again as plain text.
//! - "message is not modified": the edit already shows the text.

use std::future::Future;
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_core::{MsgId, PersonaId, RoomId, ThreadId};
use tactful_runtime::{At, Capabilities, Done, OutMessage, Platform, PlatformError, Sent};
use teloxide_core::payloads::{
    EditMessageTextSetters as _, SendChatActionSetters as _, SendMessageSetters as _,
    SetMessageReactionSetters as _,
};
use teloxide_core::requests::{Request as _, Requester as _};
use teloxide_core::types::{self as tg, ChatAction, ChatId, MessageId, ParseMode, ReplyParameters};
use teloxide_core::{ApiError, Bot, RequestError};

use crate::inbound::{GENERAL_TOPIC, ROOMS, chat_id};
use crate::{TelegramPlatform, html};

/// The longest a call waits on flood control, in all.
const MAX_FLOOD_WAIT: Duration = Duration::from_secs(120);

/// Network retries of one call.
const NETWORK_RETRIES: u32 = 3;

/// A server's text in an error, cut to a loggable size (masked first).
pub(crate) fn clip(s: &str) -> String {
    tactful_core::secrets::redact_clipped(s, 300)
}

/// An error as a log line that never shows the request URL (it holds the
/// bot token).
pub(crate) fn describe(e: &RequestError) -> String {
    match e {
        RequestError::Network(n) => {
            let what = if n.is_timeout() {
                "timed out"
            } else if n.is_connect() {
                "cannot connect"
            } else if n.is_decode() || n.is_body() {
                "the response broke off"
            } else {
                "network error"
            };
            match n.status() {
                Some(s) => format!("{what} (HTTP {s})"),
                None => what.to_owned(),
            }
        }
        RequestError::InvalidJson { raw, .. } => {
            format!("an answer that is not the Bot API's JSON: {}", clip(raw))
        }
        // 409 Conflict: something else takes this bot's updates.
        RequestError::Api(ApiError::TerminatedByOtherGetUpdates) => {
            "409 Conflict: another program is polling this bot (getUpdates): a second tactful, or another bot framework, with the same token; only one may, so stop the other (or give this persona a bot of its own)".to_owned()
        }
        RequestError::Api(ApiError::CantGetUpdates) => {
            "409 Conflict: this bot has a webhook set, so Telegram will not answer getUpdates; tactful polls: remove the webhook (the Bot API's deleteWebhook, called with the bot's token) if nothing else needs it".to_owned()
        }
        RequestError::Api(api) => clip(&api.to_string()),
        RequestError::RetryAfter(s) => format!("flood control: retry after {}s", s.seconds()),
        RequestError::MigrateToChatId(id) => format!("the group is now the supergroup {}", id.0),
        RequestError::Io(io) => format!("I/O error: {io}"),
    }
}

/// Makes `call` until it succeeds or fails for good (see the module
/// docs); `repeatable` says whether a network failure after the request
/// may have left may be retried.
async fn with_retries<T, F, Fut>(what: &str, repeatable: bool, mut call: F) -> Result<T, RequestError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RequestError>>,
{
    let mut waited = Duration::ZERO;
    let mut failures = 0;
    loop {
        match call().await {
            Err(RequestError::RetryAfter(s)) if waited < MAX_FLOOD_WAIT => {
                let wait = s
                    .duration()
                    .clamp(Duration::from_secs(1), MAX_FLOOD_WAIT - waited);
                tracing::warn!(
                    "Telegram: flood control while {what}; waiting {}s as asked",
                    wait.as_secs()
                );
                tokio::time::sleep(wait).await;
                waited += wait;
            }
            Err(RequestError::Network(n)) if failures < NETWORK_RETRIES && (repeatable || n.is_connect()) => {
                failures += 1;
                tracing::debug!(
                    "Telegram: {what} failed ({}); retrying",
                    describe(&RequestError::Network(n))
                );
                tokio::time::sleep(Duration::from_millis(250 << failures)).await;
            }
            other => return other,
        }
    }
}

fn platform_error(what: &str, e: &RequestError) -> PlatformError {
    PlatformError(format!("Telegram: {what} failed: {}", describe(e)))
}

/// The message id of a tactful id, when it is one of Telegram's.
fn message_id(id: &MsgId) -> Option<MessageId> {
    id.as_str().parse().ok().map(MessageId)
}

/// The forum topic to send to: none for the General topic, which refuses
/// its own id.
fn topic(thread: Option<&ThreadId>) -> Option<tg::ThreadId> {
    thread
        .and_then(|t| t.as_str().parse::<i32>().ok())
        .filter(|t| *t != GENERAL_TOPIC)
        .map(|t| tg::ThreadId(MessageId(t)))
}

impl TelegramPlatform {
    fn route(&self, persona: &PersonaId, room: &RoomId) -> Result<(Bot, ChatId), PlatformError> {
        let bot = self.shared.bot(persona)?;
        let chat = ROOMS.parse(room, chat_id)?;
        Ok((bot.clone(), ChatId(chat)))
    }
}

impl Platform for TelegramPlatform {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            can_edit: true,
            can_delete: true,
            native_replies: true,
            // Telegram's limit for a message's text.
            max_message_chars: 4096,
            reactions: true,
            silence_notices: true,
            // Telegram has no idempotency key tactful can use.
            deduplicates_sends: false,
            rooms: Some(ROOMS),
        }
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async move {
            let (bot, chat) = self.route(msg.persona, msg.room)?;
            let thread = topic(msg.thread);
            let reply = msg.reply_to.and_then(message_id).map(|id| ReplyParameters {
                message_id: id,
                // The message may be gone by the time the answer is ready.
                allow_sending_without_reply: Some(true),
                ..ReplyParameters::default()
            });
            let rendered = html::render(msg.text);
            let attempt = |html: bool| {
                let text = if html { rendered.as_str() } else { msg.text };
                let mut req = bot.send_message(chat, text);
                if html {
                    req = req.parse_mode(ParseMode::Html);
                }
                if let Some(t) = thread {
                    req = req.message_thread_id(t);
                }
                if let Some(r) = &reply {
                    req = req.reply_parameters(r.clone());
                }
                req.send()
            };
            let html = !rendered.trim().is_empty();
            let sent = match with_retries("sending a message", false, || attempt(html)).await {
                Err(RequestError::Api(ApiError::CantParseEntities(why))) if html => {
                    tracing::warn!(room = %msg.room, "Telegram could not parse the formatting ({}); sending as plain text", clip(&why));
                    with_retries("sending a message as plain text", false, || attempt(false)).await
                }
                other => other,
            };
            let sent = sent.map_err(|e| platform_error("sending a message", &e))?;
            Ok(MsgId::new(sent.id.0.to_string()))
        })
    }

    fn edit<'a>(&'a self, at: At<'a>, id: &'a MsgId, text: &'a str) -> Done<'a> {
        let (persona, room) = (at.persona, at.room);
        Box::pin(async move {
            let (bot, chat) = self.route(persona, room)?;
            let target =
                message_id(id).ok_or_else(|| PlatformError(format!("{id} is not a Telegram message id")))?;
            let rendered = html::render(text);
            let attempt = |html: bool| {
                let mut req =
                    bot.edit_message_text(chat, target, if html { rendered.as_str() } else { text });
                if html {
                    req = req.parse_mode(ParseMode::Html);
                }
                req.send()
            };
            let html = !rendered.trim().is_empty();
            let edited = match with_retries("editing a message", true, || attempt(html)).await {
                Err(RequestError::Api(ApiError::CantParseEntities(why))) if html => {
                    tracing::warn!(%room, "Telegram could not parse the formatting ({}); editing as plain text", clip(&why));
                    with_retries("editing a message as plain text", true, || attempt(false)).await
                }
                other => other,
            };
            match edited {
                Ok(_) | Err(RequestError::Api(ApiError::MessageNotModified)) => Ok(()),
                Err(e) => Err(platform_error("editing a message", &e)),
            }
        })
    }

    fn react<'a>(&'a self, at: At<'a>, msg: &'a MsgId, emoji: &'a str) -> Done<'a> {
        let (persona, room) = (at.persona, at.room);
        Box::pin(async move {
            let (bot, chat) = self.route(persona, room)?;
            let target = message_id(msg)
                .ok_or_else(|| PlatformError(format!("{msg} is not a Telegram message id")))?;
            let reaction = vec![tg::ReactionType::Emoji {
                emoji: emoji.to_owned(),
            }];
            // Setting the same reaction twice changes nothing: safe to retry.
            with_retries("reacting to a message", true, || {
                bot.set_message_reaction(chat, target)
                    .reaction(reaction.clone())
                    .send()
            })
            .await
            .map(|_| ())
            .map_err(|e| platform_error("reacting to a message", &e))
        })
    }

    fn delete<'a>(&'a self, at: At<'a>, id: &'a MsgId) -> Done<'a> {
        let (persona, room) = (at.persona, at.room);
        Box::pin(async move {
            let (bot, chat) = self.route(persona, room)?;
            let target =
                message_id(id).ok_or_else(|| PlatformError(format!("{id} is not a Telegram message id")))?;
            match with_retries("deleting a message", true, || {
                bot.delete_message(chat, target).send()
            })
            .await
            {
                // Already gone is what was wanted.
                Ok(_) | Err(RequestError::Api(ApiError::MessageToDeleteNotFound)) => Ok(()),
                Err(e) => Err(platform_error("deleting a message", &e)),
            }
        })
    }

    fn typing<'a>(&'a self, at: At<'a>) -> BoxFuture<'a, ()> {
        let (persona, room, thread) = (at.persona, at.room, at.thread);
        Box::pin(async move {
            let Ok((bot, chat)) = self.route(persona, room) else {
                return;
            };
            let mut req = bot.send_chat_action(chat, ChatAction::Typing);
            if let Some(t) = topic(thread) {
                req = req.message_thread_id(t);
            }
            // Only a status: one try, and a failure is not worth a warning.
            if let Err(e) = req.send().await {
                tracing::debug!(%room, "Telegram: no typing status: {}", describe(&e));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Telegram's 409s say what to do: a second poller or a webhook takes
    /// this bot's updates.
    #[test]
    fn a_conflict_names_the_other_taker_and_the_fix() {
        let other = describe(&RequestError::Api(ApiError::TerminatedByOtherGetUpdates));
        assert!(
            other.starts_with("409 Conflict: another program is polling this bot"),
            "{other}"
        );
        assert!(other.contains("stop the other"), "{other}");
        let hook = describe(&RequestError::Api(ApiError::CantGetUpdates));
        assert!(
            hook.contains("webhook") && hook.contains("deleteWebhook"),
            "{hook}"
        );
    }

    #[test]
    fn the_general_topic_is_sent_to_without_a_thread() {
        assert_eq!(topic(Some(&ThreadId::new("1"))), None);
        assert_eq!(topic(Some(&ThreadId::new("7"))), Some(tg::ThreadId(MessageId(7))));
        assert_eq!(topic(Some(&ThreadId::new("$matrix-root"))), None);
        assert_eq!(topic(None), None);
    }

    #[test]
    fn clipped_server_text_never_shows_half_a_secret() {
        tactful_core::secrets::register("123:AAE-clip-secret-token");
        let long = format!("{}123:AAE-clip-secret-token", "x".repeat(290));
        let shown = clip(&long);
        assert!(!shown.contains("123:AAE"), "{shown}");
    }
}
