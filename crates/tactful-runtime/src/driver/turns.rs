//! Running agent turns: at most `max_turns` at once, the rest waiting in
//! arrival order; each in a task of its own, its text streamed to the
//! room's delivery worker as it comes.

use std::sync::Arc;

use tactful_agents::Deltas;
use tactful_core::{AgentResult, TurnId, TurnKind, TurnRequest};
use tactful_store::Op;
use tokio::sync::{mpsc, oneshot};

use super::{Driver, Job};
use crate::clock::wall_clock;
use crate::delivery::{DeliveryEvent, Showing, Streamed};
use crate::events::Event;

/// Streams an agent's text to the room's delivery worker as it arrives:
/// appended to the turn's shared buffer, the worker told at most once
/// until it reads.
struct StreamTo {
    turn: TurnId,
    streamed: Arc<Streamed>,
    room: Option<mpsc::UnboundedSender<Job>>,
}

impl Deltas for StreamTo {
    fn delta(&mut self, piece: &str) {
        if self.streamed.push(piece)
            && let Some(room) = &self.room
        {
            let _ = room.send((DeliveryEvent::Partial { turn: self.turn }, None));
        }
    }
}

impl Driver {
    /// Starts queued turns while slots are free, oldest first.
    pub(super) fn fill(&mut self) {
        while self.running.len() < self.p.max_turns {
            let Some(req) = self.queued.pop_front() else {
                break;
            };
            let op = self.calls.started(&req, wall_clock());
            if self.saving() {
                self.batch.ops.push(op);
            }
            self.start_turn(req);
        }
    }

    fn start_turn(&mut self, req: TurnRequest) {
        let turn = req.turn;
        let Some(agent) = self.p.agents.get(req.agent.as_ref()).cloned() else {
            let result = AgentResult::Failed(format!("no agent named {:?}", req.agent));
            let _ = self.p.tx.send(Event::AgentDone(turn, result, None));
            self.running.insert(turn, tokio::spawn(async {}));
            return;
        };
        let streamed = Arc::new(Streamed::default());
        // Only replies stream into a placeholder: ambient batches are
        // usually silent and gate answers are never shown.
        let room = (req.kind == TurnKind::Reply).then(|| {
            // The placeholder goes on record with the decision that started
            // its turn, and is posted once that batch is committed: one
            // commit before a person sees it is working, not two in a row.
            let saved = (self.saving() && self.platform_of(&req.room).capabilities().can_edit).then(|| {
                self.batch.ops.push(Op::Placeholder {
                    turn,
                    room: req.room.clone(),
                    persona: req.persona.clone(),
                    thread: req.thread.clone(),
                    id: tactful_core::MsgId::new(""),
                });
                let (ack, saved) = oneshot::channel();
                self.room_acks.push((req.room.clone(), ack));
                saved
            });
            let start = DeliveryEvent::Start {
                turn,
                persona: req.persona.clone(),
                // What the reply will most likely answer: a person's message
                // that started the turn (the agent decides in the end).
                answering: req
                    .triggers
                    .last()
                    .filter(|e| e.persona.is_none() && !req.is_dm)
                    .map(|e| e.id.clone()),
                thread: req.thread.clone(),
                showing: Showing {
                    silence_token: req.silence_token.clone(),
                    strip_reasoning: req.strip_reasoning,
                    hold: req.hooked,
                },
                streamed: streamed.clone(),
                recorded: saved.is_some(),
            };
            self.deliver(&req.room, start, saved)
        });
        let done = self.p.tx.clone();
        let task = tokio::spawn(async move {
            let mut sink = StreamTo { turn, streamed, room };
            let (result, usage) = match agent.run(&req, &mut sink).await {
                Ok(reply) => {
                    let usage = reply.usage;
                    (reply.into_result(), usage)
                }
                Err(e) => {
                    // The trace and the log get the reason, secrets masked:
                    // an operator must be able to see why a turn failed.
                    let reason = tactful_core::secrets::redact(&e.to_string()).into_owned();
                    tracing::warn!(
                        persona = %req.persona, room = %req.room, turn = %turn, agent = %req.agent,
                        "agent turn failed: {reason}"
                    );
                    (AgentResult::Failed(reason), None)
                }
            };
            let _ = done.send(Event::AgentDone(turn, result, usage));
        });
        self.running.insert(turn, task);
    }
}
