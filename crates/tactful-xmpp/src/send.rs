//! What goes out: the platform's calls, each a message stanza handed to
//! the persona's session. A room post waits for the room's echo of it, to
//! learn the id (stanza-id) that replies and reactions to it will name.

use tactful_runtime::{At, Capabilities, Done, OutMessage, Platform, Sent};
use tokio::sync::oneshot;
use tokio_xmpp::jid::Jid;
use tokio_xmpp::parsers::message::{Lang, Message as Stanza_};

use super::*;
use crate::session::Command;
use crate::stanzas;

/// How long a post waits to be written and, in a room, echoed; past it, a
/// room post settles for the id tactful gave it (longer than a write may
/// take, so a post that could not be written fails first).
const ECHO_WAIT: Duration = Duration::from_secs(40);

/// The longest message, in characters: far under the stanza limits
/// servers keep (Prosody's is 256 KiB), and readable in one screen of a
/// client.
const MAX_CHARS: usize = 8_000;

impl Shared {
    /// A new message stanza to `target`, as its kind of chat has it, with
    /// an id that is its origin-id too.
    fn stanza(&self, target: &Target) -> (Stanza_, String) {
        let to = Jid::from(target.jid().clone());
        let mut m = match target {
            Target::Muc(_) => Stanza_::groupchat(to),
            Target::Direct(..) => Stanza_::chat(to),
        };
        let id = self.new_id();
        m.id = Some(tokio_xmpp::parsers::message::Id(id.clone()));
        m.payloads.push(stanzas::origin_id(&id));
        (m, id)
    }

    /// Hands `stanza` to `persona`'s session, waiting up to
    /// [`CONNECT_WAIT`] for it to be online (and, for a room post, in the
    /// room); for a room post (`echo`), waits for the room's id of it.
    async fn deliver(
        &self,
        persona: &PersonaId,
        target: &Target,
        stanza: Stanza_,
        echo: Option<String>,
    ) -> Result<Option<String>, PlatformError> {
        // `Some(None)`: the service is stopping, no use waiting.
        let tx = tactful_runtime::waiting::until(&self.connected, CONNECT_WAIT, || {
            let in_room = match target {
                Target::Muc(room) => self.nick_in(room, persona).is_some(),
                Target::Direct(..) => true,
            };
            match self.live.lock().ok().and_then(|l| l.get(persona).cloned()) {
                Some(tx) if in_room => Some(Some(tx)),
                _ => self.closing.load(Ordering::SeqCst).then_some(None),
            }
        })
        .await
        .flatten()
        .ok_or_else(|| {
            PlatformError(format!(
                "{persona} is not connected to XMPP{} (waited {} s)",
                match target {
                    Target::Muc(room) => format!(" or not in {room}"),
                    Target::Direct(..) => String::new(),
                },
                CONNECT_WAIT.as_secs()
            ))
        })?;
        let (done, answer) = oneshot::channel();
        tx.send(Command::Send {
            stanza: Box::new(stanza),
            echo,
            done,
        })
        .await
        .map_err(|_| PlatformError(format!("{persona}'s XMPP connection closed")))?;
        match tokio::time::timeout(ECHO_WAIT, answer).await {
            Ok(Ok(Ok(id))) => Ok(id),
            Ok(Ok(Err(e))) => Err(PlatformError(format!("XMPP: {e}"))),
            Ok(Err(_)) => Err(PlatformError(format!(
                "{persona}'s XMPP connection closed before the message was confirmed"
            ))),
            // Written (a failure to write comes sooner), but no echo: the
            // post stands under tactful's id.
            Err(_) => Ok(None),
        }
    }

    /// What tactful knows of its post `id`: the id it gave the post
    /// (which corrections and retractions name) and the reply it is, so a
    /// correction is a reply still. Unknown (an old post, from before a
    /// restart): `id` itself, no reply.
    fn post(&self, id: &MsgId) -> Post {
        self.posts
            .lock()
            .ok()
            .and_then(|p| p.get(&id.as_str().to_owned()).cloned())
            .unwrap_or_else(|| Post {
                own_id: id.as_str().to_owned(),
                reply: None,
            })
    }
}

/// What a message replies to: whom (`room/nick`, or a bare JID), the
/// message's id, and the quote shown by clients without replies.
#[derive(Clone, Debug)]
pub(crate) struct Reply {
    to: String,
    id: String,
    quote: Option<String>,
}

impl Reply {
    /// Puts the reply on `stanza` and its quote before `body`.
    fn apply(&self, stanza: &mut Stanza_, body: String) -> String {
        stanza.payloads.push(stanzas::reply(&self.to, &self.id));
        match &self.quote {
            Some(q) => {
                stanza.payloads.push(stanzas::reply_fallback(q.chars().count()));
                q.clone() + &body
            }
            None => body,
        }
    }
}

/// One of a persona's recent posts.
#[derive(Clone, Debug)]
pub(crate) struct Post {
    own_id: String,
    reply: Option<Reply>,
}

/// XMPP's reply quote: `> Alice: what they said` (its first line).
fn quote(author: &str, text: &str) -> String {
    let nick = author.rsplit('/').next().unwrap_or(author);
    let first = text.lines().next().unwrap_or("");
    let first: String = first.chars().take(120).collect();
    format!("> {nick}: {first}\n")
}

impl Platform for XmppPlatform {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            can_edit: true,
            can_delete: true,
            native_replies: true,
            max_message_chars: MAX_CHARS,
            reactions: true,
            silence_notices: true,
            deduplicates_sends: false,
            rooms: Some(ROOMS),
        }
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async move {
            let shared = &self.shared;
            shared.persona(msg.persona)?;
            let target = target_of(msg.room)?;
            let (mut stanza, id) = shared.stanza(&target);
            let mut body = tactful_runtime::markdown_styled(msg.text);
            let reply = msg.reply_to.map(|to| {
                let known = shared
                    .texts
                    .lock()
                    .ok()
                    .and_then(|t| t.get(&to.as_str().to_owned()).cloned());
                Reply {
                    to: known
                        .as_ref()
                        .map_or_else(|| target.jid().to_string(), |(a, _)| a.clone()),
                    id: to.as_str().to_owned(),
                    quote: known.map(|(who, text)| quote(&who, &text)),
                }
            });
            if let Some(r) = &reply {
                body = r.apply(&mut stanza, body);
            }
            stanza.payloads.push(stanzas::chat_state("active"));
            stanza.bodies.insert(Lang::default(), body);
            let echo = matches!(target, Target::Muc(_)).then(|| id.clone());
            let room_id = shared.deliver(msg.persona, &target, stanza, echo).await?;
            let platform_id = room_id.unwrap_or_else(|| id.clone());
            if let Ok(mut posts) = shared.posts.lock() {
                posts.insert(platform_id.clone(), Post { own_id: id, reply });
            }
            Ok(MsgId::new(platform_id))
        })
    }

    fn edit<'a>(&'a self, at: At<'a>, id: &'a MsgId, text: &'a str) -> Done<'a> {
        Box::pin(async move {
            let shared = &self.shared;
            let target = target_of(at.room)?;
            let (mut stanza, _) = shared.stanza(&target);
            let post = shared.post(id);
            stanza.payloads.push(stanzas::replace(&post.own_id));
            let mut body = tactful_runtime::markdown_styled(text);
            if let Some(r) = &post.reply {
                body = r.apply(&mut stanza, body);
            }
            stanza.bodies.insert(Lang::default(), body);
            shared
                .deliver(at.persona, &target, stanza, None)
                .await
                .map(|_| ())
        })
    }

    fn delete<'a>(&'a self, at: At<'a>, id: &'a MsgId) -> Done<'a> {
        Box::pin(async move {
            let shared = &self.shared;
            let target = target_of(at.room)?;
            let (mut stanza, _) = shared.stanza(&target);
            // In a room the retraction names the room's id of the post.
            let named = match target {
                Target::Muc(_) => id.as_str().to_owned(),
                Target::Direct(..) => shared.post(id).own_id,
            };
            stanza.payloads.extend(stanzas::retract(&named));
            stanza.payloads.push(stanzas::hint("store"));
            stanza.bodies.insert(
                Lang::default(),
                "(a message was taken back; this client cannot show that)".to_owned(),
            );
            shared
                .deliver(at.persona, &target, stanza, None)
                .await
                .map(|_| ())
        })
    }

    fn react<'a>(&'a self, at: At<'a>, msg: &'a MsgId, emoji: &'a str) -> Done<'a> {
        Box::pin(async move {
            let shared = &self.shared;
            let target = target_of(at.room)?;
            let (mut stanza, _) = shared.stanza(&target);
            stanza.payloads.push(stanzas::reactions(msg.as_str(), emoji));
            stanza.payloads.push(stanzas::hint("store"));
            shared
                .deliver(at.persona, &target, stanza, None)
                .await
                .map(|_| ())
        })
    }

    fn typing<'a>(&'a self, at: At<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let shared = &self.shared;
            let Ok(target) = target_of(at.room) else {
                return;
            };
            let (mut stanza, _) = shared.stanza(&target);
            stanza.payloads.push(stanzas::chat_state("composing"));
            stanza.payloads.push(stanzas::hint("no-store"));
            let _ = shared.deliver(at.persona, &target, stanza, None).await;
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let shared = &self.shared;
            shared.closing.store(true, Ordering::SeqCst);
            let sessions: Vec<_> = shared
                .live
                .lock()
                .map(|l| l.values().cloned().collect())
                .unwrap_or_default();
            for tx in sessions {
                let (done, closed) = oneshot::channel();
                if tx.send(Command::Close(done)).await.is_ok() {
                    let _ = tokio::time::timeout(Duration::from_secs(5), closed).await;
                }
            }
        })
    }
}
