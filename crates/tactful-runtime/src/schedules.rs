//! What the live runtime does for scheduled turns besides running them:
//! the last run of each schedule kept in the store (so a restart makes up
//! for at most one missed run, see `Engine::start_schedules`), and a log
//! line per run.

use std::collections::BTreeMap;
use std::sync::Arc;

use tactful_core::{ScheduleEvent, ScheduleNote, Timestamp};
use tactful_store::Op;

/// The store key a schedule's last run is kept under.
const PREFIX: &str = "schedule:";

/// Each schedule's last run, from the store's saved state. A value that
/// does not read as a time is skipped (that schedule then makes nothing
/// up), and said at WARN.
pub(crate) fn last_runs(state: &BTreeMap<String, String>) -> Vec<(Arc<str>, Timestamp)> {
    state
        .iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix(PREFIX)?;
            match v.parse::<u64>() {
                Ok(ms) => Some((Arc::from(name), Timestamp::from_millis(ms))),
                Err(_) => {
                    tracing::warn!(schedule = name, value = %v, "the stored last run of a schedule is unreadable; no missed run is made up");
                    None
                }
            }
        })
        .collect()
}

/// The record of a run, fired or skipped: its due time becomes the
/// schedule's last run.
pub(crate) fn last_run_op(note: &ScheduleNote) -> Op {
    Op::PlatformState {
        key: format!("{PREFIX}{}", note.name),
        value: note.due.as_millis().to_string(),
    }
}

/// One line per run: fired runs at INFO, skipped ones at WARN (a
/// schedule that cannot keep up wants a look).
pub(crate) fn log(note: &ScheduleNote) {
    match &note.event {
        ScheduleEvent::Fired { turn, caught_up } => tracing::info!(
            schedule = %note.name, persona = %note.persona, room = %note.room, %turn,
            due = %note.due_local, caught_up, "scheduled turn started"
        ),
        ScheduleEvent::Skipped { reason } => tracing::warn!(
            schedule = %note.name, persona = %note.persona, room = %note.room,
            due = %note.due_local, "scheduled run skipped: {reason}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_runs_are_read_back_and_junk_is_skipped() {
        let state = BTreeMap::from([
            ("schedule:daily".to_owned(), "1774771200000".to_owned()),
            ("schedule:broken".to_owned(), "yesterday".to_owned()),
            ("telegram:offset:docs".to_owned(), "42".to_owned()),
        ]);
        let runs = last_runs(&state);
        assert_eq!(
            runs,
            [(Arc::from("daily"), Timestamp::from_millis(1_774_771_200_000))]
        );
    }
}
