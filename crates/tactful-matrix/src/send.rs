//! Everything that goes out to Matrix: the [`Platform`] calls.

use matrix_sdk::room::edit::EditedContent;
use matrix_sdk::room::reply::{EnforceThread, Reply};
use matrix_sdk::ruma::OwnedEventId;
use matrix_sdk::ruma::events::Mentions;
use matrix_sdk::ruma::events::reaction::ReactionEventContent;
use matrix_sdk::ruma::events::relation::Annotation;
use matrix_sdk::ruma::events::room::message::{AddMentions, Relation, RoomMessageEventContent};
use tactful_core::MsgId;
use tactful_runtime::{At, Capabilities, Done, OutMessage, Platform, PlatformError, Sent};

use crate::MatrixPlatform;
use crate::format;

fn event_id(id: &MsgId) -> Result<OwnedEventId, PlatformError> {
    OwnedEventId::try_from(id.as_str()).map_err(|_| PlatformError(format!("{id} is not a Matrix event id")))
}

impl Platform for MatrixPlatform {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            can_edit: true,
            can_delete: true,
            native_replies: true,
            // Events are capped at 64 KiB of JSON; this leaves room for the
            // envelope and escaping.
            max_message_chars: 16_000,
            reactions: true,
            silence_notices: true,
            // The key is the event's transaction id.
            deduplicates_sends: true,
            rooms: Some(crate::event::ROOMS),
        }
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async move {
            let room = self.shared.room(msg.persona, msg.room).await?;
            let body = format::content(msg.text);
            let content: RoomMessageEventContent = match msg.reply_to {
                Some(target) => {
                    let reply = Reply {
                        event_id: event_id(target)?,
                        enforce_thread: EnforceThread::MaybeThreaded,
                        add_mentions: AddMentions::Yes,
                    };
                    room.make_reply_event(body.add_mentions(Mentions::new()), reply)
                        .await
                        .map_err(|e| PlatformError(format!("cannot reply to {target}: {e}")))?
                }
                None => {
                    let relation = match msg.thread {
                        Some(root) => {
                            let root = event_id(&MsgId::new(root.as_str()))?;
                            Some(Relation::Thread(
                                matrix_sdk::ruma::events::relation::Thread::plain(root.clone(), root),
                            ))
                        }
                        None => None,
                    };
                    body.add_mentions(Mentions::new()).with_relation(relation)
                }
            };
            let mut send = room.send(content);
            // The part's key as the transaction id: a part sent again after a
            // crash is the same event to the homeserver, not a second one.
            if let Some(key) = msg.key {
                send = send.with_transaction_id(matrix_sdk::ruma::OwnedTransactionId::from(key));
            }
            let sent = send
                .await
                .map_err(|e| PlatformError(format!("sending to {} failed: {e}", msg.room)))?;
            Ok(MsgId::new(sent.response.event_id.as_str()))
        })
    }

    fn edit<'a>(&'a self, at: At<'a>, id: &'a MsgId, text: &'a str) -> Done<'a> {
        let (persona, room) = (at.persona, at.room);
        Box::pin(async move {
            let r = self.shared.room(persona, room).await?;
            let edit = r
                .make_edit_event(&event_id(id)?, EditedContent::RoomMessage(format::content(text)))
                .await
                .map_err(|e| PlatformError(format!("cannot edit {id}: {e}")))?;
            r.send(edit)
                .await
                .map_err(|e| PlatformError(format!("editing {id} in {room} failed: {e}")))?;
            Ok(())
        })
    }

    fn react<'a>(&'a self, at: At<'a>, msg: &'a MsgId, emoji: &'a str) -> Done<'a> {
        let (persona, room) = (at.persona, at.room);
        Box::pin(async move {
            let r = self.shared.room(persona, room).await?;
            // An `m.reaction` annotating the message with the emoji as its key.
            let content = ReactionEventContent::new(Annotation::new(event_id(msg)?, emoji.to_owned()));
            r.send(content)
                .await
                .map_err(|e| PlatformError(format!("reacting to {msg} in {room} failed: {e}")))?;
            Ok(())
        })
    }

    fn delete<'a>(&'a self, at: At<'a>, id: &'a MsgId) -> Done<'a> {
        let (persona, room) = (at.persona, at.room);
        Box::pin(async move {
            let r = self.shared.room(persona, room).await?;
            r.redact(&event_id(id)?, None, None)
                .await
                .map_err(|e| PlatformError(format!("redacting {id} in {room} failed: {e}")))?;
            Ok(())
        })
    }
}
