//! The agent-call log: what the driver writes about each call it starts,
//! so the console can show a room's calls and costs after a restart.
//!
//! A call is logged when it starts (not when the engine decided it: a
//! queued turn waits for a slot, and that wait is not the agent's
//! latency), completed when the agent answers (latency, tokens, error) and
//! then with what the engine made of the answer.

use std::collections::HashMap;
use std::sync::Arc;

use tactful_agents::Usage;
use tactful_core::{AgentResult, Output, PersonaId, RoomId, Timestamp, TurnId, TurnKind, TurnRequest};
use tactful_store::{CallEnd, CallStart, Op};

use crate::runtime::TraceEvent;

/// A call in progress, as the trace reports it when it ends.
struct Running {
    kind: TurnKind,
    room: RoomId,
    persona: PersonaId,
    agent: Arc<str>,
    started: Timestamp,
}

/// The calls running now (bounded by the turns running).
#[derive(Default)]
pub(crate) struct CallLog {
    running: HashMap<TurnId, Running>,
}

impl CallLog {
    /// `req`'s call starts now.
    pub fn started(&mut self, req: &TurnRequest, now: Timestamp) -> Op {
        self.running.insert(
            req.turn,
            Running {
                kind: req.kind,
                room: req.room.clone(),
                persona: req.persona.clone(),
                agent: req.agent.clone(),
                started: now,
            },
        );
        Op::CallStarted(CallStart {
            turn: req.turn,
            kind: req.kind,
            room: req.room.clone(),
            persona: req.persona.clone(),
            agent: req.agent.to_string(),
            msg: req.triggers.last().map(|e| e.id.to_string()),
            at: now,
        })
    }

    /// What kind of call `turn` is, while it runs.
    pub fn kind(&self, turn: TurnId) -> Option<TurnKind> {
        self.running.get(&turn).map(|r| r.kind)
    }

    /// The agent of `turn` answered (or failed) at `now`: what to save, and
    /// what to trace.
    pub fn answered(
        &mut self,
        turn: TurnId,
        now: Timestamp,
        result: &AgentResult,
        usage: Option<Usage>,
    ) -> (Op, Option<TraceEvent>) {
        let error = match result {
            AgentResult::Failed(reason) => Some(reason.clone()),
            _ => None,
        };
        let op = Op::CallEnded(CallEnd {
            turn,
            at: Some(now),
            outcome: Some(if error.is_some() { "error" } else { "answered" }),
            error: error.clone(),
            prompt_tokens: usage.map(|u| u.prompt_tokens),
            completion_tokens: usage.map(|u| u.completion_tokens),
            cached_tokens: usage.map(|u| u.cached_tokens),
        });
        let trace = self.running.remove(&turn).map(|r| TraceEvent::Answered {
            turn,
            kind: r.kind,
            room: r.room,
            persona: r.persona,
            agent: r.agent,
            latency: now.saturating_since(r.started),
            usage,
            error,
        });
        (op, trace)
    }

    /// What an engine output says about how a call ended, if anything.
    pub fn ended(&mut self, output: &Output) -> Option<Op> {
        let (turn, outcome, at, error) = match output {
            Output::Send(out) => (out.turn, "reply", None, None),
            Output::Silent(end, _) => (end.turn, "silent", None, None),
            Output::Withheld(end, _) => (end.turn, "withheld", None, None),
            Output::Error(end, why) => (end.turn, "error", Some(end.at), Some(why.clone())),
            Output::Cancelled(end, _) => {
                self.running.remove(&end.turn);
                (end.turn, "cancelled", Some(end.at), None)
            }
            _ => return None,
        };
        Some(Op::CallEnded(CallEnd {
            turn,
            at,
            outcome: Some(outcome),
            error,
            prompt_tokens: None,
            completion_tokens: None,
            cached_tokens: None,
        }))
    }
}
