//! How `tactful eval` prints a report: a table for people, JSON for
//! programs.

use serde_json::{Value, json};

use super::{Case, Report, Score};

pub(super) fn figure(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |x| format!("{x:.2}"))
}

pub(super) fn per_100(n: usize, messages: usize) -> f64 {
    n as f64 * 100.0 / messages.max(1) as f64
}

/// One line of `text`, at most 60 characters, for a case's quote.
pub(super) fn clip(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_owned(),
    }
}

impl Report {
    /// The report for people: a table per persona and in all, then every
    /// miss and false alarm with its decision and reason.
    pub fn text(&self) -> String {
        let mut out = format!(
            "{} messages played, {} persona labels scored\n\n| persona | scored | precision | recall | F1 | model calls / 100 msgs | gate calls / 100 msgs | tokens / 100 msgs | failed turns |\n|---|---|---|---|---|---|---|---|---|\n",
            self.messages, self.all.scored
        );
        if let Some(c) = self.cache {
            // Before the table: what this run paid for.
            out.insert_str(0, &format!("{c}\n"));
        }
        let rows = self
            .personas
            .iter()
            .map(|(p, s)| (p.as_str(), s))
            .chain([("all", &self.all)]);
        for (name, s) in rows {
            out.push_str(&format!(
                "| {name} | {} | {} | {} | {} | {:.1} | {:.1} | {:.0} | {} |\n",
                s.scored,
                figure(s.precision()),
                figure(s.recall()),
                figure(s.f1()),
                per_100(s.calls, self.messages),
                per_100(s.gate_calls, self.messages),
                s.tokens as f64 * 100.0 / self.messages.max(1) as f64,
                s.errors
            ));
        }
        for (title, cases) in [
            ("Misses (should have answered, stayed quiet)", &self.misses),
            (
                "False alarms (answered, should have stayed quiet)",
                &self.false_alarms,
            ),
        ] {
            out.push_str(&format!("\n{title}: {}\n", cases.len()));
            for c in cases {
                out.push_str(&format!(
                    "- line {} {}: \"{}\" → {} ({}){}\n",
                    c.line,
                    c.persona,
                    clip(&c.text),
                    c.decision,
                    c.reason,
                    c.outcome
                        .as_deref()
                        .map(|o| format!("; {}", clip(o)))
                        .unwrap_or_default()
                ));
            }
        }
        out
    }

    /// The report for programs.
    pub fn json(&self) -> Value {
        let score = |s: &Score| score_json(s, self.messages);
        let case = |c: &Case| {
            json!({
                "line": c.line, "persona": c.persona, "room": c.room, "msg": c.msg, "text": c.text,
                "decision": c.decision, "reason": c.reason, "outcome": c.outcome,
            })
        };
        let personas: serde_json::Map<String, Value> =
            self.personas.iter().map(|(p, s)| (p.clone(), score(s))).collect();
        json!({
            "messages": self.messages,
            "personas": personas,
            "all": score(&self.all),
            "misses": self.misses.iter().map(case).collect::<Vec<_>>(),
            "false_alarms": self.false_alarms.iter().map(case).collect::<Vec<_>>(),
            "cache": self.cache,
        })
    }
}

/// One score as JSON, its costs per 100 of `messages`.
pub(super) fn score_json(s: &Score, messages: usize) -> Value {
    json!({
        "scored": s.scored,
        "hits": s.hits,
        "false_alarms": s.false_alarms,
        "misses": s.misses,
        "quiet": s.quiet,
        "precision": s.precision(),
        "recall": s.recall(),
        "f1": s.f1(),
        "calls_per_100": per_100(s.calls, messages),
        "gate_calls_per_100": per_100(s.gate_calls, messages),
        "tokens_per_100": s.tokens as f64 * 100.0 / messages.max(1) as f64,
        "failed_turns": s.errors,
    })
}
