//! What one process's web room shows, told to the other processes sharing
//! a PostgreSQL store, so a person connected to any of them sees the room
//! as it is.
//!
//! Each change to the `shown` table (a message, an edit, a deletion, a
//! reaction) and each note on a shown message (why a persona answered it
//! or not) is announced on [`WEB_CHANNEL`] in the transaction that makes
//! it: `NOTIFY` is delivered at commit, in commit order, and never for a
//! change that was rolled back. The announcement names the change, not its
//! content (a message can outgrow a notification's 8,000 bytes): the
//! others read the row ([`crate::Reader::shown_message`]). SQLite, one
//! process, announces nothing.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The `NOTIFY` channel of the web room's changes.
pub const WEB_CHANNEL: &str = "tactful_web";

/// The most a notification's payload may hold (PostgreSQL's limit is
/// 8,000 bytes): a note larger than this is not announced.
const MAX_PAYLOAD: usize = 7_900;

/// What changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShownKind {
    /// A message was shown.
    New,
    /// A message's text changed.
    Edit,
    /// A message was deleted.
    Delete,
    /// Someone reacted to a message.
    React,
    /// A note on a message: the web room's own, carried as it is.
    Note,
}

/// One announced change of the web room.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShownChange {
    /// What changed.
    pub kind: ShownKind,
    /// The room.
    pub room: String,
    /// The message.
    pub id: String,
    /// The process that made the change ([`origin`]): it has shown it
    /// already, and skips its own announcements.
    pub from: String,
    /// A note's content (JSON, as the web room serialised it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl ShownChange {
    /// This process's announcement of `kind` about `id` in `room`, or
    /// `None` when it would not fit in a notification.
    pub(crate) fn payload(kind: ShownKind, room: &str, id: &str, note: Option<&str>) -> Option<String> {
        let change = ShownChange {
            kind,
            room: room.to_owned(),
            id: id.to_owned(),
            from: origin().to_owned(),
            note: note.map(str::to_owned),
        };
        let payload = serde_json::to_string(&change).ok()?;
        if payload.len() > MAX_PAYLOAD {
            tracing::debug!(
                room,
                id,
                "a web room change too large to announce to other processes"
            );
            return None;
        }
        Some(payload)
    }

    /// An announcement as received; `None` for one this version cannot
    /// read (a newer process's, say).
    pub fn parse(payload: &str) -> Option<ShownChange> {
        serde_json::from_str(payload).ok()
    }

    /// Whether this process made it.
    pub fn is_own(&self) -> bool {
        self.from == origin()
    }
}

/// The `NOTIFY` channel of the settings every process follows
/// ([`crate::Op::SharedState`]: a room policy set in the console). The
/// payload is the setting's key; a process that hears it reads the
/// settings back from the store, where the change is by then (a
/// notification is delivered at commit), so announcements that cross
/// each other still leave every process with what was committed last.
pub const STATE_CHANNEL: &str = "tactful_state";

/// The `NOTIFY` channel of the consoles' live transcripts
/// ([`LiveNote`]): sent outside any batch, since nothing of it is kept.
pub const LIVE_CHANNEL: &str = "tactful_live";

/// What the consoles of processes sharing a store tell each other, so a
/// console shows the live transcript of rooms another process owns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LiveNote {
    /// A console here watches `room` (every room when `None`): the others
    /// send their lines about it for a while (the watcher says so again
    /// every few seconds while it watches).
    Watch {
        /// The process watching ([`origin`]).
        from: String,
        /// The room, or every room.
        room: Option<String>,
    },
    /// One line of a room's live transcript, from the process owning it.
    Line {
        /// The process it is from.
        from: String,
        /// The room.
        room: String,
        /// The line, as the console shows it (JSON).
        json: String,
    },
}

impl LiveNote {
    /// This process's watch of `room`, as a payload.
    pub fn watch(room: Option<&str>) -> String {
        let note = LiveNote::Watch {
            from: origin().to_owned(),
            room: room.map(str::to_owned),
        };
        serde_json::to_string(&note).unwrap_or_default()
    }

    /// This process's line about `room`, as a payload; `None` when it
    /// would not fit in a notification.
    pub fn line(room: &str, json: &str) -> Option<String> {
        let note = LiveNote::Line {
            from: origin().to_owned(),
            room: room.to_owned(),
            json: json.to_owned(),
        };
        let payload = serde_json::to_string(&note).ok()?;
        (payload.len() <= MAX_PAYLOAD).then_some(payload)
    }

    /// A note as received; `None` for one this version cannot read, and
    /// for this process's own.
    pub fn parse_other(payload: &str) -> Option<LiveNote> {
        let note: LiveNote = serde_json::from_str(payload).ok()?;
        let from = match &note {
            LiveNote::Watch { from, .. } | LiveNote::Line { from, .. } => from,
        };
        (from != origin()).then_some(note)
    }
}

/// This process's id in announcements: random, made once per process.
pub fn origin() -> &'static str {
    static ORIGIN: OnceLock<String> = OnceLock::new();
    ORIGIN.get_or_init(crate::random_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announcement_reads_back_and_knows_its_process() {
        let payload = ShownChange::payload(ShownKind::Note, "lobby", "w7", Some("{\"a\":1}")).expect("fits");
        let change = ShownChange::parse(&payload).expect("reads");
        assert_eq!(change.kind, ShownKind::Note);
        assert_eq!((change.room.as_str(), change.id.as_str()), ("lobby", "w7"));
        assert!(change.is_own(), "made here");
        let other = ShownChange {
            from: "someone else".into(),
            ..change
        };
        assert!(!other.is_own());
        assert_eq!(
            ShownChange::parse("{\"kind\":\"teleport\"}"),
            None,
            "unknown kinds are skipped"
        );
    }

    #[test]
    fn live_notes_read_back_except_this_process_s_own_and_never_too_large() {
        let own = LiveNote::watch(Some("lobby"));
        assert_eq!(LiveNote::parse_other(&own), None, "made here");
        let other = own.replace(origin(), "another");
        assert_eq!(
            LiveNote::parse_other(&other),
            Some(LiveNote::Watch {
                from: "another".into(),
                room: Some("lobby".into())
            })
        );
        assert!(LiveNote::line("lobby", "{}").is_some());
        assert_eq!(LiveNote::line("lobby", &"é".repeat(4_000)), None);
        assert_eq!(LiveNote::parse_other("{\"kind\":\"teleport\"}"), None);
    }

    #[test]
    fn a_note_too_large_for_a_notification_is_not_announced() {
        let huge = "x".repeat(MAX_PAYLOAD);
        assert_eq!(
            ShownChange::payload(ShownKind::Note, "lobby", "w7", Some(&huge)),
            None
        );
    }
}
