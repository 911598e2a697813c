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

use crate::events::TraceEvent;

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

/// Folds the [`Op::CallEnded`]s of one turn in `ops` into its first, with
/// the store's own rule (the first value of each column wins, and a later
/// outcome replaces `answered`): a quick turn's answer and its reply are
/// one write instead of two.
pub(crate) fn coalesce(ops: &mut Vec<Op>) {
    let mut first: HashMap<TurnId, usize> = HashMap::new();
    let mut i = 0;
    while i < ops.len() {
        let Op::CallEnded(end) = &ops[i] else {
            i += 1;
            continue;
        };
        let Some(&at) = first.get(&end.turn) else {
            first.insert(end.turn, i);
            i += 1;
            continue;
        };
        let Op::CallEnded(later) = ops.remove(i) else {
            unreachable!("matched above")
        };
        if let Op::CallEnded(kept) = &mut ops[at] {
            kept.at = kept.at.or(later.at);
            if kept.outcome.is_none() || kept.outcome == Some("answered") {
                kept.outcome = later.outcome.or(kept.outcome);
            }
            kept.error = kept.error.take().or(later.error);
            kept.prompt_tokens = kept.prompt_tokens.or(later.prompt_tokens);
            kept.completion_tokens = kept.completion_tokens.or(later.completion_tokens);
            kept.cached_tokens = kept.cached_tokens.or(later.cached_tokens);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(turn: u64, outcome: &'static str, at: Option<u64>, tokens: Option<u64>) -> CallEnd {
        CallEnd {
            turn: TurnId(turn),
            at: at.map(Timestamp::from_millis),
            outcome: Some(outcome),
            error: None,
            prompt_tokens: tokens,
            completion_tokens: tokens,
            cached_tokens: None,
        }
    }

    fn ended(ops: &[Op], i: usize) -> &CallEnd {
        match &ops[i] {
            Op::CallEnded(e) => e,
            other => panic!("not an end: {other:?}"),
        }
    }

    #[test]
    fn one_turns_ends_fold_into_one_write_by_the_stores_rule() {
        let mut ops: Vec<Op> = vec![
            Op::CallEnded(end(1, "answered", Some(5), Some(10))),
            Op::TurnEnded(TurnId(9)),
            Op::CallEnded(end(2, "error", Some(6), None)),
            Op::CallEnded(end(1, "reply", None, None)),
            Op::CallEnded(end(1, "silent", Some(99), Some(1))),
            Op::CallEnded(end(2, "error", None, None)),
        ];
        coalesce(&mut ops);
        assert_eq!(ops.len(), 3, "{ops:?}");
        assert_eq!(ended(&ops, 0), &end(1, "reply", Some(5), Some(10)));
        assert!(matches!(ops[1], Op::TurnEnded(TurnId(9))));
        assert_eq!(ended(&ops, 2), &end(2, "error", Some(6), None));
    }
}
