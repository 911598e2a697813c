//! `tactful replay`: a config against a scripted conversation, on a
//! virtual clock.
//!
//! The driver owns a queue of timed events (scenario messages and agent
//! answers) and feeds them to the same engine the live service runs,
//! printing every output as one JSON line. Time only moves when the next
//! event is due, so a ten-hour scenario replays in milliseconds. At equal
//! times, scenario messages go first, then agent answers in the order the
//! turns started: a burst of messages at one instant really is concurrent.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;

use serde_json::{Value, json};
use tactful_core::engine::{Outgoing, SilenceKind, TurnEnd};
use tactful_core::{AgentResult, Decision, Engine, Output, Timestamp, TurnId, TurnRequest, prompt};

use crate::config::{AgentConfig, Config};
use crate::scenario::ScenarioEvent;

/// Replay switches.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplayOptions {
    /// Include the rendered prompt in every `agent_call` line.
    pub prompts: bool,
}

/// Counts printed to stderr at the end of a replay.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Scenario messages fed in.
    pub messages: usize,
    /// Decisions made.
    pub decisions: usize,
    /// Agent turns started.
    pub agent_calls: usize,
    /// Replies sent.
    pub sends: usize,
    /// Turns that ended in deliberate silence.
    pub silent: usize,
    /// Turns that failed.
    pub errors: usize,
    /// Replies a guard held back after the agent answered.
    pub withheld: usize,
    /// Virtual time at the end.
    pub end: Timestamp,
}

#[derive(Debug)]
enum Event {
    Message(Box<ScenarioEvent>),
    AgentDone(TurnId, AgentResult),
}

/// A queued event, ordered by (time, insertion order) only.
#[derive(Debug)]
struct Timed(Timestamp, u64, Event);

impl PartialEq for Timed {
    fn eq(&self, other: &Self) -> bool {
        (self.0, self.1) == (other.0, other.1)
    }
}
impl Eq for Timed {}
impl PartialOrd for Timed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.0, self.1).cmp(&(other.0, other.1))
    }
}

/// Timed event queue: earliest first, ties in insertion order.
#[derive(Default)]
struct Queue {
    heap: BinaryHeap<Reverse<Timed>>,
    seq: u64,
}

impl Queue {
    fn push(&mut self, at: Timestamp, e: Event) {
        self.heap.push(Reverse(Timed(at, self.seq, e)));
        self.seq += 1;
    }

    fn pop(&mut self) -> Option<(Timestamp, Event)> {
        self.heap.pop().map(|Reverse(Timed(at, _, e))| (at, e))
    }
}

/// Runs `events` through an engine built from `config`, writing the trace.
pub fn run(
    config: &Config,
    events: Vec<ScenarioEvent>,
    options: ReplayOptions,
    out: &mut dyn Write,
) -> anyhow::Result<Summary> {
    let mut engine = Engine::new(config.engine.clone())?;
    let mut queue = Queue::default();
    let mut summary = Summary::default();
    for e in events {
        queue.push(e.message.time, Event::Message(Box::new(e)));
    }
    while let Some((now, event)) = queue.pop() {
        summary.end = now;
        match event {
            Event::Message(e) => {
                summary.messages += 1;
                engine.handle_message(now, e.message);
            }
            Event::AgentDone(turn, result) => engine.handle_agent_result(now, turn, result),
        }
        while let Some(output) = engine.poll_output() {
            let line = match output {
                Output::Decision(d) => {
                    summary.decisions += 1;
                    decision_line(&d)
                }
                Output::CallAgent(req) => {
                    summary.agent_calls += 1;
                    let (result, delay) = run_agent(config, &req);
                    let line = agent_call_line(&req, options);
                    queue.push(now + delay, Event::AgentDone(req.turn, result));
                    line
                }
                Output::Send(s) => {
                    summary.sends += 1;
                    send_line(&s)
                }
                Output::Silent(end, kind) => {
                    summary.silent += 1;
                    silent_line(&end, kind)
                }
                Output::Withheld(end, reason) => {
                    summary.withheld += 1;
                    let mut v = end_fields(&end, "withheld");
                    v["reason"] = json!(reason.as_str());
                    v
                }
                Output::Error(end, error) => {
                    summary.errors += 1;
                    error_line(&end, &error)
                }
                Output::Dropped {
                    at,
                    room,
                    msg,
                    reason,
                } => json!({
                    "at": at.as_secs_f64(), "type": "dropped", "room": room, "msg": msg, "reason": reason,
                }),
            };
            serde_json::to_writer(&mut *out, &line)?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    Ok(summary)
}

fn run_agent(config: &Config, req: &TurnRequest) -> (AgentResult, std::time::Duration) {
    match config.agents.get(req.agent.as_ref()) {
        Some(AgentConfig::Script(agent)) => {
            let a = agent.answer(req);
            (a.result, a.delay)
        }
        // The config check guarantees every persona's agent exists; if the
        // engine ever asks for another, the turn fails visibly.
        None => (
            AgentResult::Failed(format!("no agent named {:?}", req.agent)),
            std::time::Duration::ZERO,
        ),
    }
}

fn decision_line(d: &Decision) -> Value {
    let mut v = json!({
        "at": d.at.as_secs_f64(),
        "type": "decision",
        "persona": d.persona,
        "room": d.room,
        "msg": d.msg,
        "outcome": d.outcome.as_str(),
        "reason": d.reason.as_str(),
    });
    if let Some(t) = d.turn {
        v["turn"] = json!(t.to_string());
    }
    v
}

fn agent_call_line(req: &TurnRequest, options: ReplayOptions) -> Value {
    let mut v = json!({
        "at": req.started.as_secs_f64(),
        "type": "agent_call",
        "turn": req.turn.to_string(),
        "persona": req.persona,
        "agent": req.agent.as_ref(),
        "kind": req.kind.as_str(),
        "room": req.room,
        "msgs": req.triggers.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
    });
    if options.prompts {
        v["prompt"] =
            serde_json::to_value(prompt::render(req, prompt::DEFAULT_CONTRACT)).unwrap_or(Value::Null);
    }
    v
}

fn send_line(s: &Outgoing) -> Value {
    let mut v = json!({
        "at": s.at.as_secs_f64(),
        "type": "send",
        "turn": s.turn.to_string(),
        "persona": s.persona,
        "room": s.room,
        "id": s.id,
        "text": s.text,
        "reply_to": s.reply_to,
        "msgs": s.msgs,
    });
    if let Some(t) = &s.thread {
        v["thread"] = json!(t);
    }
    if let Some(d) = &s.dropped_reply_to {
        v["dropped_reply_to"] = json!(d);
        v["note"] = json!("reply_to names no message of this room; sent as a plain message");
    }
    if !s.invalid_reply_to.is_empty() {
        v["invalid_reply_to"] = json!(s.invalid_reply_to);
    }
    if !s.unknown_directives.is_empty() {
        v["unknown_directives"] = json!(s.unknown_directives);
    }
    v
}

fn end_fields(end: &TurnEnd, ty: &str) -> Value {
    json!({
        "at": end.at.as_secs_f64(),
        "type": ty,
        "turn": end.turn.to_string(),
        "persona": end.persona,
        "room": end.room,
        "msgs": end.msgs,
    })
}

fn silent_line(end: &TurnEnd, kind: SilenceKind) -> Value {
    let mut v = end_fields(end, "silent");
    v["reason"] = json!(kind.as_str());
    v
}

fn error_line(end: &TurnEnd, error: &str) -> Value {
    let mut v = end_fields(end, "error");
    v["error"] = json!(error);
    v
}

/// Convenience for tests: replays scenario text against config text and
/// returns the trace as parsed JSON lines.
#[cfg(test)]
pub fn replay_str(config: &str, scenario: &str, options: ReplayOptions) -> Vec<Value> {
    use std::path::Path;
    let config = Config::parse(config, Path::new("test.toml"), &|_| None).expect("test config is valid");
    let ids: Vec<&str> = config.engine.personas.iter().map(|p| p.id.as_str()).collect();
    let events =
        crate::scenario::parse(scenario, Path::new("test.jsonl"), &ids).expect("test scenario is valid");
    let mut buf = Vec::new();
    run(&config, events, options, &mut buf).expect("replay runs");
    String::from_utf8(buf)
        .expect("utf-8 trace")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each trace line is JSON"))
        .collect()
}

#[cfg(test)]
mod tests;
