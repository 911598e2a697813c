//! What a restart does before the engine task takes its first message:
//! rebuild the engine from the store, ask again the reply turns that were
//! running, and line up the deliveries that had not finished.

use std::collections::HashMap;

use tactful_core::{Engine, NotResumed, Outgoing, Timestamp, TurnId, TurnKind};
use tactful_store::{PendingTurn, Placeholder, Restored};

use crate::delivery::Resume;

/// What the restart left for the engine task to do.
#[derive(Default)]
pub(crate) struct Restart {
    /// Whether state came from a store at all.
    pub from_store: bool,
    /// Transcript messages the engine heard again.
    pub messages: usize,
    /// Turns asked again (their calls wait in the engine's outputs).
    pub resumed: usize,
    /// Old turn ids that were pending: resumed under new ids or given up.
    pub ended: Vec<TurnId>,
    /// Replies to send again, and where their delivery stopped.
    pub unsent: Vec<(Outgoing, Resume)>,
    /// Placeholders whose turn has no reply to become: removed.
    pub stale: Vec<Placeholder>,
    /// Turns that could not be asked again, and why.
    pub not_resumed: Vec<(PendingTurn, NotResumed)>,
}

impl Restart {
    /// Rebuilds `engine` from `restored` and resumes its pending turns.
    pub fn rebuild(engine: &mut Engine, restored: Restored, now: Timestamp) -> Restart {
        let mut r = Restart {
            from_store: true,
            messages: restored.rebuild(engine, now),
            ..Restart::default()
        };
        for p in restored.pending {
            let t = p.turn;
            r.ended.push(t.turn);
            // Ambient batches are back in their buffers; a gate that never
            // answered fails open, as it would on a timeout.
            if !matches!(t.kind, TurnKind::Reply | TurnKind::Gate) {
                continue;
            }
            match engine.resume_turn(now, &t.room, &t.persona, &t.msgs, &p.triggers, t.addressed) {
                Ok(_) => r.resumed += 1,
                Err(reason) => {
                    tracing::warn!(
                        room = %t.room, persona = %t.persona, msgs = ?t.msgs,
                        "a turn that was running before the restart cannot be asked again: {reason}"
                    );
                    r.not_resumed.push((t, reason));
                }
            }
        }
        let mut placeholders: HashMap<TurnId, Placeholder> =
            restored.placeholders.into_iter().map(|p| (p.turn, p)).collect();
        for u in restored.unsent {
            let placeholder = placeholders.remove(&u.out.turn);
            r.unsent.push((
                u.out,
                Resume {
                    parts_done: u.parts_done,
                    first_id: u.first_id,
                    placeholder,
                },
            ));
        }
        r.stale = placeholders.into_values().collect();
        r.stale.sort_by_key(|p| p.turn);
        if r.messages > 0 || r.resumed > 0 || !r.unsent.is_empty() || !r.stale.is_empty() {
            tracing::info!(
                messages = r.messages,
                resumed = r.resumed,
                unsent = r.unsent.len(),
                stale_placeholders = r.stale.len(),
                "restored from the store"
            );
        }
        r
    }
}
