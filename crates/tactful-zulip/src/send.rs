//! The [`Platform`] calls: a message (to the topic of the message it
//! answers, wherever that topic is now; to a direct message's people),
//! edits by `PATCH /messages/{id}`, deletions, reactions by emoji name and
//! the typing notice, each under the one outbound deadline.

use futures::future::BoxFuture;
use tactful_core::{MsgId, RoomId};
use tactful_runtime::{
    At, Capabilities, Done, OutMessage, Platform, PlatformError, Sent, account_index, within_deadline,
};

use crate::api::Form;
use crate::inbound::{ROOMS, Target, mentions_anywhere, target_of};
use crate::model::SentMessage;
use crate::{Shared, ZulipPlatform};

/// What Zulip can do; the longest message is the server's, read when a
/// bot registers its queue.
const CAPABILITIES: Capabilities = Capabilities {
    can_edit: true,
    can_delete: true,
    native_replies: false,
    max_message_chars: crate::DEFAULT_MAX_MESSAGE,
    reactions: true,
    silence_notices: true,
    // A message sent again is a second message.
    deduplicates_sends: false,
    rooms: Some(ROOMS),
};

/// The topic a stream message goes to when nothing names one (Zulip's
/// name for messages without a topic).
pub const NO_TOPIC: &str = "(no topic)";

/// What a placeholder the bot may not delete is edited to.
pub const WITHDRAWN: &str = "_(withdrawn)_";

/// The words that notify everyone, which an answer must not.
const WILDCARDS: [&str; 5] = ["all", "everyone", "channel", "stream", "topic"];

/// `text` with the `@` of every wildcard mention (`@**all**`,
/// `@_**everyone**`...) written as a full-width `＠` (U+FF20): it reads
/// the same and Zulip finds no mention, so an agent's answer notifies
/// nobody; the length in characters is unchanged. Inside code too: where
/// code ends is Markdown's to say (backtick runs, escapes), and a guess
/// that differs from Zulip's must not let a mention through.
pub fn without_wildcards(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for m in mentions_anywhere(text) {
        if m.id.is_none() && WILDCARDS.iter().any(|w| w.eq_ignore_ascii_case(&m.name)) {
            out.push_str(&text[last..m.span.start]);
            out.push('\u{FF20}');
            last = m.span.start + 1;
        }
    }
    out.push_str(&text[last..]);
    out
}

impl Shared {
    fn account(&self, persona: &tactful_core::PersonaId) -> Result<usize, PlatformError> {
        account_index(self.settings.personas.iter().map(|p| &p.id), persona, "Zulip bot")
    }

    /// Where `room` is.
    fn target(room: &RoomId) -> Result<Target, PlatformError> {
        ROOMS.parse(room, |_| target_of(room))
    }

    /// The place (stream, topic) of message `id`, if known.
    fn place(&self, id: &MsgId) -> Option<(u64, String)> {
        let id: u64 = id.as_str().parse().ok()?;
        self.places.lock().ok().and_then(|p| p.get(&id).cloned())
    }

    /// The topic a message to `stream` goes to: where the message it
    /// answers is now (moved or renamed since, it is followed), else the
    /// thread it was asked in, else [`NO_TOPIC`].
    fn topic_for(&self, stream: u64, msg: &OutMessage<'_>) -> (u64, String) {
        let named = [msg.follows, msg.reply_to, msg.first_replied_to];
        for id in named.into_iter().flatten() {
            if let Some(place) = self.place(id) {
                return place;
            }
        }
        let topic = msg
            .thread
            .map(|t| t.as_str().to_owned())
            .unwrap_or_else(|| NO_TOPIC.to_owned());
        (stream, topic)
    }
}

impl Platform for ZulipPlatform {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_chars: self.shared.max_message(),
            ..CAPABILITIES
        }
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async move {
            let shared = &self.shared;
            let i = shared.account(msg.persona)?;
            let target = Shared::target(msg.room)?;
            let content = without_wildcards(msg.text);
            let (form, place): (Form, Option<(u64, String)>) = match &target {
                Target::Stream(stream) => {
                    let (stream, topic) = shared.topic_for(*stream, &msg);
                    (
                        vec![
                            ("type", "stream".into()),
                            ("to", stream.to_string()),
                            ("topic", topic.clone()),
                            ("content", content),
                        ],
                        Some((stream, topic)),
                    )
                }
                Target::Direct(people) => {
                    let me = shared.bot_user(i);
                    let to: Vec<u64> = people.iter().copied().filter(|p| Some(*p) != me).collect();
                    let to = if to.is_empty() { people.clone() } else { to };
                    (
                        vec![
                            // `private`: every server version takes it
                            // (`direct` needs Zulip 7).
                            ("type", "private".into()),
                            ("to", serde_json::to_string(&to).unwrap_or_default()),
                            ("content", content),
                        ],
                        None,
                    )
                }
            };
            let api = &shared.apis[i];
            let sent: SentMessage = within_deadline("Zulip", api.post("/messages", &form)).await?;
            if sent.id == 0 {
                return Err(PlatformError(
                    "Zulip: the server answered the message without its id".into(),
                ));
            }
            if let Some((stream, topic)) = place {
                if msg.placeholder {
                    if let Ok(mut places) = shared.places.lock() {
                        places.insert(sent.id, (stream, topic));
                    }
                } else {
                    shared.note_persona_message(sent.id, stream, &topic);
                }
            }
            if let Ok(mut seen) = shared.seen.lock() {
                seen.first(sent.id);
            }
            Ok(MsgId::new(sent.id.to_string()))
        })
    }

    fn edit<'a>(&'a self, at: At<'a>, id: &'a MsgId, text: &'a str) -> Done<'a> {
        Box::pin(async move {
            let shared = &self.shared;
            let i = shared.account(at.persona)?;
            let form: Form = vec![("content", without_wildcards(text))];
            within_deadline(
                "Zulip",
                shared.apis[i].patch(&format!("/messages/{}", id.as_str()), &form),
            )
            .await?;
            // A placeholder edited into an answer: the topic is the
            // persona's from now on.
            if let (Some((stream, topic)), Ok(n)) = (shared.place(id), id.as_str().parse::<u64>()) {
                shared.note_persona_message(n, stream, &topic);
            }
            Ok(())
        })
    }

    fn delete<'a>(&'a self, at: At<'a>, id: &'a MsgId) -> Done<'a> {
        Box::pin(async move {
            let i = self.shared.account(at.persona)?;
            let api = &self.shared.apis[i];
            let path = format!("/messages/{}", id.as_str());
            within_deadline("Zulip", async {
                match api.delete(&path).await {
                    Ok(()) => Ok(()),
                    // Deleting is for administrators unless the
                    // organisation lets people delete their own: the
                    // placeholder then says it was withdrawn, rather than
                    // "…" for ever.
                    Err(e) if e.status() == Some(400) => {
                        tracing::info!("Zulip: could not delete a placeholder ({e}); marking it withdrawn");
                        api.patch(&path, &vec![("content", WITHDRAWN.to_owned())]).await
                    }
                    Err(e) => Err(e),
                }
            })
            .await
        })
    }

    fn react<'a>(&'a self, at: At<'a>, msg: &'a MsgId, emoji: &'a str) -> Done<'a> {
        Box::pin(async move {
            let i = self.shared.account(at.persona)?;
            // Zulip names its emoji much as GitHub's shortcodes do.
            let name = emojis::get(emoji)
                .and_then(|e| e.shortcode())
                .map(str::to_owned)
                .unwrap_or_else(|| emoji.trim_matches(':').to_owned());
            let form: Form = vec![("emoji_name", name)];
            let api = &self.shared.apis[i];
            within_deadline(
                "Zulip",
                api.post::<crate::model::Outcome>(&format!("/messages/{}/reactions", msg.as_str()), &form),
            )
            .await
            .map(|_| ())
        })
    }

    fn typing<'a>(&'a self, at: At<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let shared = &self.shared;
            let (Ok(i), Ok(target)) = (shared.account(at.persona), Shared::target(at.room)) else {
                return;
            };
            let form: Form = match target {
                Target::Stream(stream) => vec![
                    ("op", "start".into()),
                    ("type", "stream".into()),
                    ("stream_id", stream.to_string()),
                    (
                        "topic",
                        at.thread
                            .map(|t| t.as_str().to_owned())
                            .unwrap_or_else(|| NO_TOPIC.to_owned()),
                    ),
                ],
                Target::Direct(people) => {
                    let me = shared.bot_user(i);
                    let to: Vec<u64> = people.into_iter().filter(|p| Some(*p) != me).collect();
                    vec![
                        ("op", "start".into()),
                        ("type", "direct".into()),
                        ("to", serde_json::to_string(&to).unwrap_or_default()),
                    ]
                }
            };
            let _ = within_deadline(
                "Zulip",
                shared.apis[i].post::<crate::model::Outcome>("/typing", &form),
            )
            .await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_notifies_nobody_by_wildcard() {
        assert_eq!(
            without_wildcards("Hi @**all**, @_**everyone** and @**topic**; ask @**Alice|12**"),
            "Hi \u{FF20}**all**, \u{FF20}_**everyone** and \u{FF20}**topic**; ask @**Alice|12**"
        );
        // Code too: ``"` @**all** `"`` renders a live mention in Zulip.
        assert_eq!(
            without_wildcards("`@**all**` in code"),
            "`\u{FF20}**all**` in code"
        );
        assert_eq!(without_wildcards("\\`@**all**`"), "\\`\u{FF20}**all**`");
        assert_eq!(without_wildcards("@**all"), "@**all");
    }
}
