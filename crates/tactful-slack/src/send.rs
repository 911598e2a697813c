//! Everything that goes out to Slack: the [`Platform`] calls.

use std::future::Future;
use std::time::Duration;

use futures::future::BoxFuture;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;
use tactful_core::{MsgId, PersonaId, RoomId};
use tactful_runtime::{
    At, CALL_DEADLINE, Capabilities, Done, OutMessage, Platform, PlatformError, Sent, account_index,
    past_deadline,
};

use crate::SlackPlatform;
use crate::inbound::{ROOMS, channel_id};
use crate::mrkdwn;

/// The wait after a 429 that did not say how long.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Runs a Web API call, waiting out 429s for their `Retry-After` (a 429
/// means the call was not made, so trying again cannot post twice), all
/// under [`CALL_DEADLINE`]. Other failures are returned: without an
/// idempotency key a failed post may still have arrived.
pub(crate) async fn with_retry<T, F, Fut>(api: &str, mut call: F) -> Result<T, PlatformError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SlackClientError>>,
{
    let deadline = tokio::time::Instant::now() + CALL_DEADLINE;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, call()).await {
            Err(_) => return Err(past_deadline("Slack")),
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(SlackClientError::RateLimitError(e))) => {
                let wait = e.retry_after.unwrap_or(DEFAULT_RETRY_AFTER);
                if tokio::time::Instant::now() + wait >= deadline {
                    return Err(PlatformError(format!("Slack: rate limited for {wait:?}")));
                }
                tracing::debug!("Slack: rate limited; retrying in {wait:?}");
                tokio::time::sleep(wait).await;
            }
            Ok(Err(e)) => return Err(PlatformError(failed(&e, api))),
        }
    }
}

/// A failed Web API call (at `api`, the configured `api_url`) as people
/// read it: not reached, the cause and the address ("Slack: connection
/// refused: https://…"), where slack-morphism prints its transport error's
/// Debug form; answered, Slack's own words ([`said`]).
pub(crate) fn failed(e: &SlackClientError, api: &str) -> String {
    match e {
        SlackClientError::HttpProtocolError(p) => match &p.cause {
            Some(cause) => format!(
                "Slack: {}",
                one_line(&tactful_core::cause::explain(cause.as_ref(), api))
            ),
            None => said(e),
        },
        _ => said(e),
    }
}

/// A Slack error as one line that says it is Slack's once:
/// slack-morphism's own texts start "Slack API error: …".
pub(crate) fn said(e: &dyn std::fmt::Display) -> String {
    let text = one_line(&e.to_string());
    if text.starts_with("Slack") {
        text
    } else {
        format!("Slack: {text}")
    }
}

/// An error text fit for one log line: slack-morphism's quote the whole
/// response body, over several lines. Redacted before it is clipped
/// ([`tactful_core::secrets::redact_clipped`]), then put on one line.
pub(crate) fn one_line(text: &str) -> String {
    tactful_core::secrets::one_line(&tactful_core::secrets::redact_clipped(text, 400))
}

fn poisoned() -> PlatformError {
    PlatformError("Slack: the thread state is unusable after a panic".into())
}

impl SlackPlatform {
    fn index(&self, persona: &PersonaId) -> Result<usize, PlatformError> {
        account_index(
            self.shared.settings.personas.iter().map(|p| &p.id),
            persona,
            "Slack app",
        )
    }

    fn channel(room: &RoomId) -> Result<&str, PlatformError> {
        ROOMS.parse(room, channel_id)
    }
}

impl Platform for SlackPlatform {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            can_edit: true,
            can_delete: true,
            native_replies: true,
            // Slack cuts `text` at 40,000 characters and advises 4,000;
            // the escapes mrkdwn adds stay well under the hard limit.
            max_message_chars: 4000,
            reactions: true,
            silence_notices: true,
            // Slack has no idempotency key for a bot's posts.
            deduplicates_sends: false,
            rooms: Some(ROOMS),
        }
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async move {
            let i = self.index(msg.persona)?;
            let channel = Self::channel(msg.room)?;
            // In the thread the turn is in; a later part where the first
            // went; else a reply starts (or joins) the thread of the
            // message it answers: never the channel root for a threaded
            // conversation. A DM is one conversation already, and is
            // answered in line.
            let thread = {
                let threads = self.shared.threads.lock().map_err(|_| poisoned())?;
                match (msg.thread, msg.follows) {
                    (Some(t), _) => Some(t.as_str().to_owned()),
                    // Where the first part went; with no record of it
                    // (another process posted it), where a first part
                    // replying to the same message goes.
                    (None, Some(first)) => threads.thread_of_posted(channel, first.as_str()).or_else(|| {
                        msg.first_replied_to
                            .filter(|_| !channel.starts_with('D'))
                            .map(|r| threads.thread_for_reply_to(channel, r.as_str()))
                    }),
                    (None, None) if channel.starts_with('D') => None,
                    (None, None) => msg
                        .reply_to
                        .map(|r| threads.thread_for_reply_to(channel, r.as_str())),
                }
            };
            let text = mrkdwn::render(msg.text);
            let sent = with_retry(&self.shared.settings.api_url, || {
                let mut req = SlackApiChatPostMessageRequest::new(
                    channel.to_owned().into(),
                    SlackMessageContent::new().with_text(text.clone()),
                );
                if let Some(t) = &thread {
                    req = req.with_thread_ts(t.clone().into());
                }
                let session = self.shared.session(i);
                async move { session.chat_post_message(&req).await }
            })
            .await?;
            let ts = sent.ts.to_string();
            // A placeholder is not an answer until edited into one.
            self.shared
                .update_threads(|t| t.posted(channel, &ts, thread.as_deref(), !msg.placeholder));
            Ok(MsgId::new(ts))
        })
    }

    fn edit<'a>(&'a self, at: At<'a>, id: &'a MsgId, text: &'a str) -> Done<'a> {
        let (persona, room) = (at.persona, at.room);
        Box::pin(async move {
            let i = self.index(persona)?;
            let channel = Self::channel(room)?;
            let text = mrkdwn::render(text);
            with_retry(&self.shared.settings.api_url, || {
                let req = SlackApiChatUpdateRequest::new(
                    channel.to_owned().into(),
                    SlackMessageContent::new().with_text(text.clone()),
                    id.as_str().to_owned().into(),
                );
                let session = self.shared.session(i);
                async move { session.chat_update(&req).await }
            })
            .await?;
            self.shared.update_threads(|t| t.answered(channel, id.as_str()));
            Ok(())
        })
    }

    fn delete<'a>(&'a self, at: At<'a>, id: &'a MsgId) -> Done<'a> {
        let (persona, room) = (at.persona, at.room);
        Box::pin(async move {
            let i = self.index(persona)?;
            let channel = Self::channel(room)?;
            with_retry(&self.shared.settings.api_url, || {
                let req =
                    SlackApiChatDeleteRequest::new(channel.to_owned().into(), id.as_str().to_owned().into());
                let session = self.shared.session(i);
                async move { session.chat_delete(&req).await }
            })
            .await?;
            self.shared.update_threads(|t| t.deleted(channel, id.as_str()));
            Ok(())
        })
    }

    fn react<'a>(&'a self, at: At<'a>, msg: &'a MsgId, emoji: &'a str) -> Done<'a> {
        let (persona, room) = (at.persona, at.room);
        Box::pin(async move {
            let i = self.index(persona)?;
            let channel = Self::channel(room)?;
            // Slack's reactions take a name (`eyes`), not the emoji.
            let name = emojis::get(emoji)
                .and_then(emojis::Emoji::shortcode)
                .ok_or_else(|| PlatformError(format!("Slack: no reaction name for {emoji}")))?;
            let done = with_retry(&self.shared.settings.api_url, || {
                let req = SlackApiReactionsAddRequest::new(
                    channel.to_owned().into(),
                    SlackReactionName(name.to_owned()),
                    msg.as_str().to_owned().into(),
                );
                let session = self.shared.session(i);
                async move { session.reactions_add(&req).await }
            })
            .await;
            match done {
                // Already there is what was wanted.
                Err(e) if e.0.contains("already_reacted") => Ok(()),
                other => other.map(|_| ()),
            }
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let listeners = self
                .shared
                .listeners
                .lock()
                .map(|mut l| std::mem::take(&mut *l))
                .unwrap_or_default();
            for l in listeners.into_values() {
                l.shutdown().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn error_texts_are_one_clipped_line() {
        assert_eq!(
            one_line("Slack API error: invalid_auth\nBody: '{\"ok\":false}'"),
            "Slack API error: invalid_auth Body: '{\"ok\":false}'"
        );
        let long = "é".repeat(1000);
        let clipped = one_line(&long);
        assert_eq!(clipped.chars().count(), 401);
        assert!(clipped.ends_with('…'));
    }
}
