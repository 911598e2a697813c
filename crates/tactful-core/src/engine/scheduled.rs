//! Scheduled turns in the engine: each `[[schedule]]` keeps one timer for
//! its next run; a run that comes due starts a turn of kind
//! [`TurnKind::Schedule`] (see [`crate::schedule`] for what such a turn
//! may and may not do).
//!
//! Every run the engine handles, fired or not, is an
//! [`Output::Schedule`] note; the driver stores its time as the schedule's
//! last run, which is what [`Engine::start_schedules`] reads back after a
//! restart to make up for (at most) one missed run.

use std::sync::Arc;

use super::{Engine, Output, Room, Timer};
use crate::decision::{Decision, Outcome, Reason};
use crate::ids::{MsgId, PersonaId, RoomId, TurnId, UserId};
use crate::time::Timestamp;
use crate::transcript::Entry;
use crate::turn::TurnKind;

/// A schedule's state in the engine.
#[derive(Debug, Default)]
pub(super) struct Runs {
    /// The turn of its run in flight, if one is.
    pub(super) running: Option<TurnId>,
}

/// What happened to one run of a schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleEvent {
    /// It started a turn; `caught_up` when it is a run missed while tactful
    /// was down, made up at start.
    Fired {
        /// The turn.
        turn: TurnId,
        /// Whether it is a made-up run.
        caught_up: bool,
    },
    /// It did not run: `still_running` (the previous run has not ended;
    /// two runs of one schedule never overlap) or `rate_limited` (the
    /// persona's reply budget in the room is spent).
    Skipped {
        /// Why, as the trace names it.
        reason: &'static str,
    },
}

/// One run of a schedule, as the trace shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleNote {
    /// When the engine handled it.
    pub at: Timestamp,
    /// The schedule.
    pub name: Arc<str>,
    /// When the run was due (the cron time).
    pub due: Timestamp,
    /// The due time in the schedule's zone, for people to read.
    pub due_local: String,
    /// Who speaks.
    pub persona: PersonaId,
    /// Where.
    pub room: RoomId,
    /// What happened.
    pub event: ScheduleEvent,
}

impl Engine {
    /// Starts the schedules at `now`: arms each one's next run and, for a
    /// schedule whose `last_runs` entry (its last run before a restart)
    /// shows a run missed within its `catch_up`, runs that one now, once.
    /// Drivers call this once, before the first event; without the call
    /// no schedule runs.
    pub fn start_schedules(&mut self, now: Timestamp, last_runs: &[(Arc<str>, Timestamp)]) {
        self.start_schedules_for(now, last_runs, &|_| true);
    }

    /// Starts the schedules of the rooms `wanted` says are this engine's,
    /// as [`Engine::start_schedules`] does for all: when several processes
    /// share a database, a schedule runs only on the process that owns its
    /// room, starting when the room is adopted (making up a run the last
    /// owner missed) and stopping when it is handed over
    /// ([`Engine::hand_over_room`]). Starting one already armed re-arms it.
    pub fn start_schedules_for(
        &mut self,
        now: Timestamp,
        last_runs: &[(Arc<str>, Timestamp)],
        wanted: &dyn Fn(&RoomId) -> bool,
    ) {
        for i in 0..self.schedules.len() {
            let s = &self.schedules[i];
            if !wanted(&s.room) {
                continue;
            }
            self.timers
                .retain(|_, t| !matches!(t, Timer::Schedule(j) if *j == i));
            let s = &self.schedules[i];
            let missed = last_runs
                .iter()
                .find(|(name, _)| *name == s.name)
                .and_then(|(_, last)| s.missed(*last, now));
            if let Some(due) = missed {
                self.run_schedule(now, i, due, true);
            }
            self.arm_schedule(now, i);
        }
    }

    /// Arms schedule `i`'s timer for its next run after `after`.
    fn arm_schedule(&mut self, after: Timestamp, i: usize) {
        if let Some(next) = self.schedules[i].next_after(after) {
            self.arm(next, Timer::Schedule(i));
        }
    }

    /// Schedule `i`'s timer fired at `due`.
    pub(super) fn schedule_due(&mut self, now: Timestamp, i: usize, due: Timestamp) {
        self.run_schedule(now, i, due, false);
        // After a stall (a suspended machine), runs missed meanwhile are let
        // go: never a burst.
        self.arm_schedule(now.max(due), i);
    }

    /// One run of schedule `i`, due at `due`.
    fn run_schedule(&mut self, now: Timestamp, i: usize, due: Timestamp, caught_up: bool) {
        let s = &self.schedules[i];
        let (name, room_id, thread, prompt) =
            (s.name.clone(), s.room.clone(), s.thread.clone(), s.prompt.clone());
        let due_local = s.local(due);
        let Some(p) = self.persona_index(s.persona.as_str()) else {
            return;
        };
        let persona = self.personas[p.0 as usize].id.clone();
        let note = |event| {
            Output::Schedule(ScheduleNote {
                at: now,
                name: name.clone(),
                due,
                due_local: due_local.clone(),
                persona: persona.clone(),
                room: room_id.clone(),
                event,
            })
        };
        if self.runs[i].running.is_some_and(|t| self.turns.contains_key(&t)) {
            self.out.push_back(note(ScheduleEvent::Skipped {
                reason: "still_running",
            }));
            return;
        }
        let room = Room::entry(
            &mut self.rooms,
            &self.personas,
            &self.policies,
            &self.shared_policies,
            &self.limits,
            &room_id,
        );
        let policy = room.policies[p.0 as usize].clone();
        if !self.affords(now, &room_id, p, prompt.len()) {
            self.out.push_back(Output::Decision(Decision {
                at: now,
                room: room_id.clone(),
                msg: run_id(&name, due),
                persona: persona.clone(),
                outcome: Outcome::Skip,
                reason: Reason::BudgetExhausted,
                turn: None,
            }));
            self.out.push_back(note(ScheduleEvent::Skipped {
                reason: "budget_exhausted",
            }));
            if let Some(n) = self.budget_note(now, &room_id, p, run_id(&name, due), prompt.len()) {
                self.out.push_back(Output::OverBudget(n));
            }
            return;
        }
        let room = self.rooms.get_mut(&room_id).expect("room exists");
        let member = &mut room.members[p.0 as usize];
        let reserved = match &policy.rate_limit {
            Some(limit) if !member.rate.try_reserve(now, limit) => {
                let msg = run_id(&name, due);
                self.out.push_back(Output::Decision(Decision {
                    at: now,
                    room: room_id.clone(),
                    msg,
                    persona: persona.clone(),
                    outcome: Outcome::Skip,
                    reason: Reason::RateLimited,
                    turn: None,
                }));
                self.out.push_back(note(ScheduleEvent::Skipped {
                    reason: "rate_limited",
                }));
                return;
            }
            Some(_) => true,
            None => false,
        };
        let turn = self.new_turn_id();
        let instruction = Arc::new(Entry {
            id: run_id(&name, due),
            author: UserId::new(format!("schedule:{name}")),
            author_name: Arc::from(format!("schedule {name}")),
            is_bot: false,
            persona: None,
            text: prompt,
            reply_to: None,
            thread,
            time: due,
        });
        self.out.push_back(Output::Decision(Decision {
            at: now,
            room: room_id.clone(),
            msg: instruction.id.clone(),
            persona: persona.clone(),
            outcome: Outcome::Reply,
            reason: Reason::Schedule,
            turn: Some(turn),
        }));
        self.out.push_back(note(ScheduleEvent::Fired { turn, caught_up }));
        self.runs[i].running = Some(turn);
        self.start_turn(
            now,
            turn,
            &room_id,
            p,
            TurnKind::Schedule,
            vec![instruction],
            reserved,
            false,
            false,
            None,
        );
        if let Some(t) = self.turns.get_mut(&turn) {
            t.schedule = Some(i);
        }
    }

    /// A schedule's turn ended.
    pub(super) fn schedule_ended(&mut self, i: usize, turn: TurnId) {
        if let Some(r) = self.runs.get_mut(i)
            && r.running == Some(turn)
        {
            r.running = None;
        }
    }
}

/// The id a run's instruction (and its decision) goes by: the schedule and
/// the time it was due, unique per run.
fn run_id(name: &str, due: Timestamp) -> MsgId {
    MsgId::new(format!("schedule:{name}@{}", due.to_rfc3339()))
}
