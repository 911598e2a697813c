//! Whether a line in an ambient batch asks the docs something: a small
//! learned model, not a list of phrases.
//!
//! Chatter in a team room is full of the docs' words ("is the deploy config
//! in the wiki?", "who has the key to the server room?"), and people ask
//! without a question mark ("graceful shutdown window on sigterm"). A
//! logistic regression over a line's words and word pairs, how it opens and
//! ends, and what the search made of it (its best section's score against
//! the best small talk's) tells them apart. It is trained by
//! `scripts/guide-train.py` on the sets the Guide may be tuned on
//! (`tests/guide/tuning.txt` lists them), never on the frozen ones; its
//! weights are built into the binary: `gate.json` for a
//! kb without example questions, `gate-examples.json` for one with them.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

/// The model as `scripts/guide-train.py` writes it.
#[derive(Deserialize)]
struct Model {
    threshold: f32,
    min_score: f32,
    weights: HashMap<String, f32>,
}

/// The model for a kb without example questions.
static MODEL: LazyLock<Option<Model>> =
    LazyLock::new(|| serde_json::from_str(include_str!("gate.json")).ok());

/// The model for a kb with example questions: they raise the search's
/// scores, so a line reads otherwise (trained on the same lines, with them).
static MODEL_EXAMPLES: LazyLock<Option<Model>> =
    LazyLock::new(|| serde_json::from_str(include_str!("gate-examples.json")).ok());

/// The model for what `s` was seen by.
fn model(s: &Seen<'_>) -> Option<&'static Model> {
    if s.examples {
        MODEL_EXAMPLES.as_ref()
    } else {
        MODEL.as_ref()
    }
}

/// What the search made of a line, as the model reads it.
pub(super) struct Seen<'a> {
    pub text: &'a str,
    /// Whether it reads as a question (a `?`, a question's opening).
    pub question: bool,
    /// Whether it names a setting a section defines (`allow_silence`).
    pub defined: bool,
    /// The best documentation section's score.
    pub top: f32,
    /// The best small-talk score.
    pub chatter: f32,
    /// How close it comes to team-room chatter that is not about the docs.
    pub near_chatter: f32,
    /// Whether the kb has example questions (it then reads the line with
    /// the model trained with them).
    pub examples: bool,
}

/// The model's inputs; `scripts/guide-train.py`'s `features` must stay the
/// same.
fn features(s: &Seen<'_>) -> Vec<(String, f32)> {
    static WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[a-z0-9_']+").expect("regex"));
    static IDENT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[_`=]|\b[a-z]+\.[a-z]+\b").expect("regex"));
    let lower = s.text.to_lowercase();
    let words: Vec<&str> = WORD.find_iter(&lower).map(|m| m.as_str()).collect();
    let mut f: Vec<(String, f32)> = Vec::with_capacity(words.len() * 2 + 12);
    let mut seen = std::collections::HashSet::new();
    for w in &words {
        let k = format!("w:{w}");
        if seen.insert(k.clone()) {
            f.push((k, 1.0));
        }
    }
    for pair in words.windows(2) {
        let k = format!("b:{}_{}", pair[0], pair[1]);
        if seen.insert(k.clone()) {
            f.push((k, 1.0));
        }
    }
    if let Some(first) = words.first() {
        f.push((format!("first:{first}"), 1.0));
    }
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    f.push(("question".into(), flag(s.question)));
    f.push(("ends_q".into(), flag(s.text.trim().ends_with('?'))));
    f.push(("defined".into(), flag(s.defined)));
    f.push(("top".into(), s.top / 10.0));
    f.push(("chatter".into(), s.chatter / 10.0));
    f.push(("ratio".into(), (s.top / (s.chatter + 0.5)).min(5.0) / 5.0));
    f.push(("ident".into(), flag(IDENT.is_match(s.text))));
    f.push(("len".into(), (words.len().min(30) as f32) / 30.0));
    f.push(("near_chatter".into(), s.near_chatter.min(40.0) / 20.0));
    f.push(("bias".into(), 1.0));
    f
}

/// How likely the line asks the docs something, 0 to 1; `None` when the
/// model is not there (a build without it answers by the older rule).
pub(super) fn asks(s: &Seen<'_>) -> Option<f32> {
    let m = model(s)?;
    let z: f32 = features(s)
        .iter()
        .map(|(k, v)| m.weights.get(k).copied().unwrap_or(0.0) * v)
        .sum();
    Some(logistic(z))
}

/// A logistic regression's score `z` as a probability, 0 to 1 (the
/// sureness model reads its own the same way).
pub(super) fn logistic(z: f32) -> f32 {
    1.0 / (1.0 + (-z.clamp(-30.0, 30.0)).exp())
}

/// Whether the model is there and says the line asks the docs nothing,
/// however well the search matched it.
pub(super) fn asks_nothing(s: &Seen<'_>) -> bool {
    model(s).zip(asks(s)).is_some_and(|(m, p)| p <= m.threshold)
}

/// Whether the line is answered: it asks the docs something, and the best
/// section matches it at all.
pub(super) fn answers(s: &Seen<'_>) -> Option<bool> {
    let m = model(s)?;
    Some(asks(s)? > m.threshold && s.top >= m.min_score)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_built_in_and_reads_a_line() {
        assert!(MODEL.is_some(), "gate.json parses");
        assert!(MODEL_EXAMPLES.is_some(), "gate-examples.json parses");
        let seen = |text, question, top, chatter| Seen {
            text,
            question,
            defined: false,
            top,
            chatter,
            near_chatter: 0.0,
            examples: false,
        };
        let ask = asks(&seen("how do I stop bots answering each other?", true, 9.0, 1.0)).expect("model");
        let chat = asks(&seen("lunch at noon?", true, 1.0, 6.0)).expect("model");
        assert!(ask > 0.5 && chat < 0.5, "ask {ask}, chat {chat}");
        // The same words each once: a repeated word is one feature, as in
        // the training script.
        let names: Vec<String> = features(&seen("docs docs docs", false, 0.0, 0.0))
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(names.iter().filter(|k| *k == "w:docs").count(), 1);
        assert_eq!(names.iter().filter(|k| *k == "b:docs_docs").count(), 1);
    }
}
