//! The kb agent on tactful's own documentation.

mod common;

use std::sync::Arc;

use tactful_agents::kb::{DEFAULT_MIN_SCORE, KbAgent, KbDoc};
use tactful_core::{TurnKind, TurnRequest};

fn docs() -> Vec<KbDoc> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    ["README.md", "docs/faq.md", "docs/config.md", "docs/replay.md"]
        .iter()
        .map(|p| KbDoc {
            source: (*p).to_owned(),
            text: std::fs::read_to_string(root.join(p)).expect("doc"),
        })
        .collect()
}

fn ask(kind: TurnKind, addressed: bool, texts: &[&str]) -> TurnRequest {
    let mut t = common::turn();
    t.kind = kind;
    t.addressed = addressed;
    t.triggers = texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let mut e = (*t.triggers[0]).clone();
            e.id = format!("q{i}").into();
            e.text = (*text).into();
            Arc::new(e)
        })
        .collect();
    t
}

/// Questions people ask, and the FAQ heading that answers each.
const QUESTIONS: &[(&str, &str)] = &[
    (
        "how do I stop a bot from answering every message?",
        "How do I stop",
    ),
    ("what does ambient mode do?", "What is ambient mode?"),
    ("how does the rate limit work?", "How does the rate limit work?"),
    ("how can the agent stay silent?", "How can an agent stay silent?"),
    (
        "how do I reply to a specific message?",
        "How does a bot reply to a specific message?",
    ),
    (
        "what is the reply decision gate?",
        "What is the reply-decision gate?",
    ),
    (
        "how do I use a local model with ollama?",
        "How do I use a local model with Ollama?",
    ),
    (
        "can I run claude code as a persona?",
        "Can I run Claude Code as a persona?",
    ),
];

/// Everyday chatter, some of it phrased as questions.
const CHATTER: &[&str] = &[
    "lunch at noon?",
    "anyone seen my keys?",
    "good morning everyone",
    "the weather is lovely today",
    "did you watch the game last night?",
    "brb, coffee",
];

fn kb() -> KbAgent {
    KbAgent::new(&docs(), DEFAULT_MIN_SCORE)
}

#[test]
fn documentation_questions_are_answered_with_a_citation() {
    let kb = kb();
    for (q, heading) in QUESTIONS {
        let a = kb.answer(&ask(TurnKind::Ambient, false, &["morning all", q]));
        assert!(
            a.starts_with("[[reply_to:q1]]\n"),
            "answers the question, as a reply: {a}"
        );
        assert!(a.contains("(from docs/faq.md, \""), "cites its source: {a}");
        assert!(a.contains(heading), "{q} -> {a}");
    }
}

#[test]
fn chatter_gets_silence_in_a_batch() {
    let kb = kb();
    assert_eq!(kb.answer(&ask(TurnKind::Ambient, false, CHATTER)), "NO_REPLY");
    for c in CHATTER {
        // Not even one line of chatter alone, unless it is a question that
        // clears the threshold (none of these do).
        assert_eq!(kb.answer(&ask(TurnKind::Ambient, false, &[c])), "NO_REPLY", "{c}");
    }
}

#[test]
fn asked_directly_it_says_when_it_does_not_know() {
    let kb = kb();
    let a = kb.answer(&ask(
        TurnKind::Reply,
        true,
        &["@guide what is the capital of peru?"],
    ));
    assert!(a.contains("couldn't find that in the docs"), "{a}");
    let a = kb.answer(&ask(TurnKind::Reply, false, &["what is the capital of peru?"]));
    assert_eq!(a, "NO_REPLY", "not addressed: silence");
    let a = kb.answer(&ask(
        TurnKind::Reply,
        true,
        &["@guide how does the rate limit work?"],
    ));
    assert!(a.contains("slot is reserved"), "{a}");
}
