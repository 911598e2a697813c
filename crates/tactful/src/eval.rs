//! `tactful eval`: how right a config's decisions are on a labelled
//! conversation.
//!
//! A labelled file is a scenario (`tactful replay` reads it as it is)
//! whose messages may say what each persona should do with them:
//! `"expect": {"docs": "reply", "chef": "silent"}` (`any`: played, not
//! scored). The scenario is replayed with the same engine and agents as
//! `replay`, and each persona's speaking is scored against the labels:
//! precision (of what it said, how much was wanted), recall (of what was
//! wanted, how much it said), F1, with what it cost, and every miss and
//! false alarm with the decision and its reason.
//!
//! A reply counts for the message it replies to (`reply_to`), else for
//! the newest message its turn was for (an ambient batch answers the
//! conversation as it stands). A notice (an addressed silence on a
//! platform without reactions) is not speaking. A turn that failed (a
//! provider's error) is reported apart and not scored: it is neither
//! speaking nor silence.

use std::collections::{BTreeMap, HashMap};

use anyhow::Context as _;
use serde_json::Value;

use crate::config::Config;
use crate::replay::{self, AnswerCache, ReplayOptions, TraceFormat};
use crate::scenario::{Expect, Scenario, ScenarioEvent};

mod compare;
mod policy_score;
mod render;

pub use compare::Comparison;
pub use policy_score::policy_score;

/// One persona's (or everyone's) counts.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Score {
    /// Labelled messages scored (`reply` or `silent`).
    pub scored: usize,
    /// Answered where it should have.
    pub hits: usize,
    /// Answered where it should have stayed quiet.
    pub false_alarms: usize,
    /// Quiet where it should have answered.
    pub misses: usize,
    /// Quiet where it should have been.
    pub quiet: usize,
    /// Agent calls of every kind.
    pub calls: usize,
    /// Of those, reply-gate calls.
    pub gate_calls: usize,
    /// Tokens the backends reported (script agents report none).
    pub tokens: u64,
    /// Labelled messages whose turn failed (not scored).
    pub errors: usize,
}

impl Score {
    /// Of what it said, the share that was wanted; `None` if it said
    /// nothing scored.
    pub fn precision(&self) -> Option<f64> {
        ratio(self.hits, self.hits + self.false_alarms)
    }

    /// Of what was wanted, the share it said; `None` if nothing was.
    pub fn recall(&self) -> Option<f64> {
        ratio(self.hits, self.hits + self.misses)
    }

    /// The harmonic mean of precision and recall.
    pub fn f1(&self) -> Option<f64> {
        match (self.precision(), self.recall()) {
            (Some(p), Some(r)) if p + r > 0.0 => Some(2.0 * p * r / (p + r)),
            (Some(_), Some(_)) => Some(0.0),
            _ => None,
        }
    }

    fn add(&mut self, o: &Score) {
        self.scored += o.scored;
        self.hits += o.hits;
        self.false_alarms += o.false_alarms;
        self.misses += o.misses;
        self.quiet += o.quiet;
        self.calls += o.calls;
        self.gate_calls += o.gate_calls;
        self.tokens += o.tokens;
        self.errors += o.errors;
    }
}

fn ratio(a: usize, b: usize) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// A message a persona got wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// The labelled file's line.
    pub line: usize,
    /// The persona.
    pub persona: String,
    /// The message's room and id.
    pub room: String,
    /// Its id.
    pub msg: String,
    /// What it said.
    pub text: String,
    /// The persona's decision on it (`reply`, `skip`, `ambient`, …) and
    /// its reason, as `replay` traces them; `none` if it made none.
    pub decision: String,
    /// Why.
    pub reason: String,
    /// How the turn ended when it ended without a reply (`silent: …`,
    /// `withheld: …`), or what was sent for a false alarm.
    pub outcome: Option<String>,
}

/// What a persona did with one labelled message, for `--compare`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The message's text.
    pub text: String,
    /// What it should have done.
    pub want: Expect,
    /// What it sent for it, if it spoke.
    pub said: Option<String>,
    /// Its decision and reason (`none`, `no decision` if it made none).
    pub decision: String,
    /// Why.
    pub reason: String,
    /// Its turn failed (not scored).
    pub failed: bool,
}

/// How `tactful eval` runs the replay.
#[derive(Debug, Clone, Copy, Default)]
pub struct EvalOptions {
    /// Seed for ambient flush jitter.
    pub seed: u64,
    /// Real agent calls at once (`--jobs`).
    pub jobs: usize,
}

/// What the cache did for one run (`--cache`); JSON `{"calls", "hits"}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheUse {
    /// Real agents' calls: asked for by the engine.
    pub calls: usize,
    /// Of those, answered from the cache.
    pub hits: usize,
}

/// How the report says what a run paid for.
impl std::fmt::Display for CacheUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} real agent calls, {} from the cache", self.calls, self.hits)
    }
}

/// What `tactful eval` found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Messages played.
    pub messages: usize,
    /// Per persona, in id order.
    pub personas: BTreeMap<String, Score>,
    /// Everyone together.
    pub all: Score,
    /// Should have answered, stayed quiet.
    pub misses: Vec<Case>,
    /// Answered, should have stayed quiet.
    pub false_alarms: Vec<Case>,
    /// Every labelled message and persona, by the file's line.
    pub verdicts: BTreeMap<(usize, String), Verdict>,
    /// The cache's part, when there was one.
    pub cache: Option<CacheUse>,
}

/// A decision as the trace gives it: outcome, reason, turn.
type Decided = (String, String, Option<String>);

/// Replays `scenario` under `config` and scores it against its labels;
/// real agents' answers come from `cache` when it has them.
pub fn evaluate(
    config: &Config,
    scenario: Scenario,
    options: EvalOptions,
    mut cache: Option<&mut AnswerCache>,
) -> anyhow::Result<Report> {
    // Cloned before the replay takes the scenario.
    let labelled: Vec<ScenarioEvent> = scenario
        .events
        .iter()
        .filter(|e| !e.expect.is_empty())
        .cloned()
        .collect();
    let mut trace = Vec::new();
    let replay_options = ReplayOptions {
        seed: options.seed,
        jobs: options.jobs,
        format: TraceFormat::Json,
        ..ReplayOptions::default()
    };
    let before = cache.as_ref().map(|c| (c.hits, c.misses));
    let summary = replay::run_cached(config, scenario, replay_options, &mut trace, cache.as_deref_mut())
        .context("the replay failed")?;
    let mut seen: HashMap<(String, String, String), Decided> = HashMap::new();
    let mut spoke: HashMap<(String, String, String), String> = HashMap::new();
    let mut ended: HashMap<String, String> = HashMap::new();
    let mut report = Report {
        messages: summary.messages,
        cache: cache.as_ref().zip(before).map(|(c, (hits, misses))| CacheUse {
            calls: c.hits - hits + c.misses - misses,
            hits: c.hits - hits,
        }),
        ..Report::default()
    };
    for p in &config.engine.personas {
        report.personas.insert(p.id.to_string(), Score::default());
    }
    let text = String::from_utf8(trace).context("the trace is not UTF-8")?;
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).context("a trace line is not JSON")?;
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        let persona = s("persona");
        match v["type"].as_str() {
            Some("decision") => {
                let turn = v["turn"].as_str().map(str::to_owned);
                seen.insert((persona, s("room"), s("msg")), (s("outcome"), s("reason"), turn));
            }
            Some("agent_call") => {
                if let Some(score) = report.personas.get_mut(&persona) {
                    score.calls += 1;
                    if v["kind"] == "gate" {
                        score.gate_calls += 1;
                    }
                    let tokens = |k: &str| v["usage"][k].as_u64().unwrap_or(0);
                    score.tokens += tokens("prompt_tokens") + tokens("completion_tokens");
                }
            }
            Some("send") if v["notice"] != true => {
                let msgs: Vec<String> = v["msgs"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|m| m.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default();
                let reply_to = v["reply_to"].as_str().filter(|r| msgs.iter().any(|m| m == r));
                if let Some(target) = reply_to.map(str::to_owned).or_else(|| msgs.last().cloned()) {
                    spoke
                        .entry((persona, s("room"), target))
                        .or_insert_with(|| s("text"));
                }
            }
            Some(kind @ ("silent" | "withheld" | "cancelled" | "error")) => {
                let why = v["reason"].as_str().or(v["error"].as_str()).unwrap_or_default();
                ended.insert(s("turn"), format!("{kind}: {why}"));
            }
            _ => {}
        }
    }
    for e in labelled {
        let (line, room, msg, text) = (
            e.line,
            e.message.room.to_string(),
            e.message.id.to_string(),
            e.message.text.to_string(),
        );
        for (persona, want) in e.expect {
            let key = (persona.clone(), room.clone(), msg.clone());
            let decision = seen.get(&key).cloned();
            let end = decision
                .as_ref()
                .and_then(|(_, _, t)| t.as_ref())
                .and_then(|t| ended.get(t))
                .cloned();
            let said = spoke.get(&key).cloned();
            let failed = said.is_none() && end.as_deref().is_some_and(|e| e.starts_with("error"));
            let (d, r) = decision
                .as_ref()
                .map_or(("none".to_owned(), "no decision".to_owned()), |(d, r, _)| {
                    (d.clone(), r.clone())
                });
            report.verdicts.insert(
                (line, persona.clone()),
                Verdict {
                    text: text.clone(),
                    want,
                    said: said.clone(),
                    decision: d,
                    reason: r,
                    failed,
                },
            );
            let score = report.personas.entry(persona.clone()).or_default();
            if failed {
                score.errors += 1;
                continue;
            }
            let case = |outcome: Option<String>| {
                let (d, r) = decision
                    .as_ref()
                    .map_or(("none".to_owned(), "no decision".to_owned()), |(d, r, _)| {
                        (d.clone(), r.clone())
                    });
                Case {
                    line,
                    persona: persona.clone(),
                    room: room.clone(),
                    msg: msg.clone(),
                    text: text.clone(),
                    decision: d,
                    reason: r,
                    outcome,
                }
            };
            match (want, said) {
                (Expect::Any, _) => continue,
                (Expect::Reply, Some(_)) => score.hits += 1,
                (Expect::Reply, None) => {
                    score.misses += 1;
                    report.misses.push(case(end));
                }
                (Expect::Silent, Some(sent)) => {
                    score.false_alarms += 1;
                    report.false_alarms.push(case(Some(format!("sent: {sent}"))));
                }
                (Expect::Silent, None) => score.quiet += 1,
            }
            score.scored += 1;
        }
    }
    let mut all = Score::default();
    for s in report.personas.values() {
        all.add(s);
    }
    report.all = all;
    Ok(report)
}
