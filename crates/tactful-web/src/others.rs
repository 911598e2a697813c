//! The web room behind several processes: what the others showed, shown
//! here too.
//!
//! Processes sharing a PostgreSQL store (`[cluster]`) each serve the web
//! room to the people connected to them, but a room's replies are decided
//! and posted by whichever process owns it. Every change to the room is
//! stored before it is shown, and the store announces it at commit
//! ([`tactful_store::fan_out`]); here each process follows those
//! announcements, reads what changed ([`Reader::shown_message`]) and shows
//! it to its own people, in the order the changes were committed. Its own
//! announcements it skips: it showed those already. Notes (why a persona
//! answered or not) are made by the room's owner and announced the same
//! way.
//!
//! The owner usually decides a message another process took in before
//! its web room has read that process's announcement of it (the inbox's
//! notification and the web room's are sent at the same commit, and the
//! web room reads a row first): its notes are kept until the message is
//! read, then follow it as `why` events, like everyone else's.
//!
//! Who is present is each process's own: people connected elsewhere are
//! not listed in the member list.

use std::sync::Arc;
use std::time::Duration;

use tactful_store::{Location, Notification, Reader, ShownChange, ShownKind, StoreError, WEB_CHANNEL};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::why::{Note, Why};
use crate::{Shared, WebPlatform};

/// Notes kept for messages not shown here yet (see `Shared::early`).
pub(crate) const EARLY_NOTES: usize = 256;

impl Shared {
    /// Keeps a note on a message not here yet, for when it arrives from
    /// another process; the oldest go past [`EARLY_NOTES`]. Called with
    /// the rooms' lock held (`Shared::show_note`), as its taking is
    /// (`Shared::take_early`): a note and its message arriving at once
    /// cannot pass each other by.
    pub(crate) fn keep_early(&self, note: Note) {
        if let Ok(mut early) = self.early.lock() {
            if early.len() >= EARLY_NOTES {
                early.pop_front();
            }
            early.push_back(note);
        }
    }

    /// The notes kept for the message `id` of `room`, in the order they
    /// came; called with the rooms' lock held, as the message is queued.
    fn take_early(&self, room: &str, id: &str) -> Vec<Why> {
        let Ok(mut early) = self.early.lock() else {
            return Vec::new();
        };
        let (mine, rest): (Vec<Note>, Vec<Note>) = early
            .drain(..)
            .partition(|n| n.room.as_str() == room && n.msg.as_str() == id);
        early.extend(rest);
        mine.into_iter().map(|n| n.why).collect()
    }
}

/// Listening to the other processes' web rooms, before their changes are
/// shown here ([`Following::start`]).
pub struct Following {
    shared: Arc<Shared>,
    at: Location,
    changes: UnboundedReceiver<Notification>,
}

impl std::fmt::Debug for Following {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Following").finish_non_exhaustive()
    }
}

impl WebPlatform {
    /// Starts listening to the other processes sharing the store at `at`.
    /// Call before the history is read back ([`WebPlatform::restore`]):
    /// nothing committed after the read is missed, and what both bring is
    /// shown once. Notes made here are announced to them from now on.
    pub fn follow_others(&self, at: &Location) -> Result<Following, StoreError> {
        let changes = tactful_store::listen(at, WEB_CHANNEL)?;
        self.shared
            .shared_store
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(Following {
            shared: self.shared.clone(),
            at: at.clone(),
            changes,
        })
    }
}

impl Following {
    /// Shows the others' changes here from now on, until the task is
    /// dropped. When the database connection ends it listens again (what
    /// was announced meanwhile shows after a restart).
    pub fn start(self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let Following {
                shared,
                at,
                mut changes,
            } = self;
            let mut reader: Option<Reader> = None;
            loop {
                while let Some(n) = changes.recv().await {
                    let Some(change) = ShownChange::parse(&n.payload) else {
                        tracing::debug!(
                            "an announcement of another process's web room this version cannot read"
                        );
                        continue;
                    };
                    if change.is_own() {
                        continue;
                    }
                    let (back, result) = read(reader.take(), &at, change.clone()).await;
                    reader = back;
                    match result {
                        Ok(row) => apply(&shared, change, row),
                        Err(e) => tracing::warn!(
                            room = %change.room,
                            "a change another process made to the web room could not be read: {e}"
                        ),
                    }
                }
                tracing::warn!("listening to the other processes' web rooms stopped; listening again");
                loop {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    match tactful_store::listen(&at, WEB_CHANNEL) {
                        Ok(rx) => {
                            changes = rx;
                            break;
                        }
                        Err(e) => tracing::warn!("cannot listen to the other processes' web rooms: {e}"),
                    }
                }
            }
        })
    }
}

/// The row a change is about, read on a blocking thread (the reader's
/// connection is kept between reads and handed back).
async fn read(
    reader: Option<Reader>,
    at: &Location,
    change: ShownChange,
) -> (
    Option<Reader>,
    Result<Option<tactful_store::ShownMessage>, StoreError>,
) {
    if matches!(change.kind, ShownKind::Delete | ShownKind::Note) {
        return (reader, Ok(None));
    }
    let at = at.clone();
    let joined = tokio::task::spawn_blocking(move || {
        let reader = match reader {
            Some(r) => r,
            None => match Reader::open(&at) {
                Ok(r) => r,
                Err(e) => return (None, Err(e)),
            },
        };
        let row = reader.shown_message(&change.room, &change.id);
        (Some(reader), row)
    })
    .await;
    joined.unwrap_or_else(|e| (None, Err(StoreError::Io(std::io::Error::other(e.to_string())))))
}

/// Shows here what another process changed; `row` is the message as the
/// store has it now (`None` once deleted).
fn apply(shared: &Shared, change: ShownChange, row: Option<tactful_store::ShownMessage>) {
    let limit = shared.config.history;
    let room = change.room.as_str();
    let id = change.id.as_str();
    if change.kind == ShownKind::Note {
        if let Some(why) = change.note.as_deref().and_then(Why::from_json) {
            shared.show_note(Note {
                room: tactful_core::RoomId::new(room),
                msg: tactful_core::MsgId::new(id),
                why,
            });
        }
        return;
    }
    let _ = shared.with_rooms(|rooms| {
        let r = rooms.entry(room.to_owned()).or_default();
        match (change.kind, row) {
            (ShownKind::Delete, _) => {
                if r.knows(id) {
                    r.queue_delete(id.to_owned());
                    // Only the room's owner deletes (a placeholder, a
                    // stale one when it took the room over): an edit of it
                    // here comes from a process that lost the room.
                    r.deleted_elsewhere(id);
                }
            }
            // Deleted since: its deletion is announced too.
            (_, None) => {}
            (_, Some(m)) if !r.knows(id) => {
                let key = m.key.clone();
                let msg = r.shown_as_web(m);
                r.queue_new(msg, key, true);
                // Notes made here before it came (this process owns the
                // room and decided it first) follow it (`Room::flush`),
                // taken under the lock they were kept under.
                for why in shared.take_early(room, id) {
                    r.note_why(id, why);
                }
            }
            (_, Some(m)) => {
                if r.text_of(id) != Some(m.text.as_str()) {
                    r.queue_edit(id.to_owned(), m.text.clone());
                }
                for (emoji, by) in &m.reactions {
                    for name in by {
                        if !r.has_reaction(id, emoji, name) {
                            r.queue_react(id.to_owned(), emoji.clone(), name.clone());
                        }
                    }
                }
            }
        }
        r.flush(room, limit, &shared.events);
    });
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use tactful_core::{MsgId, PersonaId, RoomId, Timestamp, UserId};
    use tactful_runtime::{At, Platform};

    use super::*;
    use crate::WebConfig;

    /// A web room sharing its store with other processes.
    fn web() -> WebPlatform {
        let listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let web = WebPlatform::new(WebConfig::new(listen), &[]).expect("a web room");
        web.shared.shared_store.store(true, Ordering::Relaxed);
        web
    }

    /// Another process's announcement of `kind` about `id` in the lobby.
    fn from_elsewhere(kind: ShownKind, id: &str) -> ShownChange {
        ShownChange {
            kind,
            room: "lobby".into(),
            id: id.into(),
            from: "another process".into(),
            note: None,
        }
    }

    fn row(id: &str, sender: &str, bot: bool) -> tactful_store::ShownMessage {
        tactful_store::ShownMessage {
            id: MsgId::new(id),
            room: RoomId::new("lobby"),
            key: None,
            sender: UserId::new(sender),
            sender_name: sender.to_owned(),
            is_bot: bot,
            text: format!("{id}'s text"),
            reply_to: None,
            time: Timestamp(0),
            reactions: Vec::new(),
        }
    }

    fn note(msg: &str, persona: &str, state: &'static str) -> Note {
        Note {
            room: RoomId::new("lobby"),
            msg: MsgId::new(msg),
            why: Why {
                persona: persona.to_owned(),
                state,
                text: format!("{persona}: {state}"),
            },
        }
    }

    /// The room's owner decides a message another process took in before
    /// it reads that process's announcement of it: the notes wait, then
    /// reach people as `why` events after the message (they reached them
    /// inside the message event only, which a client following `why`
    /// events never saw).
    #[test]
    fn notes_made_before_another_process_s_message_arrives_follow_it() {
        let web = web();
        let shared = &web.shared;
        let mut events = shared.events.subscribe();
        shared.show_note(note("w7", "docs", "answering"));
        shared.show_note(note("w7", "chef", "quiet"));
        assert!(events.try_recv().is_err(), "nothing to show them on yet");
        apply(
            shared,
            from_elsewhere(ShownKind::New, "w7"),
            Some(row("w7", "web:Alice", false)),
        );
        let got: Vec<serde_json::Value> = std::iter::from_fn(|| events.try_recv().ok())
            .map(|(_, v)| v)
            .collect();
        let seen: Vec<(&str, &str)> = got
            .iter()
            .map(|v| {
                (
                    v["type"].as_str().unwrap_or(""),
                    v["why"]["persona"].as_str().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [("message", ""), ("why", "docs"), ("why", "chef")],
            "{got:?}"
        );
        assert!(
            shared.early.lock().is_ok_and(|e| e.is_empty()),
            "nothing left waiting"
        );
        // A note made now goes out at once.
        shared.show_note(note("w7", "docs", "answered"));
        let now = events.try_recv().map(|(_, v)| v).expect("sent at once");
        assert_eq!(
            (now["type"].as_str(), now["msg"].as_str()),
            (Some("why"), Some("w7"))
        );
    }

    /// A streaming edit from a process that lost the room (stopped past
    /// its lease) of the placeholder the new owner deleted as stale: the
    /// refusal says the room moved, in the words delivery's log knows, so
    /// a correct fencing does not read as a platform failing.
    #[tokio::test]
    async fn an_edit_of_a_message_the_new_owner_deleted_says_the_room_moved() {
        let web = web();
        apply(
            &web.shared,
            from_elsewhere(ShownKind::New, "w8"),
            Some(row("w8", "docs", true)),
        );
        apply(&web.shared, from_elsewhere(ShownKind::Delete, "w8"), None);
        let (docs, lobby) = (PersonaId::new("docs"), RoomId::new("lobby"));
        let err = web
            .edit(At::new(&docs, &lobby, None), &MsgId::new("w8"), "more")
            .await
            .expect_err("deleted");
        assert!(err.0.contains(tactful_runtime::ROOM_MOVED), "{}", err.0);
        let err = web
            .edit(At::new(&docs, &lobby, None), &MsgId::new("w9"), "more")
            .await
            .expect_err("never here");
        assert!(!err.0.contains(tactful_runtime::ROOM_MOVED), "{}", err.0);
    }
}
