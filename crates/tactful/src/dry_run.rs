//! Trying a room policy before applying it: the room's last stored
//! messages replayed through the engine under the policy in force and
//! under the proposed one, and the decisions that would differ.
//!
//! Both runs use the same engine as the live service and `tactful replay`,
//! on the messages' own times. No agent is called: every turn is taken to
//! end in silence (so no reply of the simulation changes what follows),
//! and hooks and schedules are left out. What it measures is what the
//! policy decides: who would have been answered, and how many model calls
//! (answers, ambient batches, gate questions) that would have cost.

use std::collections::BTreeMap;

use serde::Serialize;
use tactful_core::{AgentResult, Engine, EngineConfig, Message, Output, PolicyTable};

/// One decision, as the dry run shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Decided {
    /// `reply`, `record` or `skip`.
    pub outcome: &'static str,
    /// Why.
    pub reason: &'static str,
}

/// A (message, persona) pair whose decision would change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Changed {
    /// The message.
    pub msg: String,
    /// Who wrote it.
    pub sender: String,
    /// What it said.
    pub text: String,
    /// The persona.
    pub persona: String,
    /// Under the policy in force.
    pub now: Option<Decided>,
    /// Under the proposed one.
    pub proposed: Option<Decided>,
}

/// What a dry run found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DryRun {
    /// Messages replayed.
    pub messages: usize,
    /// Model calls under the policy in force.
    pub calls_now: usize,
    /// Model calls under the proposed one.
    pub calls_proposed: usize,
    /// The decisions that differ, in message order.
    pub changed: Vec<Changed>,
}

/// Replays `messages` under `now` and `proposed` and compares.
pub fn dry_run(
    config: &EngineConfig,
    now: PolicyTable,
    proposed: PolicyTable,
    messages: &[Message],
) -> DryRun {
    let (calls_now, before) = run(config, now, messages);
    let (calls_proposed, after) = run(config, proposed, messages);
    let mut changed = Vec::new();
    for m in messages {
        for p in &config.personas {
            let key = (m.id.to_string(), p.id.to_string());
            let (a, b) = (before.get(&key), after.get(&key));
            if a != b {
                changed.push(Changed {
                    msg: key.0,
                    sender: m.sender.name.to_string(),
                    text: m.text.to_string(),
                    persona: key.1,
                    now: a.cloned(),
                    proposed: b.cloned(),
                });
            }
        }
    }
    DryRun {
        messages: messages.len(),
        calls_now,
        calls_proposed,
        changed,
    }
}

type Decisions = BTreeMap<(String, String), Decided>;

fn run(config: &EngineConfig, policies: PolicyTable, messages: &[Message]) -> (usize, Decisions) {
    let config = EngineConfig {
        policies,
        hooks: Vec::new(),
        schedules: Vec::new(),
        ..config.clone()
    };
    let Ok(mut engine) = Engine::new(config) else {
        return (0, Decisions::new());
    };
    let mut calls = 0;
    let mut decisions = Decisions::new();
    let mut drain = |engine: &mut Engine, at| {
        while let Some(out) = engine.poll_output() {
            match out {
                Output::Decision(d) => {
                    decisions.insert(
                        (d.msg.to_string(), d.persona.to_string()),
                        Decided {
                            outcome: d.outcome.as_str(),
                            reason: d.reason.as_str(),
                        },
                    );
                }
                Output::CallAgent(req) => {
                    calls += 1;
                    engine.handle_agent_result(at, req.turn, AgentResult::Output("NO_REPLY".to_owned()));
                }
                _ => {}
            }
        }
    };
    for m in messages {
        while let Some(t) = engine.poll_timeout().filter(|t| *t <= m.time) {
            engine.handle_timeout(t);
            drain(&mut engine, t);
        }
        let at = m.time;
        engine.handle_message(at, m.clone());
        drain(&mut engine, at);
    }
    // Batches still waiting run to their end.
    let mut guard = 0;
    while let Some(t) = engine.poll_timeout() {
        guard += 1;
        if guard > 10_000 {
            break;
        }
        engine.handle_timeout(t);
        drain(&mut engine, t);
    }
    (calls, decisions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tactful_core::policy::{PolicyPatch, RoomLayer};
    use tactful_core::{Mode, PersonaSpec, Timestamp};

    #[test]
    fn the_decisions_a_mode_change_would_move_are_listed_with_their_cost() {
        let config = EngineConfig {
            personas: vec![PersonaSpec::new("docs", "a")],
            ..Default::default()
        };
        let msgs: Vec<Message> = ["the build broke again", "@docs how do I reset?", "anyone?"]
            .iter()
            .enumerate()
            .map(|(i, t)| {
                Message::new(
                    format!("m{i}").as_str(),
                    "lobby",
                    "alice",
                    t,
                    Timestamp(i as u64 * 1000),
                )
            })
            .collect();
        let now = PolicyTable::default();
        let mut proposed = now.clone();
        proposed.live.insert(
            "lobby".into(),
            RoomLayer {
                all: PolicyPatch {
                    mode: Some(Mode::All),
                    ..PolicyPatch::default()
                },
                ..RoomLayer::default()
            },
        );
        let run = dry_run(&config, now, proposed, &msgs);
        assert_eq!((run.messages, run.calls_now, run.calls_proposed), (3, 1, 3));
        let moved: Vec<(&str, &str, &str)> = run
            .changed
            .iter()
            .map(|c| {
                (
                    c.text.as_str(),
                    c.now.as_ref().map_or("", |d| d.reason),
                    c.proposed.as_ref().map_or("", |d| d.reason),
                )
            })
            .collect();
        assert_eq!(
            moved,
            [
                ("the build broke again", "not_addressed", "all"),
                ("anyone?", "not_addressed", "all")
            ]
        );
    }
}
