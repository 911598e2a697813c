//! `kind = "kb"`: answers from markdown documents, offline.
//!
//! The documents are split into sections at their headings and indexed with
//! BM25 (the `bm25` crate: stemming, stop words, Unicode folding). A turn's
//! question is looked up; when the best section scores at least
//! `min_score`, the answer quotes its opening and cites the file and
//! heading it came from, as a reply to the question. Below the threshold
//! the agent stays silent (`NO_REPLY`), or, when someone asked it directly,
//! says it does not know. In an ambient batch only questions are looked up:
//! chatter that happens to share words with the docs gets no answer.

use std::sync::Arc;

use bm25::{Language, SearchEngine, SearchEngineBuilder};
use futures::future::BoxFuture;
use tactful_core::transcript::Entry;
use tactful_core::{TurnKind, TurnRequest};

use crate::{Agent, AgentError, AgentReply, Deltas};

/// One markdown document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KbDoc {
    /// Where it came from, as cited in answers (e.g. `docs/config.md`).
    pub source: String,
    /// Its markdown.
    pub text: String,
}

/// A section of a document: a heading and what follows it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Section {
    source: String,
    heading: String,
    body: String,
}

/// The longest excerpt quoted in an answer, in characters.
const EXCERPT_CHARS: usize = 480;

/// The default relevance threshold; calibrated on tactful's own docs so
/// that questions about them clear it and everyday chatter does not.
pub const DEFAULT_MIN_SCORE: f32 = 4.0;

/// A knowledge-base agent.
pub struct KbAgent {
    sections: Vec<Section>,
    engine: SearchEngine<usize>,
    min_score: f32,
}

impl std::fmt::Debug for KbAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KbAgent")
            .field("sections", &self.sections.len())
            .field("min_score", &self.min_score)
            .finish()
    }
}

/// Splits markdown into sections at `#` headings (code blocks are not
/// headings).
fn sections(doc: &KbDoc) -> Vec<Section> {
    let mut out = Vec::new();
    let mut heading = doc.source.clone();
    let mut body = String::new();
    let mut in_code = false;
    for line in doc.text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if !in_code && line.starts_with('#') {
            if !body.trim().is_empty() {
                out.push(Section {
                    source: doc.source.clone(),
                    heading: heading.clone(),
                    body: std::mem::take(&mut body),
                });
            }
            body.clear();
            heading = line.trim_start_matches('#').trim().to_owned();
            continue;
        }
        body.push_str(line);
        body.push('\n');
    }
    if !body.trim().is_empty() {
        out.push(Section {
            source: doc.source.clone(),
            heading,
            body,
        });
    }
    out
}

/// The opening prose of a section: its first paragraphs, without code,
/// tables or HTML, up to [`EXCERPT_CHARS`].
fn excerpt(body: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for para in body.split("\n\n") {
        let p = para.trim();
        // A paragraph with an odd number of fences opens or closes a block.
        if in_code || p.starts_with("```") {
            if p.matches("```").count() % 2 == 1 {
                in_code = !in_code;
            }
            continue;
        }
        if p.is_empty() || p.starts_with('|') || p.starts_with('<') {
            continue;
        }
        let p = p.split_whitespace().collect::<Vec<_>>().join(" ");
        if out.chars().count() + p.chars().count() > EXCERPT_CHARS {
            if out.is_empty() {
                let cut: String = p.chars().take(EXCERPT_CHARS).collect();
                let end = cut.rfind(". ").map_or(cut.len(), |i| i + 1);
                out.push_str(&cut[..end]);
            }
            break;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&p);
    }
    out
}

/// The words of a message worth searching for: mentions removed.
fn query_of(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().filter(|w| !w.starts_with('@')).collect();
    searchable(&words.join(" "))
}

/// Text as the index sees it: `rate_limit` and `reply-to` are words apart,
/// so they match "rate limit" and "reply to".
fn searchable(text: &str) -> String {
    text.replace(['_', '-', '`'], " ")
}

impl KbAgent {
    /// Indexes `docs`; answers only at `min_score` or above.
    pub fn new(docs: &[KbDoc], min_score: f32) -> Self {
        let sections: Vec<Section> = docs.iter().flat_map(sections).collect();
        let documents = sections
            .iter()
            .enumerate()
            // The heading says what the section is about: it counts twice.
            .map(|(i, s)| {
                bm25::Document::new(i, searchable(&format!("{h}\n{h}\n{}", s.body, h = s.heading)))
            });
        let engine = SearchEngineBuilder::<usize>::with_documents(Language::English, documents).build();
        KbAgent {
            sections,
            engine,
            min_score,
        }
    }

    /// How many sections are indexed.
    pub fn len(&self) -> usize {
        self.sections.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.sections.is_empty()
    }

    /// The best section for `query` and its score, if it clears the
    /// threshold.
    fn lookup(&self, query: &str) -> Option<(f32, &Section)> {
        if std::env::var_os("TACTFUL_KB_DEBUG").is_some() {
            for h in self.engine.search(query, 2) {
                let s = &self.sections[h.document.id];
                tracing::info!(score = h.score, source = %s.source, heading = %s.heading, "kb candidate");
                eprintln!("  {:.2} {} / {}", h.score, s.source, s.heading);
            }
        }
        let hit = self.engine.search(query, 1).into_iter().next()?;
        (hit.score >= self.min_score).then(|| (hit.score, &self.sections[hit.document.id]))
    }

    /// The answer text for a turn (before it is sent).
    pub fn answer(&self, turn: &TurnRequest) -> String {
        let ambient = turn.kind == TurnKind::Ambient;
        // In a batch, only questions; asked directly, the newest message.
        let candidates: Vec<&Arc<Entry>> = if ambient {
            turn.triggers.iter().filter(|e| e.text.contains('?')).collect()
        } else {
            turn.triggers.last().into_iter().collect()
        };
        let best = candidates
            .iter()
            .filter_map(|e| self.lookup(&query_of(&e.text)).map(|(score, s)| (score, s, *e)))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        match best {
            Some((_, s, e)) => format!(
                "[[reply_to:{}]]\n{}\n\n(from {}, \"{}\")",
                e.id,
                excerpt(&s.body),
                s.source,
                s.heading
            ),
            // Not asked directly: nothing worth saying.
            None if !turn.addressed => "NO_REPLY".to_owned(),
            None => {
                let id = turn.triggers.last().map(|e| e.id.to_string()).unwrap_or_default();
                format!(
                    "[[reply_to:{id}]]\nI couldn't find that in the docs I know. Try asking with other words?"
                )
            }
        }
    }
}

impl Agent for KbAgent {
    fn run<'a>(
        &'a self,
        turn: &'a TurnRequest,
        deltas: &'a mut dyn Deltas,
    ) -> BoxFuture<'a, Result<AgentReply, AgentError>> {
        Box::pin(async move {
            let text = self.answer(turn);
            deltas.delta(&text);
            Ok(AgentReply { text, usage: None })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_splits_at_headings_but_not_inside_code() {
        let doc = KbDoc {
            source: "a.md".into(),
            text: "intro\n# One\ntext one\n```sh\n# not a heading\n```\n## Two\ntext two\n".into(),
        };
        let s = sections(&doc);
        let headings: Vec<&str> = s.iter().map(|s| s.heading.as_str()).collect();
        assert_eq!(headings, ["a.md", "One", "Two"]);
        assert!(s[1].body.contains("# not a heading"));
    }

    #[test]
    fn excerpts_skip_code_and_tables() {
        let body = "\n```toml\nx = 1\n```\n\n| a | b |\n|---|---|\n\nThe first real sentence. And more.\n\nSecond paragraph.";
        assert_eq!(
            excerpt(body),
            "The first real sentence. And more.\nSecond paragraph."
        );
    }
}
