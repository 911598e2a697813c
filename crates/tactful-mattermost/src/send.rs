//! The [`Platform`] calls: a post (in the thread it answers, or starting
//! one under the post answered; in line in a direct message), edits by
//! `posts/{id}/patch`, deletions, reactions by emoji name and the typing
//! status, each under the one outbound deadline.

use futures::future::BoxFuture;
use tactful_core::{MsgId, RoomId};
use tactful_runtime::{
    At, Capabilities, Done, OutMessage, Platform, PlatformError, Sent, account_index, within_deadline,
};

use crate::api::Api;
use crate::inbound::{EVERYONE, ROOMS, name_after, opens_mention};
use crate::model::{Channel, Post};
use crate::{MattermostPlatform, Shared};

/// What Mattermost can do; the longest post is the server's
/// `MaxPostSize`, read at start ([`Platform::capabilities`] says it, so
/// both streaming and the parts of a long answer fit it).
const CAPABILITIES: Capabilities = Capabilities {
    can_edit: true,
    can_delete: true,
    native_replies: true,
    max_message_chars: crate::DEFAULT_MAX_POST,
    reactions: true,
    silence_notices: true,
    // A post sent again is a second post: a failed send may still have
    // arrived, so delivery does not try it again.
    deduplicates_sends: false,
    rooms: Some(ROOMS),
};

/// `text` with the `@` of every `@channel`, `@all` and `@here` written as
/// a full-width `＠` (U+FF20): it reads the same and Mattermost finds no
/// mention, so an agent's answer notifies nobody; the length in
/// characters is unchanged, so a part cut to the server's longest post
/// still fits. Inside code too: where code ends is Markdown's to say, and
/// a guess that differs from Mattermost's must not let a mention through.
pub fn without_channel_mentions(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    chars
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let wide = *c == '@'
                && opens_mention(&chars, i)
                && EVERYONE.contains(&name_after(&chars, i).trim_end_matches(['.', '-', '_']));
            if wide { '\u{FF20}' } else { *c }
        })
        .collect()
}

/// The platform's error for a failed call.
fn failed(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl Shared {
    fn account(&self, persona: &tactful_core::PersonaId) -> Result<usize, PlatformError> {
        account_index(
            self.settings.personas.iter().map(|p| &p.id),
            persona,
            "Mattermost bot",
        )
    }

    /// The channel of `room`.
    fn channel(room: &RoomId) -> Result<&str, PlatformError> {
        ROOMS.parse(room, |c| (!c.is_empty() && c.len() <= 64).then_some(c))
    }

    /// The channel's type, remembered or asked.
    async fn kind(&self, api: &Api, channel: &str) -> String {
        if let Some(k) = self
            .kinds
            .lock()
            .ok()
            .and_then(|k| k.get(&channel.to_owned()).cloned())
        {
            return k;
        }
        match api.get::<Channel>(&format!("/channels/{channel}")).await {
            Ok(c) => {
                if let Ok(mut kinds) = self.kinds.lock() {
                    kinds.insert(channel.to_owned(), c.kind.clone());
                }
                c.kind
            }
            Err(_) => String::new(),
        }
    }

    /// The thread a post answering `msg` goes in: its thread; else, in a
    /// channel, a thread under the post it answers (or under the post the
    /// reply's first part answered); in a direct message, none.
    async fn root_for(&self, api: &Api, channel: &str, msg: &OutMessage<'_>) -> String {
        if let Some(t) = msg.thread {
            return t.as_str().to_owned();
        }
        if let Some(first) = msg.follows
            && let Some(root) = self
                .roots
                .lock()
                .ok()
                .and_then(|r| r.get(&first.as_str().to_owned()).cloned())
        {
            return root;
        }
        let answered = msg.reply_to.or(msg.first_replied_to);
        let Some(answered) = answered else {
            return String::new();
        };
        match self.kind(api, channel).await.as_str() {
            "D" | "G" => String::new(),
            _ => answered.as_str().to_owned(),
        }
    }
}

impl Platform for MattermostPlatform {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_chars: self.shared.max_post(),
            ..CAPABILITIES
        }
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async move {
            let shared = &self.shared;
            let i = shared.account(msg.persona)?;
            let channel = Shared::channel(msg.room)?;
            let api = &shared.apis[i];
            within_deadline("Mattermost", async {
                let root = shared.root_for(api, channel, &msg).await;
                let body = serde_json::json!({
                    "channel_id": channel,
                    "message": without_channel_mentions(msg.text),
                    "root_id": root,
                });
                let post: Post = api.post("/posts", &body).await.map_err(failed)?;
                if post.id.is_empty() {
                    return Err("the server answered the post without its id".to_owned());
                }
                if msg.placeholder {
                    // A thread is the persona's once it holds an answer:
                    // the placeholder counts when it is edited into one.
                    if let Ok(mut roots) = shared.roots.lock() {
                        roots.insert(post.id.clone(), root.clone());
                    }
                } else {
                    shared.note_persona_post(&post.id, &root);
                }
                Ok(MsgId::new(post.id))
            })
            .await
        })
    }

    fn edit<'a>(&'a self, at: At<'a>, id: &'a MsgId, text: &'a str) -> Done<'a> {
        Box::pin(async move {
            let shared = &self.shared;
            let i = shared.account(at.persona)?;
            let api = &shared.apis[i];
            within_deadline("Mattermost", async {
                let body = serde_json::json!({ "message": without_channel_mentions(text) });
                let _: Post = api
                    .put(&format!("/posts/{}/patch", id.as_str()), &body)
                    .await
                    .map_err(failed)?;
                let root = shared
                    .roots
                    .lock()
                    .ok()
                    .and_then(|r| r.get(&id.as_str().to_owned()).cloned());
                if let Some(root) = root {
                    shared.note_persona_post(id.as_str(), &root);
                }
                Ok::<_, String>(())
            })
            .await
        })
    }

    fn delete<'a>(&'a self, at: At<'a>, id: &'a MsgId) -> Done<'a> {
        Box::pin(async move {
            let i = self.shared.account(at.persona)?;
            let api = &self.shared.apis[i];
            within_deadline("Mattermost", api.delete(&format!("/posts/{}", id.as_str()))).await
        })
    }

    fn react<'a>(&'a self, at: At<'a>, msg: &'a MsgId, emoji: &'a str) -> Done<'a> {
        Box::pin(async move {
            let shared = &self.shared;
            let i = shared.account(at.persona)?;
            let me = shared.bot_user(i).ok_or_else(|| {
                PlatformError(format!(
                    "{}'s Mattermost bot has not said who it is yet",
                    at.persona
                ))
            })?;
            // Mattermost names its emoji as GitHub's shortcodes do.
            let name = emojis::get(emoji)
                .and_then(|e| e.shortcode())
                .map(str::to_owned)
                .unwrap_or_else(|| emoji.trim_matches(':').to_owned());
            let body = serde_json::json!({ "user_id": me, "post_id": msg.as_str(), "emoji_name": name });
            let api = &shared.apis[i];
            within_deadline("Mattermost", api.post_only("/reactions", &body)).await
        })
    }

    fn typing<'a>(&'a self, at: At<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let shared = &self.shared;
            let (Ok(i), Ok(channel)) = (shared.account(at.persona), Shared::channel(at.room)) else {
                return;
            };
            let Some(me) = shared.bot_user(i) else {
                return;
            };
            let body = serde_json::json!({
                "channel_id": channel,
                "parent_id": at.thread.map(|t| t.as_str()).unwrap_or_default(),
            });
            let _ = within_deadline(
                "Mattermost",
                shared.apis[i].post_only(&format!("/users/{me}/typing"), &body),
            )
            .await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_notifies_no_whole_channel() {
        let out = without_channel_mentions("Hey @channel, @ALL and @here. Ask @alice; mail x@all.org");
        assert_eq!(out, "Hey ＠channel, ＠ALL and ＠here. Ask @alice; mail x@all.org");
        // Italics and other leading punctuation do not hide a mention from
        // Mattermost, so they do not here either.
        assert_eq!(
            without_channel_mentions("_@here_ and :@all"),
            "_＠here_ and :＠all"
        );
        assert_eq!(
            without_channel_mentions("@channels @allison a_@here"),
            "@channels @allison a_@here"
        );
        // Code too: a guess at where code ends must not let one through.
        assert_eq!(
            without_channel_mentions("`@here` and\n```\n@all\n```"),
            "`＠here` and\n```\n＠all\n```"
        );
        assert_eq!(without_channel_mentions("trailing @"), "trailing @");
        // The length in characters is kept.
        let text = "é@all ".repeat(50);
        assert_eq!(
            without_channel_mentions(&text).chars().count(),
            text.chars().count()
        );
    }
}
