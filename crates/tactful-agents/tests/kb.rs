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

/// The Guide's labelled set (`tests/guide/labelled.jsonl`): each line heard
/// alone in an ambient batch, as in the demo. Chatter must get no reply;
/// a question about tactful must be answered from one of its right
/// sections. Prints the figures for BENCHMARKS.md:
/// `cargo test -p tactful-agents --test kb labelled -- --nocapture`.
#[test]
fn the_labelled_set_meets_its_precision_and_recall() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/guide/labelled.jsonl");
    let kb = kb();
    let (mut chatter, mut silent, mut questions, mut right) = (0, 0, 0, 0);
    let mut misses = Vec::new();
    for line in std::fs::read_to_string(&path).expect("the labelled set").lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let text = v["text"].as_str().expect("text");
        let want: Vec<&str> = v["answer"]
            .as_array()
            .expect("answer")
            .iter()
            .filter_map(|a| a.as_str())
            .collect();
        let got = kb.answer(&ask(TurnKind::Ambient, false, &[text]));
        let cited = got.rsplit_once("\n\n(from ").map(|(_, c)| {
            let (source, heading) = c.trim_end_matches(')').split_once(", ").unwrap_or_default();
            format!("{source}#{}", heading.trim_matches('"'))
        });
        if want.is_empty() {
            chatter += 1;
            if got == "NO_REPLY" {
                silent += 1;
            } else {
                misses.push(format!("chatter answered: {text:?} -> {cited:?}"));
            }
        } else {
            questions += 1;
            match &cited {
                Some(c) if want.contains(&c.as_str()) => right += 1,
                _ => misses.push(format!("question {text:?} -> {cited:?}, want one of {want:?}")),
            }
        }
    }
    let quiet = f64::from(silent) / f64::from(chatter);
    let recall = f64::from(right) / f64::from(questions);
    println!(
        "labelled set: {chatter} chatter lines, {silent} unanswered ({:.1} %); {questions} questions, {right} answered from a right section ({:.1} %)",
        quiet * 100.0,
        recall * 100.0
    );
    for m in &misses {
        println!("  {m}");
    }
    assert!(chatter + questions >= 200, "the set has at least 200 lines");
    assert!(quiet >= 0.95, "chatter left alone: {:.1} % < 95 %", quiet * 100.0);
    assert!(
        recall >= 0.90,
        "questions answered right: {:.1} % < 90 %",
        recall * 100.0
    );
}

/// "good thanks! lunch at noon?" then "what is ambient mode?" in one batch:
/// the answer is about ambient mode, as a reply to the question.
#[test]
fn in_a_batch_the_question_is_answered_not_the_chatter_beside_it() {
    let turn = ask(
        TurnKind::Ambient,
        false,
        &["good thanks! lunch at noon?", "what is ambient mode?"],
    );
    let got = kb().answer(&turn);
    assert!(got.starts_with("[[reply_to:q1]]"), "{got}");
    assert!(
        got.contains("(from docs/faq.md, \"What is ambient mode?\")"),
        "{got}"
    );
}

/// A reply to one of its own answers ("can you say more?") goes on with
/// the section that answer came from, instead of searching for "more".
#[test]
fn a_follow_up_continues_the_section_it_answered_from() {
    let kb = kb();
    let first = kb.answer(&ask(TurnKind::Ambient, false, &["what is ambient mode?"]));
    let mut turn = ask(TurnKind::Reply, true, &["can you say more?"]);
    let mut own = (*turn.history[0]).clone();
    own.id = "guide:1".into();
    own.persona = Some(turn.persona_idx);
    own.text = first
        .split_once('\n')
        .map(|(_, body)| body)
        .unwrap_or_default()
        .into();
    turn.history.push(std::sync::Arc::new(own));
    let mut q = (*turn.triggers[0]).clone();
    q.reply_to = Some("guide:1".into());
    turn.triggers = vec![std::sync::Arc::new(q)];
    let more = kb.answer(&turn);
    assert!(more.starts_with("[[reply_to:q0]]"), "{more}");
    assert!(
        more.contains("(from docs/faq.md, \"What is ambient mode?\")"),
        "{more}"
    );
    assert!(!more.contains("couldn't find"), "{more}");
    let excerpt = |t: &str| t.lines().nth(1).unwrap_or_default().to_owned();
    assert_ne!(
        excerpt(&more),
        excerpt(&first),
        "says something more:\n{first}\n---\n{more}"
    );
}

/// Three questions in one batch: each gets its own reply, newest first.
#[test]
fn every_question_of_a_batch_gets_its_own_reply_newest_first() {
    let turn = ask(
        TurnKind::Ambient,
        false,
        &[
            "what is ambient mode?",
            "lunch anyone?",
            "how does the rate limit work?",
            "what is floor control?",
        ],
    );
    let got = kb().answer(&turn);
    let replies = tactful_core::directives::split_replies(&got);
    let to: Vec<Option<&str>> = replies.iter().map(|(d, _)| d.reply_to.as_deref()).collect();
    assert_eq!(to, [Some("q3"), Some("q2"), Some("q0")], "{got}");
    assert!(replies[0].1.contains("\"What is floor control?\""), "{got}");
}
