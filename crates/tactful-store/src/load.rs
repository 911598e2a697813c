//! Reading back what a restart needs, and rebuilding the engine from it.
//!
//! A row that does not parse (a hand-edited file, a bug in an older
//! version) must not keep the service from starting: it is skipped with a
//! warning naming it, and the rest is restored.

use tactful_core::{Counters, Engine, Message, MsgId, PersonaId, RoomId, RoomSnapshot, Timestamp, TurnId};

use crate::StoreError;
use crate::backend::Backend;
use crate::ops::{PendingTurn, kind_from_name};
use crate::records::{Placeholder, Unsent};

/// Everything needed to rebuild the engine, per room.
#[derive(Clone, Debug)]
pub struct RestoredRoom {
    /// The room.
    pub room: RoomId,
    /// Its most recent messages, oldest first.
    pub messages: Vec<Message>,
    /// Replies' platform ids: (engine id, platform id).
    pub aliases: Vec<(MsgId, MsgId)>,
    /// Own messages older than `messages`: (persona, id), platform ids
    /// included.
    pub older_own: Vec<(PersonaId, MsgId)>,
    /// The engine's snapshot, if one was saved (and readable).
    pub snapshot: Option<RoomSnapshot>,
}

/// A reply turn that was running, with the messages it answers as they
/// were stored (a trigger may have left the engine's history window while
/// the service was down or busy).
#[derive(Clone, Debug)]
pub struct Pending {
    /// The turn.
    pub turn: PendingTurn,
    /// Its triggers, oldest first; those the store no longer holds are
    /// missing.
    pub triggers: Vec<Message>,
}

/// What [`Store::load`] found.
#[derive(Clone, Debug, Default)]
pub struct Restored {
    /// The engine's id counters.
    pub counters: Option<Counters>,
    /// Every room with saved state.
    pub rooms: Vec<RestoredRoom>,
    /// Reply turns that were running, oldest first.
    pub pending: Vec<Pending>,
    /// Replies decided but not confirmed sent, oldest first.
    pub unsent: Vec<Unsent>,
    /// Streaming placeholders left on screen.
    pub placeholders: Vec<Placeholder>,
    /// Rows that could not be read and were skipped, described.
    pub skipped: Vec<String>,
}

impl Restored {
    /// Rebuilds `engine` (fresh from its config) from what was saved, in the
    /// order [`tactful_core::engine`]'s restore API asks for. Pending turns
    /// and unsent replies are left for the driver: resuming a turn calls an
    /// agent and sending a reply is the platform's business. Returns how many
    /// messages were restored.
    pub fn rebuild(&self, engine: &mut Engine, now: Timestamp) -> usize {
        if let Some(c) = &self.counters {
            engine.restore_counters(c);
        }
        let mut restored = 0;
        for room in &self.rooms {
            for (persona, id) in &room.older_own {
                engine.restore_own(&room.room, persona, id.clone());
            }
            for m in &room.messages {
                engine.restore_message(m.clone());
                restored += 1;
            }
            for (local, platform) in &room.aliases {
                engine.handle_sent(&room.room, local, platform.clone());
            }
            if let Some(s) = &room.snapshot {
                engine.restore_room(now, &room.room, s.clone());
            }
        }
        // Restoring is not news: nothing needs saving again.
        engine.take_changed_rooms();
        restored
    }
}

/// How much of each room [`Store::load`] reads back.
#[derive(Clone, Copy, Debug)]
pub struct LoadLimits {
    /// Messages per room (the engine's `history`).
    pub history: usize,
    /// Own message ids per (room, persona) (the engine's `own_ids`).
    pub own_ids: usize,
}

impl Restored {
    /// Reads back what the engine needs after a restart from `store`.
    /// Unreadable rows are skipped, each with a warning naming it (see
    /// [`Restored::skipped`]).
    pub(crate) fn read(
        store: &mut dyn Backend,
        limits: LoadLimits,
        wanted: &dyn Fn(&RoomId) -> bool,
    ) -> Result<Restored, StoreError> {
        let mut skipped = Vec::new();
        let counters = store
            .counters_json()?
            .and_then(|j| match serde_json::from_str(&j) {
                Ok(c) => Some(c),
                Err(e) => {
                    skipped.push(format!("the id counters ({e})"));
                    None
                }
            });
        let mut rooms = Vec::new();
        for name in store.room_names()? {
            let room = RoomId::new(name);
            if wanted(&room) {
                rooms.push(read_room(store, room, limits, &mut skipped)?);
            }
        }
        let pending = pending_turns(store, wanted, &mut skipped)?;
        let mut unsent = store.unsent()?;
        unsent.retain(|u| wanted(&u.out.room));
        let mut placeholders = store.placeholders()?;
        placeholders.retain(|p| wanted(&p.room));
        let restored = Restored {
            counters,
            rooms,
            pending,
            unsent,
            placeholders,
            skipped,
        };
        for what in &restored.skipped {
            tracing::warn!("store: skipped {what}: it could not be read");
        }
        Ok(restored)
    }
}

fn read_room(
    store: &mut dyn Backend,
    room: RoomId,
    limits: LoadLimits,
    skipped: &mut Vec<String>,
) -> Result<RestoredRoom, StoreError> {
    let mut rows = store.recent(&room, limits.history, skipped)?;
    rows.reverse();
    let oldest = rows.first().map_or(i64::MAX, |r| r.seq);
    let aliases = rows
        .iter()
        .filter_map(|r| {
            r.platform_id
                .as_ref()
                .map(|p| (r.msg.id.clone(), MsgId::new(p.as_str())))
        })
        .collect();
    let mut older_own = Vec::new();
    for (persona, id, platform) in store.older_own(&room, oldest, limits.own_ids)? {
        let persona = PersonaId::new(persona);
        older_own.push((persona.clone(), MsgId::new(id)));
        if let Some(p) = platform {
            older_own.push((persona, MsgId::new(p)));
        }
    }
    let snapshot = store
        .snapshot_json(&room)?
        .and_then(|j| match serde_json::from_str(&j) {
            Ok(s) => Some(s),
            Err(e) => {
                skipped.push(format!("the snapshot of room {room} ({e})"));
                None
            }
        });
    Ok(RestoredRoom {
        room,
        messages: rows.into_iter().map(|r| r.msg).collect(),
        aliases,
        older_own,
        snapshot,
    })
}

fn pending_turns(
    store: &mut dyn Backend,
    wanted: &dyn Fn(&RoomId) -> bool,
    skipped: &mut Vec<String>,
) -> Result<Vec<Pending>, StoreError> {
    let mut out = Vec::new();
    for row in store.pending_rows()? {
        if !wanted(&RoomId::new(row.room.as_str())) {
            continue;
        }
        let msgs: Vec<String> = match serde_json::from_str(&row.msgs) {
            Ok(m) => m,
            Err(e) => {
                skipped.push(format!("pending turn {} in room {} ({e})", row.turn, row.room));
                continue;
            }
        };
        let room = RoomId::new(row.room);
        let msgs: Vec<MsgId> = msgs.into_iter().map(MsgId::new).collect();
        let mut triggers = Vec::new();
        for id in &msgs {
            triggers.extend(store.message(&room, id, skipped)?);
        }
        out.push(Pending {
            turn: PendingTurn {
                turn: TurnId(row.turn.max(0) as u64),
                kind: kind_from_name(&row.kind),
                room,
                persona: PersonaId::new(row.persona),
                msgs,
                addressed: row.addressed,
            },
            triggers,
        });
    }
    Ok(out)
}
