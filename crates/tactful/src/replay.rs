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
use tactful_core::engine::Outgoing;
use tactful_core::hooks::HookOutcome;
use tactful_core::{AgentResult, Decision, Engine, Output, Timestamp, TurnId, TurnRequest, prompt};

use crate::config::Config;
use crate::scenario::{Scenario, ScenarioEvent};
use crate::trace_lines;

mod agents;
mod answer_cache;

use agents::Agents;
pub use answer_cache::AnswerCache;

/// Replay switches.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplayOptions {
    /// Include the rendered prompt in every `agent_call` line.
    pub prompts: bool,
    /// Seed for ambient flush jitter; the same seed replays identically.
    pub seed: u64,
    /// Print no trace; the caller prints [`Summary::stats_table`].
    pub stats: bool,
    /// When the virtual clock starts (`--start`); scenario times count
    /// from it. Else the scenario's `start` line, else
    /// [`Timestamp::ZERO`] (1970-01-01T00:00:00Z).
    pub start: Option<Timestamp>,
    /// How the trace is printed (`--format`).
    pub format: TraceFormat,
    /// How many real agent calls asked for at one instant run at once
    /// (`eval --jobs`); 0 counts as 1. The trace does not depend on it.
    pub jobs: usize,
}

/// How `tactful replay` prints its trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceFormat {
    /// One JSON object a line: for programs, goldens and `jq`.
    #[default]
    Json,
    /// One block per message with each persona's decision under it, and
    /// prompts as plain text: for people.
    Text,
}

/// What one persona cost and did over a replay, for `--stats`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PersonaStats {
    /// Scenario messages addressed to the persona (DM, mention, command,
    /// reply to it) that it took a turn for.
    pub addressed: usize,
    /// Of those, how many got a reply.
    pub answered: usize,
    /// Agent calls of every kind.
    pub calls: usize,
    /// Gate (classifier) calls.
    pub gate_calls: usize,
    /// Ambient batch calls.
    pub ambient_calls: usize,
    /// Calls made for messages that did not address the persona.
    pub unaddressed_calls: usize,
    /// Replies sent.
    pub sent: usize,
    addressed_ids: std::collections::BTreeSet<(String, String)>,
    answered_ids: std::collections::BTreeSet<(String, String)>,
}

/// Counts printed to stderr at the end of a replay.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
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
    /// Turns the engine cancelled in flight.
    pub cancelled: usize,
    /// Virtual time at the start.
    pub start: Timestamp,
    /// Virtual time at the end.
    pub end: Timestamp,
    /// Per persona, in id order.
    pub personas: std::collections::BTreeMap<String, PersonaStats>,
    /// Scenario messages with a `?`, by (room, id): whether a persona was
    /// addressed by it, the reply calls made for it, the replies it got.
    questions: std::collections::BTreeMap<(String, String), Question>,
    /// The last reply or batch prompt of each (persona, room), flattened.
    last_prompt: std::collections::BTreeMap<(String, String), String>,
    /// Over consecutive prompts of one (persona, room): characters the
    /// later one shares as an identical prefix with the one before, and
    /// its length.
    prefix: (u64, u64),
}

/// The scenario's unaddressed questions: messages with a `?` that address
/// no persona (what floor passing is measured on).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QuestionStats {
    /// How many.
    pub count: usize,
    /// Reply calls made for them.
    pub calls: usize,
    /// How many got exactly one reply.
    pub answered_once: usize,
    /// How many got none.
    pub unanswered: usize,
}

/// One scenario question, for the calls-per-question figure.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Question {
    addressed: bool,
    calls: usize,
    replies: usize,
}

impl Summary {
    fn persona(&mut self, id: &str) -> &mut PersonaStats {
        self.personas.entry(id.to_owned()).or_default()
    }

    fn note_message(&mut self, m: &tactful_core::Message) {
        self.messages += 1;
        if m.text.contains('?') {
            self.questions
                .insert((m.room.to_string(), m.id.to_string()), Question::default());
        }
    }

    fn note_decision(&mut self, d: &Decision, from_scenario: bool) {
        use tactful_core::Reason::*;
        if from_scenario
            && matches!(d.reason, Dm | Mention | Command | ReplyToMe)
            && let Some(q) = self.questions.get_mut(&(d.room.to_string(), d.msg.to_string()))
        {
            q.addressed = true;
        }
        if from_scenario && matches!(d.reason, Dm | Mention | Command | ReplyToMe) && d.turn.is_some() {
            let key = (d.room.to_string(), d.msg.to_string());
            let s = self.persona(d.persona.as_str());
            s.addressed += 1;
            s.addressed_ids.insert(key);
        }
    }

    fn note_call(&mut self, req: &TurnRequest) {
        let room = req.room.to_string();
        if req.kind == tactful_core::TurnKind::Reply
            && let [trigger] = req.triggers.as_slice()
            && let Some(q) = self.questions.get_mut(&(room.clone(), trigger.id.to_string()))
        {
            q.calls += 1;
        }
        let s = self.persona(req.persona.as_str());
        s.calls += 1;
        match req.kind {
            tactful_core::TurnKind::Gate => s.gate_calls += 1,
            tactful_core::TurnKind::Ambient => s.ambient_calls += 1,
            tactful_core::TurnKind::Reply => {}
            // Nobody's message asked for it: neither addressed nor not.
            tactful_core::TurnKind::Schedule => return,
        }
        let addressed = req
            .triggers
            .iter()
            .all(|e| s.addressed_ids.contains(&(room.clone(), e.id.to_string())));
        if !addressed {
            s.unaddressed_calls += 1;
        }
    }

    /// How much of this prompt repeats the start of the persona's previous
    /// one in the room: what a provider's prompt cache can serve.
    fn note_prompt(&mut self, req: &TurnRequest, contract: &str) {
        if !matches!(
            req.kind,
            tactful_core::TurnKind::Reply | tactful_core::TurnKind::Ambient
        ) {
            return;
        }
        let prompt = tactful_core::prompt::render(req, contract);
        let mut flat = prompt.system;
        for m in &prompt.messages {
            flat.push('\u{0}');
            flat.push_str(match m.role {
                tactful_core::prompt::Role::User => "user:",
                tactful_core::prompt::Role::Assistant => "assistant:",
            });
            flat.push_str(&m.content);
        }
        let key = (req.persona.to_string(), req.room.to_string());
        if let Some(before) = self.last_prompt.get(&key) {
            let shared = before
                .chars()
                .zip(flat.chars())
                .take_while(|(a, b)| a == b)
                .count();
            self.prefix.0 += shared as u64;
            self.prefix.1 += flat.chars().count() as u64;
        }
        self.last_prompt.insert(key, flat);
    }

    /// The share of consecutive prompts (per persona and room) that
    /// repeats the previous prompt's start, in percent; `None` before two.
    pub fn prefix_reuse(&self) -> Option<f64> {
        (self.prefix.1 > 0).then(|| self.prefix.0 as f64 * 100.0 / self.prefix.1 as f64)
    }

    fn note_send(&mut self, o: &Outgoing) {
        let room = o.room.to_string();
        if !o.notice {
            for m in &o.msgs {
                if let Some(q) = self.questions.get_mut(&(room.clone(), m.to_string())) {
                    q.replies += 1;
                }
            }
        }
        let s = self.persona(o.persona.as_str());
        s.sent += 1;
        for m in &o.msgs {
            let key = (room.clone(), m.to_string());
            if s.addressed_ids.contains(&key) && s.answered_ids.insert(key) {
                s.answered += 1;
            }
        }
    }

    /// A Markdown table of what each persona cost, per 100 scenario
    /// messages. Modes are those of the room `main`.
    pub fn stats_table(&self, config: &Config) -> String {
        let main = tactful_core::RoomId::new("main");
        let per100 = |n: usize| n as f64 * 100.0 / self.messages.max(1) as f64;
        let mut out = String::from(
            "| persona | mode | addressed | answered | model calls / 100 msgs | gate calls / 100 msgs | ambient batches | unaddressed msgs per unaddressed call | replies sent |\n|---|---|---|---|---|---|---|---|---|\n",
        );
        for (id, s) in &self.personas {
            let policy = config
                .engine
                .policies
                .resolve(&main, &tactful_core::PersonaId::new(id.as_str()));
            let mut mode = policy.mode.as_str().to_owned();
            if policy.reply_gate.is_some() {
                mode.push_str(" + gate");
            }
            let unaddressed_msgs = self.messages.saturating_sub(s.addressed);
            let ratio = if s.unaddressed_calls == 0 {
                "no calls".to_owned()
            } else {
                format!("{:.1}", unaddressed_msgs as f64 / s.unaddressed_calls as f64)
            };
            out.push_str(&format!(
                "| {id} | {mode} | {} | {} | {:.1} | {:.1} | {} | {ratio} | {} |\n",
                s.addressed,
                s.answered,
                per100(s.calls - s.gate_calls),
                per100(s.gate_calls),
                s.ambient_calls,
                s.sent
            ));
        }
        out.push_str(&format!("\n{} scenario messages.\n", self.messages));
        if let Some(p) = self.prefix_reuse() {
            out.push_str(&format!(
                "Prompt prefix reuse: {p:.1} % of each reply or batch prompt repeats the start of the same persona's previous prompt in the room (what a provider's prompt cache can serve).\n"
            ));
        }
        let q = self.questions();
        if q.count > 0 {
            out.push_str(&format!(
                "{} unaddressed questions (messages with a `?` that address no persona): {:.2} reply calls per question; {} answered once, {} not answered, {} answered more than once.\n",
                q.count,
                q.calls as f64 / q.count as f64,
                q.answered_once,
                q.unanswered,
                q.count - q.answered_once - q.unanswered,
            ));
        }
        out
    }

    /// What the unaddressed questions of the scenario cost and got.
    pub fn questions(&self) -> QuestionStats {
        let open: Vec<&Question> = self.questions.values().filter(|q| !q.addressed).collect();
        QuestionStats {
            count: open.len(),
            calls: open.iter().map(|q| q.calls).sum(),
            answered_once: open.iter().filter(|q| q.replies == 1).count(),
            unanswered: open.iter().filter(|q| q.replies == 0).count(),
        }
    }
}

#[derive(Debug)]
enum Event {
    Message(Box<ScenarioEvent>),
    AgentDone(TurnId, AgentResult, Option<tactful_agents::Usage>),
    HooksDone(TurnId, Vec<HookOutcome>),
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

    fn peek_time(&self) -> Option<Timestamp> {
        self.heap.peek().map(|Reverse(Timed(at, _, _))| *at)
    }
}

/// Reads `--start`: an RFC 3339 time (`2026-03-28T23:00:00Z`, or with an
/// offset) at or after 1970.
pub fn parse_start(text: &str) -> Result<Timestamp, String> {
    crate::scenario::rfc3339(text)
        .ok_or_else(|| format!("{text:?} is not an RFC 3339 time like 2026-03-28T23:00:00Z"))
}

/// Runs a scenario through an engine built from `config`, writing the
/// trace.
pub fn run(
    config: &Config,
    scenario: Scenario,
    options: ReplayOptions,
    out: &mut dyn Write,
) -> anyhow::Result<Summary> {
    run_cached(config, scenario, options, out, None)
}

/// [`run`], with real agents' answers taken from and added to `cache`.
pub fn run_cached(
    config: &Config,
    scenario: Scenario,
    options: ReplayOptions,
    out: &mut dyn Write,
    cache: Option<&mut AnswerCache>,
) -> anyhow::Result<Summary> {
    let start = options.start.or(scenario.start).unwrap_or_default();
    let end = scenario
        .end
        .map(|s| start + std::time::Duration::from_secs_f64(s));
    let mut engine_config = config.engine.clone();
    engine_config.seed = options.seed;
    let mut engine = Engine::new(engine_config)?;
    let mut agents = Agents::new(config, options.jobs, cache);
    let mut queue = Queue::default();
    let mut summary = Summary {
        start,
        end: start,
        ..Summary::default()
    };
    for p in &config.engine.personas {
        summary.persona(p.id.as_str());
    }
    let mut scenario_ids = std::collections::HashSet::new();
    for mut e in scenario.events {
        scenario_ids.insert((e.message.room.to_string(), e.message.id.to_string()));
        e.message.time = start + std::time::Duration::from_millis(e.message.time.as_millis());
        queue.push(e.message.time, Event::Message(Box::new(e)));
    }
    let mut text = (options.format == TraceFormat::Text)
        .then(|| text::TextTrace::new(config.engine.personas.iter().map(|p| p.id.as_str()), start));
    let mut starting = true;
    loop {
        // Timers due at or before the next event fire first. Schedules
        // alone keep a replay going only up to its `end`.
        let next_event = queue.peek_time();
        let timeout = engine
            .poll_timeout()
            .filter(|t| end.is_none_or(|e| *t <= e))
            .filter(|_| end.is_some() || next_event.is_some() || engine.has_work_besides_schedules());
        let now = match (timeout, next_event) {
            _ if starting => {
                starting = false;
                engine.start_schedules(start, &scenario.last_runs);
                start
            }
            (Some(t), Some(e)) if t <= e => {
                engine.handle_timeout(t);
                t
            }
            (Some(t), None) => {
                engine.handle_timeout(t);
                t
            }
            (_, Some(_)) => {
                let (now, event) = queue.pop().expect("peeked");
                match event {
                    Event::Message(e) => {
                        summary.note_message(&e.message);
                        if let Some(t) = text.as_mut().filter(|_| !options.stats) {
                            t.message(out, &e.message, now)?;
                        }
                        engine.handle_message(now, e.message);
                    }
                    Event::AgentDone(turn, result, usage) => {
                        if let Some(u) = usage {
                            engine.handle_usage(turn, u.prompt_tokens.saturating_add(u.completion_tokens));
                        }
                        engine.handle_agent_result(now, turn, result);
                    }
                    Event::HooksDone(turn, outcomes) => engine.handle_hook_result(now, turn, outcomes),
                }
                now
            }
            (None, None) => break,
        };
        summary.end = now;
        let outputs: Vec<Output> = std::iter::from_fn(|| engine.poll_output()).collect();
        // The turns asked for at this instant are answered together.
        let asked: Vec<&TurnRequest> = outputs
            .iter()
            .filter_map(|o| match o {
                Output::CallAgent(req) => Some(&**req),
                _ => None,
            })
            .collect();
        let mut answers = agents.run_all(&asked)?.into_iter();
        for output in outputs {
            match &output {
                Output::RunHooks(req) => {
                    // Hooks really run (a command hook is started), taking
                    // no virtual time; their steps are traced as `hook`
                    // lines when the engine hears them.
                    let outcomes = agents.block_on(config.hooks.run(req))?;
                    queue.push(now, Event::HooksDone(req.turn, outcomes));
                }
                Output::Decision(d) => {
                    summary.decisions += 1;
                    let from_scenario = scenario_ids.contains(&(d.room.to_string(), d.msg.to_string()));
                    summary.note_decision(d, from_scenario);
                }
                Output::CallAgent(req) => {
                    summary.agent_calls += 1;
                    summary.note_call(req);
                    if options.stats {
                        summary.note_prompt(req, &config.contract);
                    }
                }
                Output::Send(s) => {
                    summary.sends += 1;
                    summary.note_send(s);
                }
                Output::Silent(..) => summary.silent += 1,
                Output::Cancelled(..) => summary.cancelled += 1,
                Output::Withheld(..) => summary.withheld += 1,
                Output::Error(..) => summary.errors += 1,
                Output::Hook(_)
                | Output::Schedule(_)
                | Output::Ambient(_)
                | Output::Limited(_)
                | Output::OverBudget(_)
                | Output::React(_)
                | Output::Floor(_)
                | Output::Dropped { .. } => {}
            }
            let line = match output {
                Output::CallAgent(req) => {
                    let (result, delay, usage) = answers.next().expect("one answer per call");
                    let mut line = agent_call_line(&req, options, &config.contract);
                    if let Some(u) = usage {
                        // Live backends have finished by now: their token
                        // usage is known when the call is traced.
                        line["usage"] = json!(u);
                    }
                    queue.push(now + delay, Event::AgentDone(req.turn, result, usage));
                    line
                }
                other => match trace_lines::line(&other) {
                    Some(line) => line,
                    None => continue,
                },
            };
            if options.stats {
                continue;
            }
            if let Some(t) = text.as_mut() {
                t.line(out, &line)?;
            } else {
                serde_json::to_writer(&mut *out, &line)?;
                out.write_all(b"\n")?;
            }
        }
    }
    if let Some(t) = text.as_mut() {
        t.finish(out)?;
    }
    out.flush()?;
    Ok(summary)
}

fn agent_call_line(req: &TurnRequest, options: ReplayOptions, contract: &str) -> Value {
    let mut v = trace_lines::call_line(req);
    if options.prompts {
        v["prompt"] = serde_json::to_value(prompt::render(req, contract)).unwrap_or(Value::Null);
    }
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

mod text;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ambient;
#[cfg(test)]
mod tests_prompts;
