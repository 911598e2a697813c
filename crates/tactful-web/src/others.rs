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
    let early: Vec<Note> = match shared.early.lock() {
        Ok(mut early) if change.kind == ShownKind::New => {
            let (mine, rest): (Vec<Note>, Vec<Note>) = early
                .drain(..)
                .partition(|n| n.room.as_str() == room && n.msg.as_str() == id);
            early.extend(rest);
            mine
        }
        _ => Vec::new(),
    };
    let _ = shared.with_rooms(|rooms| {
        let r = rooms.entry(room.to_owned()).or_default();
        match (change.kind, row) {
            (ShownKind::Delete, _) => {
                if r.knows(id) {
                    r.queue_delete(id.to_owned());
                }
            }
            // Deleted since: its deletion is announced too.
            (_, None) => {}
            (_, Some(m)) if !r.knows(id) => {
                let key = m.key.clone();
                let msg = r.shown_as_web(m);
                r.queue_new(msg, key, true);
                for note in early {
                    r.note_why(id, note.why);
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
