//! Changing the personas while the engine runs (a config reload).
//!
//! A persona's index is a slot that never moves while the engine lives:
//! room state, turns and ambient buffers refer to it. So a reload
//! *changes* a persona whose id stays in place (its name, prompt, agent and
//! aliases; turns in flight keep what they started with), *adds* a new id
//! in a new slot at the end, and *retires* an id the file no longer has:
//! its slot stays (its past messages are still its own) but it decides
//! nothing, cannot be addressed, its turns end `cancelled`
//! (`persona_removed`) and its ambient batches are dropped. An id that
//! comes back takes its old slot again. Slots are bounded by
//! [`MAX_PERSONAS`] over the engine's life; a reload past that is refused
//! (a restart starts from the file's personas alone).

use std::sync::Arc;

use super::{CancelReason, Engine, EngineError, Output, PersonaRoom};
use crate::ids::PersonaId;
use crate::persona::{MAX_PERSONAS, PersonaIdx, PersonaSpec};
use crate::time::Timestamp;

/// What [`Engine::set_personas`] changed, by persona id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PersonasChanged {
    /// New ids (or ids that had been removed and came back).
    pub added: Vec<PersonaId>,
    /// Ids kept whose settings changed.
    pub changed: Vec<PersonaId>,
    /// Ids no longer there.
    pub removed: Vec<PersonaId>,
}

impl PersonasChanged {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }
}

/// Refuses two personas answering to one handle: a mention of it would
/// address both.
pub(super) fn check_handles<'a>(
    personas: impl Iterator<Item = &'a PersonaSpec> + Clone,
) -> Result<(), EngineError> {
    for (i, a) in personas.clone().enumerate() {
        for b in personas.clone().skip(i + 1) {
            let handles = std::iter::once(b.id.as_str()).chain(b.aliases.iter().map(|x| x.as_str()));
            for h in handles {
                if a.answers_to(h) {
                    return Err(EngineError::DuplicateHandle(
                        a.id.clone(),
                        b.id.clone(),
                        h.to_owned(),
                    ));
                }
            }
        }
    }
    Ok(())
}

impl Engine {
    /// Replaces the personas (see the module docs), with the `[agents]`
    /// keys whose answers keep their reasoning. Nothing changes when the
    /// new list is refused.
    pub fn set_personas(
        &mut self,
        now: Timestamp,
        personas: Vec<PersonaSpec>,
        reasoning_kept: Vec<Arc<str>>,
    ) -> Result<PersonasChanged, EngineError> {
        if personas.is_empty() {
            return Err(EngineError::NoPersonas);
        }
        check_handles(personas.iter())?;
        let slots = self.personas.len()
            + personas
                .iter()
                .filter(|p| !self.personas.iter().any(|s| s.id == p.id))
                .count();
        if slots > MAX_PERSONAS {
            return Err(EngineError::TooManyPersonas(slots));
        }
        let mut changed = PersonasChanged::default();
        let mut keep = crate::persona::PersonaSet::default();
        for spec in personas {
            let p = match self.personas.iter().position(|s| s.id == spec.id) {
                Some(i) => {
                    let p = PersonaIdx(i as u8);
                    if self.retired.contains(p) {
                        changed.added.push(spec.id.clone());
                    } else if self.personas[i] != spec {
                        changed.changed.push(spec.id.clone());
                    }
                    self.personas[i] = spec;
                    p
                }
                None => {
                    changed.added.push(spec.id.clone());
                    self.personas.push(spec);
                    self.sent_count.push(0);
                    self.spend.push(crate::budget::SpendLedger::default());
                    for room in self.rooms.values_mut() {
                        room.members.push(PersonaRoom::default());
                    }
                    PersonaIdx((self.personas.len() - 1) as u8)
                }
            };
            keep.insert(p);
        }
        for i in 0..self.personas.len() {
            let p = PersonaIdx(i as u8);
            if !keep.contains(p) && !self.retired.contains(p) {
                changed.removed.push(self.personas[i].id.clone());
                self.retire(now, p);
            }
        }
        self.retired = crate::persona::PersonaSet::default();
        for i in 0..self.personas.len() {
            let p = PersonaIdx(i as u8);
            if !keep.contains(p) {
                self.retired.insert(p);
            }
        }
        self.reasoning_kept = reasoning_kept;
        // Every room resolves its policies for the new slots too.
        self.set_policies(self.policies.clone());
        Ok(changed)
    }

    /// Whether persona `p` was removed by a reload.
    pub fn is_retired(&self, p: PersonaIdx) -> bool {
        self.retired.contains(p)
    }

    /// Ends everything persona `p` has going: its ambient batches and
    /// their timers, its place in the flush queue, its turns (cancelled).
    fn retire(&mut self, now: Timestamp, p: PersonaIdx) {
        self.flush_queue.retain(|(_, q)| *q != p);
        // Its buffers go below, in every room.
        self.ambient_pending.retain(|(_, q)| *q != p);
        self.ambient_touched.retain(|(_, q)| *q != p);
        for (id, room) in self.rooms.iter_mut() {
            let member = &mut room.members[p.0 as usize];
            if let Some(st) = member.ambient.take()
                && let Some(key) = st.due
            {
                self.timers.remove(&key);
            }
            self.dirty.insert(id.clone());
        }
        let mut ending: Vec<_> = self
            .turns
            .iter()
            .filter(|(_, t)| t.persona == p)
            .map(|(id, _)| *id)
            .collect();
        ending.sort();
        for id in ending {
            if let Some(turn) = self.turns.remove(&id) {
                if let Some(key) = turn.gate_timer {
                    self.timers.remove(&key);
                }
                let end = self.turn_end(now, id, &turn);
                self.out
                    .push_back(Output::Cancelled(end, CancelReason::PersonaRemoved));
                self.finish(now, id, turn, false);
            }
        }
    }
}
