//! `tactful eval --compare OTHER.toml`: the same labelled file under two
//! configs, side by side, and the messages whose outcome differs: what a
//! policy change would win and lose, before it is made.

use serde_json::{Value, json};

use super::render::{clip, figure, per_100, score_json};
use super::{Report, Score, Verdict};
use crate::scenario::Expect;

/// Two reports on the same labelled file.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The first config's name (its path) and report.
    pub a: (String, Report),
    /// The second's.
    pub b: (String, Report),
}

/// A labelled message one config got otherwise than the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference<'r> {
    /// The labelled file's line.
    pub line: usize,
    /// The persona.
    pub persona: &'r str,
    /// Under the first config.
    pub a: &'r Verdict,
    /// Under the second.
    pub b: &'r Verdict,
}

/// `answered`, `quiet` or `failed`, and whether that was right.
fn did(v: &Verdict) -> (&'static str, Option<bool>) {
    let right = |spoke: bool| match v.want {
        Expect::Reply => Some(spoke),
        Expect::Silent => Some(!spoke),
        Expect::Any => None,
    };
    match (&v.said, v.failed) {
        (Some(_), _) => ("answered", right(true)),
        (None, true) => ("failed", None),
        (None, false) => ("quiet", right(false)),
    }
}

fn describe(v: &Verdict) -> String {
    let (what, right) = did(v);
    let mark = match right {
        Some(true) => "right",
        Some(false) => "wrong",
        None => "not scored",
    };
    match (&v.said, what) {
        (Some(sent), _) => format!("{mark}: answered \"{}\"", clip(sent)),
        (None, _) => format!("{mark}: {what}, {} ({})", v.decision, v.reason),
    }
}

impl Comparison {
    /// The labelled messages whose outcome (answered, quiet, failed)
    /// differs, in the file's order.
    pub fn differences(&self) -> Vec<Difference<'_>> {
        self.a
            .1
            .verdicts
            .iter()
            .filter_map(|((line, persona), a)| {
                let b = self.b.1.verdicts.get(&(*line, persona.clone()))?;
                (did(a).0 != did(b).0).then_some(Difference {
                    line: *line,
                    persona,
                    a,
                    b,
                })
            })
            .collect()
    }

    /// For people: one table with each figure as `first → second`, then
    /// every message whose outcome differs.
    pub fn text(&self) -> String {
        let (ra, rb) = (&self.a.1, &self.b.1);
        let mut out = String::new();
        for (name, r) in [&self.a, &self.b] {
            if let Some(c) = r.cache {
                out.push_str(&format!("{name}: {c}\n"));
            }
        }
        out.push_str(&format!(
            "{} messages played, {} persona labels scored\nA: {}\nB: {}\n\n| persona | precision A → B | recall A → B | F1 A → B | model calls / 100 msgs A → B | gate calls / 100 msgs A → B | failed turns A → B |\n|---|---|---|---|---|---|---|\n",
            ra.messages, ra.all.scored, self.a.0, self.b.0
        ));
        let empty = Score::default();
        let rows = ra
            .personas
            .keys()
            .map(|p| (p.as_str(), &ra.personas[p], rb.personas.get(p).unwrap_or(&empty)))
            .chain([("all", &ra.all, &rb.all)]);
        for (name, x, y) in rows {
            let calls = |s: &Score, r: &Report| format!("{:.1}", per_100(s.calls, r.messages));
            let gates = |s: &Score, r: &Report| format!("{:.1}", per_100(s.gate_calls, r.messages));
            out.push_str(&format!(
                "| {name} | {} → {} | {} → {} | {} → {} | {} → {} | {} → {} | {} → {} |\n",
                figure(x.precision()),
                figure(y.precision()),
                figure(x.recall()),
                figure(y.recall()),
                figure(x.f1()),
                figure(y.f1()),
                calls(x, ra),
                calls(y, rb),
                gates(x, ra),
                gates(y, rb),
                x.errors,
                y.errors,
            ));
        }
        let diffs = self.differences();
        out.push_str(&format!("\nOutcomes that differ: {}\n", diffs.len()));
        for d in diffs {
            out.push_str(&format!(
                "- line {} {}: \"{}\"\n    A {}\n    B {}\n",
                d.line,
                d.persona,
                clip(&d.a.text),
                describe(d.a),
                describe(d.b)
            ));
        }
        out
    }

    /// For programs: both reports' scores and the differences.
    pub fn json(&self) -> Value {
        let side = |(name, r): &(String, Report)| {
            let personas: serde_json::Map<String, Value> = r
                .personas
                .iter()
                .map(|(p, s)| (p.clone(), score_json(s, r.messages)))
                .collect();
            json!({
                "config": name,
                "personas": personas,
                "all": score_json(&r.all, r.messages),
                "cache": r.cache,
            })
        };
        let verdict = |v: &Verdict| {
            let (what, right) = did(v);
            json!({"did": what, "right": right, "decision": v.decision, "reason": v.reason, "said": v.said})
        };
        let differs: Vec<Value> = self
            .differences()
            .iter()
            .map(|d| {
                json!({
                    "line": d.line, "persona": d.persona, "text": d.a.text,
                    "want": format!("{:?}", d.a.want).to_lowercase(),
                    "a": verdict(d.a), "b": verdict(d.b),
                })
            })
            .collect();
        json!({
            "messages": self.a.1.messages,
            "a": side(&self.a),
            "b": side(&self.b),
            "differs": differs,
        })
    }
}
