//! What leaves for IRC: a reply cut into lines, one line a part, each
//! sent when its persona's connection may send again.
//!
//! IRC shows no Markdown and carries at most one line of ~400 bytes a
//! message, so a reply of 40 lines is 40 messages. They are cut here, in
//! [`Platform::parts`], rather than inside [`Platform::send`]: the delivery
//! path records each part before the next goes, so a crash in the middle
//! of the answer sends again at most the line in flight, not every line
//! before it (an answer sent whole by one `send` was sent whole again).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_core::{MsgId, PersonaId, RoomId};
use tactful_runtime::{Capabilities, OutMessage, Platform, PlatformError, Sent};
use tokio::time::Instant;

use crate::{IrcPlatform, QUIT_MESSAGE, ROOMS, Target, author_of, target_of, text};

/// When each persona's connection may send its next line: lines of one
/// reply, of replies in several rooms, and of notices all keep
/// `send_interval` apart on one connection, so flood control never sees
/// a burst.
#[derive(Default)]
pub(crate) struct Pace {
    next: Mutex<HashMap<PersonaId, Instant>>,
}

impl Pace {
    /// Waits for `persona`'s turn to send one line, and takes it.
    async fn turn(&self, persona: &PersonaId, interval: Duration) {
        let at = {
            let Ok(mut next) = self.next.lock() else {
                return;
            };
            let now = Instant::now();
            let at = next.get(persona).copied().filter(|&t| t > now).unwrap_or(now);
            next.insert(persona.clone(), at + interval);
            at
        };
        tokio::time::sleep_until(at).await;
    }
}

/// Where a room's lines go: a channel, or a person's nick.
fn recipient(room: &RoomId) -> Option<String> {
    match target_of(room)? {
        Target::Channel(c) => Some(c),
        Target::Private(nick) => Some(nick),
    }
}

/// How an answer names the person it replies to: `nick: ` in a channel
/// (IRC has no native replies), nothing in a private conversation, where
/// there is only one person.
fn addressing(room: &RoomId, reply_to: Option<&MsgId>) -> String {
    reply_to
        .filter(|_| !room.as_str().starts_with("irc:dm:"))
        .and_then(author_of)
        .map(|nick| format!("{nick}: "))
        .unwrap_or_default()
}

impl Platform for IrcPlatform {
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let shared = &self.shared;
            shared.closing.store(true, Ordering::SeqCst);
            let senders: Vec<_> = match shared.live.lock() {
                Ok(live) => live.values().map(|(s, _)| s.clone()).collect(),
                Err(_) => return,
            };
            for sender in senders {
                if let Err(e) = sender.send_quit(QUIT_MESSAGE) {
                    tracing::debug!("IRC QUIT not sent: {e}");
                }
            }
            // The server answers QUIT by closing the connection; wait for
            // that (briefly: a server that does not must not hold us up).
            tactful_runtime::waiting::until(&shared.ended, Duration::from_secs(3), || {
                shared.live.lock().map_or(true, |l| l.is_empty()).then_some(())
            })
            .await;
        })
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            can_edit: false,
            can_delete: false,
            native_replies: false,
            // Read by nobody but the default `parts`, which IRC replaces
            // with its lines.
            max_message_chars: 2000,
            // Silence on an addressed message is a notice instead.
            reactions: false,
            silence_notices: true,
            // A line sent twice is said twice.
            deduplicates_sends: false,
            rooms: Some(ROOMS),
        }
    }

    /// The answer as IRC shows it (Markdown read as plain text: `**mode**`
    /// would arrive with its stars), one line a part; the first leaves
    /// room for the `nick: ` that `send` puts before it.
    fn parts(&self, room: &RoomId, reply_to: Option<&MsgId>, text: &str) -> Vec<String> {
        let Some(to) = recipient(room) else {
            // Not an IRC room: `send` refuses it with its reason.
            return vec![text.to_owned()];
        };
        let room_for = text::max_text_bytes(&to).saturating_sub(addressing(room, reply_to).len());
        text::split_lines(&tactful_runtime::markdown_plain(text), room_for.max(64))
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async move {
            let shared = &self.shared;
            let Some(to) = recipient(msg.room) else {
                return Err(PlatformError(format!("{} is not an IRC room", msg.room)));
            };
            let sender = shared.sender_of(msg.persona).await?;
            let prefix = addressing(msg.room, msg.reply_to);
            // One line as `parts` cut it; cut again all the same, so that
            // no text can carry a line end onto the wire.
            let lines = text::split_lines(&format!("{prefix}{}", msg.text), text::max_text_bytes(&to));
            for line in &lines {
                shared.pace.turn(msg.persona, shared.settings.send_interval).await;
                sender
                    .send_privmsg(&to, line)
                    .map_err(|e| PlatformError(format!("IRC send to {to} failed: {e}")))?;
            }
            Ok(shared.new_id())
        })
    }
}

#[cfg(test)]
mod tests {
    use tactful_runtime::markdown_plain;

    use super::*;
    use crate::IrcSettings;

    fn platform() -> IrcPlatform {
        IrcPlatform::new(IrcSettings {
            server: "127.0.0.1".into(),
            port: 6667,
            tls: false,
            channels: vec!["#tactful".into()],
            send_interval: Duration::from_millis(50),
            personas: Vec::new(),
            max_backoff: Duration::from_secs(60),
            nick_retry: Duration::from_secs(60),
        })
    }

    #[test]
    fn a_long_answer_is_one_part_a_line_and_each_fits_with_its_nick() {
        let p = platform();
        let room = RoomId::new("irc:#tactful");
        let asked = MsgId::new("i1-1.alice_with_a_long_nick");
        let text = format!("**Intro**\n\n{}\n\n- one\n- two\n", "word ".repeat(300));
        let parts = p.parts(&room, Some(&asked), &text);
        assert_eq!(parts[0], "Intro");
        assert!(parts.len() > 4, "{parts:?}");
        let max = text::max_text_bytes("#tactful");
        let prefix = "alice_with_a_long_nick: ";
        assert!(prefix.len() + parts[0].len() <= max);
        assert!(
            parts
                .iter()
                .all(|l| l.len() + prefix.len() <= max && !l.contains(['\r', '\n']))
        );
        // Nothing is lost: the words, and the list as lines.
        let words: usize = parts.iter().map(|l| l.matches("word").count()).sum();
        assert_eq!(words, 300);
        assert_eq!(&parts[parts.len() - 2..], ["- one", "- two"]);
        // Without Markdown the text is not read twice: a part is posted as
        // it is, where rendering it again would eat `*literal*`'s stars.
        let escaped = p.parts(&room, None, r"a \*literal\* star");
        assert_eq!(escaped, ["a *literal* star"]);
        assert_ne!(
            markdown_plain(&escaped[0]),
            escaped[0],
            "rendering twice would change it"
        );
    }

    #[test]
    fn a_private_answer_has_no_nick_before_it_and_other_rooms_are_left_whole() {
        let p = platform();
        let dm = RoomId::new("irc:dm:docs:alice");
        assert_eq!(addressing(&dm, Some(&MsgId::new("i1-1.alice"))), "");
        assert_eq!(
            addressing(&RoomId::new("irc:#c"), Some(&MsgId::new("i1-1.alice"))),
            "alice: "
        );
        assert_eq!(p.parts(&RoomId::new("web:main"), None, "a\nb"), ["a\nb"]);
    }

    #[tokio::test(start_paused = true)]
    async fn lines_of_one_connection_keep_their_interval_whoever_sends_them() {
        let pace = Pace::default();
        let docs = PersonaId::new("docs");
        let chef = PersonaId::new("chef");
        let start = Instant::now();
        let gap = Duration::from_millis(50);
        pace.turn(&docs, gap).await;
        pace.turn(&chef, gap).await;
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "another connection does not wait"
        );
        pace.turn(&docs, gap).await;
        pace.turn(&docs, gap).await;
        assert_eq!(start.elapsed(), 2 * gap);
        tokio::time::advance(Duration::from_secs(1)).await;
        let later = Instant::now();
        pace.turn(&docs, gap).await;
        assert_eq!(
            later.elapsed(),
            Duration::ZERO,
            "an idle connection sends at once"
        );
    }
}
