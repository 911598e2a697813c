//! Whether the Guide may answer a question from its best section, or
//! should say it is not sure: a small learned model.
//!
//! How much the best section outscores the next says too little on its own:
//! a newcomer asks in words the docs do not use ("can I stop it saying
//! something nasty?"), and the search then ranks some section first with
//! a fine margin for the wrong reason. What tells a right first section
//! from a wrong one is a handful of signals together: how high the best
//! section scores and by how much, what its score is made of (its body,
//! its heading, its example questions), how many of the question's words
//! the docs never use, and how long the question is. A logistic regression
//! over them, trained by `scripts/guide-train.py --sure` on the sets the
//! Guide may be tuned on (never the frozen ones), says how likely the best
//! section is a right answer; below [`Model::threshold`] the Guide says
//! "Not sure —" and lists the closest sections (the `unsure` module).
//! It only adds doubt to the margin rule (`unsure::SURE_MARGIN`), never
//! removes it. Its weights are built in (`sure.json`).

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

use super::gate::logistic;
use super::rank::Parts;

/// The model as `scripts/guide-train.py --sure` writes it.
#[derive(Deserialize)]
struct Model {
    threshold: f32,
    weights: HashMap<String, f32>,
    /// Each signal's least and greatest value in training: a kb whose
    /// scores run beyond them (a larger one than tactful's docs) is read
    /// at the edge of what the model learned, not extrapolated.
    #[serde(default)]
    range: HashMap<String, (f32, f32)>,
}

static MODEL: LazyLock<Option<Model>> =
    LazyLock::new(|| serde_json::from_str(include_str!("sure.json")).ok());

/// Words too common to say whether a question is in the docs' language.
const STOP: &[&str] = &[
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "to", "of", "in", "on", "at", "for", "and",
    "or", "but", "if", "it", "its", "this", "that", "i", "you", "we", "my", "me", "our", "do", "does", "did",
    "can", "could", "would", "will", "should", "how", "what", "when", "where", "why", "who", "which",
    "there", "here", "with", "from", "by", "as", "about", "into", "so", "not", "no", "just", "any", "some",
];

/// A text's words as the model counts them: lower-case letters, stop
/// words out.
fn words(text: &str) -> Vec<String> {
    static WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[a-z]+").expect("regex"));
    WORD.find_iter(&text.to_lowercase())
        .map(|m| m.as_str().to_owned())
        .filter(|w| !STOP.contains(&w.as_str()))
        .collect()
}

/// The words a kb's documents use, and those its example questions add.
#[derive(Default)]
pub(super) struct Vocabulary {
    docs: HashSet<String>,
    asked: HashSet<String>,
}

impl Vocabulary {
    /// The words of `docs`.
    pub(super) fn of<'t>(docs: impl IntoIterator<Item = &'t str>) -> Self {
        Vocabulary {
            docs: docs.into_iter().flat_map(words).collect(),
            asked: HashSet::new(),
        }
    }

    /// With the words of example questions `asks`.
    pub(super) fn asked<'t>(&mut self, asks: impl IntoIterator<Item = &'t str>) {
        self.asked.extend(asks.into_iter().flat_map(words));
    }

    /// Of `text`'s words, the share the documents never use, and the share
    /// neither they nor the example questions use.
    fn unknown(&self, text: &str) -> (f32, f32) {
        let all = words(text);
        if all.is_empty() {
            return (1.0, 1.0);
        }
        let n = all.len() as f32;
        let not_docs = all.iter().filter(|w| !self.docs.contains(*w)).count() as f32;
        let neither = all
            .iter()
            .filter(|w| !self.docs.contains(*w) && !self.asked.contains(*w))
            .count() as f32;
        (not_docs / n, neither / n)
    }
}

/// What the model reads of a question and its search.
pub(super) struct Evidence<'a> {
    /// The line as written; mentions (`@guide`) are not read.
    pub text: &'a str,
    /// The best section's score, in its parts.
    pub top: Parts,
    /// The second best section's score.
    pub second: f32,
    /// The best small-talk score.
    pub chatter: f32,
    /// Whether it reads as a question.
    pub question: bool,
    /// Whether the kb has example questions.
    pub examples: bool,
}

/// The model's inputs; `scripts/guide-train.py` learns from them as
/// exported, so there is no second copy of this code to keep in step.
pub(super) fn features(e: &Evidence<'_>, vocabulary: &Vocabulary) -> Vec<(&'static str, f32)> {
    let top = e.top.score();
    // A mention is how the line was addressed, not what it asks.
    let text: String = e
        .text
        .split_whitespace()
        .filter(|w| !w.starts_with('@'))
        .collect::<Vec<_>>()
        .join(" ");
    let (not_docs, neither) = vocabulary.unknown(&text);
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    vec![
        ("bias", 1.0),
        ("top", top / 20.0),
        ("ratio", (top / (e.second + 0.1)).min(3.0) / 3.0),
        ("diff", (top - e.second) / 10.0),
        ("body", e.top.body / 10.0),
        ("heading", e.top.heading / 5.0),
        ("whole_heading", e.top.whole_heading / 2.5),
        ("example", e.top.example.0 / 10.0),
        ("example2", e.top.example.1 / 10.0),
        ("chatter", e.chatter / 10.0),
        ("question", flag(e.question)),
        ("examples", flag(e.examples)),
        ("len", (text.split_whitespace().count().min(30) as f32) / 30.0),
        ("unknown", not_docs),
        ("unknown_asked", neither),
    ]
}

/// Whether the best section may be answered from: `None` without the
/// built-in model.
pub(super) fn sure(e: &Evidence<'_>, vocabulary: &Vocabulary) -> Option<bool> {
    let m = MODEL.as_ref()?;
    let z: f32 = features(e, vocabulary)
        .iter()
        .map(|(k, v)| {
            let v = m.range.get(*k).map_or(*v, |&(lo, hi)| v.clamp(lo, hi));
            m.weights.get(*k).copied().unwrap_or(0.0) * v
        })
        .sum();
    Some(logistic(z) >= m.threshold)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(text: &str, body: f32, second: f32) -> Evidence<'_> {
        Evidence {
            text,
            top: Parts {
                body,
                ..Parts::default()
            },
            second,
            chatter: 0.0,
            question: true,
            examples: false,
        }
    }

    #[test]
    fn the_model_is_built_in_and_doubts_a_question_in_other_words() {
        assert!(MODEL.is_some(), "sure.json parses");
        let v = Vocabulary::of(["# Floor\nOne persona answers a question; the others pass."]);
        assert_eq!(v.unknown("who answers the question?"), (0.0, 0.0));
        assert_eq!(v.unknown("Which bot answers?"), (0.5, 0.5));
        assert_eq!(v.unknown("?"), (1.0, 1.0));
        // A section far ahead on the docs' own words; one barely ahead
        // on a question the docs' words do not cover.
        let clear = "who answers a question on the floor?";
        assert_eq!(sure(&evidence(clear, 30.0, 3.0), &v), Some(true));
        assert_eq!(
            sure(&evidence("zorbling flimflam wobbles gorp?", 4.1, 4.0), &v),
            Some(false)
        );
        // How it was addressed does not move it.
        for (text, body, second) in [(clear, 30.0, 3.0), ("which floor?", 6.0, 5.0)] {
            let with = format!("@helpbot {text}");
            assert_eq!(
                sure(&evidence(&with, body, second), &v),
                sure(&evidence(text, body, second), &v),
                "{with}"
            );
        }
        // A clear winner stays sure however far its score runs past what
        // the model saw in training.
        for body in [30.0, 60.0, 200.0, 10_000.0] {
            assert_eq!(sure(&evidence(clear, body, 3.0), &v), Some(true), "{body}");
        }
    }

    #[test]
    fn the_model_has_a_weight_and_a_range_for_each_input_and_no_other() {
        let m = MODEL.as_ref().expect("sure.json parses");
        let v = Vocabulary::default();
        let e = evidence("x", 0.0, 0.0);
        let mut inputs: Vec<&str> = features(&e, &v).into_iter().map(|(k, _)| k).collect();
        inputs.sort();
        let mut weights: Vec<&str> = m.weights.keys().map(String::as_str).collect();
        weights.sort();
        assert_eq!(
            inputs, weights,
            "sure.json was trained on other inputs: train it again"
        );
        for k in inputs {
            assert!(m.range.contains_key(k), "no range for {k}");
        }
    }
}
