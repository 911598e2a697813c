//! How much work is pending, counted without visiting every room: the
//! driver asks after every event ([`Engine::pending_work`]), and a
//! deployment may hold a hundred thousand ambient buffers waiting to
//! flush. Every change to a buffer names it (`ambient_touched`), and the
//! count looks at those alone.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Engine {
    /// Work started or scheduled that may still end in a message: turns in
    /// flight, ambient buffers armed to flush or waiting to, and outputs
    /// not polled yet (a notice decided without a call is one). Zero means
    /// nothing will be said until the next message arrives.
    pub fn pending_work(&mut self) -> usize {
        self.fold_touched();
        let waiting = self.ambient_pending.len();
        // Every test run checks the shortcut against the long way.
        #[cfg(debug_assertions)]
        {
            let scanned = self
                .rooms
                .values()
                .flat_map(|r| r.members.iter())
                .filter(|m| m.ambient.as_deref().is_some_and(ambient_pending))
                .count();
            debug_assert_eq!(waiting, scanned, "ambient work found by the buffers touched");
        }
        self.turns.len() + waiting + self.out.len()
    }

    /// Notes that `p`'s ambient buffer in `room` may change (see
    /// `ambient_touched`).
    pub(super) fn touch_ambient(&mut self, room: &RoomId, p: PersonaIdx) {
        self.ambient_touched.push((room.clone(), p));
    }

    /// Folds the touched buffers in when many wait, at the start of an
    /// event (never mid-change: a buffer touched before it changes would
    /// be read too early).
    pub(super) fn bound_touched(&mut self) {
        if self.ambient_touched.len() >= TOUCHED_FOLD {
            self.fold_touched();
        }
    }

    /// Brings `ambient_pending` up to date with the buffers touched since
    /// the last time: only those are looked at.
    fn fold_touched(&mut self) {
        for key in std::mem::take(&mut self.ambient_touched) {
            let pending = self
                .rooms
                .get(&key.0)
                .and_then(|r| r.members.get(key.1.0 as usize))
                .and_then(|m| m.ambient.as_deref())
                .is_some_and(ambient_pending);
            if pending {
                self.ambient_pending.insert(key);
            } else {
                self.ambient_pending.remove(&key);
            }
        }
    }
}

/// How many touched buffers may wait before the next message or timeout
/// folds them into the count without being asked (see
/// `Engine::ambient_touched`).
const TOUCHED_FOLD: usize = 4096;

/// Whether an ambient buffer has work of its own pending: a flush due,
/// queued, or waiting on a cooldown or the concurrency bound (one waiting
/// for its batch in flight counts with that batch's turn).
pub(super) fn ambient_pending(a: &AmbientState) -> bool {
    a.due.is_some() || a.queued || a.waiting.is_some_and(|(_, why)| why != WaitReason::InFlight)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Mode, PolicyPatch};

    /// An engine nobody asks for its pending work (a replay, a library
    /// user) keeps its list of touched buffers bounded, and the count is
    /// right when it is finally asked (debug builds compare it with a scan
    /// of every room).
    #[test]
    fn touched_buffers_stay_bounded_when_nobody_asks() {
        let mut policies = crate::PolicyTable::default();
        let mut listen = PolicyPatch {
            mode: Some(Mode::Ambient),
            allow_silence: Some(true),
            ..PolicyPatch::default()
        };
        listen.ambient.flush_after = Some(Duration::from_secs(600));
        listen.ambient.flush_messages = Some(50);
        policies.default.personas.insert("guide".into(), listen);
        let mut e = Engine::new(EngineConfig {
            personas: vec![PersonaSpec::new("guide", "a")],
            policies,
            ..EngineConfig::default()
        })
        .expect("valid config");
        for i in 0..3 * TOUCHED_FOLD {
            let room = format!("room-{}", i % 500);
            e.handle_message(
                Timestamp(i as u64),
                Message::new(
                    format!("m{i}").as_str(),
                    room.as_str(),
                    "alice",
                    "chatter",
                    Timestamp(i as u64),
                ),
            );
            while e.poll_output().is_some() {}
            assert!(
                e.ambient_touched.len() <= TOUCHED_FOLD + 8,
                "{}",
                e.ambient_touched.len()
            );
        }
        assert_eq!(e.pending_work(), 500, "every room's buffer waits for its flush");
    }
}
