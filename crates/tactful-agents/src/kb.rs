//! `kind = "kb"`: answers from markdown documents, offline.
//!
//! The documents are split into sections at their headings and indexed with
//! BM25 (the `bm25` crate: stemming, stop words, Unicode folding). A turn's
//! question is looked up; when the best section scores at least
//! `min_score` and is likely the right one ([`doubt`]), the answer quotes
//! the block of it that holds the question's words and cites the file and
//! heading it came from, as a reply to the question; when it may not be,
//! the answer says so and lists the closest sections ([`unsure`]). Below the threshold
//! the agent stays silent (`NO_REPLY`), or, when someone asked it directly,
//! says it does not know. In an ambient batch a line is answered only when
//! a small learned model says it asks the docs something ([`gate`]), so
//! chatter that happens to share words with the docs gets no answer.
//! Example questions for the sections, in people's words ([`KbQuestions`]),
//! find a section a question shares few words with. A reply to one of its
//! own answers ("can you say more?") continues past what that answer
//! showed.

mod doubt;
mod gate;
mod grounded;
mod questions;
mod quote;
mod rank;
mod settings;
mod talk;
mod unsure;

pub use grounded::GroundedAgent;
pub use questions::{KbQuestions, QuestionsError, parse_questions};

use std::sync::Arc;

use bm25::{Language, SearchEngine, SearchEngineBuilder, Tokenizer as _};
use futures::future::BoxFuture;
use tactful_core::transcript::Entry;
use tactful_core::{TurnKind, TurnRequest};

use crate::{Agent, AgentError, AgentReply, Deltas};
use quote::{excerpt, more_of, prose_excerpt};
use rank::{Parts, Ranked};
use unsure::Found;

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

impl Section {
    /// `FILE#HEADING`, as answers cite it; empty for small talk.
    fn name(&self) -> String {
        if self.source.is_empty() {
            String::new()
        } else {
            format!("{}#{}", self.source, self.heading)
        }
    }
}

/// Checks example questions against `docs` without indexing anything:
/// each key must name exactly one of their sections.
pub fn check_questions(docs: &[KbDoc], list: &[KbQuestions]) -> Result<(), QuestionsError> {
    let names: Vec<String> = docs.iter().flat_map(sections).map(|s| s.name()).collect();
    questions::resolve(list, &names).map(|_| ())
}

/// What each word of a question found in a section's heading adds to the
/// section's score.
const HEADING_BONUS: f32 = 2.5;

/// The default relevance threshold; calibrated on tactful's own docs so
/// that questions about them clear it and everyday chatter does not.
pub const DEFAULT_MIN_SCORE: f32 = 4.0;

/// A knowledge-base agent.
pub struct KbAgent {
    sections: Vec<Section>,
    /// Settings the docs define, and which section speaks of which.
    settings: settings::Settings,
    /// Each section's heading as search terms (stemmed, stop words out).
    headings: Vec<std::collections::HashSet<String>>,
    tokenizer: bm25::DefaultTokenizer,
    engine: SearchEngine<usize>,
    /// Which documents point to which for more (`docs/faq.md` →
    /// `docs/config.md`).
    refers: Vec<(String, String)>,
    /// Example questions for sections, if the operator gave some.
    questions: Option<questions::Questions>,
    /// The words the docs and the example questions use.
    vocabulary: doubt::Vocabulary,
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

/// A reply to message `id` quoting `text` from `s`, with the citation that
/// a follow-up later reads back (see `KbAgent::followed_up`).
fn cited(id: &tactful_core::MsgId, text: &str, s: &Section) -> String {
    format!(
        "[[reply_to:{id}]]\n{text}\n\n(from {}, \"{}\")",
        s.source, s.heading
    )
}

/// Words people use for what the docs call otherwise, added to a query.
const SYNONYMS: &[(&str, &str)] = &[
    ("bot", "persona"),
    ("bots", "personas"),
    ("answer", "reply"),
    ("answers", "replies"),
    ("answering", "replying"),
    ("quiet", "silence silent"),
    ("loop", "max_bot_turns forever"),
    ("loops", "max_bot_turns forever"),
    ("users", "allowed_users"),
    ("env", "environment ${ENV}"),
    ("variable", "${ENV} expansion"),
    ("often", "rate limit"),
    ("mentioned", "mention mode"),
    ("particular", "specific reply_to"),
    ("llm", "model"),
    ("chatty", "ambient all mode"),
    ("cost", "budget spend tokens"),
    ("costs", "budget spend tokens"),
    ("restarts", "restart store survives"),
];

/// Phrases people use for what the docs name otherwise, and the docs'
/// words (or setting) for them, added to a question before it is looked up.
const PHRASES: &[(&str, &str)] = &[
    ("no_reply", "stay silent silence"),
    ("not to answer", "stay silent"),
    ("not answer", "stay silent"),
    ("reply_to", "reply to a specific message"),
    ("same question", "floor one answer not three"),
    ("other bots", "talking to each other forever"),
    ("why didn't", "why stayed quiet see"),
    ("why did not", "why stayed quiet see"),
    ("why didnt", "why stayed quiet see"),
    ("why doesnt", "why stayed quiet see"),
    ("why doesn't", "why stayed quiet see"),
    ("who can", "allowed_users"),
    ("run the demo", "two commands cargo run demo"),
    ("agent kinds", "kind backend openai acp command script"),
    ("how long can a reply", "max_reply_chars"),
    ("at once", "max_concurrent_turns"),
    ("modes", "mode mention all command observe"),
];

/// `text` with the docs' words for its phrases added (see [`PHRASES`]).
fn with_phrases(text: &str) -> String {
    let lower = text.to_lowercase();
    let mut out = text.to_owned();
    for (phrase, docs) in PHRASES {
        if lower.contains(phrase) {
            out.push(' ');
            out.push_str(docs);
        }
    }
    out
}

/// The words of a message worth searching for: mentions removed, with the
/// docs' own word for what people call otherwise.
fn query_of(text: &str) -> String {
    let mut words: Vec<String> = text
        .split_whitespace()
        .filter(|w| !w.starts_with('@'))
        .map(str::to_owned)
        .collect();
    let extra: Vec<String> = words
        .iter()
        .filter_map(|w| {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
            SYNONYMS
                .iter()
                .find(|(k, _)| *k == w)
                .map(|(_, v)| (*v).to_owned())
        })
        .collect();
    words.extend(extra);
    searchable(&words.join(" "))
}

/// Text as the index sees it: `rate_limit` and `reply-to` are words apart,
/// so they match "rate limit" and "reply to".
fn searchable(text: &str) -> String {
    text.replace(['_', '-', '`', '.', '/'], " ")
}

impl KbAgent {
    /// Indexes `docs`; answers only at `min_score` or above.
    pub fn new(docs: &[KbDoc], min_score: f32) -> Self {
        let mut sections: Vec<Section> = docs.iter().flat_map(sections).collect();
        // Small talk, indexed beside the docs: a source-less section.
        sections.extend(talk::SMALL_TALK.iter().map(|t| Section {
            source: String::new(),
            heading: String::new(),
            body: (*t).to_owned(),
        }));
        let mut documents = Vec::new();
        for (i, s) in sections.iter().enumerate() {
            // The heading says what the section is about: it counts thrice.
            let whole = format!("{h}\n{h}\n{h}\n{}", s.body, h = s.heading);
            documents.push(bm25::Document::new(i, searchable(&whole)));
        }
        let settings = settings::Settings::new(
            sections
                .iter()
                .map(|s| (!s.source.is_empty()).then_some(s.body.as_str())),
        );
        let engine = SearchEngineBuilder::<usize>::with_documents(Language::English, documents).build();
        let tokenizer = bm25::DefaultTokenizer::new(Language::English);
        let headings = sections
            .iter()
            .map(|s| tokenizer.tokenize(&searchable(&s.heading)).into_iter().collect())
            .collect();
        // A document points to the longer documentation when it names a
        // document whose sections are longer than its own (a FAQ's short
        // answers → the reference); the reference naming a file in an
        // example is no such pointer.
        let mean_len = |source: &str| {
            let lens: Vec<usize> = sections
                .iter()
                .filter(|s| s.source == source)
                .map(|s| s.body.len())
                .collect();
            lens.iter().sum::<usize>() / lens.len().max(1)
        };
        let refers = docs
            .iter()
            .flat_map(|from| {
                docs.iter()
                    .filter(|to| {
                        to.source != from.source
                            && from.text.contains(to.source.as_str())
                            && mean_len(&to.source) > mean_len(&from.source)
                    })
                    .map(|to| (from.source.clone(), to.source.clone()))
            })
            .collect();
        KbAgent {
            refers,
            sections,
            settings,
            headings,
            tokenizer,
            engine,
            questions: None,
            vocabulary: doubt::Vocabulary::of(docs.iter().map(|d| d.text.as_str())),
            min_score,
        }
    }

    /// The agent with example questions for its sections ([`KbQuestions`]):
    /// a line close to one is about that example's section. Fails when one
    /// names a section the documents do not have, or a heading two share.
    pub fn with_questions(mut self, list: &[KbQuestions]) -> Result<Self, QuestionsError> {
        let at = questions::resolve(list, &self.names())?;
        self.questions = Some(questions::Questions::new(list, &at));
        self.vocabulary
            .asked(list.iter().flat_map(|q| q.asks.iter().map(String::as_str)));
        Ok(self)
    }

    /// Each section's name as answers cite it, `FILE#HEADING`; empty for
    /// small talk.
    fn names(&self) -> Vec<String> {
        self.sections.iter().map(Section::name).collect()
    }

    /// How many documentation sections are indexed.
    pub fn len(&self) -> usize {
        self.sections.iter().filter(|s| !s.source.is_empty()).count()
    }

    /// Whether no documentation is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What answers a question put to it directly: a section that clears
    /// the threshold and explains it clearly better than small talk would,
    /// if it is clearly the one ([`Found::Sure`]); else the closest
    /// sections ([`Found::Unsure`]), unless the line is no question and
    /// asks the docs nothing ("see you tomorrow"). Below the threshold,
    /// nothing in the docs is near enough to point to.
    fn lookup(&self, raw: &str) -> Option<Found<'_>> {
        let r = self.ranked(raw);
        if self.clear_best(&r).is_some() {
            return match self.sureness(raw, &r) {
                // Doubt about a line that asks nothing ("see you
                // tomorrow") is no answer either.
                Found::Unsure(_) if !talk::is_question(raw) && gate::asks_nothing(&self.seen(raw, &r)) => {
                    None
                }
                found => Some(found),
            };
        }
        // Small talk ("@guide thanks!") is not a doubt about the docs.
        if r.docs
            .first()
            .is_none_or(|d| d.1 < r.chatter * talk::MARGIN_OVER_CHATTER)
        {
            return None;
        }
        let near: Vec<&Section> = r
            .docs
            .iter()
            .filter(|d| d.1 >= self.min_score)
            .take(unsure::LINKS)
            .map(|d| &self.sections[d.0])
            .collect();
        (!near.is_empty()).then_some(Found::Unsure(near))
    }

    /// [`KbAgent::lookup`]'s rule on a line already ranked: the section
    /// defining a setting it names, else the best one if it clears the
    /// threshold and beats small talk by the margin.
    fn clear_best(&self, r: &Ranked) -> Option<(f32, &Section)> {
        if let Some(i) = r.defined {
            return Some((f32::MAX, &self.sections[i]));
        }
        let &(best, score) = r.docs.first()?;
        (score >= self.min_score && score >= r.chatter * talk::MARGIN_OVER_CHATTER)
            .then(|| (score, &self.sections[best]))
    }

    /// Whether the section an answer would quote is clearly the one: it
    /// defines a setting the line names, or it outscores the next best by
    /// [`unsure::SURE_MARGIN`] and the learned model ([`doubt`]) finds it
    /// likely right; else the closest few.
    fn sureness(&self, raw: &str, r: &Ranked) -> Found<'_> {
        if let Some(i) = r.defined {
            return Found::Sure(&self.sections[i]);
        }
        let top = r.docs.first().map_or(0.0, |d| d.1);
        let second = r.docs.get(1).map_or(0.0, |d| d.1);
        // The model only adds doubt: two sections the search can hardly
        // tell apart are a doubt whatever else it reads.
        let sure = top > second
            && top >= unsure::SURE_MARGIN * second
            && doubt::sure(&self.evidence(raw, r), &self.vocabulary).unwrap_or(true);
        match r.pick() {
            Some(i) if sure => Found::Sure(&self.sections[i]),
            // The closest few, each at least half as close as the best:
            // a section the question barely touches is no place to look.
            // The best is always among them, so the list is never empty.
            _ => Found::Unsure(
                r.docs
                    .iter()
                    .enumerate()
                    .filter(|(n, d)| *n == 0 || (d.1 > 0.0 && d.1 >= top / 2.0))
                    .take(unsure::LINKS)
                    .map(|(_, d)| &self.sections[d.0])
                    .collect(),
            ),
        }
    }

    /// What the sureness model reads of a question ranked `r`.
    fn evidence<'t>(&self, raw: &'t str, r: &Ranked) -> doubt::Evidence<'t> {
        doubt::Evidence {
            text: raw,
            top: r.docs.first().map_or_else(Parts::default, |d| r.parts[d.0]),
            second: r.docs.get(1).map_or(0.0, |d| d.1),
            chatter: r.chatter,
            question: talk::is_question(raw),
            examples: self.questions.is_some(),
        }
    }

    /// What the gate reads of a line: its words, and what the search
    /// made of it.
    fn seen<'t>(&self, text: &'t str, r: &Ranked) -> gate::Seen<'t> {
        gate::Seen {
            text,
            question: talk::is_question(text),
            defined: r.names_setting,
            top: r.docs.first().map_or(0.0, |d| d.1),
            chatter: r.chatter,
            near_chatter: talk::near_chatter(&r.query),
            examples: self.questions.is_some(),
        }
    }

    /// What answers a line heard in an ambient batch, nobody asking the
    /// persona: only when the line asks the docs something ([`gate`]);
    /// without the model, by [`KbAgent::lookup`]'s rule for a question.
    fn heard(&self, raw: &str) -> Option<Found<'_>> {
        let r = self.ranked(raw);
        let seen = self.seen(raw, &r);
        match gate::answers(&seen) {
            Some(false) => None,
            Some(true) if r.docs.is_empty() => None,
            Some(true) => Some(self.sureness(raw, &r)),
            None => (seen.question && self.clear_best(&r).is_some()).then(|| self.sureness(raw, &r)),
        }
    }

    /// What an answer quotes of `s` for `question`: the block holding the
    /// question's words ([`quote::answering`]), else the section's opening.
    fn quote(&self, s: &Section, question: &str) -> String {
        let terms = |t: &str| -> std::collections::HashSet<String> {
            self.tokenizer.tokenize(&searchable(t)).into_iter().collect()
        };
        let words = terms(&query_of(&with_phrases(question)));
        quote::answering(&s.body, &words, terms).unwrap_or_else(|| excerpt(&s.body))
    }

    /// What the search made of `text`, as `scripts/guide-train.py` reads
    /// it (`KB_EXPORT=<file>` in the kb tests): the gate's inputs, the five
    /// best sections as `file#heading`, the section an answer would quote
    /// (`pick`: the one defining a setting it names, else the best), the
    /// sureness model's inputs (`sure`), and whether a named setting's
    /// section answers it without the model (`answered_by_setting`).
    #[doc(hidden)]
    pub fn export(&self, text: &str) -> serde_json::Value {
        let r = self.ranked(text);
        let seen = self.seen(text, &r);
        let top: Vec<(String, f32)> = r
            .docs
            .iter()
            .map(|&(i, score)| (self.sections[i].name(), score))
            .collect();
        serde_json::json!({
            "text": text,
            "top": top,
            "chatter": r.chatter,
            "q": talk::is_question(text),
            "defined": r.names_setting,
            "pick": r.pick().map(|i| self.sections[i].name()),
            "near_chatter": talk::near_chatter(&r.query),
            "examples": self.questions.is_some(),
            "asks": gate::asks(&seen),
            "answers": gate::answers(&seen),
            "sure": doubt::features(&self.evidence(text, &r), &self.vocabulary)
                .into_iter()
                .collect::<std::collections::BTreeMap<_, _>>(),
            "answered_by_setting": r.defined.is_some(),
        })
    }

    /// When `e` replies to one of this persona's own answers, the section
    /// that answer quoted, and what it showed of it.
    fn followed_up<'s>(&'s self, turn: &'s TurnRequest, e: &Entry) -> Option<(&'s Section, &'s str)> {
        let to = e.reply_to.as_ref()?;
        let answer = turn
            .history
            .iter()
            .chain(&turn.triggers)
            .find(|h| &h.id == to && h.persona == Some(turn.persona_idx))?;
        let (shown, cite) = answer.text.rsplit_once("\n\n(from ")?;
        let (source, heading) = cite.trim_end_matches(")").split_once(", ")?;
        let heading = heading.trim_matches('"');
        self.sections
            .iter()
            .find(|s| s.source == source && s.heading == heading)
            .map(|s| (s, shown))
    }

    /// What a turn asks about, and the message each answers, newest
    /// question first; a follow-up to one of its own answers ("say more")
    /// gets the section that answer came from. Empty when nothing clears
    /// the threshold.
    fn wanted<'s>(&'s self, turn: &'s TurnRequest) -> Vec<(Found<'s>, &'s Arc<Entry>)> {
        if let Some(e) = turn.triggers.last()
            && let Some((s, _)) = self.followed_up(turn, e)
        {
            return vec![(Found::Sure(s), e)];
        }
        // In a batch, every line that asks the docs something; asked
        // directly, the newest message.
        let found: Vec<(Found<'s>, &Arc<Entry>)> = if turn.kind == TurnKind::Ambient {
            turn.triggers
                .iter()
                .rev()
                .filter_map(|e| self.heard(&e.text).map(|f| (f, e)))
                .collect()
        } else {
            turn.triggers
                .last()
                .and_then(|e| self.lookup(&e.text).map(|f| (f, e)))
                .into_iter()
                .collect()
        };
        // Two questions the same section answers get it once, under the
        // newer one.
        let mut answers: Vec<(Found<'s>, &Arc<Entry>)> = Vec::new();
        for (f, e) in found {
            let again = |seen: &Found<'_>| match (seen, &f) {
                (Found::Sure(a), Found::Sure(b)) => std::ptr::eq(*a, *b),
                _ => false,
            };
            if !answers.iter().any(|(seen, _)| again(seen)) {
                answers.push((f, e));
            }
        }
        answers
    }

    /// "Say more" after an answer from `s`: the rest of `s`; when it has
    /// no more (a FAQ entry is a paragraph), the longer section elsewhere in
    /// the docs on the same subject (the FAQ's `mode = "ambient"` goes on in
    /// `docs/config.md`); else it says plainly that this is all.
    fn say_more(&self, e: &Entry, s: &Section, shown: &str) -> String {
        if let Some(more) = more_of(&s.body, shown) {
            return cited(&e.id, &more, s);
        }
        if let Some(d) = self.deeper(s) {
            return cited(&e.id, &excerpt(&d.body), d);
        }
        cited(
            &e.id,
            &format!(
                "That is all the docs say about this. In short: {}",
                excerpt(&s.body)
            ),
            s,
        )
    }

    /// Where the longer documentation says more about what `s` says: of
    /// the three sections elsewhere that match it best (above the
    /// threshold), the best one in a document `s`'s own names (a FAQ that
    /// says "see docs/config.md" goes on there). A document that names no
    /// other is the longer documentation itself: nothing deeper.
    fn deeper(&self, s: &Section) -> Option<&Section> {
        let query = searchable(&format!("{h} {h} {}", s.body, h = s.heading));
        let found: Vec<&Section> = self
            .engine
            .search(&query, self.sections.len())
            .into_iter()
            .filter(|h| h.score >= self.min_score)
            .map(|h| &self.sections[h.document.id])
            .filter(|d| !d.source.is_empty() && d.source != s.source && !prose_excerpt(&d.body).is_empty())
            .take(3)
            .collect();
        let named = |d: &&Section| {
            self.refers
                .iter()
                .any(|(from, to)| *from == s.source && *to == d.source)
        };
        found.iter().copied().find(named)
    }

    /// The answer text for a turn (before it is sent).
    pub fn answer(&self, turn: &TurnRequest) -> String {
        // A follow-up to one of its own answers continues that section.
        if let Some(e) = turn.triggers.last()
            && let Some((s, shown)) = self.followed_up(turn, e)
        {
            return self.say_more(e, s, shown);
        }
        // Every question that has an answer, newest first, one reply each.
        let answers = self.wanted(turn);
        if !answers.is_empty() {
            return answers
                .iter()
                .map(|(f, e)| match f {
                    Found::Sure(s) => cited(&e.id, &self.quote(s, &e.text), s),
                    Found::Unsure(near) => unsure::not_sure(&e.id, near),
                })
                .collect::<Vec<_>>()
                .join("\n\n");
        }
        if !turn.addressed {
            // Not asked directly: nothing worth saying.
            return "NO_REPLY".to_owned();
        }
        let id = turn.triggers.last().map(|e| e.id.to_string()).unwrap_or_default();
        format!("[[reply_to:{id}]]\nI couldn't find that in the docs I know. Try asking with other words?")
    }

    /// The documentation a model answering `turn` should have before it:
    /// the sections its questions are about, whole (up to a few thousand
    /// characters each), each headed by how to cite it. `None`: nothing in
    /// the docs is about it.
    pub fn context_for(&self, turn: &TurnRequest) -> Option<String> {
        let wanted = self.wanted(turn);
        if wanted.is_empty() {
            return None;
        }
        let mut out = String::from(
            "Documentation that may answer the messages below. Answer from it, briefly, and end each answer with its source as (from FILE, \"HEADING\"). If it does not answer a question, say so rather than guess.\n",
        );
        for (f, e) in &wanted {
            let s = f.closest();
            let body: String = s.body.trim().chars().take(CONTEXT_CHARS).collect();
            out.push_str(&format!(
                "\n--- {} · \"{}\" (for message {}) ---\n{body}\n",
                s.source, s.heading, e.id
            ));
        }
        Some(out)
    }
}

/// The most of one section put before a model, in characters.
const CONTEXT_CHARS: usize = 4000;

impl Agent for KbAgent {
    fn run<'a>(
        &'a self,
        turn: &'a TurnRequest,
        deltas: &'a mut dyn Deltas,
    ) -> BoxFuture<'a, Result<AgentReply, AgentError>> {
        Box::pin(async move {
            let text = self.answer(turn);
            deltas.delta(&text);
            Ok(AgentReply::text(text))
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
}
