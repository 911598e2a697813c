//! The reply-decision gate's verdict: a reply turn, a skip, or (for an
//! ambient batch) the flush going ahead.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Engine {
    /// The gate answered (or failed, or timed out: `verdict` is `None`).
    pub(super) fn gate_decided(
        &mut self,
        now: Timestamp,
        gate_id: TurnId,
        gate: Turn,
        verdict: Option<GateVerdict>,
    ) {
        let p = gate.persona;
        let room_id = gate.room.clone();
        let spec_id = self.personas[p.0 as usize].id.clone();
        let reason = match verdict {
            Some(GateVerdict::Reply) => Reason::GateReply,
            Some(GateVerdict::Skip) => Reason::GateSkip,
            None => Reason::GateFailedOpen,
        };
        // Other turns may have spent the budget while the gate ran: the
        // reply it lets through must still fit (`budget.rs`).
        let bytes: usize = gate.triggers.iter().map(|e| e.text.len()).sum();
        let affordable = reason == Reason::GateSkip || self.affords(now, &room_id, p, bytes);
        match gate.gate_for {
            Some(GateFor::Ambient(trigger)) => {
                if reason == Reason::GateSkip {
                    let msgs = gate.msgs();
                    self.out.push_back(Output::Ambient(AmbientNote {
                        at: now,
                        persona: spec_id,
                        room: room_id,
                        event: AmbientEvent::Skipped { msgs, reason },
                    }));
                    self.finish(now, gate_id, gate, false);
                    return;
                }
                if !affordable {
                    let msgs: Vec<MsgId> = gate.msgs();
                    let newest = msgs.last().cloned();
                    self.out.push_back(Output::Ambient(AmbientNote {
                        at: now,
                        persona: spec_id,
                        room: room_id.clone(),
                        event: AmbientEvent::Skipped {
                            msgs,
                            reason: Reason::BudgetExhausted,
                        },
                    }));
                    if let Some(note) = newest.and_then(|m| self.budget_note(now, &room_id, p, m, bytes)) {
                        self.out.push_back(Output::OverBudget(note));
                    }
                    self.finish(now, gate_id, gate, false);
                    return;
                }
                // The gate's own call is counted; the flush goes ahead with
                // the gate's slots and batch.
                if self.budgets {
                    self.settle_budget(now, &gate);
                }
                let unprompted = gate.unprompted;
                let turn = self.new_turn_id();
                self.replace_in_flight(&room_id, p, gate_id, turn);
                self.start_turn(
                    now,
                    turn,
                    &room_id,
                    p,
                    TurnKind::Ambient,
                    gate.triggers,
                    gate.reserved,
                    true,
                    gate.answers_bot,
                    Some(GateFor::Ambient(trigger)),
                );
                if unprompted {
                    self.hold_unprompted(turn);
                }
            }
            _ => {
                let msg = gate.triggers[0].id.clone();
                let floor_taken = reason != Reason::GateSkip
                    && self.rooms[&room_id].floor_taken(&gate.triggers, gate.policy.floor_max_speakers);
                let (outcome, reason) = if floor_taken {
                    (Outcome::Skip, Reason::FloorTaken)
                } else if reason == Reason::GateSkip {
                    (Outcome::Skip, reason)
                } else if !affordable {
                    (Outcome::Skip, Reason::BudgetExhausted)
                } else {
                    (Outcome::Reply, reason)
                };
                let turn = (outcome == Outcome::Reply).then(|| self.new_turn_id());
                self.out.push_back(Output::Decision(Decision {
                    at: now,
                    room: room_id.clone(),
                    msg: msg.clone(),
                    persona: spec_id,
                    outcome,
                    reason,
                    turn,
                }));
                if reason == Reason::BudgetExhausted
                    && let Some(note) = self.budget_note(now, &room_id, p, msg.clone(), bytes)
                {
                    self.out.push_back(Output::OverBudget(note));
                }
                match turn {
                    Some(t) => {
                        // The gate's own call is counted (`finish` does it
                        // on the other paths).
                        if self.budgets {
                            self.settle_budget(now, &gate);
                        }
                        let (passed, unprompted) = (gate.floor_pass, gate.unprompted);
                        self.start_turn(
                            now,
                            t,
                            &room_id,
                            p,
                            TurnKind::Reply,
                            gate.triggers,
                            gate.reserved,
                            true,
                            gate.answers_bot,
                            None,
                        );
                        if passed {
                            self.floor_moved(&room_id, &msg, t);
                        }
                        if unprompted {
                            self.hold_unprompted(t);
                        }
                    }
                    None => self.finish(now, gate_id, gate, false),
                }
            }
        }
    }
}
