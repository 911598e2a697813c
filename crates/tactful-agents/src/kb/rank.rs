//! What the search makes of a line: each section's score, in its parts.

use bm25::Tokenizer as _;

use super::{HEADING_BONUS, KbAgent, query_of, questions, with_phrases};

/// What a section's score is made of.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Parts {
    /// BM25 over the whole section.
    pub(super) body: f32,
    /// The bonus for the question's words its heading holds.
    pub(super) heading: f32,
    /// The bonus when the question holds all of the heading's words.
    pub(super) whole_heading: f32,
    /// The section's closest example question's score, and its second's.
    pub(super) example: (f32, f32),
}

impl Parts {
    pub(super) fn score(&self) -> f32 {
        self.body + self.heading + self.whole_heading + questions::WEIGHT * (self.example.0 + self.example.1)
    }
}

/// What the search made of a line ([`KbAgent::ranked`]).
pub(super) struct Ranked {
    /// The five best documentation sections and their scores, best first.
    pub(super) docs: Vec<(usize, f32)>,
    /// Every section's score, in its parts.
    pub(super) parts: Vec<Parts>,
    /// The best small-talk score.
    pub(super) chatter: f32,
    /// The section defining a setting the line names, when that section
    /// is the one to answer from.
    pub(super) defined: Option<usize>,
    /// Whether the line names a setting some section defines.
    pub(super) names_setting: bool,
    /// The line as searched (phrases added, mentions out).
    pub(super) query: String,
}

impl Ranked {
    /// The section an answer quotes: the one defining a setting the line
    /// names, else the best.
    pub(super) fn pick(&self) -> Option<usize> {
        self.defined.or(self.docs.first().map(|d| d.0))
    }
}

impl KbAgent {
    /// What the search makes of a line: every section's score (BM25 over
    /// whole sections, plus a bonus for each word of the question its
    /// heading holds: a heading says what a section is about in a handful
    /// of words, where a long section's body dilutes), the best
    /// documentation section, the best small talk, and a setting the line
    /// names.
    pub(super) fn ranked(&self, raw: &str) -> Ranked {
        let raw = &with_phrases(raw);
        // A setting named in the question, and the section defining it.
        let setting = self.settings.named(raw);
        let query = &query_of(raw);
        if std::env::var_os("TACTFUL_KB_DEBUG").is_some() {
            for h in self.engine.search(query, 2) {
                let s = &self.sections[h.document.id];
                tracing::info!(score = h.score, source = %s.source, heading = %s.heading, "kb candidate");
                eprintln!("  {:.2} {} / {}", h.score, s.source, s.heading);
            }
        }
        let n_sections = self.sections.len();
        let mut parts = vec![Parts::default(); n_sections];
        for h in self.engine.search(query, n_sections) {
            parts[h.document.id].body = h.score;
        }
        // In a set order, so the bonuses add up the same way every run
        // (a float sum in hash order can break a tie either way).
        let words: std::collections::BTreeSet<String> = self.tokenizer.tokenize(query).into_iter().collect();
        let n = self.headings.len() as f32;
        for (i, heading) in self.headings.iter().enumerate() {
            // A rare heading word says more than one many headings share;
            // a heading the question covers whole is what it asks about.
            let matched: Vec<&String> = words.iter().filter(|w| heading.contains(*w)).collect();
            for w in &matched {
                let shared = self.headings.iter().filter(|h| h.contains(*w)).count() as f32;
                parts[i].heading += HEADING_BONUS * (1.0 + (n / shared).ln()) / (1.0 + n.ln());
            }
            if !heading.is_empty() && matched.len() == heading.len() {
                parts[i].whole_heading = HEADING_BONUS;
            }
        }
        if let Some(q) = &self.questions {
            for (p, two) in parts.iter_mut().zip(q.closest(query, n_sections)) {
                p.example = two;
            }
        }
        let scores: Vec<f32> = parts.iter().map(Parts::score).collect();
        let chatter = (0..scores.len())
            .filter(|&i| self.sections[i].source.is_empty())
            .map(|i| scores[i])
            .fold(0.0f32, f32::max);
        let mut docs: Vec<(usize, f32)> = (0..scores.len())
            .filter(|&i| !self.sections[i].source.is_empty())
            .map(|i| (i, scores[i]))
            .collect();
        docs.sort_by(|a, b| b.1.total_cmp(&a.1));
        docs.truncate(5);
        let defined = setting
            .as_ref()
            .and_then(|(i, key)| self.settings.answering(*i, key, docs.first().map(|d| d.0)));
        Ranked {
            docs,
            parts,
            chatter,
            defined,
            names_setting: setting.is_some(),
            query: query.clone(),
        }
    }
}
