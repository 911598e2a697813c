//! The personas' own posts, edits and deletions as their apps hear them.
//!
//! Slack shows an app every message in its channels, its own and the
//! other personas' included. The engine has no use for them (it decided
//! them), but the thread state does: a follow-up in a thread is addressed
//! to the persona that answered there last ([`crate::threads`]), and the
//! process listening with an app is not always the one that posted (when
//! processes share a store, a room's owner posts over the Web API while
//! another process listens). Followed from the events, the listener's
//! thread state is right wherever the answer was posted from.

use slack_morphism::events::{SlackMessageEvent, SlackMessageEventType};
use slack_morphism::prelude::SlackMessageSender;

use crate::inbound::KnownBot;

/// What one event says about a persona's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Own {
    /// Posted, in `thread` or at the channel's root; `answer` unless it
    /// is a placeholder.
    Posted {
        channel: String,
        ts: String,
        thread: Option<String>,
        answer: bool,
    },
    /// Edited; `answer` when a placeholder became an answer (an edit of
    /// an answer, a link preview Slack added, changes nothing).
    Edited {
        channel: String,
        ts: String,
        answer: bool,
    },
    /// Deleted (a silent turn's placeholder, say).
    Deleted { channel: String, ts: String },
}

/// Whether `sender` is one of the personas' apps.
fn is_persona(sender: &SlackMessageSender, bots: &[KnownBot]) -> bool {
    let bot_id = sender.bot_id.as_ref().map(|b| b.to_string());
    let user = sender.user.as_ref().map(|u| u.to_string());
    bots.iter()
        .any(|b| (bot_id.is_some() && b.bot_id == bot_id) || (user.is_some() && b.user == user))
}

/// What `ev` says about a persona's message, if it is about one: a post
/// (`message`, or `bot_message`), an edit (`message_changed`, the message
/// as it is now under `message`) or a deletion (`message_deleted`, the
/// message as it was under `previous_message`). `placeholder` is what a
/// placeholder says.
pub fn own_change(ev: &SlackMessageEvent, bots: &[KnownBot], placeholder: &str) -> Option<Own> {
    let channel = ev.origin.channel.as_ref()?.to_string();
    let is_answer = |text: Option<&String>| text.is_some_and(|t| t.trim() != placeholder);
    match &ev.subtype {
        None | Some(SlackMessageEventType::BotMessage) => {
            if ev.hidden == Some(true) || !is_persona(&ev.sender, bots) {
                return None;
            }
            let ts = ev.origin.ts.to_string();
            let thread = ev
                .origin
                .thread_ts
                .as_ref()
                .map(|t| t.to_string())
                .filter(|t| *t != ts);
            Some(Own::Posted {
                channel,
                ts,
                thread,
                answer: is_answer(ev.content.as_ref().and_then(|c| c.text.as_ref())),
            })
        }
        Some(SlackMessageEventType::MessageChanged) => {
            let now = ev.message.as_ref()?;
            let was_placeholder = ev
                .previous_message
                .as_ref()
                .and_then(|p| p.content.as_ref()?.text.as_ref())
                .is_some_and(|t| t.trim() == placeholder);
            is_persona(&now.sender, bots).then(|| Own::Edited {
                channel,
                ts: now.ts.to_string(),
                answer: was_placeholder && is_answer(now.content.as_ref().and_then(|c| c.text.as_ref())),
            })
        }
        Some(SlackMessageEventType::MessageDeleted) => {
            let was = ev.previous_message.as_ref()?;
            let ts = ev.deleted_ts.as_ref()?.to_string();
            is_persona(&was.sender, bots).then_some(Own::Deleted { channel, ts })
        }
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tactful_core::PersonaId;

    use super::*;

    fn bots() -> Vec<KnownBot> {
        vec![KnownBot {
            persona: PersonaId::new("docs"),
            user: Some("U0DOCSBOT".into()),
            bot_id: Some("B0DOCS".into()),
        }]
    }

    fn event(v: serde_json::Value) -> SlackMessageEvent {
        serde_json::from_value(v).expect("a message event")
    }

    #[test]
    fn a_personas_posts_edits_and_deletions_are_followed_and_nobody_elses() {
        let b = bots();
        let posted = event(
            json!({"type": "message", "channel": "C1", "ts": "2.0", "thread_ts": "1.0",
            "user": "U0DOCSBOT", "bot_id": "B0DOCS", "text": "…"}),
        );
        assert_eq!(
            own_change(&posted, &b, "…"),
            Some(Own::Posted {
                channel: "C1".into(),
                ts: "2.0".into(),
                thread: Some("1.0".into()),
                answer: false
            }),
            "a placeholder is not an answer yet"
        );
        let answer = event(json!({"type": "message", "channel": "C1", "ts": "3.0",
            "bot_id": "B0DOCS", "subtype": "bot_message", "text": "the answer"}));
        assert_eq!(
            own_change(&answer, &b, "…"),
            Some(Own::Posted {
                channel: "C1".into(),
                ts: "3.0".into(),
                thread: None,
                answer: true
            }),
            "by its bot id alone, at the root"
        );
        let edited = event(
            json!({"type": "message", "subtype": "message_changed", "channel": "C1",
            "ts": "9.0", "hidden": true,
            "message": {"type": "message", "ts": "2.0", "user": "U0DOCSBOT", "bot_id": "B0DOCS", "text": "done"},
            "previous_message": {"type": "message", "ts": "2.0", "user": "U0DOCSBOT", "text": "…"}}),
        );
        assert_eq!(
            own_change(&edited, &b, "…"),
            Some(Own::Edited {
                channel: "C1".into(),
                ts: "2.0".into(),
                answer: true
            })
        );
        // An answer edited again (or given a link preview): not an
        // answer anew, so the thread does not move back to it.
        let again = event(
            json!({"type": "message", "subtype": "message_changed", "channel": "C1",
            "ts": "9.5", "hidden": true,
            "message": {"type": "message", "ts": "2.0", "bot_id": "B0DOCS", "text": "done, see https://x"},
            "previous_message": {"type": "message", "ts": "2.0", "bot_id": "B0DOCS", "text": "done"}}),
        );
        assert_eq!(
            own_change(&again, &b, "…"),
            Some(Own::Edited {
                channel: "C1".into(),
                ts: "2.0".into(),
                answer: false
            })
        );
        let deleted = event(
            json!({"type": "message", "subtype": "message_deleted", "channel": "C1",
            "ts": "9.1", "hidden": true, "deleted_ts": "2.0",
            "previous_message": {"type": "message", "ts": "2.0", "user": "U0DOCSBOT", "text": "…"}}),
        );
        assert_eq!(
            own_change(&deleted, &b, "…"),
            Some(Own::Deleted {
                channel: "C1".into(),
                ts: "2.0".into()
            })
        );

        // People's messages, other bots', and edits of them: not ours.
        let person = event(
            json!({"type": "message", "channel": "C1", "ts": "4.0", "thread_ts": "1.0",
            "user": "U0ALICE", "text": "thanks"}),
        );
        assert_eq!(own_change(&person, &b, "…"), None);
        let other_bot = event(json!({"type": "message", "channel": "C1", "ts": "5.0",
            "bot_id": "B0OTHER", "subtype": "bot_message", "text": "beep"}));
        assert_eq!(own_change(&other_bot, &b, "…"), None);
        let persons_edit = event(
            json!({"type": "message", "subtype": "message_changed", "channel": "C1",
            "ts": "9.2", "hidden": true,
            "message": {"type": "message", "ts": "4.0", "user": "U0ALICE", "text": "thanks!"}}),
        );
        assert_eq!(own_change(&persons_edit, &b, "…"), None);
        let joined = event(
            json!({"type": "message", "subtype": "channel_join", "channel": "C1",
            "ts": "9.3", "user": "U0DOCSBOT", "text": "joined"}),
        );
        assert_eq!(own_change(&joined, &b, "…"), None);
        // A deletion that does not say whose message it was: not followed.
        let unknown = event(
            json!({"type": "message", "subtype": "message_deleted", "channel": "C1",
            "ts": "9.4", "hidden": true, "deleted_ts": "3.0"}),
        );
        assert_eq!(own_change(&unknown, &b, "…"), None);
    }
}
