//! Ambient mode in the engine: a persona's buffer of unaddressed
//! messages in a room, and the batch that reads it (`buffer`, `try_flush`,
//! `start_flush`), waiting on cooldowns, the process-wide flush bound and
//! batches in flight; cleared when someone addresses the persona
//! (`preempt_ambient`).

#[allow(clippy::wildcard_imports)]
use super::*;

impl Engine {
    /// Puts a message in `p`'s ambient buffer and fires any trigger it
    /// completes.
    pub(super) fn buffer(&mut self, now: Timestamp, room_id: &RoomId, p: PersonaIdx, entry: Arc<Entry>) {
        self.touch_ambient(room_id, p);
        let room = self.rooms.get_mut(room_id).expect("room exists");
        let ambient = room.policies[p.0 as usize].ambient;
        let st = room.members[p.0 as usize].ambient();
        st.buffer.push(entry);
        let len = st.buffer.len() as u32;
        if len >= ambient.hard_cap {
            self.start_flush(now, room_id, p, FlushTrigger::HardCap);
        } else if len >= ambient.flush_messages {
            self.try_flush(now, room_id, p, FlushTrigger::Count);
        } else if st.due.is_none() {
            let factor = 1.0 + ambient.jitter * self.rng.next_signed_unit();
            let delay = Duration::from_secs_f64(ambient.flush_after.as_secs_f64() * factor);
            let key = self.arm(now + delay, Timer::Ambient(room_id.clone(), p));
            let st = self.rooms.get_mut(room_id).expect("room exists").members[p.0 as usize].ambient();
            st.due = Some(key);
            self.out.push_back(Output::Ambient(AmbientNote {
                at: now,
                persona: self.personas[p.0 as usize].id.clone(),
                room: room_id.clone(),
                event: AmbientEvent::Armed { due: key.0 },
            }));
        }
    }

    /// Starts a flush if nothing holds it back, else records why it waits.
    pub(super) fn try_flush(
        &mut self,
        now: Timestamp,
        room_id: &RoomId,
        p: PersonaIdx,
        trigger: FlushTrigger,
    ) {
        self.touch_ambient(room_id, p);
        let max_flushes = self.max_flushes;
        let running = self.flushes_running;
        let room = self.rooms.get_mut(room_id).expect("room exists");
        let cooldown = room.policies[p.0 as usize].ambient.cooldown;
        let member = &mut room.members[p.0 as usize];
        let cooldown_end = member.last_spoke.map(|t| t + cooldown).filter(|&end| now < end);
        let st = member.ambient();
        if st.buffer.is_empty() {
            st.waiting = None;
            return;
        }
        let wait = if !st.in_flight.is_empty() {
            Some((WaitReason::InFlight, None))
        } else if let Some(end) = cooldown_end {
            Some((WaitReason::Cooldown, Some(end)))
        } else if running >= max_flushes {
            Some((WaitReason::Concurrency, None))
        } else {
            None
        };
        let Some((why, until)) = wait else {
            self.start_flush(now, room_id, p, trigger);
            return;
        };
        let announced = st.waiting.is_some_and(|(_, w)| w == why);
        st.waiting = Some((trigger, why));
        if why == WaitReason::Concurrency && !st.queued {
            st.queued = true;
            self.flush_queue.push_back((room_id.clone(), p));
        }
        // The cooldown can move later if the persona speaks again while the
        // flush waits: there must always be a timer at its current end.
        let wake = until.filter(|&end| st.wake != Some(end));
        if let Some(end) = wake {
            st.wake = Some(end);
            self.arm(end, Timer::Ambient(room_id.clone(), p));
        }
        // A wait already announced (more messages arriving during the same
        // cooldown, say) is not announced again.
        if !announced {
            self.out.push_back(Output::Ambient(AmbientNote {
                at: now,
                persona: self.personas[p.0 as usize].id.clone(),
                room: room_id.clone(),
                event: AmbientEvent::Waiting { trigger, why, until },
            }));
        }
    }

    /// Takes the buffer and starts its flush (or its gate), with no further
    /// waiting: the hard cap comes here directly.
    pub(super) fn start_flush(
        &mut self,
        now: Timestamp,
        room_id: &RoomId,
        p: PersonaIdx,
        trigger: FlushTrigger,
    ) {
        self.touch_ambient(room_id, p);
        self.dirty.insert(room_id.clone());
        let persona = self.personas[p.0 as usize].id.clone();
        let room = self.rooms.get_mut(room_id).expect("room exists");
        let policy = room.policies[p.0 as usize].clone();
        let max_speakers = policy.floor_max_speakers;
        let batch: Vec<Arc<Entry>> = {
            let st = room.members[p.0 as usize].ambient();
            if let Some(key) = st.due.take() {
                self.timers.remove(&key);
            }
            st.waiting = None;
            std::mem::take(&mut st.buffer)
        };
        // Messages another persona already answered are context now, not
        // news.
        let (fresh, taken): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .partition(|e| room.floor.get(&e.id).copied().unwrap_or(0) < max_speakers);
        let skip = |reason: Reason, msgs: Vec<MsgId>| AmbientNote {
            at: now,
            persona: persona.clone(),
            room: room_id.clone(),
            event: AmbientEvent::Skipped { msgs, reason },
        };
        if fresh.is_empty() {
            let msgs = taken.iter().map(|e| e.id.clone()).collect();
            self.out
                .push_back(Output::Ambient(skip(Reason::FloorTaken, msgs)));
            return;
        }
        let bytes = fresh.iter().map(|e| e.text.len()).sum();
        if !self.affords(now, room_id, p, bytes) {
            let msgs: Vec<MsgId> = fresh.iter().map(|e| e.id.clone()).collect();
            let newest = msgs.last().cloned();
            self.out
                .push_back(Output::Ambient(skip(Reason::BudgetExhausted, msgs)));
            if let Some(note) = newest.and_then(|m| self.budget_note(now, room_id, p, m, bytes)) {
                self.out.push_back(Output::OverBudget(note));
            }
            return;
        }
        let room = self.rooms.get_mut(room_id).expect("room exists");
        let mut reserved = false;
        if let Some(limit) = policy.rate_limit {
            if !room.members[p.0 as usize].rate.try_reserve(now, &limit) {
                let msgs = fresh.iter().map(|e| e.id.clone()).collect();
                self.out
                    .push_back(Output::Ambient(skip(Reason::RateLimited, msgs)));
                return;
            }
            reserved = true;
        }
        // A batch nobody asked for spends the room's unprompted budget.
        let Ok(unprompted) = room.reserve_unprompted(now, p, reserved) else {
            let msgs = fresh.iter().map(|e| e.id.clone()).collect();
            self.out
                .push_back(Output::Ambient(skip(Reason::UnpromptedBudget, msgs)));
            return;
        };
        let answers_bot = fresh.iter().any(|e| e.is_bot);
        let turn = self.new_turn_id();
        self.flushes_running += 1;
        let room = self.rooms.get_mut(room_id).expect("room exists");
        room.members[p.0 as usize].ambient().in_flight.push(turn);
        let kind = if policy.reply_gate.as_ref().is_some_and(|g| g.in_ambient) {
            TurnKind::Gate
        } else {
            TurnKind::Ambient
        };
        self.start_turn(
            now,
            turn,
            room_id,
            p,
            kind,
            fresh,
            reserved,
            true,
            answers_bot,
            Some(GateFor::Ambient(trigger)),
        );
        if unprompted {
            self.hold_unprompted(turn);
        }
    }

    /// After a flush of (room, p) ended: a trigger that waited for it, or a
    /// buffer that filled meanwhile, may flush now.
    pub(super) fn resume_ambient(&mut self, now: Timestamp, room_id: &RoomId, p: PersonaIdx) {
        self.touch_ambient(room_id, p);
        let Some(room) = self.rooms.get_mut(room_id) else {
            return;
        };
        let flush_messages = room.policies[p.0 as usize].ambient.flush_messages as usize;
        let Some(st) = room.members[p.0 as usize].ambient.as_mut() else {
            return;
        };
        if !st.in_flight.is_empty() || st.queued {
            return;
        }
        let trigger = match st.waiting {
            Some((t, _)) => Some(t),
            None if st.buffer.len() >= flush_messages => Some(FlushTrigger::Count),
            None => None,
        };
        if let Some(t) = trigger {
            self.try_flush(now, room_id, p, t);
        }
    }

    /// Starts waiting flushes while the concurrency bound allows, first
    /// come first served.
    pub(super) fn pump_flush_queue(&mut self, now: Timestamp) {
        while self.flushes_running < self.max_flushes {
            let Some((room_id, p)) = self.flush_queue.pop_front() else {
                break;
            };
            let Some(st) = self.ambient_mut(&room_id, p) else {
                continue;
            };
            st.queued = false;
            if let Some((trigger, _)) = st.waiting.take() {
                self.try_flush(now, &room_id, p, trigger);
            }
        }
    }

    /// A message addressed `p` in an ambient room: its reply answers now,
    /// so the buffer is cleared and a flush in flight is cancelled (it must
    /// not post after the addressed reply).
    pub(super) fn preempt_ambient(&mut self, now: Timestamp, room_id: &RoomId, p: PersonaIdx) {
        self.touch_ambient(room_id, p);
        self.dirty.insert(room_id.clone());
        let persona = self.personas[p.0 as usize].id.clone();
        // Borrow the room alone (not all of `self`): the timers change too.
        let Some(st) = self
            .rooms
            .get_mut(room_id)
            .and_then(|r| r.members[p.0 as usize].ambient.as_deref_mut())
        else {
            return;
        };
        let cleared: Vec<MsgId> = st.buffer.drain(..).map(|e| e.id.clone()).collect();
        if let Some(key) = st.due.take() {
            self.timers.remove(&key);
        }
        st.waiting = None;
        let in_flight = std::mem::take(&mut st.in_flight);
        if !cleared.is_empty() {
            self.out.push_back(Output::Ambient(AmbientNote {
                at: now,
                persona,
                room: room_id.clone(),
                event: AmbientEvent::Cleared { msgs: cleared },
            }));
        }
        for t in in_flight {
            if let Some(turn) = self.turns.remove(&t) {
                let end = self.turn_end(now, t, &turn);
                self.out
                    .push_back(Output::Cancelled(end, CancelReason::Addressed));
                self.finish(now, t, turn, false);
            }
        }
    }
}
